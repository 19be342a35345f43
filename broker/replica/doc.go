// Package replica is the replication state machine of one partition on one
// broker, as Kafka's Partition and Replica classes keep it for ISR
// replication: the role (leader, follower or none), the leader and
// partition epochs, the replicas and the ISR with the AlterPartition change
// in flight, the high watermark, and on a leader every follower's fetch
// state (log end offset, last fetch and last caught-up time, broker epoch).
//
// It is pure: no goroutines, files, network or clock. Every input carries
// what it needs (an injected now, the local log end offset, the leader
// epoch cache as a list of (epoch, start offset)), and every output is a
// value the caller acts on: an AlterPartition request to send to the
// controller, a high watermark move to wake waiting fetches and delayed
// produces, a leader epoch start to record in the log's epoch cache, a
// truncation for a follower. The partition's log, its fetcher goroutine and
// the AlterPartition sender are the I/O shell around it.
//
// Where it differs from Kafka's Partition, and why: an AlterPartition
// carries a sequence number its answer must echo (Kafka compares the
// pending state object, which a value-typed state machine cannot);
// MetadataChange ignores a partition epoch equal to the known one (a KRaft
// delta never holds an unchanged partition, and applying it again would
// drop the change in flight while the controller may still apply it);
// the broker view is a value set by SetBrokers rather than a metadata cache
// read, and a broker missing from it is not eligible for the ISR; a leader
// re-elected in a new epoch forgets its followers' log ends from the
// earlier epoch (Kafka keeps them), as it may have missed other leaders'
// epochs in one merged delta while a follower truncated to their logs.
// Reassignment (adding and removing replicas) and eligible leader
// replicas are not modelled. Leader recovery after an unclean election
// (KIP-704) is Kafka's: a leader registered RECOVERING counts itself
// recovered as it becomes leader (there is no log recovery to run) and
// says RECOVERED in its next AlterPartition, which the controller needs
// before the ISR may grow past the leader.
//
// Use, on a leader:
//
//	s := replica.New(replica.Config{BrokerID: 1, MinInSyncReplicas: 2, ReplicaLagTimeMax: 30 * time.Second})
//	s.SetBrokers(view) // broker epochs, fencing and shutdown from the metadata image
//	eff := s.BecomeLeader(replica.PartitionState{Leader: 1, LeaderEpoch: 5, ...}, now, log.EndOffset())
//	// record eff.EpochStart in the log's leader epoch cache
//	if err := s.CheckAppend(-1); err != nil { ... } // NOT_ENOUGH_REPLICAS
//	eff = s.LocalAppend(newLEO, now)
//	res := s.FollowerFetch(replica.FetchRequest{...}, cache, now) // from a follower's Fetch
//	eff = s.Tick(now)                                             // ISR shrink
//	ok, err := s.CheckAcks(requiredOffset)                        // acks=all
//	eff = s.AlterPartitionResult(replica.AlterResult{...}, now)   // the controller's answer
//
// On a follower:
//
//	pos := s.BecomeFollower(ps, localCache, log.EndOffset())
//	// fetch from pos; on a diverging epoch:
//	tr := replica.TruncationFor(localCache, log.EndOffset(), s.HighWatermark(), diverging)
//	s.Truncated(tr.Offset)
//	// after appending the fetched records:
//	s.LocalAppend(newLEO, now)
//	s.LeaderHighWatermark(resp.HighWatermark)
package replica

// Package share is Cascade's foundation of KIP-932 share groups ("queues
// for Kafka"), with Apache Kafka 4.4 as the specification. It holds three
// state machines in the etcd-raft style, with no goroutines, clock, disk
// or network inside: the caller passes the time on each call and carries
// out what each returns.
//
// Partition (partition.go) is one share group's view of one
// topic-partition, Kafka's SharePartition: the in-flight records between
// the share-partition start offset (SPSO) and end offset (SPEO), each
// Available, Acquired by one member under a lock of
// group.share.record.lock.duration.ms, Acknowledged or Archived, with a
// delivery count; a record whose count reaches
// group.share.delivery.count.limit is archived when released or expired,
// records delivered often are throttled to smaller fetches, and at most
// group.share.partition.max.record.locks records are in flight. The SPSO starts where share.auto.offset.reset says (latest,
// earliest, by_duration:<ISO-8601>) and moves past every Acknowledged or
// Archived prefix. Under read_committed the records of aborted
// transactions are archived undelivered. The caller reads the log for it
// (Acquire takes the fetched batches and aborted transactions), feeds
// acknowledgements and time (Tick), releases a departed member's records
// (ReleaseMember), and drains Ready of the state to persist.
//
// StateCoordinator (state.go, state_records.go) is the share coordinator
// of Kafka's ShareCoordinatorShard: it takes InitializeShareGroupState,
// WriteShareGroupState and ReadShareGroupState (kmsg), keeps each
// share-partition's durable state,
// and writes it to __share_group_state as ShareSnapshot and ShareUpdate
// records in Kafka's key/value schemas, a snapshot after every
// share.coordinator.snapshot.update.records.per.snapshot updates. Replay
// rebuilds the state from those records, and Partition.Initialize loads
// it, so acknowledged and archived records, delivery counts and the SPSO
// survive a restart. Acquisition is not persisted, as in Kafka: what was
// acquired at a stop is available again.
//
// Groups (group.go, assign.go, group_records.go) is the share group
// membership of Kafka's GroupMetadataManager: ShareGroupHeartbeat (API
// key 76, v1) joins with epoch 0 and the subscribed topic names, leaves
// with -1, and is answered with Kafka's errors; the SimpleAssignor
// balances partitions over members and lets several share one, at most
// once every group.share.assignment.interval.ms, and only share-partitions
// whose state is initialized are assignable: the group asks for that
// (GroupReady.Initialize, then Initialized) as Kafka 4.4 does; sessions
// expire after group.share.session.timeout.ms; the group, member, target
// and current assignment, and state-partition records go to
// __consumer_offsets in Kafka's schemas and are replayed at load.
//
// Use:
//
//	p := share.NewPartition(share.DefaultPartitionConfig())
//	_ = p.Initialize(now, persisted, share.LogOffsets{LogStartOffset: 0, HighWatermark: hwm})
//	got, _ := p.Acquire(now, memberID, batchesFrom(p.NextFetchOffset()), aborted, 500)
//	_ = p.Acknowledge(now, memberID, []share.Ack{{FirstOffset: 0, LastOffset: 4, Types: []share.AckType{share.AckAccept}}})
//	p.Tick(now)
//	if w := p.Ready(); w != nil { /* WriteShareGroupState to the StateCoordinator */ }
//
//	g := share.NewGroups(share.DefaultGroupConfig())
//	g.SetTopics(topics)
//	_ = g.Step(now, share.GroupRequest{ID: 1, ClientID: "c", Msg: heartbeat})
//	rd := g.Ready() // append rd.Records, send rd.Replies, release rd.Left
//
// Records are tracked one offset at a time, where Kafka tracks whole
// fetched batches until a batch is split: acquisition is exact to the
// record (Kafka 4.2's record_limit acquire mode), and acknowledgement
// errors use Kafka's batch-level messages.
//
// Not here yet: the ShareFetch, ShareAcknowledge and ShareGroupHeartbeat
// handlers, share sessions, the __share_group_state topic itself, the
// share admin APIs (DescribeShareGroupOffsets, AlterShareGroupOffsets,
// DeleteShareGroupOffsets, deleting topics' state), and the broker
// configuration keys.
package share

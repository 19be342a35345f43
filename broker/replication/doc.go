// Package replication is the I/O shell of ISR replication on a cluster
// node, as Kafka's ReplicaManager, Partition, ReplicaFetcherManager and
// AlterPartitionManager together: for every partition with more than one
// replica of which this node holds one, it drives the partition's
// replication state machine (broker/replica) from the metadata image, the
// followers' fetches, the clock and the controller's AlterPartition
// answers, and applies what the state machine asks to the partition
// (broker/partition): the leader's high watermark, a new leader epoch, a
// follower's truncation and appends.
//
// A leader (Manager.FollowerFetch, called by the Fetch handler for a fetch
// with a replica id) records each follower's fetch offset; the high
// watermark advances to the ISR's least log end offset; ISR shrinks (every
// half replica.lag.time.max.ms, Kafka's isr-expiration task) and expansions
// go to the active controller as AlterPartition with the partition epoch,
// and the answer's partition epoch and ISR apply. Produce with acks=all is
// refused with NOT_ENOUGH_REPLICAS before the append when the ISR is under
// min.insync.replicas (Manager.CheckAppend) and waits for the high
// watermark to pass the batch (Manager.AwaitAcks), as Kafka's
// DelayedProduce: NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank
// under it meanwhile, REQUEST_TIMED_OUT after the request's timeout.
//
// A follower is fed by a fetcher per leader broker (num.replica.fetchers
// of them, a partition going to one by its hash, as Kafka's
// AbstractFetcherManager): Fetch with the replica id and broker epoch
// (ReplicaState from v15), the current leader epoch and the last fetched
// epoch (KIP-595), replica.fetch.max.bytes per partition and
// replica.fetch.response.max.bytes in all, replica.fetch.min.bytes and
// replica.fetch.wait.max.ms, to the leader's inter-broker endpoint in the
// image. Records are appended as the leader wrote them, the high watermark
// and log start follow the leader's answer; a diverging epoch truncates
// (replica.TruncationFor), OFFSET_OUT_OF_RANGE asks the leader for its log
// start and end with ListOffsets and truncates or starts over
// (replica.OutOfRangeTruncation); any error backs the partition off for
// replica.fetch.backoff.ms.
//
// Partitions with one replica are not replicated and are left alone: their
// high watermark follows appends as on a single node.
//
// Use:
//
//	m := replication.New(cfg, parts, sender)
//	unsub := store.Subscribe(func(_, img *metadata.Image) { m.Apply(img) })
//	// the Fetch and Produce handlers call FollowerFetch, CheckAppend,
//	// Appended and AwaitAcks
//	m.Close()
package replication

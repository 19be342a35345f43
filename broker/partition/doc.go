// Package partition owns one replica of a topic-partition on this broker and
// the Manager that maps topic-partitions and topic ids to replicas.
//
// A Partition wraps a log (broker/log) with the state Kafka keeps beside it in
// its Partition and UnifiedLog classes: the leader epoch, the high watermark,
// the last stable offset, and the fetch waiters that long-polling fetches
// park on. Its storage contract is the Log interface (log.go): leader
// appends, follower appends and truncation, leader epochs and the
// checkpointed high watermark, all methods of *log.Log, so that tests can
// run a partition over an in-memory log.
//
// Who moves the high watermark (replica.go):
//
//   - On a single node (the default) every leader append moves it to the
//     log end offset, the leader alone being the ISR, and New starts it at
//     the log end offset.
//   - Replicated (SetReplicated(true), or Spec.Replicated through the
//     Manager, set before the partition is published), appends leave it:
//     a leader moves it forward with AdvanceHighWatermark from its replica
//     state machine (broker/replica: the ISR's log end offsets), a follower
//     sets it from its leader's fetch answer with SetHighWatermark (bounded
//     by its own log end). New starts it from the log dir's
//     replication-offset-checkpoint when the log dir keeps one.
//
// MakeLeader starts a new leader epoch at the log end offset in the leader
// epoch cache, as Kafka's Partition.makeLeader. A replicated partition's
// leader appends are stamped with the epoch MakeLeader gave it (never the
// image's, which may already be a newer leader's) and refused with
// ErrNotLeader before MakeLeader and after StopLeading, which the
// replication shell calls as the replica becomes a follower.
//
// Fetch waiters wake on every leader append (followers' fetches wait at the
// log end), on every high watermark move (consumers wait at the high
// watermark), on truncation and on removal. A follower appends with
// AppendAsFollower (batches kept as the leader wrote them; an empty log
// starts over at the base of a batch that holds the leader's log start, as
// Kafka does) and cuts a divergent tail with TruncateTo or starts over with
// TruncateFullyAndStartAt.
//
// Use:
//
//	p := partition.New(tp, topicID, epoch, lg)
//	info, err := p.Append(records)
//	ch := p.Changed() // closed by the next append or high watermark move
//	res, err := p.Read(offset, maxBytes, partition.ReadHighWatermark, true)
//
// A follower, driven by its fetcher:
//
//	p.SetReplicated(true)
//	_, err := p.AppendAsFollower(fetched)
//	p.SetHighWatermark(leaderHighWatermark)
package partition

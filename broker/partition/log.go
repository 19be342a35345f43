package partition

import "github.com/cascade-kafka/cascade/broker/log"

// Log is the storage contract of a partition replica: what *log.Log offers
// and the partition uses, whether it leads or follows. It is an interface so
// tests can run partitions over an in-memory log; every method is documented
// on *log.Log (broker/log/api.go lists them).
type Log interface {
	// Leader appends: offsets assigned, leaderEpoch stamped on each batch.
	Append(records []byte, leaderEpoch int32) (log.AppendInfo, error)
	AppendFromClient(records []byte, leaderEpoch int32) (log.AppendInfo, error)

	// Follower appends and truncation: batches kept exactly as the leader
	// wrote them, and the log cut back to where it agrees with the leader
	// (or started over at the leader's log start).
	AppendAsFollower(records []byte) (log.AppendInfo, error)
	Truncate(offset int64) error
	TruncateFullyAndStartAt(offset int64) error

	// Leader epochs (Kafka's LeaderEpochFileCache): OffsetForLeaderEpoch
	// answers, and the start of a new leader's epoch.
	EndOffsetForEpoch(epoch int32) (foundEpoch int32, endOffset int64, ok bool)
	AssignEpochStartOffset(epoch int32, offset int64) error
	LatestEpoch() int32

	// The high watermark as the log dir's replication-offset-checkpoint
	// keeps it: ok is false when the log dir keeps none (a single node).
	HighWatermark() (hw int64, ok bool)
	UpdateHighWatermark(hw int64) int64

	Read(offset int64, maxBytes int, maxOffset int64, minOne bool) (log.ReadResult, error)
	LogStartOffset() int64
	LogEndOffset() int64
	FirstUnstableOffset() (int64, bool)
	OffsetForTimestamp(ts int64) (offset, timestamp int64, leaderEpoch int32, ok bool)
	MaxTimestamp() (offset, timestamp int64)
	AbortedTxns(from, to int64) []log.AbortedTxn
	DeleteRecordsBefore(offset int64) (int64, error)
	Flush() error
	SetConfig(log.Config)
	Err() error
	Size() int64
}

// The storage engine keeps the whole contract.
var _ Log = (*log.Log)(nil)

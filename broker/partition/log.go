package partition

import "github.com/cascade-kafka/cascade/broker/log"

// Log is the part of *log.Log a partition uses. It is an interface so tests
// can run partitions over an in-memory log and so the partition layer compiles
// against the storage contract in broker/log/api.go.
type Log interface {
	Append(records []byte, leaderEpoch int32) (log.AppendInfo, error)
	AppendFromClient(records []byte, leaderEpoch int32) (log.AppendInfo, error)
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

// epochLog is implemented by logs that keep Kafka's leader-epoch-checkpoint
// (LeaderEpochFileCache) and can answer OffsetForLeaderEpoch for any epoch.
type epochLog interface {
	EndOffsetForEpoch(epoch int32) (foundEpoch int32, endOffset int64, ok bool)
}

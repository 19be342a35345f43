package log

// This file is the contract between the storage engine and the layers above
// it (broker/partition, the handlers, and later broker/replication). The
// signatures here are what the rest of the broker codes against.

import (
	"errors"
	"io"
	"time"
)

// TopicPartition names one partition's log.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Policy is a topic's cleanup.policy.
type Policy uint8

const (
	PolicyDelete  Policy = 1 << iota // cleanup.policy=delete
	PolicyCompact                    // cleanup.policy=compact
)

// TimestampType is a topic's message.timestamp.type.
type TimestampType uint8

const (
	CreateTime TimestampType = iota
	LogAppendTime
)

// Config is the per-topic log configuration, named after Kafka's topic
// configs. A negative duration or size means "unlimited" where Kafka uses -1.
type Config struct {
	SegmentBytes           int64         // segment.bytes
	SegmentMs              time.Duration // segment.ms
	SegmentIndexBytes      int           // segment.index.bytes
	IndexIntervalBytes     int           // index.interval.bytes
	RetentionBytes         int64         // retention.bytes (-1: unlimited)
	RetentionMs            time.Duration // retention.ms (-1: unlimited)
	FlushMessages          int64         // flush.messages (math.MaxInt64: never by count)
	FlushMs                time.Duration // flush.ms (math.MaxInt64: never by time)
	CleanupPolicy          Policy        // cleanup.policy
	DeleteRetentionMs      time.Duration // delete.retention.ms
	MinCompactionLagMs     time.Duration // min.compaction.lag.ms
	MaxCompactionLagMs     time.Duration // max.compaction.lag.ms
	MinCleanableDirtyRatio float64       // min.cleanable.dirty.ratio
	TimestampType          TimestampType // message.timestamp.type
	MaxMessageBytes        int           // max.message.bytes (largest record batch)
	// message.timestamp.before.max.ms and message.timestamp.after.max.ms:
	// how far a CreateTime timestamp may lag or lead the broker's clock.
	// Zero means Kafka's default (unlimited before, one hour after);
	// math.MaxInt64 means unlimited.
	TimestampBeforeMax time.Duration
	TimestampAfterMax  time.Duration
}

// Errors returned by Append. The handler edge maps them to Kafka codes.
var (
	ErrCorrupt              = errors.New("log: corrupt record batch")         // CORRUPT_MESSAGE
	ErrInvalidRecord        = errors.New("log: invalid record")               // INVALID_RECORD
	ErrMessageTooLarge      = errors.New("log: record batch too large")       // MESSAGE_TOO_LARGE
	ErrOutOfOrderSequence   = errors.New("log: out of order sequence number") // OUT_OF_ORDER_SEQUENCE_NUMBER
	ErrInvalidProducerEpoch = errors.New("log: invalid producer epoch")       // INVALID_PRODUCER_EPOCH
	ErrInvalidTxnState      = errors.New("log: invalid transaction state")    // INVALID_TXN_STATE
	ErrUnknownProducerID    = errors.New("log: unknown producer id")          // UNKNOWN_PRODUCER_ID
	ErrOffsetOutOfRange     = errors.New("log: offset out of range")          // OFFSET_OUT_OF_RANGE
	ErrInvalidTimestamp     = errors.New("log: invalid timestamp")            // INVALID_TIMESTAMP
	ErrStorage              = errors.New("log: storage error")                // KAFKA_STORAGE_ERROR; sticky
	ErrClosed               = errors.New("log: closed")                       // NOT_LEADER_OR_FOLLOWER at the edge
)

// AppendInfo describes a successful append of one record set.
type AppendInfo struct {
	FirstOffset    int64 // offset of the first record appended
	LastOffset     int64 // offset of the last record appended
	LogAppendTime  int64 // ms; -1 unless the topic uses LogAppendTime
	LogStartOffset int64
	NumRecords     int
	Duplicate      bool // an idempotent retry: nothing written, offsets are the original ones
	// OffsetOfMaxTimestamp is the offset of the first record with the
	// largest timestamp appended (LogValidator's offsetOfMaxTimestamp);
	// -1 when no record has a timestamp or for a duplicate.
	OffsetOfMaxTimestamp int64
}

// Region is a range of bytes of one segment file: whole record batches, ready
// to be written to a socket. WriteTo uses sendfile where dst is a *net.TCPConn.
// A Region stays readable until Release, even if retention deletes the segment.
type Region interface {
	io.WriterTo
	Len() int
	Release()
}

// ReadResult is what Read returns.
type ReadResult struct {
	Regions        []Region // batches in offset order; empty when nothing is readable
	Size           int      // total bytes of Regions
	LogStartOffset int64
	LogEndOffset   int64
}

// AbortedTxn is one entry of the transaction index.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
	LastStable  int64
}

// Partition-level operations offered by *Log (documented on the type):
//
//	Append(records []byte, leaderEpoch int32) (AppendInfo, error)
//	    One produce record set (one or more v2 batches). Validates, checks
//	    producer state (idempotence, transactions), assigns offsets, writes.
//	    Control batches (commit/abort markers) are appended the same way.
//	Read(offset int64, maxBytes int, maxOffset int64, minOne bool) (ReadResult, error)
//	    Whole batches starting at the batch containing offset, none at or
//	    beyond maxOffset, up to maxBytes, at least one batch when minOne.
//	LogStartOffset() int64, LogEndOffset() int64, FirstUnstableOffset() (int64, bool)
//	OffsetForTimestamp(ts int64) (offset, timestamp int64, leaderEpoch int32, ok bool)
//	MaxTimestamp() (offset, timestamp int64)
//	AbortedTxns(from, to int64) []AbortedTxn
//	DeleteRecordsBefore(offset int64) (newStart int64, err error)
//	Flush() error; SetConfig(Config); Err() error; Size() int64
//
// Additions beyond the drafted contract (documented on *Log and *Manager):
//
//	AppendFromClient(records, leaderEpoch) (AppendInfo, error)
//	    Append with Kafka's client-origin checks: control batches and
//	    non-zero base offsets are INVALID_RECORD. Produce handlers use it;
//	    the transaction coordinator writes markers with Append.
//	EndOffsetForEpoch(epoch) (foundEpoch int32, endOffset int64, ok bool)
//	AssignEpochStartOffset(epoch, offset) error; LatestEpoch() int32; EpochAt(offset) int32
//	Truncate(offset) error; TruncateFullyAndStartAt(offset) error
//	AppendAsFollower(records) (AppendInfo, error)
//	    A follower's append of batches fetched from the leader, kept as
//	    they are (follower.go); *AppendOffsetError when they do not
//	    continue the log.
//	HighWatermark() (int64, bool); UpdateHighWatermark(hw) int64
//	    The high watermark kept for replication-offset-checkpoint when
//	    Options.HighWatermarkCheckpoint is set.
//	Roll() error; ApplyRetention() (int, error)
//	RecoveryPoint() int64; ActiveProducers() []ProducerInfo; ExpireProducers() int
//	ErrCoordinatorFenced (TRANSACTION_COORDINATOR_FENCED) from Append of a
//	marker with a stale coordinator epoch.
//	Manager.CleanOnce() (CleanStats, bool, error); Manager.UncleanablePartitions()
//	Log.CleanerCheckpoint() int64
//	    The log cleaner for compacted topics (cleaner.go); the Manager runs
//	    it in the background every Options.CleanerBackoff while idle.

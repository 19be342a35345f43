package log

import (
	"io"
	"log/slog"
	"math"
	"time"

	"github.com/cascade-kafka/cascade/broker/record"
)

// DefaultConfig returns Kafka 4's topic defaults (LogConfig / ServerLogConfigs).
func DefaultConfig() Config {
	return Config{
		SegmentBytes:           1 << 30,
		SegmentMs:              7 * 24 * time.Hour,
		SegmentIndexBytes:      10 << 20,
		IndexIntervalBytes:     4096,
		RetentionBytes:         -1,
		RetentionMs:            7 * 24 * time.Hour,
		FlushMessages:          math.MaxInt64,
		FlushMs:                math.MaxInt64,
		CleanupPolicy:          PolicyDelete,
		DeleteRetentionMs:      24 * time.Hour,
		MinCompactionLagMs:     0,
		MaxCompactionLagMs:     math.MaxInt64,
		MinCleanableDirtyRatio: 0.5,
		TimestampType:          CreateTime,
		MaxMessageBytes:        1048588,
		TimestampBeforeMax:     math.MaxInt64,
		TimestampAfterMax:      time.Hour,
	}
}

// normalize replaces zero values that Kafka would reject with defaults, so
// a partially filled Config behaves sensibly.
func (c Config) normalize() Config {
	d := DefaultConfig()
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = d.SegmentBytes
	}
	if c.SegmentMs <= 0 {
		c.SegmentMs = d.SegmentMs
	}
	if c.SegmentIndexBytes < offsetEntrySize*4 {
		c.SegmentIndexBytes = d.SegmentIndexBytes
	}
	if c.IndexIntervalBytes < 0 {
		c.IndexIntervalBytes = d.IndexIntervalBytes
	}
	if c.FlushMessages <= 0 {
		c.FlushMessages = d.FlushMessages
	}
	if c.FlushMs <= 0 {
		c.FlushMs = d.FlushMs
	}
	if c.CleanupPolicy == 0 {
		c.CleanupPolicy = d.CleanupPolicy
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = d.MaxMessageBytes
	}
	if c.TimestampBeforeMax <= 0 {
		c.TimestampBeforeMax = d.TimestampBeforeMax
	}
	if c.TimestampAfterMax <= 0 {
		c.TimestampAfterMax = d.TimestampAfterMax
	}
	return c
}

// Options configures a Manager (one log dir).
type Options struct {
	// Clock returns the current time; time.Now when nil.
	Clock func() time.Time
	// Logger receives operational messages; discarded when nil.
	Logger *slog.Logger
	// MaxDecompressedBytes caps the size a compressed batch may inflate to
	// during validation, timestamp lookups and compaction (default 128 MiB).
	MaxDecompressedBytes int
	// MaxDecodeMemory caps the decoder state one validation may hold (a
	// zstd window, a snappy block); default record.DefaultMaxDecodeMemory,
	// zstd's own 128 MiB window limit. A batch needing more is
	// CORRUPT_MESSAGE. record.Limits.Bound gives the most one validation
	// may hold under both limits.
	MaxDecodeMemory int
	// ConfigFor returns the configuration of a partition found on disk at
	// Open; DefaultConfig when nil. Create passes its own.
	ConfigFor func(TopicPartition) Config

	// FlushCheckInterval is how often the background flusher looks for logs
	// to flush (Kafka's log.flush.scheduler.interval.ms); default 1 s.
	FlushCheckInterval time.Duration
	// FlushMaxDirtyAge, when positive, flushes a log whose oldest
	// unflushed append is at least this old, whatever flush.ms says.
	FlushMaxDirtyAge time.Duration
	// FlushMaxDirtyBytes, when positive, flushes a log as soon as this many
	// bytes are unflushed.
	FlushMaxDirtyBytes int64
	// CheckpointInterval is how often recovery points and log start
	// offsets are checkpointed (log.flush.offset.checkpoint.interval.ms);
	// default 60 s.
	CheckpointInterval time.Duration
	// HighWatermarkCheckpoint keeps Kafka's replication-offset-checkpoint
	// in the log dir: every log's high watermark (Log.UpdateHighWatermark)
	// is written every HighWatermarkCheckpointInterval and on Close, and
	// read at Open, so that a replicated partition restarts from its last
	// known high watermark (Log.HighWatermark) instead of its log end. A
	// single node leaves it off: its one replica's whole log is committed,
	// so its high watermark is the log end offset on open.
	HighWatermarkCheckpoint bool
	// HighWatermarkCheckpointInterval is
	// replica.high.watermark.checkpoint.interval.ms; default 5 s.
	HighWatermarkCheckpointInterval time.Duration
	// RetentionCheckInterval is log.retention.check.interval.ms (default
	// 5 minutes); negative disables the background retention check.
	RetentionCheckInterval time.Duration

	// ProducerIDExpiration is producer.id.expiration.ms (default 1 day):
	// producer state idle this long, with no open transaction, is dropped.
	// Negative disables expiration.
	ProducerIDExpiration time.Duration
	// ProducerIDExpirationCheckInterval is
	// producer.id.expiration.check.interval.ms (default 10 minutes).
	ProducerIDExpirationCheckInterval time.Duration

	// CleanerBackoff is log.cleaner.backoff.ms: how long the background
	// cleaner sleeps when no log needs cleaning (default 15 s). Negative
	// disables the background cleaner; CleanOnce still works.
	CleanerBackoff time.Duration
	// CleanerDedupeBufferSize is log.cleaner.dedupe.buffer.size (default
	// 128 MiB): it bounds the keys one cleaning pass maps, at Kafka's 24
	// bytes per key, and so the work of one pass.
	CleanerDedupeBufferSize int64
	// CleanerIOBufferLoadFactor is log.cleaner.io.buffer.load.factor
	// (default 0.9), the fill limit of the dedupe map.
	CleanerIOBufferLoadFactor float64

	// ClusterID and NodeID are written to meta.properties when it is missing.
	ClusterID string
	NodeID    int32
}

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.MaxDecompressedBytes <= 0 {
		o.MaxDecompressedBytes = record.DefaultMaxDecompressedBytes
	}
	if o.MaxDecodeMemory <= 0 {
		o.MaxDecodeMemory = record.DefaultMaxDecodeMemory
	}
	if o.FlushCheckInterval <= 0 {
		o.FlushCheckInterval = time.Second
	}
	if o.CheckpointInterval <= 0 {
		o.CheckpointInterval = time.Minute
	}
	if o.HighWatermarkCheckpointInterval <= 0 {
		o.HighWatermarkCheckpointInterval = 5 * time.Second
	}
	if o.RetentionCheckInterval == 0 {
		o.RetentionCheckInterval = 5 * time.Minute
	}
	if o.ProducerIDExpiration == 0 {
		o.ProducerIDExpiration = 24 * time.Hour
	}
	if o.CleanerBackoff == 0 {
		o.CleanerBackoff = 15 * time.Second
	}
	if o.CleanerDedupeBufferSize <= 0 {
		o.CleanerDedupeBufferSize = 128 << 20
	}
	if o.CleanerIOBufferLoadFactor <= 0 || o.CleanerIOBufferLoadFactor > 1 {
		o.CleanerIOBufferLoadFactor = 0.9
	}
	if o.ProducerIDExpirationCheckInterval <= 0 {
		o.ProducerIDExpirationCheckInterval = 10 * time.Minute
	}
	return o
}

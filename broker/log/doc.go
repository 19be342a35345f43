// Package log is Cascade's storage engine: the durable, segmented log of one
// partition and the manager of a log dir, in Apache Kafka's own on-disk
// format so that Kafka's kafka-dump-log reads what Cascade writes.
//
// It owns, per partition directory <topic>-<partition>/:
//
//   - <20-digit base offset>.log: magic-v2 record batches exactly as served;
//   - .index (int32 relative offset, int32 position; one entry per
//     index.interval.bytes, preallocated to segment.index.bytes and trimmed
//     on roll and close), .timeindex (int64 timestamp, int32 relative
//     offset) and .txnindex (Kafka's 34-byte AbortedTxn entries);
//   - leader-epoch-checkpoint, <offset>.snapshot producer-state snapshots
//     (ProducerStateManager format v1) and partition.metadata;
//
// and, per log dir, recovery-point-offset-checkpoint,
// log-start-offset-checkpoint, cleaner-offset-checkpoint, meta.properties,
// the .kafka_cleanshutdown marker and, when Options.HighWatermarkCheckpoint
// asks for it (a replicated broker), replication-offset-checkpoint.
//
// A *Log validates and appends produce record sets (assigning offsets,
// checking idempotent and transactional producer state, stamping
// LogAppendTime), serves reads as file Regions that go to sockets with
// sendfile, answers offset lookups by time and by leader epoch, applies
// retention and DeleteRecords, and truncates for replication. A *Manager
// loads every partition of a log dir at Open, recovering after an unclean
// stop from the recovery point (every batch re-validated, torn or corrupt
// tails truncated, indexes and producer state rebuilt), runs the background
// flusher and retention check, and writes checkpoints and the clean-shutdown
// marker on Close. Kafka's errors surface as this package's sentinel errors
// (api.go); a disk error is sticky and takes the partition offline.
//
// Descriptors (files.go). As in Kafka, a segment costs at most one
// descriptor while idle, so thousands of segments (one per batch from a
// client whose timestamps step past segment.ms) fit a modest RLIMIT_NOFILE:
//
//   - The active segment holds its .log, .index and .timeindex open while
//     it is appended to.
//   - A sealed segment's .index and .timeindex entries are kept in memory
//     (they were before: a sparse index is about a thousandth of its log)
//     and the files are opened only for a write, truncation or fsync, as
//     Kafka's LazyIndex maps an index on first use and AbstractIndex closes
//     the descriptor once mapped. Cascade reads the entries instead of
//     mapping them: lookups cost no page faults or descriptors, and the
//     bytes on disk are Kafka's.
//   - A .txnindex is created by the first aborted transaction written to
//     it, as Kafka's TransactionIndex, and open from a write until the next
//     fsync; reads use the entries in memory.
//   - A sealed segment's .log file is opened when read, through one
//     process-wide cache of open handles bounded by a quarter of the soft
//     RLIMIT_NOFILE, where Kafka keeps every .log file open and asks for a
//     limit of 100,000. Idle handles beyond the bound are closed by a CLOCK
//     sweep; a handle in use (a Region going out with sendfile) never is,
//     and one that is open is found without a lock, so the read path costs
//     two atomic operations more than before. A bounded cache rather than
//     open-per-read keeps catch-up reads of a sealed segment at no
//     open(2) per Fetch, and rather than Kafka's open-all keeps the count
//     bounded whatever the number of segments.
//   - A segment being deleted or replaced by the cleaner keeps its handle
//     open (pinned) for readers that still hold it, and is never opened by
//     name again.
//   - Running out of descriptors (EMFILE, ENFILE) while a read or an fsync
//     opens a sealed segment's file fails that call with ErrStorage
//     (KAFKA_STORAGE_ERROR, which clients retry) without taking the
//     partition offline: nothing on disk is wrong.
//
// The log cleaner (cleaner*.go) compacts logs whose cleanup.policy
// includes compact, as Kafka's LogCleaner, LogCleanerManager and Cleaner:
//
//   - One background goroutine per log dir (Manager.CleanOnce, every
//     log.cleaner.backoff.ms while idle) picks the log with the highest
//     dirty ratio above min.cleanable.dirty.ratio, or one whose oldest
//     dirty segment is older than max.compaction.lag.ms.
//   - The cleanable range stops at the active segment, the last stable
//     offset and the first segment with a record newer than
//     min.compaction.lag.ms, rounded down to a segment base.
//   - A pass maps each key of the dirty section to its latest offset (at
//     most log.cleaner.dedupe.buffer.size / 24 keys, which bounds the work
//     of a pass), then rewrites the log from its start to the end of the
//     map in groups of segments that fit one segment: only each key's
//     latest record stays, offsets are kept, and a batch that lost records
//     is re-encoded in its own codec under the decompressed-size cap.
//   - Tombstones and markers that may go get a delete horizon (KIP-534)
//     the first time they are cleaned and are removed by the first pass
//     after it; aborted transactions' records are removed and their
//     markers kept until no batch of the transaction remains; the last
//     batch of every active producer is kept (empty if need be) so its
//     sequence and epoch survive.
//   - A cleaned segment is written as .cleaned files, flushed, renamed to
//     .swap, swapped into the segment list under the append lock, the old
//     files renamed to .deleted and the .swap files to their final names.
//     Open completes a swap that a crash interrupted and removes .cleaned
//     and .deleted leftovers. Readers holding Regions of replaced segments
//     keep reading them until they release them.
//   - The first dirty offset of every cleaned log is kept in
//     cleaner-offset-checkpoint (Kafka's OffsetCheckpointFile format).
//
// Retention applies to compact,delete logs as to delete logs.
//
// A follower replica (follower.go, load.go), as Kafka's UnifiedLog:
//
//   - AppendAsFollower appends batches fetched from the leader as they are:
//     no offsets assigned, no epoch stamped, no timestamps or CRCs
//     rewritten. Batches are checked as stored data (CRC, length, magic);
//     offsets must increase and the first must not be below the log end
//     (*AppendOffsetError, ErrUnexpectedAppendOffset; ErrOffsetsOutOfOrder
//     inside a set); gaps left by the leader's compaction are kept. Producer
//     state, the transaction index and the last stable offset follow the
//     batches, markers included, without the producer checks a leader
//     makes; each batch's partition leader epoch starts at its base offset
//     in the leader epoch cache. The bytes on disk equal the leader's.
//   - Truncate cuts a divergent tail: segments, indexes, transaction
//     index, producer state (rebuilt from the latest snapshot below) and
//     its snapshots, leader epochs, the recovery point, the cleaner
//     checkpoint and the kept high watermark; the log start comes down if
//     it was beyond the new end, and an offset below the first segment
//     starts the log over there. TruncateFullyAndStartAt empties the log
//     and starts it at an offset (the leader's log start beyond this end).
//   - With Options.HighWatermarkCheckpoint each log keeps the high
//     watermark its partition reports (UpdateHighWatermark), written to
//     replication-offset-checkpoint every
//     HighWatermarkCheckpointInterval and on Close, and read at Open
//     (HighWatermark, bounded by the log). An unreadable checkpoint fails
//     Open with ErrStorage, as Kafka takes the log dir offline; removing it
//     is safe. Off (a single node), the file is neither written nor read.
//
// Use:
//
//	m, err := log.Open("/var/lib/cascade", log.Options{})
//	l, err := m.Create(log.TopicPartition{Topic: "t", Partition: 0}, topicID, log.DefaultConfig())
//	info, err := l.Append(recordSet, leaderEpoch)
//	res, err := l.Read(offset, maxBytes, highWatermark, true)
//	for _, r := range res.Regions { r.WriteTo(conn); r.Release() }
//	err = m.Close()
//
// docs/durability.md states what is on disk when an append returns.
package log

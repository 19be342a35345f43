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
// log-start-offset-checkpoint, meta.properties and the .kafka_cleanshutdown
// marker.
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
// Segments are designed for the log cleaner (cleaner*.go, not yet written):
// a cleaned segment is written with the .cleaned suffix, renamed to .swap,
// and swapped in; Open completes or discards an interrupted swap.
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

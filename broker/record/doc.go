// Package record owns Kafka's magic-v2 record batch format: a zero-copy view
// over batch bytes (header accessors, validation, in-place header rewrites
// with CRC recomputation), the per-record checks of Kafka's LogValidator
// (Batch.Check), iteration over the varint-encoded records inside a batch,
// gzip, snappy, lz4 and zstd under bounds on decompressed size and decoder
// memory (Limits), and a builder used by tests, transaction markers and the
// log cleaner.
//
// Check never inflates a compressed payload whole: it streams the records
// out of the decoder through a 64 KiB window, refuses a zstd frame whose
// window exceeds Limits.MaxMemory before allocating it, and keeps pooled
// decoders small. Batch.DecodeMemory and SetDecodeMemory tell a caller,
// from the compression headers alone, what a validation will hold;
// Limits.Bound is the most any validation may hold.
//
// Nothing here does I/O or keeps state beyond pooled buffers; broker/log
// builds on it. The format follows Kafka's DefaultRecordBatch and
// DefaultRecord classes.
//
// Typical use on the produce path:
//
//	for b, rest, err := record.Next(set); len(b) > 0; b, rest, err = record.Next(rest) {
//		if err != nil { ... }
//		if err := b.Validate(); err != nil { ... }
//		res, err := b.Check(record.Checks{Limits: limits, CheckTimestamps: true, ...})
//		if err != nil { ... } // a *record.ValidationError lists refused records
//		if res.Rebuild { b, err = b.Rebuild(limits) }
//		b.SetMaxTimestamp(false, res.MaxTimestamp)
//		b.SetBaseOffset(next)
//	}
package record

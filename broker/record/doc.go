// Package record owns Kafka's magic-v2 record batch format: a zero-copy view
// over batch bytes (header accessors, validation, in-place header rewrites
// with CRC recomputation), iteration over the varint-encoded records inside a
// batch (decompressing gzip, snappy, lz4 and zstd under a size cap), and a
// builder used by tests, transaction markers and the log cleaner.
//
// Nothing here does I/O or keeps state; broker/log builds on it. The format
// follows Kafka's DefaultRecordBatch and DefaultRecord classes.
//
// Typical use on the produce path:
//
//	for b, rest, err := record.Next(set); len(b) > 0; b, rest, err = record.Next(rest) {
//		if err != nil { ... }
//		if err := b.Validate(); err != nil { ... }
//		b.SetBaseOffset(next)
//		b.UpdateCRC()
//	}
package record

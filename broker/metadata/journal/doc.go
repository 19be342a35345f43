// Package journal is the durable local log under Cascade's metadata store:
// an append-only file of checksummed frames, fsynced per append, recovered
// by truncating a torn or corrupt tail.
//
// File layout (<dir>/metadata.journal):
//
//	header: 8 bytes "CSCDMJ01"
//	frame:  uint32 big-endian payload length, uint32 big-endian CRC-32C of
//	        the payload, payload (one metadata batch)
//
// A frame is written with a single write and then fsynced, so after a crash
// the file holds every acknowledged frame followed by at most one partial
// frame, which Replay cuts off. Rewrite replaces the whole file atomically
// (temporary file, fsync, rename, directory fsync) to compact the log.
// Open takes an exclusive lock on <dir>/.lock (flock, as Kafka locks its log
// dirs), so a second broker on the same data dir fails at start.
//
// This package owns the file format only; the record encoding and the image
// live in broker/metadata.
package journal

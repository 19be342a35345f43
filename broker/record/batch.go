package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Field positions of the v2 batch header, as in Kafka's DefaultRecordBatch.
const (
	baseOffsetPos           = 0
	batchLengthPos          = 8
	partitionLeaderEpochPos = 12
	magicPos                = 16
	crcPos                  = 17
	attributesPos           = 21
	lastOffsetDeltaPos      = 23
	baseTimestampPos        = 27
	maxTimestampPos         = 35
	producerIDPos           = 43
	producerEpochPos        = 51
	baseSequencePos         = 53
	recordCountPos          = 57

	// HeaderSize is the size of a v2 batch header (RECORD_BATCH_OVERHEAD).
	HeaderSize = 61
	// LogOverhead is the size of the baseOffset and batchLength fields, which
	// batchLength does not count.
	LogOverhead = 12
)

// Attribute bits of a v2 batch.
const (
	compressionMask        = 0x07
	timestampTypeMask      = 0x08
	transactionalMask      = 0x10
	controlMask            = 0x20
	deleteHorizonMask      = 0x40
	NoProducerID           = -1
	NoProducerEpoch        = -1
	NoSequence             = -1
	NoPartitionLeaderEpoch = -1
	NoTimestamp            = -1
)

// Codec is a batch's compression codec (attributes bits 0-2).
type Codec int8

// Codecs, numbered as in Kafka's CompressionType.
const (
	CodecNone Codec = iota
	CodecGzip
	CodecSnappy
	CodecLZ4
	CodecZstd
)

// String returns Kafka's name for the codec.
func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// Sentinel errors of batch parsing and validation.
var (
	ErrShort          = errors.New("record: batch shorter than its header or its declared length")
	ErrBadLength      = errors.New("record: batch length field out of range")
	ErrMagic          = errors.New("record: unsupported magic (only v2 is accepted)")
	ErrCRC            = errors.New("record: CRC32C mismatch")
	ErrRecordCount    = errors.New("record: record count inconsistent with lastOffsetDelta")
	ErrProducerFields = errors.New("record: incoherent producer id, epoch and sequence")
	ErrCodec          = errors.New("record: unknown compression codec")
	ErrRecords        = errors.New("record: malformed inner records")
	ErrTooLarge       = errors.New("record: decompressed size exceeds the limit")
	ErrControl        = errors.New("record: malformed control record")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Batch is a view over the bytes of one v2 record batch, header included. It
// never copies; setters rewrite the bytes in place. A Batch returned by Next
// is at least HeaderSize long and exactly as long as its batchLength says.
type Batch []byte

// Next splits the first batch off a record set. It returns the batch, the
// rest of the set, and an error when the set does not start with a complete
// batch; lengths are never trusted beyond the buffer. An empty set returns a
// nil batch and no error.
func Next(set []byte) (Batch, []byte, error) {
	if len(set) == 0 {
		return nil, nil, nil
	}
	if len(set) < LogOverhead {
		return nil, nil, ErrShort
	}
	length := int64(int32(binary.BigEndian.Uint32(set[batchLengthPos:])))
	if length < HeaderSize-LogOverhead {
		return nil, nil, fmt.Errorf("%w: %d", ErrBadLength, length)
	}
	total := length + LogOverhead
	if total > int64(len(set)) {
		return nil, nil, ErrShort
	}
	return Batch(set[:total]), set[total:], nil
}

// Count returns the number of whole batches in a record set, or an error if
// the set has trailing partial bytes or a bad length.
func Count(set []byte) (int, error) {
	n := 0
	for len(set) > 0 {
		_, rest, err := Next(set)
		if err != nil {
			return n, err
		}
		set = rest
		n++
	}
	return n, nil
}

func (b Batch) u16(p int) uint16 { return binary.BigEndian.Uint16(b[p:]) }
func (b Batch) u32(p int) uint32 { return binary.BigEndian.Uint32(b[p:]) }
func (b Batch) u64(p int) uint64 { return binary.BigEndian.Uint64(b[p:]) }

// BaseOffset returns the offset of the first record.
func (b Batch) BaseOffset() int64 { return int64(b.u64(baseOffsetPos)) }

// BatchLength returns the length field: the size after the length field.
func (b Batch) BatchLength() int32 { return int32(b.u32(batchLengthPos)) }

// Size returns the batch's total size in bytes.
func (b Batch) Size() int { return len(b) }

// PartitionLeaderEpoch returns the leader epoch stamped by the leader.
func (b Batch) PartitionLeaderEpoch() int32 { return int32(b.u32(partitionLeaderEpochPos)) }

// Magic returns the format version byte.
func (b Batch) Magic() int8 { return int8(b[magicPos]) }

// CRC returns the stored CRC32C.
func (b Batch) CRC() uint32 { return b.u32(crcPos) }

// Attributes returns the raw attributes field.
func (b Batch) Attributes() int16 { return int16(b.u16(attributesPos)) }

// Codec returns the compression codec.
func (b Batch) Codec() Codec { return Codec(b.Attributes() & compressionMask) }

// LogAppendTime reports whether the timestamp type is LogAppendTime.
func (b Batch) LogAppendTime() bool { return b.Attributes()&timestampTypeMask != 0 }

// Transactional reports whether the batch is part of a transaction.
func (b Batch) Transactional() bool { return b.Attributes()&transactionalMask != 0 }

// Control reports whether the batch holds control records (markers).
func (b Batch) Control() bool { return b.Attributes()&controlMask != 0 }

// HasDeleteHorizon reports whether baseTimestamp holds a delete horizon
// (KIP-534), set by the log cleaner.
func (b Batch) HasDeleteHorizon() bool { return b.Attributes()&deleteHorizonMask != 0 }

// LastOffsetDelta returns lastOffset - baseOffset.
func (b Batch) LastOffsetDelta() int32 { return int32(b.u32(lastOffsetDeltaPos)) }

// LastOffset returns the offset of the last record.
func (b Batch) LastOffset() int64 { return b.BaseOffset() + int64(b.LastOffsetDelta()) }

// NextOffset returns LastOffset()+1.
func (b Batch) NextOffset() int64 { return b.LastOffset() + 1 }

// BaseTimestamp returns the first timestamp (or the delete horizon).
func (b Batch) BaseTimestamp() int64 { return int64(b.u64(baseTimestampPos)) }

// MaxTimestamp returns the largest record timestamp (or the append time).
func (b Batch) MaxTimestamp() int64 { return int64(b.u64(maxTimestampPos)) }

// ProducerID returns the producer id, -1 if none.
func (b Batch) ProducerID() int64 { return int64(b.u64(producerIDPos)) }

// ProducerEpoch returns the producer epoch, -1 if none.
func (b Batch) ProducerEpoch() int16 { return int16(b.u16(producerEpochPos)) }

// BaseSequence returns the first sequence number, -1 if none.
func (b Batch) BaseSequence() int32 { return int32(b.u32(baseSequencePos)) }

// LastSequence returns the sequence of the last record, wrapping at
// MaxInt32 as Kafka's DefaultRecordBatch.incrementSequence does.
func (b Batch) LastSequence() int32 {
	base := b.BaseSequence()
	if base == NoSequence {
		return NoSequence
	}
	return IncrementSequence(base, b.LastOffsetDelta())
}

// IncrementSequence adds delta to seq, wrapping past MaxInt32 to 0.
func IncrementSequence(seq, delta int32) int32 {
	if seq > (1<<31-1)-delta {
		return delta - ((1<<31 - 1) - seq) - 1
	}
	return seq + delta
}

// RecordCount returns the number of records declared.
func (b Batch) RecordCount() int32 { return int32(b.u32(recordCountPos)) }

// Payload returns the (possibly compressed) records section.
func (b Batch) Payload() []byte { return b[HeaderSize:] }

// ComputeCRC returns the CRC32C over attributes..end, as Kafka computes it.
func (b Batch) ComputeCRC() uint32 { return crc32.Checksum(b[attributesPos:], castagnoli) }

// Validate checks the header as Kafka's DefaultRecordBatch.ensureValid and
// LogValidator do for a batch arriving from a client: the length, magic 2,
// the CRC, a record count consistent with lastOffsetDelta, a known codec and
// coherent producer fields. It does not look inside the records; see
// ValidateRecords.
func (b Batch) Validate() error {
	if len(b) < HeaderSize {
		return ErrShort
	}
	if int64(b.BatchLength())+LogOverhead != int64(len(b)) {
		return ErrBadLength
	}
	if b.Magic() != 2 {
		return fmt.Errorf("%w: %d", ErrMagic, b.Magic())
	}
	if b.CRC() != b.ComputeCRC() {
		return fmt.Errorf("%w: stored %08x, computed %08x", ErrCRC, b.CRC(), b.ComputeCRC())
	}
	if b.Codec() > CodecZstd {
		return fmt.Errorf("%w: %d", ErrCodec, b.Codec())
	}
	// As LogValidator.validateBatch: count derived from offsets must be
	// positive and equal the declared count.
	count, delta := b.RecordCount(), b.LastOffsetDelta()
	if delta < 0 || count <= 0 || int64(delta)+1 != int64(count) {
		return fmt.Errorf("%w: count %d, lastOffsetDelta %d", ErrRecordCount, count, delta)
	}
	pid, epoch, seq := b.ProducerID(), b.ProducerEpoch(), b.BaseSequence()
	if pid < NoProducerID || (pid >= 0 && epoch < 0) || seq < NoSequence {
		return fmt.Errorf("%w: producerId %d, epoch %d, baseSequence %d", ErrProducerFields, pid, epoch, seq)
	}
	if pid >= 0 && !b.Control() && seq < 0 {
		return fmt.Errorf("%w: idempotent batch without a sequence", ErrProducerFields)
	}
	if b.Transactional() && pid < 0 {
		return fmt.Errorf("%w: transactional batch without a producer id", ErrProducerFields)
	}
	return nil
}

// SetBaseOffset rewrites the base offset. The CRC does not cover it.
func (b Batch) SetBaseOffset(o int64) { binary.BigEndian.PutUint64(b[baseOffsetPos:], uint64(o)) }

// SetPartitionLeaderEpoch rewrites the leader epoch. The CRC does not cover it.
func (b Batch) SetPartitionLeaderEpoch(e int32) {
	binary.BigEndian.PutUint32(b[partitionLeaderEpochPos:], uint32(e))
}

// SetLogAppendTime stamps the batch with the broker's append time: the
// timestamp type bit is set and maxTimestamp holds ts, as Kafka's
// DefaultRecordBatch.setMaxTimestamp(LOG_APPEND_TIME, ts). Call UpdateCRC after.
func (b Batch) SetLogAppendTime(ts int64) {
	attrs := b.u16(attributesPos) | timestampTypeMask
	binary.BigEndian.PutUint16(b[attributesPos:], attrs)
	binary.BigEndian.PutUint64(b[maxTimestampPos:], uint64(ts))
}

// UpdateCRC recomputes and stores the CRC after a covered field changed.
func (b Batch) UpdateCRC() { binary.BigEndian.PutUint32(b[crcPos:], b.ComputeCRC()) }

// ValidateStored checks what Kafka's DefaultRecordBatch.ensureValid checks
// when it reads a batch back from disk during recovery: the length, magic 2,
// a known codec and the CRC. Unlike Validate it accepts the offset gaps and
// empty batches that compaction leaves.
func (b Batch) ValidateStored() error {
	if len(b) < HeaderSize {
		return ErrShort
	}
	if int64(b.BatchLength())+LogOverhead != int64(len(b)) {
		return ErrBadLength
	}
	if b.Magic() != 2 {
		return fmt.Errorf("%w: %d", ErrMagic, b.Magic())
	}
	if b.Codec() > CodecZstd {
		return fmt.Errorf("%w: %d", ErrCodec, b.Codec())
	}
	if b.LastOffsetDelta() < 0 || b.RecordCount() < 0 {
		return fmt.Errorf("%w: count %d, lastOffsetDelta %d", ErrRecordCount, b.RecordCount(), b.LastOffsetDelta())
	}
	if b.CRC() != b.ComputeCRC() {
		return fmt.Errorf("%w: stored %08x, computed %08x", ErrCRC, b.CRC(), b.ComputeCRC())
	}
	return nil
}

// SetMaxTimestamp sets the timestamp type and the max timestamp and
// recomputes the CRC, as Kafka's DefaultRecordBatch.setMaxTimestamp: when
// neither changes the batch is left as it is and its CRC is not computed.
func (b Batch) SetMaxTimestamp(logAppendTime bool, ts int64) {
	if b.LogAppendTime() == logAppendTime && b.MaxTimestamp() == ts {
		return
	}
	attrs := b.u16(attributesPos) &^ timestampTypeMask
	if logAppendTime {
		attrs |= timestampTypeMask
	}
	binary.BigEndian.PutUint16(b[attributesPos:], attrs)
	binary.BigEndian.PutUint64(b[maxTimestampPos:], uint64(ts))
	b.UpdateCRC()
}

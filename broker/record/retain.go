package record

import (
	"encoding/binary"
	"fmt"
)

// This file holds what the log cleaner needs to rewrite a batch after it has
// dropped some of its records, as Kafka's MemoryRecords.filterTo and
// buildRetainedRecordsInto do.

// RecordsReuse is Records for a caller that decodes many batches: the
// decompression buffer, grown as needed, is handed back in *scratch, so
// steady-state decoding allocates only for a batch larger than any before.
// Records of one batch alias *scratch until the next call.
func (b Batch) RecordsReuse(limit int, scratch *[]byte) (Iter, error) {
	if b.Codec() == CodecNone {
		return NewIter(b.Payload(), b.RecordCount()), nil
	}
	data, err := Decompress(b.Codec(), b.Payload(), limit, (*scratch)[:0])
	if err != nil {
		return Iter{}, err
	}
	*scratch = data[:0]
	return NewIter(data, b.RecordCount()), nil
}

// Timestamp returns the record's absolute timestamp within batch b: the
// batch's base timestamp (or delete horizon) plus the record's delta.
func (r Record) Timestamp(b Batch) int64 { return b.BaseTimestamp() + r.TimestampDelta }

// OffsetIn returns the record's absolute offset within batch b.
func (r Record) OffsetIn(b Batch) int64 { return b.BaseOffset() + int64(r.OffsetDelta) }

func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

func bytesLen(b []byte) int {
	if b == nil {
		return varintLen(-1)
	}
	return varintLen(int64(len(b))) + len(b)
}

// appendRetainedRecord re-encodes r (DefaultRecord.writeTo) with its
// timestamp relative to baseTS; its offset delta, key, value and raw headers
// are kept.
func appendRetainedRecord(dst []byte, r Record, ts, baseTS int64) []byte {
	delta := ts - baseTS
	size := 1 + varintLen(delta) + varintLen(int64(r.OffsetDelta)) + bytesLen(r.Key) + bytesLen(r.Value) +
		varintLen(int64(r.NumHeaders)) + len(r.headers)
	dst = binary.AppendVarint(dst, int64(size))
	dst = append(dst, byte(r.Attributes))
	dst = binary.AppendVarint(dst, delta)
	dst = binary.AppendVarint(dst, int64(r.OffsetDelta))
	dst = appendBytes(dst, r.Key)
	dst = appendBytes(dst, r.Value)
	dst = binary.AppendVarint(dst, int64(r.NumHeaders))
	return append(dst, r.headers...)
}

// AppendRetained appends to dst a batch that keeps orig's header (base
// offset, last offset delta, producer id, epoch and base sequence, leader
// epoch, timestamp type, transactional and control flags) but holds only
// recs, which were decoded from orig, compressed again in orig's codec.
// Keeping the last offset keeps the producer's last sequence
// (MemoryRecordsBuilder.overrideLastOffset). When horizon >= 0 the batch
// carries it as its delete horizon (KIP-534): the base timestamp is the
// horizon and the delete-horizon attribute is set. Otherwise the base
// timestamp is the first kept record's. A LogAppendTime batch keeps its max
// timestamp; a CreateTime batch's is the largest kept record's. payload is
// scratch space for the uncompressed records and is returned grown.
func AppendRetained(dst []byte, orig Batch, recs []Record, horizon int64, payload []byte) (out, scratch []byte, err error) {
	if len(recs) == 0 {
		return dst, payload, fmt.Errorf("%w: no records to retain", ErrRecords)
	}
	baseTS := recs[0].Timestamp(orig)
	if horizon >= 0 {
		baseTS = horizon
	}
	maxTS := int64(NoTimestamp)
	payload = payload[:0]
	for _, r := range recs {
		ts := r.Timestamp(orig)
		maxTS = max(maxTS, ts)
		payload = appendRetainedRecord(payload, r, ts, baseTS)
	}
	if orig.LogAppendTime() {
		maxTS = orig.MaxTimestamp()
	}
	body := payload
	if orig.Codec() != CodecNone {
		if body, err = Compress(orig.Codec(), payload); err != nil {
			return dst, payload, err
		}
	}
	attrs := uint16(orig.Attributes()) &^ deleteHorizonMask
	if horizon >= 0 {
		attrs |= deleteHorizonMask
	}
	start := len(dst)
	dst = appendHeader(dst, orig, attrs, baseTS, maxTS, int32(len(recs)), len(body))
	dst = append(dst, body...)
	Batch(dst[start:]).UpdateCRC()
	return dst, payload, nil
}

// AppendEmpty appends a batch with orig's offsets and producer fields but
// no records, as DefaultRecordBatch.writeEmptyHeader: the cleaner keeps such
// a batch when all its records are gone but the producer's last sequence or
// epoch, or the last offset of a cleaning round, must survive. It is
// uncompressed and both timestamps are orig's max timestamp.
func AppendEmpty(dst []byte, orig Batch) []byte {
	attrs := uint16(orig.Attributes()) & (timestampTypeMask | transactionalMask | controlMask)
	start := len(dst)
	dst = appendHeader(dst, orig, attrs, orig.MaxTimestamp(), orig.MaxTimestamp(), 0, 0)
	Batch(dst[start:]).UpdateCRC()
	return dst
}

// appendHeader appends a v2 header copying orig's offsets, leader epoch and
// producer fields, with the CRC left zero.
func appendHeader(dst []byte, orig Batch, attrs uint16, baseTS, maxTS int64, count int32, payloadLen int) []byte {
	be := binary.BigEndian
	dst = be.AppendUint64(dst, uint64(orig.BaseOffset()))
	dst = be.AppendUint32(dst, uint32(HeaderSize-LogOverhead+payloadLen))
	dst = be.AppendUint32(dst, uint32(orig.PartitionLeaderEpoch()))
	dst = append(dst, 2)
	dst = be.AppendUint32(dst, 0) // CRC, computed by the caller
	dst = be.AppendUint16(dst, attrs)
	dst = be.AppendUint32(dst, uint32(orig.LastOffsetDelta()))
	dst = be.AppendUint64(dst, uint64(baseTS))
	dst = be.AppendUint64(dst, uint64(maxTS))
	dst = be.AppendUint64(dst, uint64(orig.ProducerID()))
	dst = be.AppendUint16(dst, uint16(orig.ProducerEpoch()))
	dst = be.AppendUint32(dst, uint32(orig.BaseSequence()))
	return be.AppendUint32(dst, uint32(count))
}

// Rebuild returns b rebuilt as Kafka's LogValidator.buildRecordsAndAssignOffsets
// rebuilds a compressed batch whose records' offset deltas do not run
// 0,1,2... (Result.Rebuild): the same records, with their keys, values,
// headers and timestamps, renumbered and compressed again in b's codec,
// under b's offsets, producer fields, flags and timestamp type. Unlike Check
// it holds the decompressed records and the new payload at once, each
// bounded by l.MaxBytes (its default when zero); no Java or Go client sends such batches.
func (b Batch) Rebuild(l Limits) (Batch, error) {
	var scratch []byte
	it, err := b.RecordsReuse(l.maxBytes(), &scratch)
	if err != nil {
		return nil, err
	}
	var recs []Record
	for r, ok := it.Next(); ok; r, ok = it.Next() {
		r.OffsetDelta = int32(len(recs))
		recs = append(recs, r)
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	out, _, err := AppendRetained(nil, b, recs, -1, nil)
	return Batch(out), err
}

package bench

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Field positions of Kafka's v2 record batch header (DefaultRecordBatch).
// The raw client writes and reads them itself rather than through the
// broker's own record package, so a defect in Cascade's batch code cannot
// hide behind the same defect in the tool that checks it.
const (
	batchLengthPos   = 8
	leaderEpochPos   = 12
	magicPos         = 16
	crcPos           = 17
	attributesPos    = 21
	lastDeltaPos     = 23
	baseTimePos      = 27
	maxTimePos       = 35
	producerIDPos    = 43
	producerEpochPos = 51
	baseSeqPos       = 53
	recordCountPos   = 57
	batchHeaderBytes = 61
	// batchLengthBase is what batchLength counts besides the records: the
	// header after the baseOffset and batchLength fields.
	batchLengthBase = batchHeaderBytes - 12
)

// rawTemplates are a run's distinct batches, each built and compressed
// once: the raw producer replays them, rewriting only the header fields a
// send changes, and the raw consumer recognises them by their records'
// checksum.
type rawTemplates struct {
	// perBatch is the records of a full batch: as many as fit the
	// workload's batch.size uncompressed.
	perBatch int
	// full are the full-size templates; a send of first record id f uses
	// full[templateIndex(f)].
	full []*rawTemplate
	// short holds the templates of a producer's last, shorter send, by
	// record count.
	mu    sync.Mutex
	short map[int]*rawTemplate
	w     Workload
	codec int8
	// epoch is the base timestamp of record id 0: a send's first record id
	// is its batch's base timestamp minus epoch. It lies as many
	// milliseconds before the run as the run (or its warm-up) has records,
	// so every timestamp is in the past, and for runs of up to 86 million
	// records within a day: inside Kafka's default retention (seven days)
	// and producer.id.expiration.ms (one day), which both count from the
	// batches' timestamps.
	epoch int64
}

// rawTemplate is one built batch: the 61-byte header as built (base
// offset 0, producer fields unset) and the records section after it.
type rawTemplate struct {
	count   int
	header  [batchHeaderBytes]byte
	records []byte
	// recordsCRC is the CRC-32C of records; shift combines it with a
	// header's CRC into the batch's (crcCombine).
	recordsCRC uint32
	shift      uint32
}

// rawFullTemplates is how many distinct full batches a run replays.
const rawFullTemplates = 16

var rawCodecs = map[string]int8{"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

// rawRecordOverhead bounds the bytes one record adds besides its value:
// the length, attributes, timestamp and offset deltas, key length, value
// length and header count varints.
const rawRecordOverhead = 1 + 5 + 1 + 5 + 5 + 1 + 5 + 1

// rawPerBatch returns how many records the raw producer puts in a batch:
// as many as fit batch.size uncompressed, as a Kafka producer fills its
// batches at full speed, and at least one.
func rawPerBatch(w Workload) int {
	n := (max(w.BatchBytes, w.PayloadBytes+512) - batchHeaderBytes) / (w.PayloadBytes + rawRecordOverhead)
	return max(1, n)
}

func newRawTemplates(w Workload) (*rawTemplates, error) {
	t := &rawTemplates{w: w, perBatch: rawPerBatch(w), short: map[int]*rawTemplate{}, codec: rawCodecs[w.Compression],
		epoch: time.Now().UnixMilli() - max(w.Records, w.WarmupRecords)}
	for i := range rawFullTemplates {
		tp, err := buildRawTemplate(w, t.codec, t.perBatch, uint64(i*t.perBatch))
		if err != nil {
			return nil, err
		}
		t.full = append(t.full, tp)
	}
	// A producer's share ends in a send of share % perBatch records; a
	// warm-up's shares may end otherwise, and build theirs when first used.
	per, extra := w.Records/int64(w.Producers), w.Records%int64(w.Producers)
	for _, share := range []int64{per, per + 1} {
		if share == per+1 && extra == 0 {
			continue
		}
		if r := int(share % int64(t.perBatch)); r > 0 {
			if _, err := t.shortTemplate(r); err != nil {
				return nil, err
			}
		}
	}
	return t, nil
}

// shortTemplate returns the template of count records, less than a full
// batch, building it on first use. Its records depend on count alone, so
// the producer and the consumer agree on it whichever builds it.
func (t *rawTemplates) shortTemplate(count int) (*rawTemplate, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tp := t.short[count]; tp != nil {
		return tp, nil
	}
	tp, err := buildRawTemplate(t.w, t.codec, count, uint64(rawFullTemplates*t.perBatch+count*t.perBatch))
	if err != nil {
		return nil, err
	}
	t.short[count] = tp
	return tp, nil
}

// template returns the template a send of count records from first uses,
// or nil when count is not a batch size of the run.
func (t *rawTemplates) template(first int64, count int) *rawTemplate {
	if count == t.perBatch {
		return t.full[mix64(uint64(first))%rawFullTemplates]
	}
	if count <= 0 || count > t.perBatch {
		return nil
	}
	tp, err := t.shortTemplate(count)
	if err != nil {
		return nil
	}
	return tp
}

// buildRawTemplate encodes count records whose values are Payload(seed,
// base+i), compresses them once with codec, and lays out the header.
func buildRawTemplate(w Workload, codec int8, count int, base uint64) (*rawTemplate, error) {
	var recs []byte
	v := make([]byte, w.PayloadBytes)
	for i := range count {
		Payload(v, w.Seed, base+uint64(i))
		var body []byte
		body = append(body, 0)                     // attributes
		body = binary.AppendVarint(body, 0)        // timestamp delta
		body = binary.AppendVarint(body, int64(i)) // offset delta
		body = binary.AppendVarint(body, -1)       // null key
		body = binary.AppendVarint(body, int64(len(v)))
		body = append(body, v...)
		body = binary.AppendVarint(body, 0) // no headers
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	records, err := rawCompress(codec, recs)
	if err != nil {
		return nil, fmt.Errorf("compressing a %s batch: %w", w.Compression, err)
	}
	tp := &rawTemplate{count: count, records: records, recordsCRC: crc32.Checksum(records, castagnoli),
		shift: crcShift(len(records))}
	h := tp.header[:]
	binary.BigEndian.PutUint32(h[batchLengthPos:], uint32(batchLengthBase+len(records)))
	binary.BigEndian.PutUint32(h[leaderEpochPos:], 0xffffffff)
	h[magicPos] = 2
	binary.BigEndian.PutUint16(h[attributesPos:], uint16(codec))
	binary.BigEndian.PutUint32(h[lastDeltaPos:], uint32(count-1))
	binary.BigEndian.PutUint64(h[producerIDPos:], 0xffffffffffffffff)
	binary.BigEndian.PutUint16(h[producerEpochPos:], 0xffff)
	binary.BigEndian.PutUint32(h[baseSeqPos:], 0xffffffff)
	binary.BigEndian.PutUint32(h[recordCountPos:], uint32(count))
	return tp, nil
}

// stamp writes a send's header into dst: the template's, with the send's
// identity (first record id, as the base and max timestamps), its
// producer fields, and the CRC, computed from the header and the
// template's records CRC without reading the records again.
func (t *rawTemplates) stamp(dst *[batchHeaderBytes]byte, tp *rawTemplate, first int64, pid int64, epoch int16, seq int32) {
	*dst = tp.header
	h := dst[:]
	ts := uint64(t.epoch + first)
	binary.BigEndian.PutUint64(h[baseTimePos:], ts)
	binary.BigEndian.PutUint64(h[maxTimePos:], ts)
	if pid >= 0 {
		binary.BigEndian.PutUint64(h[producerIDPos:], uint64(pid))
		binary.BigEndian.PutUint16(h[producerEpochPos:], uint16(epoch))
		binary.BigEndian.PutUint32(h[baseSeqPos:], uint32(seq))
	}
	crc := crcCombine(crc32.Checksum(h[attributesPos:], castagnoli), tp.recordsCRC, tp.shift)
	binary.BigEndian.PutUint32(h[crcPos:], crc)
}

// rawCompress compresses a records section in the framing Kafka's Java
// client writes: a gzip member, xerial-framed snappy, an LZ4 frame of
// 64 KiB blocks, a zstd frame.
func rawCompress(codec int8, src []byte) ([]byte, error) {
	var buf bytes.Buffer
	switch codec {
	case 0:
		return src, nil
	case 1:
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(src); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
	case 2:
		// snappy-java's stream: magic, version 1, compatible version 1,
		// then blocks of at most 32 KiB of input, each length-prefixed.
		buf.Write([]byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1})
		for p := src; len(p) > 0; {
			n := min(len(p), 32<<10)
			block := snappy.Encode(nil, p[:n])
			buf.Write(binary.BigEndian.AppendUint32(nil, uint32(len(block))))
			buf.Write(block)
			p = p[n:]
		}
	case 3:
		zw := lz4.NewWriter(&buf)
		if err := zw.Apply(lz4.BlockSizeOption(lz4.Block64Kb)); err != nil {
			return nil, err
		}
		if _, err := zw.Write(src); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
	case 4:
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		defer enc.Close()
		return enc.EncodeAll(src, nil), nil
	default:
		return nil, fmt.Errorf("unknown codec %d", codec)
	}
	return buf.Bytes(), nil
}

// castagnoliReflected is CRC-32C's polynomial, bit-reflected.
const castagnoliReflected = 0x82F63B78

// crcMulModP multiplies a and b modulo the CRC polynomial (zlib's
// multmodp): the arithmetic that lets two CRCs be combined.
func crcMulModP(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; ; m >>= 1 {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				return p
			}
		}
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReflected
		} else {
			b >>= 1
		}
	}
}

// crcShift returns x^(8n) modulo the polynomial: the operator that
// appends n bytes' worth of shift to a CRC (zlib's x2nmodp(n, 3)).
func crcShift(n int) uint32 {
	p := uint32(1) << 31  // x^0
	sq := uint32(1) << 30 // x^1
	for range 3 {         // x^8
		sq = crcMulModP(sq, sq)
	}
	for ; n > 0; n >>= 1 {
		if n&1 != 0 {
			p = crcMulModP(sq, p)
		}
		sq = crcMulModP(sq, sq)
	}
	return p
}

// crcCombine returns the CRC-32C of A||B from crc(A), crc(B) and
// crcShift(len(B)), as zlib's crc32_combine.
func crcCombine(crcA, crcB, shiftB uint32) uint32 {
	return crcMulModP(shiftB, crcA) ^ crcB
}

// check verifies one fetched batch and accounts for its records in v:
// its magic, attributes and offset deltas; its CRC-32C, recomputed over
// every byte it covers; its identity (the first record id, from the base
// timestamp); and its records, which must be those of the template a send
// of that identity and size used (by their CRC). It returns the batch's
// record count. Records are never decoded one by one.
func (t *rawTemplates) check(b []byte, v *verifier) int {
	count := int(int32(binary.BigEndian.Uint32(b[recordCountPos:])))
	if count <= 0 || count > t.perBatch {
		v.corruptN(1)
		return 1
	}
	first := int64(binary.BigEndian.Uint64(b[baseTimePos:])) - t.epoch
	records := b[batchHeaderBytes:]
	recordsCRC := crc32.Checksum(records, castagnoli)
	tp := t.template(first, count)
	var shift uint32
	if tp != nil && len(tp.records) == len(records) {
		shift = tp.shift
	} else {
		shift = crcShift(len(records))
	}
	crc := crcCombine(crc32.Checksum(b[attributesPos:batchHeaderBytes], castagnoli), recordsCRC, shift)
	attrs := binary.BigEndian.Uint16(b[attributesPos:])
	switch {
	case b[magicPos] != 2, crc != binary.BigEndian.Uint32(b[crcPos:]),
		int(int32(binary.BigEndian.Uint32(b[lastDeltaPos:]))) != count-1,
		attrs&0x07 != uint16(t.codec), attrs&0x30 != 0,
		tp == nil, len(tp.records) != len(records), recordsCRC != tp.recordsCRC:
		v.corruptN(count)
	default:
		v.markRange(first, count)
	}
	return count
}

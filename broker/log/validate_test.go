package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/broker/record"
)

var allCodecs = []record.Codec{record.CodecNone, record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd}

// lyingBatch builds a batch of records with the given timestamps whose
// header claims maxTimestamp claimed, with a CRC that matches the lie.
func lyingBatch(t *testing.T, codec record.Codec, claimed int64, ts ...int64) record.Batch {
	t.Helper()
	recs := make([]record.Rec, len(ts))
	for i := range recs {
		recs[i] = record.Rec{Timestamp: ts[i], Key: []byte{'k', byte(i)}, Value: []byte("value")}
	}
	s := record.NewSpec(recs...)
	s.Codec = codec
	b, err := record.Build(s)
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint64(b[35:], uint64(claimed)) // maxTimestamp
	b.UpdateCRC()
	return b
}

// eachCodec runs f in a subtest per codec, on a new log with cfg whose
// clock reads now.
func eachCodec(t *testing.T, cfg Config, f func(t *testing.T, codec record.Codec, l *Log, now int64)) {
	for _, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			c := newFakeClock()
			m, l := openTest(t, t.TempDir(), c, cfg)
			defer m.Close()
			f(t, codec, l, c.Now().UnixMilli())
		})
	}
}

// TestAppendStoresTrueMaxTimestamp: a batch whose header's maxTimestamp is
// smaller than one of its records' is stored with the true maximum and a
// CRC that matches, as LogValidator's setMaxTimestamp does, so that lookups
// by timestamp find the record.
func TestAppendStoresTrueMaxTimestamp(t *testing.T) {
	eachCodec(t, DefaultConfig(), func(t *testing.T, codec record.Codec, l *Log, now int64) {
		b := lyingBatch(t, codec, now-5000, now-3000, now-1000, now-2000)
		if _, err := l.AppendFromClient(b, 0); err != nil {
			t.Fatal(err)
		}
		got := readAll(t, l, 0)
		if len(got) != 1 || got[0].MaxTimestamp() != now-1000 {
			t.Fatalf("stored max timestamp %d, want %d", got[0].MaxTimestamp(), now-1000)
		}
		if !bytes.Equal(got[0][record.HeaderSize:], b[record.HeaderSize:]) {
			t.Fatal("records rewritten")
		}
		o, ts, _, ok := l.OffsetForTimestamp(now - 1500)
		if !ok || o != 1 || ts != now-1000 {
			t.Fatalf("OffsetForTimestamp: offset %d ts %d ok %v, want 1 %d", o, ts, ok, now-1000)
		}
		if o, ts := l.MaxTimestamp(); o != 1 || ts != now-1000 {
			t.Fatalf("MaxTimestamp: offset %d ts %d, want 1 %d", o, ts, now-1000)
		}
	})
}

// TestAppendChecksEveryRecordTimestamp: a record beyond
// message.timestamp.after.max.ms (or before before.max.ms) is refused even
// when the header's maxTimestamp is in range.
func TestAppendChecksEveryRecordTimestamp(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TimestampBeforeMax = 24 * time.Hour
	eachCodec(t, cfg, func(t *testing.T, codec record.Codec, l *Log, now int64) {
		ahead := lyingBatch(t, codec, now, now, now+2*time.Hour.Milliseconds())
		if _, err := l.AppendFromClient(ahead, 0); !errors.Is(err, ErrInvalidTimestamp) {
			t.Fatalf("record 2h ahead in a header within range: %v, want ErrInvalidTimestamp", err)
		}
		behind := lyingBatch(t, codec, now, now-48*time.Hour.Milliseconds(), now)
		if _, err := l.AppendFromClient(behind, 0); !errors.Is(err, ErrInvalidTimestamp) {
			t.Fatalf("record 48h behind: %v, want ErrInvalidTimestamp", err)
		}
		if l.LogEndOffset() != 0 {
			t.Fatalf("refused batches appended: LEO %d", l.LogEndOffset())
		}
	})
}

// zstdWindowSet is a batch of a few hundred bytes whose zstd frame (raw
// blocks, no content size) declares a 512 MiB window.
func zstdWindowSet(t *testing.T) record.Batch {
	t.Helper()
	plain := lyingBatch(t, record.CodecNone, 1000, 1000, 1000)
	data := plain.Payload()
	frame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 19 << 3} // window 2^(10+19)
	h := uint32(1 | len(data)<<3)                          // last raw block
	frame = append(frame, byte(h), byte(h>>8), byte(h>>16))
	frame = append(frame, data...)
	b := make(record.Batch, record.HeaderSize+len(frame))
	copy(b, plain[:record.HeaderSize])
	copy(b[record.HeaderSize:], frame)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-record.LogOverhead))
	b[22] |= byte(record.CodecZstd)
	b.UpdateCRC()
	return b
}

// TestAppendZstdWindowCorrupt: the 512 MiB window is CORRUPT_MESSAGE, and
// refusing it repeatedly allocates and keeps little.
func TestAppendZstdWindowCorrupt(t *testing.T) {
	m, l := openTest(t, t.TempDir(), newFakeClock(), DefaultConfig())
	defer m.Close()
	set := zstdWindowSet(t)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	for range 10 {
		if _, err := l.AppendFromClient(bytes.Clone(set), 0); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("512 MiB zstd window: %v, want ErrCorrupt", err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	if d := m1.TotalAlloc - m0.TotalAlloc; d > 16<<20 {
		t.Errorf("10 refusals allocated %d bytes", d)
	}
	if m1.HeapInuse > m0.HeapInuse+8<<20 {
		t.Errorf("heap in use grew from %d to %d", m0.HeapInuse, m1.HeapInuse)
	}
}

// TestAppendCodecsByteIdentical: legitimate batches of every codec, with a
// record larger than the validation window, are accepted and stored
// exactly as sent apart from the offset and leader epoch fields.
func TestAppendCodecsByteIdentical(t *testing.T) {
	c := newFakeClock()
	m, l := openTest(t, t.TempDir(), c, DefaultConfig())
	defer m.Close()
	now := c.Now().UnixMilli()
	var sent []record.Batch
	for _, codec := range allCodecs {
		recs := []record.Rec{
			{Timestamp: now - 10, Key: []byte("a"), Value: []byte("small"), Headers: []record.Header{{Key: []byte("h"), Value: []byte("v")}}},
			{Timestamp: now - 5, Key: []byte("b"), Value: bytes.Repeat([]byte("large "), 30<<10)},
			{Timestamp: now - 7, Value: nil},
		}
		s := record.NewSpec(recs...)
		s.Codec = codec
		b, err := record.Build(s)
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, bytes.Clone(b))
		if _, err := l.AppendFromClient(b, 4); err != nil {
			t.Fatalf("%v: %v", codec, err)
		}
	}
	got := readAll(t, l, 0)
	if len(got) != len(sent) {
		t.Fatalf("%d batches stored, %d sent", len(got), len(sent))
	}
	for i, b := range got {
		if !bytes.Equal(b[8:12], sent[i][8:12]) || !bytes.Equal(b[16:], sent[i][16:]) || b.PartitionLeaderEpoch() != 4 {
			t.Errorf("%v batch not stored as sent", allCodecs[i])
		}
	}
}

// TestAppendRecordErrors: the refused records come back with their index
// and Kafka's message, and the offset of the true maximum timestamp is
// reported for an accepted batch.
func TestAppendRecordErrors(t *testing.T) {
	eachCodec(t, DefaultConfig(), func(t *testing.T, codec record.Codec, l *Log, now int64) {
		hour := time.Hour.Milliseconds()
		_, err := l.AppendFromClient(lyingBatch(t, codec, now, now, now+2*hour, now, now+3*hour), 0)
		var verr *record.ValidationError
		if !errors.Is(err, ErrInvalidTimestamp) || !errors.As(err, &verr) {
			t.Fatalf("err %v, want ErrInvalidTimestamp with record errors", err)
		}
		if verr.Error() != "One or more records have been rejected due to invalid timestamp" ||
			len(verr.Records) != 2 || verr.Records[0].Index != 1 || verr.Records[1].Index != 3 {
			t.Fatalf("record errors %q %+v", verr.Error(), verr.Records)
		}
		want := "Timestamp 1700007200000 of message with offset 1 is out of range. The timestamp should be within ["
		if !strings.HasPrefix(verr.Records[0].Message, want) || !strings.HasSuffix(verr.Records[0].Message, ", 1700003600000]") {
			t.Fatalf("message %q", verr.Records[0].Message)
		}
		info, err := l.AppendFromClient(lyingBatch(t, codec, now-9, now-9, now-3, now-3, now-8), 0)
		if err != nil || info.OffsetOfMaxTimestamp != 1 {
			t.Fatalf("OffsetOfMaxTimestamp %d, %v; want 1", info.OffsetOfMaxTimestamp, err)
		}
	})
}

// TestAppendLogAppendTimeFromProducer: on a LogAppendTime topic a batch the
// producer marked LogAppendTime is INVALID_TIMESTAMP, as LogValidator's
// validateTimestamp; a CreateTime one is stamped with the append time.
func TestAppendLogAppendTimeFromProducer(t *testing.T) {
	c := newFakeClock()
	cfg := DefaultConfig()
	cfg.TimestampType = LogAppendTime
	m, l := openTest(t, t.TempDir(), c, cfg)
	defer m.Close()
	b := lyingBatch(t, record.CodecLZ4, 5, 5)
	b.SetMaxTimestamp(true, 5)
	if _, err := l.AppendFromClient(b, 0); !errors.Is(err, ErrInvalidTimestamp) {
		t.Fatalf("producer LogAppendTime batch: %v, want ErrInvalidTimestamp", err)
	}
	info, err := l.AppendFromClient(lyingBatch(t, record.CodecLZ4, 5, 5, 6), 0)
	if err != nil || info.LogAppendTime != c.Now().UnixMilli() || info.OffsetOfMaxTimestamp != 0 {
		t.Fatalf("append: %+v, %v", info, err)
	}
	if got := readAll(t, l, 0); !got[0].LogAppendTime() || got[0].MaxTimestamp() != c.Now().UnixMilli() {
		t.Fatalf("stored type %v max %d", got[0].LogAppendTime(), got[0].MaxTimestamp())
	}
}

// TestAppendRebuildsIrregularOffsets: a compressed batch whose inner
// offset deltas do not run 0,1,2... is rebuilt with consecutive ones and
// its records kept, as LogValidator's buildRecordsAndAssignOffsets; an
// uncompressed one is refused.
func TestAppendRebuildsIrregularOffsets(t *testing.T) {
	eachCodec(t, DefaultConfig(), func(t *testing.T, codec record.Codec, l *Log, now int64) {
		s := record.NewSpec(
			record.Rec{Timestamp: now - 3, Key: []byte("a"), Value: []byte("1")},
			record.Rec{Timestamp: now - 1, Key: []byte("b"), Value: []byte("2"), Headers: []record.Header{{Key: []byte("h"), Value: []byte("v")}}},
			record.Rec{Timestamp: now - 2, Key: []byte("c"), Value: nil})
		s.Records[1].OffsetDelta, s.Records[2].OffsetDelta = 2, 5
		s.LastOffsetDelta, s.Codec = 2, codec
		b, err := record.Build(s)
		if err != nil {
			t.Fatal(err)
		}
		info, err := l.AppendFromClient(b, 0)
		if codec == record.CodecNone {
			if !errors.Is(err, ErrInvalidRecord) {
				t.Fatalf("uncompressed: %v, want ErrInvalidRecord", err)
			}
			return
		}
		if err != nil || info.FirstOffset != 0 || info.LastOffset != 2 || info.OffsetOfMaxTimestamp != 1 {
			t.Fatalf("append: %+v, %v", info, err)
		}
		got := readAll(t, l, 0)
		it, err := got[0].Records(1<<20, nil)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for r, ok := it.Next(); ok; r, ok = it.Next() {
			if r.OffsetDelta != int32(len(keys)) || r.Timestamp(got[0]) != s.Records[len(keys)].Timestamp {
				t.Fatalf("record %d: delta %d ts %d", len(keys), r.OffsetDelta, r.Timestamp(got[0]))
			}
			keys = append(keys, string(r.Key))
		}
		if strings.Join(keys, ",") != "a,b,c" || got[0].Codec() != codec || got[0].MaxTimestamp() != now-1 || got[0].ValidateStored() != nil {
			t.Fatalf("stored %v codec %v max %d", keys, got[0].Codec(), got[0].MaxTimestamp())
		}
	})
}

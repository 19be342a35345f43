package record

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/klauspost/compress/snappy"
)

func sampleRecs(n int) []Rec {
	recs := make([]Rec, n)
	for i := range recs {
		recs[i] = Rec{
			Timestamp: 1_700_000_000_000 + int64(i),
			Key:       []byte(fmt.Sprintf("k%d", i)),
			Value:     bytes.Repeat([]byte{byte(i)}, 100),
			Headers:   []Header{{Key: []byte("h"), Value: []byte("v")}, {Key: []byte("n"), Value: nil}},
		}
	}
	recs[0].Key = nil // a null key
	if n > 1 {
		recs[1].Value = nil // a tombstone
	}
	return recs
}

func TestBuildAccessorsAllCodecs(t *testing.T) {
	for _, c := range []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		t.Run(c.String(), func(t *testing.T) {
			s := NewSpec(sampleRecs(5)...)
			s.Codec, s.BaseOffset, s.PartitionLeaderEpoch = c, 42, 7
			s.ProducerID, s.ProducerEpoch, s.BaseSequence = 9, 2, 100
			s.Transactional = true
			b, err := Build(s)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if err := b.ValidateRecords(1 << 20); err != nil {
				t.Fatalf("ValidateRecords: %v", err)
			}
			checks := []struct {
				name      string
				got, want int64
			}{
				{"baseOffset", b.BaseOffset(), 42},
				{"lastOffset", b.LastOffset(), 46},
				{"leaderEpoch", int64(b.PartitionLeaderEpoch()), 7},
				{"magic", int64(b.Magic()), 2},
				{"codec", int64(b.Codec()), int64(c)},
				{"count", int64(b.RecordCount()), 5},
				{"pid", b.ProducerID(), 9},
				{"epoch", int64(b.ProducerEpoch()), 2},
				{"seq", int64(b.BaseSequence()), 100},
				{"lastSeq", int64(b.LastSequence()), 104},
				{"baseTs", b.BaseTimestamp(), 1_700_000_000_000},
				{"maxTs", b.MaxTimestamp(), 1_700_000_000_004},
				{"length", int64(b.BatchLength()) + LogOverhead, int64(len(b))},
			}
			for _, ch := range checks {
				if ch.got != ch.want {
					t.Errorf("%s = %d, want %d", ch.name, ch.got, ch.want)
				}
			}
			if !b.Transactional() || b.Control() || b.LogAppendTime() {
				t.Errorf("attribute bits wrong: %x", b.Attributes())
			}
			it, err := b.Records(1<<20, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := sampleRecs(5)
			i := 0
			for r, ok := it.Next(); ok; r, ok = it.Next() {
				w := want[i]
				if !bytes.Equal(r.Key, w.Key) || (r.Key == nil) != (w.Key == nil) ||
					!bytes.Equal(r.Value, w.Value) || (r.Value == nil) != (w.Value == nil) {
					t.Errorf("record %d key/value mismatch", i)
				}
				if b.BaseTimestamp()+r.TimestampDelta != w.Timestamp || r.OffsetDelta != int32(i) {
					t.Errorf("record %d ts/offset mismatch", i)
				}
				hs := r.Headers()
				if len(hs) != 2 || string(hs[0].Key) != "h" || string(hs[0].Value) != "v" || hs[1].Value != nil {
					t.Errorf("record %d headers %q", i, hs)
				}
				i++
			}
			if it.Err() != nil || i != 5 {
				t.Fatalf("iterated %d records, err %v", i, it.Err())
			}
		})
	}
}

func TestValidateErrors(t *testing.T) {
	good, err := Build(NewSpec(sampleRecs(3)...))
	if err != nil {
		t.Fatal(err)
	}
	mut := func(f func(b Batch)) Batch {
		b := append(Batch(nil), good...)
		f(b)
		return b
	}
	cases := []struct {
		name string
		b    Batch
		want error
	}{
		{"crc", mut(func(b Batch) { b[len(b)-1] ^= 1 }), ErrCRC},
		{"magic", mut(func(b Batch) { b[magicPos] = 1 }), ErrMagic},
		{"short", good[:HeaderSize-1], ErrShort},
		{"length", mut(func(b Batch) { b[batchLengthPos+3]-- }), ErrBadLength},
		{"count", mut(func(b Batch) { b[recordCountPos+3] = 5; b.UpdateCRC() }), ErrRecordCount},
		{"zero count", mut(func(b Batch) {
			b[recordCountPos+3] = 0
			b[lastOffsetDeltaPos+3] = 0xff
			b[lastOffsetDeltaPos] = 0xff
			b.UpdateCRC()
		}), ErrRecordCount},
		{"codec", mut(func(b Batch) { b[attributesPos+1] |= 7; b.UpdateCRC() }), ErrCodec},
		{"txn without pid", mut(func(b Batch) { b[attributesPos+1] |= transactionalMask; b.UpdateCRC() }), ErrProducerFields},
		{"pid without seq", mut(func(b Batch) {
			copy(b[producerIDPos:], []byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0})
			b.UpdateCRC()
		}), ErrProducerFields},
	}
	for _, c := range cases {
		if err := c.b.Validate(); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	// Base offset and leader epoch are outside the CRC.
	b := mut(func(b Batch) { b.SetBaseOffset(99); b.SetPartitionLeaderEpoch(3) })
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	b.SetLogAppendTime(123)
	if err := b.Validate(); !errors.Is(err, ErrCRC) {
		t.Fatalf("LogAppendTime without CRC update: %v", err)
	}
	b.UpdateCRC()
	if err := b.Validate(); err != nil || !b.LogAppendTime() || b.MaxTimestamp() != 123 {
		t.Fatalf("after UpdateCRC: %v %v %d", err, b.LogAppendTime(), b.MaxTimestamp())
	}
}

func TestValidateRecordsDetectsBadInner(t *testing.T) {
	s := NewSpec(sampleRecs(3)...)
	s.Records[2].OffsetDelta = 5
	s.LastOffsetDelta = 2
	b, _ := Build(s)
	if err := b.ValidateRecords(1 << 20); !errors.Is(err, ErrRecords) {
		t.Fatalf("gap in offset deltas: %v", err)
	}
	b, _ = Build(NewSpec(sampleRecs(3)...))
	b[recordCountPos+3] = 2 // header claims 2 records; 3 present
	if err := b.ValidateRecords(1 << 20); !errors.Is(err, ErrRecords) {
		t.Fatalf("trailing record: %v", err)
	}
	b, _ = Build(NewSpec(sampleRecs(3)...))
	b[recordCountPos+3] = 4
	if err := b.ValidateRecords(1 << 20); !errors.Is(err, ErrRecords) {
		t.Fatalf("missing record: %v", err)
	}
}

func TestDecompressLimit(t *testing.T) {
	big := bytes.Repeat([]byte("a"), 1<<20)
	for _, c := range []Codec{CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		z, err := Compress(c, big)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decompress(c, z, 1<<19, nil); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%v: over the cap: %v", c, err)
		}
		out, err := Decompress(c, z, 1<<20, nil)
		if err != nil || !bytes.Equal(out, big) {
			t.Errorf("%v: at the cap: %v", c, err)
		}
		if _, err := Decompress(c, z[:len(z)/2], 1<<20, nil); err == nil {
			t.Errorf("%v: truncated stream accepted", c)
		}
	}
	// Raw (unframed) snappy, as some clients write it.
	raw := snappy.Encode(nil, []byte("hello"))
	out, err := Decompress(CodecSnappy, raw, 100, nil)
	if err != nil || string(out) != "hello" {
		t.Fatalf("raw snappy: %q %v", out, err)
	}
}

func TestNextAndCount(t *testing.T) {
	a, _ := Build(NewSpec(sampleRecs(2)...))
	b, _ := Build(NewSpec(sampleRecs(3)...))
	set := append(append([]byte(nil), a...), b...)
	if n, err := Count(set); n != 2 || err != nil {
		t.Fatalf("Count = %d, %v", n, err)
	}
	for cut := 1; cut < len(b); cut++ {
		if _, err := Count(set[:len(a)+cut]); err == nil {
			t.Fatalf("partial batch of %d bytes accepted", cut)
		}
	}
	neg := append([]byte(nil), a...)
	copy(neg[batchLengthPos:], []byte{0xff, 0xff, 0xff, 0xff})
	if _, _, err := Next(neg); !errors.Is(err, ErrBadLength) {
		t.Fatalf("negative length: %v", err)
	}
}

func TestSequenceWrap(t *testing.T) {
	if got := IncrementSequence(math.MaxInt32, 1); got != 0 {
		t.Fatalf("wrap = %d", got)
	}
	if got := IncrementSequence(math.MaxInt32-1, 3); got != 1 {
		t.Fatalf("wrap = %d", got)
	}
	if got := IncrementSequence(5, 3); got != 8 {
		t.Fatalf("plain = %d", got)
	}
}

func TestControlBatch(t *testing.T) {
	for _, commit := range []bool{true, false} {
		b := ControlBatch(77, 3, commit, 12, 1000)
		if err := b.Validate(); err != nil {
			t.Fatal(err)
		}
		if err := b.ValidateRecords(1 << 16); err != nil {
			t.Fatal(err)
		}
		c, err := b.ControlOf()
		if err != nil {
			t.Fatal(err)
		}
		want := ControlAbort
		if commit {
			want = ControlCommit
		}
		if c.Type != want || c.CoordinatorEpoch != 12 || !b.Control() || !b.Transactional() ||
			b.ProducerID() != 77 || b.ProducerEpoch() != 3 || b.BaseSequence() != NoSequence {
			t.Fatalf("marker %+v attrs %x", c, b.Attributes())
		}
	}
}

func TestAllocsValidate(t *testing.T) {
	b, _ := Build(NewSpec(sampleRecs(16)...))
	n := testing.AllocsPerRun(100, func() {
		if err := b.Validate(); err != nil {
			t.Fatal(err)
		}
		if err := b.ValidateRecords(1 << 20); err != nil {
			t.Fatal(err)
		}
		b.SetBaseOffset(5)
		b.UpdateCRC()
	})
	if n != 0 {
		t.Fatalf("%v allocations per uncompressed validation", n)
	}
}

// BenchmarkValidate measures header (CRC) and inner-record validation of an
// uncompressed 1 MiB batch of 1 KiB records.
func BenchmarkValidate(b *testing.B) {
	recs := make([]Rec, 1024)
	for i := range recs {
		recs[i] = Rec{Timestamp: 1, Key: []byte(fmt.Sprintf("key-%06d", i)), Value: make([]byte, 1000)}
	}
	bt, _ := Build(NewSpec(recs...))
	b.Run("crc", func(b *testing.B) {
		b.SetBytes(int64(len(bt)))
		for i := 0; i < b.N; i++ {
			if err := bt.Validate(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("records", func(b *testing.B) {
		b.SetBytes(int64(len(bt)))
		for i := 0; i < b.N; i++ {
			if err := bt.ValidateRecords(2 << 20); err != nil {
				b.Fatal(err)
			}
		}
	})
}

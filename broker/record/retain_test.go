package record

import (
	"bytes"
	"testing"
)

func TestAppendRetained(t *testing.T) {
	for _, codec := range []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		for _, horizon := range []int64{-1, 5000} {
			recs := []Rec{
				{Timestamp: 1000, Key: []byte("a"), Value: []byte("1")},
				{Timestamp: 1007, Key: []byte("b"), Value: nil, Headers: []Header{{Key: []byte("h"), Value: []byte("v")}}},
				{Timestamp: 1003, Key: []byte("c"), Value: []byte("3")},
			}
			s := NewSpec(recs...)
			s.Codec, s.BaseOffset, s.PartitionLeaderEpoch = codec, 100, 4
			s.ProducerID, s.ProducerEpoch, s.BaseSequence = 9, 2, 40
			orig, err := Build(s)
			if err != nil {
				t.Fatal(err)
			}
			it, err := orig.Records(1<<20, nil)
			if err != nil {
				t.Fatal(err)
			}
			var keep []Record
			for r, ok := it.Next(); ok; r, ok = it.Next() {
				if string(r.Key) != "a" {
					keep = append(keep, r)
				}
			}
			out, _, err := AppendRetained([]byte("prefix"), orig, keep, horizon, nil)
			if err != nil {
				t.Fatal(err)
			}
			if string(out[:6]) != "prefix" {
				t.Fatal("dst prefix lost")
			}
			b, rest, err := Next(out[6:])
			if err != nil || len(rest) != 0 {
				t.Fatal(err, len(rest))
			}
			if err := b.ValidateStored(); err != nil {
				t.Fatalf("%s: %v", codec, err)
			}
			if b.BaseOffset() != 100 || b.LastOffset() != 102 || b.RecordCount() != 2 || b.Codec() != codec ||
				b.ProducerID() != 9 || b.ProducerEpoch() != 2 || b.BaseSequence() != 40 || b.LastSequence() != 42 ||
				b.PartitionLeaderEpoch() != 4 || b.MaxTimestamp() != 1007 || b.HasDeleteHorizon() != (horizon >= 0) {
				t.Fatalf("%s horizon %d: header %x", codec, horizon, []byte(b[:HeaderSize]))
			}
			if horizon >= 0 && b.BaseTimestamp() != horizon {
				t.Fatalf("base timestamp %d, want the horizon", b.BaseTimestamp())
			}
			it, err = b.Records(1<<20, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for r, ok := it.Next(); ok; r, ok = it.Next() {
				got = append(got, string(r.Key))
				if r.Timestamp(b) != map[string]int64{"b": 1007, "c": 1003}[string(r.Key)] {
					t.Fatalf("%s: timestamp %d", r.Key, r.Timestamp(b))
				}
				if string(r.Key) == "b" && (r.Value != nil || len(r.Headers()) != 1 || !bytes.Equal(r.Headers()[0].Value, []byte("v"))) {
					t.Fatalf("record b: %+v", r)
				}
				if r.OffsetIn(b) != map[string]int64{"b": 101, "c": 102}[string(r.Key)] {
					t.Fatalf("%s at %d", r.Key, r.OffsetIn(b))
				}
			}
			if it.Err() != nil || len(got) != 2 {
				t.Fatal(it.Err(), got)
			}
		}
	}
}

func TestAppendEmptyAndLogAppendTime(t *testing.T) {
	s := NewSpec(Rec{Timestamp: 10, Key: []byte("k"), Value: []byte("v")}, Rec{Timestamp: 11, Key: []byte("k2")})
	s.Codec, s.BaseOffset, s.Transactional = CodecZstd, 7, true
	s.ProducerID, s.ProducerEpoch, s.BaseSequence = 3, 1, 0
	orig, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	orig.SetLogAppendTime(99)
	orig.UpdateCRC()
	e := Batch(AppendEmpty(nil, orig))
	if err := e.ValidateStored(); err != nil {
		t.Fatal(err)
	}
	if e.RecordCount() != 0 || e.Codec() != CodecNone || e.LastOffset() != 8 || !e.Transactional() || !e.LogAppendTime() ||
		e.MaxTimestamp() != 99 || e.BaseTimestamp() != 99 || e.LastSequence() != 1 || len(e) != HeaderSize {
		t.Fatalf("empty batch header %x", []byte(e))
	}
	it, _ := orig.Records(1<<20, nil)
	r, _ := it.Next()
	out, _, err := AppendRetained(nil, orig, []Record{r}, -1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b := Batch(out); !b.LogAppendTime() || b.MaxTimestamp() != 99 || b.ValidateStored() != nil {
		t.Fatal("a LogAppendTime batch keeps its append time")
	}
	if _, _, err := AppendRetained(nil, orig, nil, -1, nil); err == nil {
		t.Fatal("retaining no records must use AppendEmpty")
	}
}

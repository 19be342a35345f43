package record

import (
	"errors"
	"testing"
)

func fuzzSeeds(f *testing.F) {
	for _, c := range []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		s := NewSpec(sampleRecs(3)...)
		s.Codec = c
		b, err := Build(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(b))
	}
	f.Add([]byte(ControlBatch(1, 0, true, 0, 0)))
	f.Add([]byte{})
	f.Add(make([]byte, HeaderSize))
}

// FuzzBatch feeds arbitrary bytes to the batch splitter and validators; they
// must return errors, never panic or allocate without bound.
func FuzzBatch(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		rest := data
		for len(rest) > 0 {
			b, r, err := Next(rest)
			if err != nil {
				return
			}
			if len(b) < HeaderSize {
				t.Fatalf("Next returned a %d-byte batch", len(b))
			}
			_ = b.Validate()
			_ = b.ValidateStored()
			_ = b.ValidateRecords(1 << 20)
			_, _ = b.ControlOf()
			rest = r
		}
	})
}

// FuzzRecords feeds arbitrary payloads to the record iterator.
func FuzzRecords(f *testing.F) {
	b, _ := Build(NewSpec(sampleRecs(3)...))
	f.Add(b.Payload(), int32(3))
	f.Add([]byte{0x02, 0x00}, int32(1))
	f.Fuzz(func(t *testing.T, data []byte, count int32) {
		it := NewIter(data, count)
		for r, ok := it.Next(); ok; r, ok = it.Next() {
			_ = r.Headers()
		}
	})
}

// FuzzCompressedPayload feeds arbitrary payloads to every codec's decoder
// through Check: they must be refused or accepted without panicking, and a
// payload whose headers already exceed the limits (DecodeMemory) must be
// refused by Check too.
func FuzzCompressedPayload(f *testing.F) {
	plain, err := Build(NewSpec(sampleRecs(2)...))
	if err != nil {
		f.Fatal(err)
	}
	for _, c := range []Codec{CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		p, err := Compress(c, plain.Payload())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(byte(c), p)
	}
	f.Add(byte(CodecZstd), zstdRawFrame(29, 0, plain.Payload()))
	l := Limits{MaxBytes: 1 << 20, MaxMemory: 8 << 20}
	f.Fuzz(func(t *testing.T, codec byte, payload []byte) {
		c := Codec(codec%4 + 1)
		b := withPayload(t, plain, c, payload)
		_, merr := b.DecodeMemory(l)
		_, err := b.Check(Checks{Limits: l})
		if merr != nil && (errors.Is(merr, ErrDecodeMemory) || errors.Is(merr, ErrTooLarge)) && err == nil {
			t.Fatalf("DecodeMemory refused (%v) what Check accepted", merr)
		}
	})
}

package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
)

// withPayload returns plain's header over payload, marked with codec, with
// its length and CRC fixed.
func withPayload(tb testing.TB, plain Batch, codec Codec, payload []byte) Batch {
	tb.Helper()
	b := make(Batch, HeaderSize+len(payload))
	copy(b, plain[:HeaderSize])
	copy(b[HeaderSize:], payload)
	binary.BigEndian.PutUint32(b[batchLengthPos:], uint32(len(b)-LogOverhead))
	attrs := b.u16(attributesPos)&^compressionMask | uint16(codec)
	binary.BigEndian.PutUint16(b[attributesPos:], attrs)
	b.UpdateCRC()
	if err := b.Validate(); err != nil {
		tb.Fatal(err)
	}
	return b
}

// zstdRawFrame wraps data in a zstd frame of raw blocks whose header
// declares a window of 2^windowLog bytes plus mantissa eighths, without a
// content size: a few KiB of frame can declare any window.
func zstdRawFrame(windowLog, mantissa int, data []byte) []byte {
	f := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, byte((windowLog-10)<<3 | mantissa)}
	for {
		n := min(len(data), 128<<10)
		last := 0
		if n == len(data) {
			last = 1
		}
		h := uint32(last | n<<3)
		f = append(f, byte(h), byte(h>>8), byte(h>>16))
		f = append(f, data[:n]...)
		data = data[n:]
		if last == 1 {
			return f
		}
	}
}

// zstdWindowBatch is a batch of three small records in a zstd frame
// declaring the given window.
func zstdWindowBatch(tb testing.TB, windowLog, mantissa int) Batch {
	plain, err := Build(NewSpec(sampleRecs(3)...))
	if err != nil {
		tb.Fatal(err)
	}
	return withPayload(tb, plain, CodecZstd, zstdRawFrame(windowLog, mantissa, plain.Payload()))
}

// memStats returns the heap in use after a collection, and the bytes
// allocated so far.
func memStats() (inuse, total uint64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse, m.TotalAlloc
}

// TestZstdWindowRefused: a batch of a few hundred bytes whose zstd frame
// declares a 512 MiB window is refused before any window is allocated, by
// Check and by Decompress, and refusing it again and again leaves the heap
// as it was.
func TestZstdWindowRefused(t *testing.T) {
	b := zstdWindowBatch(t, 29, 0)
	if len(b) > 4<<10 {
		t.Fatalf("crafted batch is %d bytes", len(b))
	}
	inuse0, total0 := memStats()
	for range 20 {
		if _, err := b.Check(Checks{Limits: Limits{MaxBytes: 128 << 20}}); !errors.Is(err, ErrDecodeMemory) {
			t.Fatalf("Check: %v, want ErrDecodeMemory", err)
		}
		if _, err := Decompress(CodecZstd, b.Payload(), 128<<20, nil); !errors.Is(err, ErrDecodeMemory) {
			t.Fatalf("Decompress: %v, want ErrDecodeMemory", err)
		}
		if _, err := b.DecodeMemory(Limits{MaxBytes: 128 << 20}); !errors.Is(err, ErrDecodeMemory) {
			t.Fatalf("DecodeMemory: %v, want ErrDecodeMemory", err)
		}
	}
	inuse1, total1 := memStats()
	if d := total1 - total0; d > 8<<20 {
		t.Errorf("refusing the batch 20 times allocated %d bytes", d)
	}
	if inuse1 > inuse0+8<<20 {
		t.Errorf("heap in use grew from %d to %d bytes", inuse0, inuse1)
	}
	// Just past zstd's 128 MiB limit is refused too.
	if _, err := zstdWindowBatch(t, 27, 1).Check(Checks{Limits: Limits{MaxBytes: 128 << 20}}); !errors.Is(err, ErrDecodeMemory) {
		t.Fatalf("144 MiB window: %v, want ErrDecodeMemory", err)
	}
}

// TestZstdWindowsRetained: frames declaring windows the limit admits are
// decoded; a window beyond what pooled decoders take gets a decoder of its
// own, so repeating either leaves no more than a small heap behind.
func TestZstdWindowsRetained(t *testing.T) {
	for _, tc := range []struct {
		name      string
		windowLog int
	}{{"2MiB-pooled", 21}, {"8MiB-own-decoder", 23}} {
		t.Run(tc.name, func(t *testing.T) {
			b := zstdWindowBatch(t, tc.windowLog, 0)
			l := Limits{MaxBytes: 128 << 20}
			need, err := b.DecodeMemory(l)
			if err != nil || need < 1<<tc.windowLog || need > 1<<tc.windowLog+1<<20 {
				t.Fatalf("DecodeMemory %d, %v", need, err)
			}
			inuse0, _ := memStats()
			for range 10 {
				if _, err := b.Check(Checks{Limits: l}); err != nil {
					t.Fatal(err)
				}
				out, err := Decompress(CodecZstd, b.Payload(), 1<<20, nil)
				if err != nil || len(out) == 0 {
					t.Fatalf("Decompress: %d bytes, %v", len(out), err)
				}
			}
			inuse1, _ := memStats()
			if inuse1 > inuse0+6<<20 {
				t.Errorf("heap in use grew from %d to %d bytes", inuse0, inuse1)
			}
		})
	}
}

// bombs returns, per codec, a batch of one record whose 16 MiB value of
// zeros compresses to a few KiB or less.
func bombs(tb testing.TB) map[string]Batch {
	tb.Helper()
	plain, err := Build(NewSpec(Rec{Timestamp: 1, Value: make([]byte, 16<<20)}))
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]Batch{"snappy-raw": withPayload(tb, plain, CodecSnappy, snappy.Encode(nil, plain.Payload()))}
	for _, c := range []Codec{CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		p, err := Compress(c, plain.Payload())
		if err != nil {
			tb.Fatal(err)
		}
		out[c.String()] = withPayload(tb, plain, c, p)
	}
	// A streamed zstd frame, which declares no content size.
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, zstd.WithWindowSize(1<<20), zstd.WithEncoderConcurrency(1))
	if err != nil {
		tb.Fatal(err)
	}
	for p := plain.Payload(); len(p) > 0; p = p[min(len(p), 1<<20):] {
		if _, err := w.Write(p[:min(len(p), 1<<20)]); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	out["zstd-stream"] = withPayload(tb, plain, CodecZstd, buf.Bytes())
	return out
}

// TestBombsRefused: every codec's bomb is refused past the decompressed
// size limit, having allocated far less than it would inflate to.
func TestBombsRefused(t *testing.T) {
	for name, b := range bombs(t) {
		t.Run(name, func(t *testing.T) {
			_, total0 := memStats()
			if _, err := b.Check(Checks{Limits: Limits{MaxBytes: 1 << 20}}); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Check: %v, want ErrTooLarge", err)
			}
			_, total1 := memStats()
			if d := total1 - total0; d > 8<<20 {
				t.Errorf("refusing a %d-byte bomb allocated %d bytes", len(b), d)
			}
			// Under a limit it fits, the same batch is valid.
			if _, err := b.Check(Checks{Limits: Limits{MaxBytes: 32 << 20}}); err != nil {
				t.Fatalf("Check under 32 MiB: %v", err)
			}
		})
	}
}

// TestCheckCodecs: batches of every codec, with records larger than the
// window and records with headers, are accepted with the same result as
// their uncompressed form; the stream path gives the same answers as the
// in-place path.
func TestCheckCodecs(t *testing.T) {
	recs := sampleRecs(5)
	recs = append(recs, Rec{Timestamp: 1_800_000_000_000, Key: []byte("big"), Value: bytes.Repeat([]byte("v"), 200<<10),
		Headers: []Header{{Key: []byte("h"), Value: bytes.Repeat([]byte("x"), 70<<10)}}})
	recs = append(recs, Rec{Timestamp: 7, Value: []byte("after")})
	for i := range recs {
		recs[i].OffsetDelta = int32(i)
	}
	plain, err := Build(NewSpec(recs...))
	if err != nil {
		t.Fatal(err)
	}
	want, err := plain.Check(Checks{Limits: Limits{MaxBytes: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	if want.MaxTimestamp != 1_800_000_000_000 || want.MaxTimestampDelta != 5 {
		t.Fatalf("max timestamp %d at %d, want 1800000000000 at 5", want.MaxTimestamp, want.MaxTimestampDelta)
	}
	batches := map[string]Batch{"snappy-raw": withPayload(t, plain, CodecSnappy, snappy.Encode(nil, plain.Payload()))}
	for _, c := range []Codec{CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		s := NewSpec(recs...)
		s.Codec = c
		if batches[c.String()], err = Build(s); err != nil {
			t.Fatal(err)
		}
	}
	for name, b := range batches {
		got, err := b.Check(Checks{Limits: Limits{MaxBytes: 1 << 20}})
		if err != nil || got != want {
			t.Errorf("%s: %+v, %v; want %+v", name, got, err, want)
		}
		if _, err := b.Check(Checks{Limits: Limits{MaxBytes: 1 << 20}, RequireKeys: true}); err == nil {
			t.Errorf("%s: keyless records accepted on a compacted topic", name)
		}
	}
}

// FuzzStreamMatchesInPlace checks, for arbitrary record bytes, that
// streaming them out of a gzip payload through a small window accepts and
// refuses exactly what parsing them in place does, with the same result,
// except that offsets out of sequence ask for a rebuild where the
// uncompressed batch is refused.
func FuzzStreamMatchesInPlace(f *testing.F) {
	for _, n := range []int{1, 3} {
		b, _ := Build(NewSpec(sampleRecs(n)...))
		f.Add(b.Payload(), int32(n))
	}
	big, _ := Build(NewSpec(Rec{Timestamp: 5, Key: []byte("k"), Value: bytes.Repeat([]byte("v"), 300),
		Headers: []Header{{Key: []byte("hk"), Value: bytes.Repeat([]byte("h"), 100)}}}))
	f.Add(big.Payload(), int32(1))
	f.Add([]byte{0x02, 0x00}, int32(1))
	plain, _ := Build(NewSpec(sampleRecs(1)...))
	old := scanWindow
	scanWindow = 64
	f.Cleanup(func() { scanWindow = old })
	f.Fuzz(func(t *testing.T, data []byte, count int32) {
		if count <= 0 || len(data) > 1<<16 {
			return
		}
		hdr := bytes.Clone(plain[:HeaderSize])
		binary.BigEndian.PutUint32(hdr[recordCountPos:], uint32(count))
		binary.BigEndian.PutUint32(hdr[lastOffsetDeltaPos:], uint32(count-1))
		in := withPayload(t, Batch(hdr), CodecNone, data)
		gz, err := Compress(CodecGzip, data)
		if err != nil {
			t.Fatal(err)
		}
		st := withPayload(t, Batch(hdr), CodecGzip, gz)
		c := Checks{Limits: Limits{MaxBytes: 1 << 20}, RequireKeys: true}
		r1, err1 := in.Check(c)
		r2, err2 := st.Check(c)
		if err2 == nil && r2.Rebuild {
			// Out-of-sequence offsets: rebuilt when compressed,
			// refused in place.
			if err1 == nil {
				t.Fatalf("in place accepted offsets a compressed batch must rebuild: %+v", r1)
			}
			return
		}
		if (err1 == nil) != (err2 == nil) || r1 != r2 {
			t.Fatalf("in place: %+v, %v; streamed: %+v, %v", r1, err1, r2, err2)
		}
	})
}

// TestDecodeMemory: the memory a validation will hold is read from the
// compression headers, and stays within Limits.Bound.
func TestDecodeMemory(t *testing.T) {
	plain, err := Build(NewSpec(sampleRecs(3)...))
	if err != nil {
		t.Fatal(err)
	}
	l := Limits{MaxBytes: 1 << 20}
	cases := map[string]struct {
		b        Batch
		min, max int
	}{
		"none":       {plain, 0, 0},
		"gzip":       {mustCodec(t, CodecGzip), streamBufSize, streamBufSize + gzipMemory},
		"lz4-64KiB":  {mustCodec(t, CodecLZ4), 2 * 64 << 10, streamBufSize + 2*64<<10},
		"lz4-4MiB":   {lz4Batch(t, 3, 1<<22), 8 << 20, streamBufSize + 8<<20},
		"snappy-raw": {withPayload(t, plain, CodecSnappy, snappy.Encode(nil, plain.Payload())), len(plain.Payload()), streamBufSize + len(plain.Payload())},
		"zstd-2MiB":  {zstdWindowBatch(t, 21, 0), 2 << 20, streamBufSize + 2<<20 + zstdBlockSpace},
	}
	for name, tc := range cases {
		n, err := tc.b.DecodeMemory(l)
		if err != nil || n < tc.min || n > tc.max || n > l.Bound() {
			t.Errorf("%s: %d, %v; want in [%d, %d] and under %d", name, n, err, tc.min, tc.max, l.Bound())
		}
	}
	set := append(append([]byte(nil), cases["gzip"].b...), cases["zstd-2MiB"].b...)
	if n, err := SetDecodeMemory(set, l); err != nil || n != streamBufSize+2<<20+zstdBlockSpace {
		t.Errorf("SetDecodeMemory: %d, %v", n, err)
	}
	if _, err := SetDecodeMemory(append(set, zstdWindowBatch(t, 29, 0)...), l); !errors.Is(err, ErrDecodeMemory) {
		t.Errorf("SetDecodeMemory with a 512 MiB window: %v", err)
	}
	if _, err := zstdWindowBatch(t, 23, 0).DecodeMemory(Limits{MaxBytes: 1 << 20, MaxMemory: 4 << 20}); !errors.Is(err, ErrDecodeMemory) {
		t.Errorf("8 MiB window under a 4 MiB limit: %v", err)
	}
	if _, err := zstdWindowBatch(t, 23, 0).Check(Checks{Limits: Limits{MaxBytes: 1 << 20, MaxMemory: 4 << 20}}); !errors.Is(err, ErrDecodeMemory) {
		t.Errorf("Check of an 8 MiB window under a 4 MiB limit: %v", err)
	}
}

func mustCodec(t *testing.T, c Codec) Batch {
	t.Helper()
	s := NewSpec(sampleRecs(3)...)
	s.Codec = c
	b, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPooledStateRetained: after many validations of every codec,
// including LZ4 frames of 4 MiB blocks, what the pools keep once they have
// been through the collector is small.
func TestPooledStateRetained(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under -race")
	}
	batches := []Batch{lz4Batch(t, 50, 1<<22), zstdWindowBatch(t, 21, 0)}
	for _, c := range []Codec{CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		batches = append(batches, mustCodec(t, c))
	}
	runtime.GC()
	inuse0, _ := memStats()
	for range 20 {
		for _, b := range batches {
			if _, err := b.Check(Checks{Limits: Limits{MaxBytes: 8 << 20}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	runtime.GC() // a pool's items survive one collection in its victim cache
	inuse1, _ := memStats()
	if inuse1 > inuse0+4<<20 {
		t.Errorf("heap in use grew from %d to %d bytes", inuse0, inuse1)
	}
}

// TestZstdFrames: every frame of a payload is held to the window limit and
// decides which decoder serves it, a skippable frame included.
func TestZstdFrames(t *testing.T) {
	plain, err := Build(NewSpec(sampleRecs(3)...))
	if err != nil {
		t.Fatal(err)
	}
	p := plain.Payload()
	half := len(p) / 2
	skippable := []byte{0x50, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 'x', 'y', 'z'}
	l := Limits{MaxBytes: 1 << 20}
	for _, tc := range []struct {
		name    string
		payload []byte
		want    error
		memory  int
	}{
		{"small-then-8MiB", append(zstdRawFrame(20, 0, p[:half]), zstdRawFrame(23, 0, p[half:])...), nil, 8 << 20},
		{"skippable-then-2MiB", append(append([]byte(nil), skippable...), zstdRawFrame(21, 0, p)...), nil, 2 << 20},
		{"small-then-512MiB", append(zstdRawFrame(20, 0, p[:half]), zstdRawFrame(29, 0, p[half:])...), ErrDecodeMemory, 0},
		{"truncated", zstdRawFrame(20, 0, p)[:20], ErrRecords, 0},
	} {
		b := withPayload(t, plain, CodecZstd, tc.payload)
		n, err := b.DecodeMemory(l)
		if !errors.Is(err, tc.want) || (tc.want == nil && n != streamBufSize+tc.memory+zstdBlockSpace) {
			t.Errorf("%s: DecodeMemory %d, %v; want %v", tc.name, n, err, tc.want)
		}
		if _, err := b.Check(Checks{Limits: l}); !errors.Is(err, tc.want) {
			t.Errorf("%s: Check %v, want %v", tc.name, err, tc.want)
		}
	}
}

package record

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/pierrec/lz4/v4"
)

// lz4Batch builds a batch of n incompressible 1 KiB records compressed as an
// LZ4 frame with the given block size: franz-go's default writer declares
// 4 MiB blocks, Kafka's Java client 64 KiB ones.
func lz4Batch(tb testing.TB, n int, block lz4.BlockSize) Batch {
	tb.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	recs := make([]Rec, n)
	for i := range recs {
		v := make([]byte, 1024)
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		recs[i] = Rec{Timestamp: 1, Value: v}
	}
	plain, err := Build(NewSpec(recs...))
	if err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	w := lz4.NewWriter(&buf)
	if err := w.Apply(lz4.BlockSizeOption(block)); err != nil {
		tb.Fatal(err)
	}
	if _, err := w.Write(plain.Payload()); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	b := make(Batch, HeaderSize+buf.Len())
	copy(b, plain[:HeaderSize])
	copy(b[HeaderSize:], buf.Bytes())
	binary.BigEndian.PutUint32(b[batchLengthPos:], uint32(len(b)-LogOverhead))
	b[attributesPos+1] |= byte(CodecLZ4)
	b.UpdateCRC()
	if err := b.Validate(); err != nil {
		tb.Fatal(err)
	}
	return b
}

// BenchmarkValidateLZ4 validates the records of a 126 KiB (decompressed)
// LZ4 batch, the size workload A's producers send, streaming them out of the
// decoder as log.validateSet does.
func BenchmarkValidateLZ4(b *testing.B) {
	for _, bs := range []struct {
		name string
		size lz4.BlockSize
	}{{"4MiB-blocks", lz4.Block4Mb}, {"64KiB-blocks", lz4.Block64Kb}} {
		bt := lz4Batch(b, 123, bs.size)
		b.Run(bs.name+"/stream", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bt)))
			for b.Loop() {
				if err := bt.ValidateRecords(8 << 20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestValidateRecordsAllocs holds the steady state of BenchmarkValidateLZ4:
// an LZ4 batch is validated through pooled state, without a batch-sized
// allocation.
func TestValidateRecordsAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under -race")
	}
	bt := lz4Batch(t, 123, lz4.Block64Kb)
	if err := bt.ValidateRecords(8 << 20); err != nil {
		t.Fatal(err)
	}
	var err error
	allocs := testing.AllocsPerRun(50, func() { err = bt.ValidateRecords(8 << 20) })
	if err != nil {
		t.Fatal(err)
	}
	// A sync.Pool refill after a GC may allocate a reader now and then;
	// a batch-sized buffer every time would be at least 1.
	if allocs >= 1 {
		t.Fatalf("%.1f allocations per validated batch, want < 1", allocs)
	}
}

// TestReadLimitedCap checks that decompression stops one byte past the
// limit, whatever the scratch buffer, and that a payload of exactly limit
// bytes is accepted.
func TestReadLimitedCap(t *testing.T) {
	bt := lz4Batch(t, 10, lz4.Block64Kb)
	plain, err := Decompress(CodecLZ4, bt.Payload(), 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := len(plain)
	for _, scratch := range [][]byte{nil, make([]byte, 0, 10), make([]byte, 0, 4<<20)} {
		if _, err := Decompress(CodecLZ4, bt.Payload(), n-1, scratch); err != ErrTooLarge {
			t.Fatalf("limit n-1: err %v, want ErrTooLarge", err)
		}
		out, err := Decompress(CodecLZ4, bt.Payload(), n, scratch)
		if err != nil || !bytes.Equal(out, plain) {
			t.Fatalf("limit n: err %v, equal %v", err, bytes.Equal(out, plain))
		}
		if cap(scratch) < n && cap(out) > n+1+n/4 {
			t.Fatalf("grew to %d for limit %d", cap(out), n)
		}
	}
}

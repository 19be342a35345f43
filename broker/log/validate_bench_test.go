package log

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/broker/record"
)

// lz4Set builds one LZ4 batch of 123 incompressible 1 KiB records, about
// 126 KiB decompressed: what workload A's producers send with a 128 KiB
// batch size.
func lz4Set(tb testing.TB) []byte {
	tb.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	recs := make([]record.Rec, 123)
	for i := range recs {
		v := make([]byte, 1024)
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		recs[i] = record.Rec{Timestamp: 1_700_000_000_000, Value: v}
	}
	s := record.NewSpec(recs...)
	s.Codec = record.CodecLZ4
	bt, err := record.Build(s)
	if err != nil {
		tb.Fatal(err)
	}
	return bt
}

func openLZ4Bench(tb testing.TB) (*Manager, *Log) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 256 << 20
	cfg.RetentionBytes = 512 << 20
	m, err := Open(tb.TempDir(), Options{RetentionCheckInterval: -1, FlushCheckInterval: time.Hour})
	if err != nil {
		tb.Fatal(err)
	}
	l, err := m.Create(TopicPartition{Topic: "bench", Partition: 0}, [16]byte{1}, cfg)
	if err != nil {
		m.Close()
		tb.Fatal(err)
	}
	return m, l
}

// BenchmarkAppendLZ4 is Log.Append of one 126 KiB (decompressed) LZ4 batch:
// the validation decompresses it to check every record, as Kafka's
// LogValidator does, so this measures what the decompression buffer costs.
func BenchmarkAppendLZ4(b *testing.B) {
	set := lz4Set(b)
	m, l := openLZ4Bench(b)
	defer m.Close()
	b.SetBytes(int64(len(set)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := l.Append(set, 0); err != nil {
			b.Fatal(err)
		}
		if l.NumSegments() > 2 {
			b.StopTimer()
			if _, err := l.ApplyRetention(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
}

// TestAppendLZ4Allocs holds BenchmarkAppendLZ4's steady state: the
// decompression buffer that grew for the first batch is kept in the pool,
// so later batches of the same size allocate no batch-sized buffer.
func TestAppendLZ4Allocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under -race")
	}
	set := lz4Set(t)
	m, l := openLZ4Bench(t)
	defer m.Close()
	for range 5 {
		if _, err := l.Append(set, 0); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	var total uint64
	const runs = 50
	allocs := testing.AllocsPerRun(runs, func() {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err = l.Append(set, 0)
		runtime.ReadMemStats(&after)
		total += after.TotalAlloc - before.TotalAlloc
	})
	if err != nil {
		t.Fatal(err)
	}
	// A GC may empty the pools between runs and cost one refill; a fresh
	// 126 KiB buffer per batch would average over 100 KB.
	if avg := total / (runs + 1); avg > 16<<10 || allocs > 1 {
		t.Fatalf("%d bytes in %.1f allocations per LZ4 append, want a few hundred bytes", avg, allocs)
	}
}

package log

import (
	"testing"
	"time"
)

// BenchmarkReadSmall measures the steady-state cost of Log.Read for the
// common consumer fetch: a few KiB from the middle of a segment of small
// batches, the Region released at once. allocs/op and B/op are the figures
// of interest (the read path should not allocate its scan buffer per call).
func BenchmarkReadSmall(b *testing.B) {
	set := benchBatch(b, 2<<10)
	m, err := Open(b.TempDir(), Options{RetentionCheckInterval: -1, FlushCheckInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	l, err := m.Create(TopicPartition{Topic: "bench", Partition: 0}, [16]byte{1}, DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	for l.Size() < 4<<20 {
		if _, err := l.Append(set, 0); err != nil {
			b.Fatal(err)
		}
	}
	end := l.LogEndOffset()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		var off int64
		for i := 0; i < b.N; i++ {
			res, err := l.Read(off, 16<<10, 1<<62, true)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range res.Regions {
				r.Release()
			}
			off = (off + 37) % end
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			var off int64
			for pb.Next() {
				res, err := l.Read(off, 16<<10, 1<<62, true)
				if err != nil {
					b.Error(err)
					return
				}
				for _, r := range res.Regions {
					r.Release()
				}
				off = (off + 37) % end
			}
		})
	})
}

// TestReadAllocs holds the read path to one small allocation per Read (the
// Region handed to the caller); the scan buffer is pooled.
func TestReadAllocs(t *testing.T) {
	c := newFakeClock()
	m, l := openTest(t, t.TempDir(), c, smallConfig())
	defer m.Close()
	for i := 0; i < 200; i++ {
		if _, err := l.Append(batch(t, 3, "r", c.Now().UnixMilli()), 0); err != nil {
			t.Fatal(err)
		}
	}
	var off int64
	allocs := testing.AllocsPerRun(500, func() {
		res, err := l.Read(off, 2048, 1<<62, true)
		if err != nil || len(res.Regions) != 1 {
			t.Fatal(err)
		}
		res.Regions[0].Release()
		off = (off + 7) % l.LogEndOffset()
	})
	if allocs > 1 {
		t.Fatalf("%.2f allocations per Read, want at most 1", allocs)
	}
}

// BenchmarkReadSealed measures Log.Read from sealed segments, whose .log
// files are opened through the handle cache: "cached" with every segment's
// handle kept open, "evicting" with a cache of one handle and reads
// alternating between segments, so each read opens and closes a file (the
// worst case of a cache bound far below the segments being read).
func BenchmarkReadSealed(b *testing.B) {
	set := benchBatch(b, 2<<10)
	m, err := Open(b.TempDir(), Options{RetentionCheckInterval: -1, FlushCheckInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1 << 20
	l, err := m.Create(TopicPartition{Topic: "bench", Partition: 0}, [16]byte{1}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	for l.Size() < 8<<20 {
		if _, err := l.Append(set, 0); err != nil {
			b.Fatal(err)
		}
	}
	segs := l.segments()
	sealed := segs[:len(segs)-1]
	for _, c := range []struct {
		name  string
		limit int
	}{{"cached", 0}, {"evicting", 1}} {
		b.Run(c.name, func(b *testing.B) {
			setCacheLimit(b, c.limit)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				off := sealed[i%len(sealed)].base + 7
				res, err := l.Read(off, 16<<10, 1<<62, true)
				if err != nil || len(res.Regions) == 0 {
					b.Fatal(err)
				}
				for _, r := range res.Regions {
					r.Release()
				}
			}
		})
	}
}

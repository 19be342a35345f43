package log

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/broker/record"
)

// benchBatch builds an uncompressed batch of 1 KiB records totalling about size bytes.
func benchBatch(b *testing.B, size int) []byte {
	b.Helper()
	n := max(size/1024, 1)
	recs := make([]record.Rec, n)
	val := make([]byte, 1000)
	for i := range recs {
		recs[i] = record.Rec{Timestamp: 1_700_000_000_000, Key: []byte(fmt.Sprintf("key-%06d", i)), Value: val}
	}
	bt, err := record.Build(record.NewSpec(recs...))
	if err != nil {
		b.Fatal(err)
	}
	return bt
}

// BenchmarkAppend compares Log.Append of 1 KiB records in 16 KiB and 1 MiB
// batches (no fsync, Kafka's default flush policy) with a raw sequential
// os.File.Write of the same bytes to the same directory.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{16 << 10, 1 << 20} {
		set := benchBatch(b, size)
		name := fmt.Sprintf("%dKiB", size>>10)
		b.Run(name+"/raw-write", func(b *testing.B) {
			// Files rotate at 256 MiB and the oldest is removed, like the
			// segments of the append case.
			dir := b.TempDir()
			seq := 0
			open := func() *os.File {
				f, err := os.Create(filepath.Join(dir, fmt.Sprintf("raw-%d", seq)))
				if err != nil {
					b.Fatal(err)
				}
				if seq >= 2 {
					os.Remove(filepath.Join(dir, fmt.Sprintf("raw-%d", seq-2)))
				}
				seq++
				return f
			}
			f := open()
			defer func() { f.Close() }()
			b.SetBytes(int64(len(set)))
			b.ReportAllocs()
			var written int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := f.Write(set); err != nil {
					b.Fatal(err)
				}
				written += int64(len(set))
				if written >= 256<<20 {
					b.StopTimer()
					f.Close()
					f = open()
					written = 0
					b.StartTimer()
				}
			}
		})
		b.Run(name+"/append", func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.SegmentBytes = 256 << 20
			cfg.RetentionBytes = 512 << 20
			m, err := Open(b.TempDir(), Options{RetentionCheckInterval: -1, FlushCheckInterval: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			l, err := m.Create(TopicPartition{Topic: "bench", Partition: 0}, [16]byte{1}, cfg)
			if err != nil {
				b.Fatal(err)
			}
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
		})
	}
}

// BenchmarkRead compares sequential Log.Read of 1 MiB fetches, copied out
// through Region.WriteTo, with raw sequential ReadAt of the same file.
func BenchmarkRead(b *testing.B) {
	set := benchBatch(b, 16<<10)
	m, err := Open(b.TempDir(), Options{RetentionCheckInterval: -1, FlushCheckInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	l, err := m.Create(TopicPartition{Topic: "bench", Partition: 0}, [16]byte{1}, DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	for l.Size() < 64<<20 {
		if _, err := l.Append(set, 0); err != nil {
			b.Fatal(err)
		}
	}
	total := l.Size()
	b.Run("raw-read", func(b *testing.B) {
		f, err := os.Open(segmentPath(l.dir, 0, logSuffix))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 1<<20)
		var pos int64
		b.SetBytes(1 << 20)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			n, err := f.ReadAt(buf, pos)
			if err != nil && err != io.EOF {
				b.Fatal(err)
			}
			pos += int64(n)
			if pos >= total {
				pos = 0
			}
		}
	})
	b.Run("read", func(b *testing.B) {
		buf := make([]byte, 1<<20)
		var off int64
		b.SetBytes(1 << 20)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			res, err := l.Read(off, 1<<20, 1<<62, true)
			if err != nil {
				b.Fatal(err)
			}
			r := res.Regions[0].(*region)
			if _, err := r.ReadAt(buf[:r.Len()], 0); err != nil && err != io.EOF {
				b.Fatal(err)
			}
			r.Release()
			off += int64(r.Len()/len(set)) * int64(record.Batch(set).RecordCount())
			if off >= l.LogEndOffset() {
				off = 0
			}
		}
	})
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRecover1GiB writes a 1 GiB partition, simulates a crash with a
// recovery point of 0 and measures Open, which validates every batch and
// rebuilds every index. It reports the CPU time of recovery.
func BenchmarkRecover1GiB(b *testing.B) {
	if testing.Short() {
		b.Skip("writes 1 GiB")
	}
	dir := b.TempDir()
	set := benchBatch(b, 1<<20)
	m, err := Open(dir, Options{RetentionCheckInterval: -1, FlushCheckInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	l, err := m.Create(TopicPartition{Topic: "bench", Partition: 0}, [16]byte{1}, DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	for l.Size() < 1<<30 {
		if _, err := l.Append(set, 0); err != nil {
			b.Fatal(err)
		}
	}
	size := l.Size()
	m.WriteCheckpoints()
	m.crash()
	b.SetBytes(size)
	b.ResetTimer()
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		start := cpuTime()
		m2, err := Open(dir, Options{RetentionCheckInterval: -1, FlushCheckInterval: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - start
		b.StopTimer()
		l2, _ := m2.Get(TopicPartition{Topic: "bench", Partition: 0})
		if l2.Size() != size {
			b.Fatalf("recovered %d of %d bytes", l2.Size(), size)
		}
		m2.WriteCheckpoints()
		m2.crash() // keep the next iteration unclean
		os.WriteFile(filepath.Join(dir, recoveryPointFile), []byte("0\n0\n"), 0o644)
		b.StartTimer()
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
}

package log

import (
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/broker/record"
)

// BenchmarkClean measures one cleaning pass over a 32 MiB compacted
// partition of 1 KiB records (half random, half zeros) in 16-record
// batches over 8192 keys: about three quarters of the records are removed
// uncompressed, more with a codec (the log holds more records). MB/s is
// source bytes cleaned per second: the offset map is built, every segment
// is read, CRC-checked, filtered, re-encoded (recompressed for a codec) and
// written, and the cleaned segments are flushed and swapped in.
func BenchmarkClean(b *testing.B) {
	for _, codec := range []record.Codec{record.CodecNone, record.CodecLZ4, record.CodecZstd} {
		b.Run(codec.String(), func(b *testing.B) {
			tmpl := b.TempDir()
			cfg := DefaultConfig()
			cfg.CleanupPolicy = PolicyCompact
			cfg.SegmentBytes = 8 << 20
			cfg.MinCleanableDirtyRatio = 0
			opts := Options{RetentionCheckInterval: -1, FlushCheckInterval: time.Hour, CleanerBackoff: -1,
				ConfigFor: func(TopicPartition) Config { return cfg }}
			m, err := Open(tmpl, opts)
			if err != nil {
				b.Fatal(err)
			}
			tp := TopicPartition{Topic: "bench", Partition: 0}
			l, err := m.Create(tp, [16]byte{1}, cfg)
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewSource(1))
			for l.Size() < 32<<20 {
				recs := make([]record.Rec, 16)
				for i := range recs {
					val := make([]byte, 1000)
					rng.Read(val[:500]) // half random, half compressible
					recs[i] = record.Rec{Timestamp: 1_700_000_000_000, Key: []byte(fmt.Sprintf("key-%05d", rng.Intn(8192))), Value: val}
				}
				s := record.NewSpec(recs...)
				s.Codec = codec
				bt, err := record.Build(s)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := l.Append(bt, 0); err != nil {
					b.Fatal(err)
				}
			}
			if err := l.Roll(); err != nil {
				b.Fatal(err)
			}
			size := l.Size()
			if err := m.Close(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(size)
			b.ReportAllocs()
			b.ResetTimer()
			var st CleanStats
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dir := filepath.Join(b.TempDir(), "d")
				if err := copyDir(tmpl, dir); err != nil {
					b.Fatal(err)
				}
				m, err := Open(dir, opts)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				var ok bool
				st, ok, err = m.CleanOnce()
				if err != nil || !ok {
					b.Fatal(ok, err)
				}
				b.StopTimer()
				m.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(st.BytesWritten)/float64(st.BytesRead), "out/in")
		})
	}
}

// copyDir copies a log dir tree (files one level below the partition
// directories).
func copyDir(src, dst string) error {
	return filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if rel == ".lock" {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(to)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

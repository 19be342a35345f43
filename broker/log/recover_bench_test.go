package log

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkRecoverSmallPartitions builds a log dir shaped like a fresh
// broker's: 50 __consumer_offsets partitions and one small topic, a few
// batches in some of them, then simulates a crash (no clean-shutdown
// marker) and measures Open, which recovers every partition from its
// recovery point.
func BenchmarkRecoverSmallPartitions(b *testing.B) {
	dir := b.TempDir()
	opts := Options{RetentionCheckInterval: -1, FlushCheckInterval: time.Hour, CheckpointInterval: time.Hour, CleanerBackoff: -1}
	m, err := Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	var tps []TopicPartition
	for p := int32(0); p < 50; p++ {
		tps = append(tps, TopicPartition{Topic: "__consumer_offsets", Partition: p})
	}
	tps = append(tps, TopicPartition{Topic: "topic", Partition: 0})
	for i, tp := range tps {
		l, err := m.Create(tp, [16]byte{byte(i + 1)}, DefaultConfig())
		if err != nil {
			b.Fatal(err)
		}
		if i%10 == 0 || tp.Topic == "topic" {
			for j := 0; j < 3; j++ {
				if _, err := l.Append(batch(b, 5, fmt.Sprint(i, j), 1_700_000_000_000), 0); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	if err := m.WriteCheckpoints(); err != nil {
		b.Fatal(err)
	}
	m.crash()
	b.ResetTimer()
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		start := cpuTime()
		m2, err := Open(dir, opts)
		if err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - start
		b.StopTimer()
		if n := m2.Stats().Partitions; n != len(tps) {
			b.Fatalf("loaded %d of %d partitions", n, len(tps))
		}
		m2.crash() // keep the next iteration unclean
		b.StartTimer()
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
}

package log

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/broker/record"
)

// fakeClock is an injectable clock for deterministic tests.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.UnixMilli(1_700_000_000_000)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

var testTP = TopicPartition{Topic: "orders", Partition: 3}

func testOpts(c *fakeClock) Options {
	return Options{Clock: c.Now, FlushCheckInterval: time.Hour, CheckpointInterval: time.Hour, RetentionCheckInterval: -1, CleanerBackoff: -1}
}

func smallConfig() Config {
	c := DefaultConfig()
	c.SegmentBytes = 4096
	c.IndexIntervalBytes = 256
	return c
}

// openTest opens a manager on dir and creates (or gets) testTP.
func openTest(t testing.TB, dir string, c *fakeClock, cfg Config) (*Manager, *Log) {
	t.Helper()
	o := testOpts(c)
	o.ConfigFor = func(TopicPartition) Config { return cfg }
	m, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Create(testTP, [16]byte{1, 2, 3}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m, l
}

// crash simulates a process crash with Abandon: files are closed without
// a flush, a snapshot, checkpoints or the clean-shutdown marker.
func (m *Manager) crash() {
	if err := m.Abandon(); err != nil {
		panic("log: abandon: " + err.Error())
	}
}

// batch builds an uncompressed batch of n records with values tagged by tag.
func batch(t testing.TB, n int, tag string, ts int64) []byte {
	t.Helper()
	recs := make([]record.Rec, n)
	for i := range recs {
		recs[i] = record.Rec{Timestamp: ts + int64(i), Key: []byte(fmt.Sprintf("%s-k%d", tag, i)), Value: []byte(fmt.Sprintf("%s-v%d", tag, i))}
	}
	b, err := record.Build(record.NewSpec(recs...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func idemBatch(t testing.TB, pid int64, epoch int16, seq int32, n int, txn bool) []byte {
	t.Helper()
	recs := make([]record.Rec, n)
	for i := range recs {
		recs[i] = record.Rec{Timestamp: 1000, Key: []byte("k"), Value: []byte("v")}
	}
	s := record.NewSpec(recs...)
	s.ProducerID, s.ProducerEpoch, s.BaseSequence, s.Transactional = pid, epoch, seq, txn
	b, err := record.Build(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readAll reads every batch from offset to the end and returns their bytes.
func readAll(t testing.TB, l *Log, from int64) []record.Batch {
	t.Helper()
	var out []record.Batch
	for off := from; off < l.LogEndOffset(); {
		res, err := l.Read(off, 1<<20, 1<<62, true)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if len(res.Regions) == 0 {
			t.Fatalf("Read(%d) returned nothing below LEO %d", off, l.LogEndOffset())
		}
		var buf bytes.Buffer
		for _, r := range res.Regions {
			if _, err := r.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			r.Release()
		}
		set := buf.Bytes()
		for len(set) > 0 {
			b, rest, err := record.Next(set)
			if err != nil {
				t.Fatalf("served bytes do not parse: %v", err)
			}
			if err := b.ValidateStored(); err != nil {
				t.Fatalf("served a bad batch: %v", err)
			}
			out = append(out, b)
			off = b.NextOffset()
			set = rest
		}
	}
	return out
}

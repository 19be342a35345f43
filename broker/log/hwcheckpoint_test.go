package log

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// openHW opens dir keeping replication-offset-checkpoint.
func openHW(t *testing.T, dir string, c *fakeClock, interval time.Duration) *Manager {
	t.Helper()
	o := testOpts(c)
	o.ConfigFor = func(TopicPartition) Config { return smallConfig() }
	o.HighWatermarkCheckpoint = true
	o.HighWatermarkCheckpointInterval = interval
	m, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func appendN(t *testing.T, l *Log, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := l.Append(batch(t, 1, "h", 1), 0); err != nil {
			t.Fatal(err)
		}
	}
}

func TestHighWatermarkCheckpointRoundTrip(t *testing.T) {
	dir := t.TempDir()
	c := newFakeClock()
	m := openHW(t, dir, c, time.Hour)
	l, err := m.Create(testTP, [16]byte{1}, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	if hw, ok := l.HighWatermark(); !ok || hw != 0 {
		t.Fatalf("new log: %d %v", hw, ok)
	}
	appendN(t, l, 10)
	if got := l.UpdateHighWatermark(7); got != 7 {
		t.Fatalf("UpdateHighWatermark(7) = %d", got)
	}
	if got := l.UpdateHighWatermark(50); got != 10 {
		t.Fatalf("bounded by the log end: %d", got)
	}
	l.UpdateHighWatermark(7)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, highWatermarkFile))
	if err != nil || string(data) != "0\n1\norders 3 7\n" {
		t.Fatalf("replication-offset-checkpoint = %q, %v", data, err)
	}
	m = openHW(t, dir, c, time.Hour)
	l, _ = m.Get(testTP)
	if hw, ok := l.HighWatermark(); !ok || hw != 7 {
		t.Fatalf("after restart: %d %v", hw, ok)
	}
	// Truncation below the high watermark takes it down.
	if err := l.Truncate(4); err != nil {
		t.Fatal(err)
	}
	if hw, _ := l.HighWatermark(); hw != 4 {
		t.Fatalf("after truncate: %d", hw)
	}
	if err := l.TruncateFullyAndStartAt(20); err != nil {
		t.Fatal(err)
	}
	if hw, _ := l.HighWatermark(); hw != 20 {
		t.Fatalf("after truncate fully: %d", hw)
	}
	m.Close()

	// An entry beyond the log end (the log lost its tail in a crash) or
	// below the log start is bounded; a log without an entry starts at
	// its log start (Kafka reads 0).
	if err := os.WriteFile(filepath.Join(dir, highWatermarkFile), []byte("0\n2\norders 3 99\nother 0 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m = openHW(t, dir, c, time.Hour)
	l, _ = m.Get(testTP)
	if hw, _ := l.HighWatermark(); hw != 20 {
		t.Fatalf("entry beyond the end: %d", hw)
	}
	m.Close()
	if err := os.WriteFile(filepath.Join(dir, highWatermarkFile), []byte("0\n0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m = openHW(t, dir, c, time.Hour)
	l, _ = m.Get(testTP)
	if hw, _ := l.HighWatermark(); hw != 20 {
		t.Fatalf("no entry: %d, want the log start", hw)
	}
	m.Close()
}

// TestHighWatermarkCheckpointOff checks the single-node default: no
// replication-offset-checkpoint written or read, no high watermark kept.
func TestHighWatermarkCheckpointOff(t *testing.T) {
	dir := t.TempDir()
	c := newFakeClock()
	m, l := openTest(t, dir, c, smallConfig())
	appendN(t, l, 3)
	if got := l.UpdateHighWatermark(2); got != 2 {
		t.Fatalf("UpdateHighWatermark = %d", got)
	}
	if _, ok := l.HighWatermark(); ok {
		t.Fatal("high watermark kept without the option")
	}
	if err := os.WriteFile(filepath.Join(dir, highWatermarkFile), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, highWatermarkFile)); string(data) != "garbage" {
		t.Fatalf("checkpoint written without the option: %q", data)
	}
	m, _ = openTest(t, dir, c, smallConfig()) // the garbage is not read
	m.Close()
}

// TestHighWatermarkCheckpointCorrupt checks Kafka's handling of an
// unreadable checkpoint: CheckpointFileWithFailureHandler fails the read
// with a storage error (the log dir goes offline); an empty file reads as
// no entries.
func TestHighWatermarkCheckpointCorrupt(t *testing.T) {
	c := newFakeClock()
	for _, tc := range []struct {
		data string
		ok   bool
	}{
		{"", true},
		{"0\n", true},
		{"0\n1\norders 3 x\n", false},
		{"0\n2\norders 3 4\n", false},
		{"1\n0\n", false},
		{"0\n1\norders 3\n", false},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, highWatermarkFile), []byte(tc.data), 0o644); err != nil {
			t.Fatal(err)
		}
		o := testOpts(c)
		o.HighWatermarkCheckpoint = true
		m, err := Open(dir, o)
		if tc.ok {
			if err != nil {
				t.Fatalf("%q: %v", tc.data, err)
			}
			m.Close()
			continue
		}
		if !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), highWatermarkFile) {
			t.Fatalf("%q: %v, want a storage error naming the file", tc.data, err)
		}
	}
}

func TestHighWatermarkCheckpointPeriodic(t *testing.T) {
	dir := t.TempDir()
	c := newFakeClock()
	m := openHW(t, dir, c, 10*time.Millisecond)
	defer m.Close()
	l, err := m.Create(testTP, [16]byte{1}, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 5)
	l.UpdateHighWatermark(3)
	deadline := time.Now().Add(20 * time.Second)
	for {
		data, _ := os.ReadFile(filepath.Join(dir, highWatermarkFile))
		if string(data) == "0\n1\norders 3 3\n" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint not written in the background: %q", data)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

package log

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRetentionByTime(t *testing.T) {
	c := newFakeClock()
	cfg := smallConfig()
	cfg.RetentionMs = time.Hour
	m, l := openTest(t, t.TempDir(), c, cfg)
	defer m.Close()
	now := c.Now().UnixMilli()
	for i := 0; i < 100; i++ {
		ts := now - 2*time.Hour.Milliseconds() // old records
		if i >= 50 {
			ts = now
		}
		if _, err := l.Append(batch(t, 3, "t", ts), 0); err != nil {
			t.Fatal(err)
		}
	}
	before := l.NumSegments()
	n, err := m.ApplyRetention()
	if err != nil || n == 0 {
		t.Fatalf("deleted %d, %v", n, err)
	}
	if l.NumSegments() != before-n {
		t.Fatal("segment count")
	}
	// Every remaining segment holds a fresh record; the start moved to a
	// segment boundary at or below offset 150.
	if ls := l.LogStartOffset(); ls == 0 || ls > 150 {
		t.Fatalf("log start %d", ls)
	}
	// Later, everything expires: the log rolls and keeps an empty active
	// segment at the log end.
	c.Advance(3 * time.Hour)
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 300 || l.LogEndOffset() != 300 || l.NumSegments() != 1 {
		t.Fatalf("start %d end %d segs %d", l.LogStartOffset(), l.LogEndOffset(), l.NumSegments())
	}
	if info, err := l.Append(batch(t, 1, "n", c.Now().UnixMilli()), 0); err != nil || info.FirstOffset != 300 {
		t.Fatalf("append after full retention: %+v %v", info, err)
	}
}

func TestRetentionBySizeAndCheckpoint(t *testing.T) {
	dir := t.TempDir()
	c := newFakeClock()
	cfg := smallConfig()
	cfg.RetentionBytes = 8192
	m, l := openTest(t, dir, c, cfg)
	for i := 0; i < 200; i++ {
		if _, err := l.Append(batch(t, 3, "s", c.Now().UnixMilli()), 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if l.Size() > 8192+4096 || l.Size() < 8192-4096 {
		t.Fatalf("size %d after retention.bytes=8192", l.Size())
	}
	start := l.LogStartOffset()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	ck, _ := os.ReadFile(filepath.Join(dir, logStartOffsetFile))
	if !strings.Contains(string(ck), "orders 3 ") {
		t.Fatalf("log-start-offset-checkpoint = %q", ck)
	}
	m2, l2 := reopen(t, dir)
	defer m2.Close()
	if l2.LogStartOffset() != start {
		t.Fatalf("start %d after restart, want %d", l2.LogStartOffset(), start)
	}
}

func TestDeleteRecordsBefore(t *testing.T) {
	dir := t.TempDir()
	c := newFakeClock()
	m, l := openTest(t, dir, c, smallConfig())
	for i := 0; i < 50; i++ {
		if _, err := l.Append(batch(t, 2, "d", 1), 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.DeleteRecordsBefore(101); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("beyond LEO: %v", err)
	}
	got, err := l.DeleteRecordsBefore(37)
	if err != nil || got != 37 || l.LogStartOffset() != 37 {
		t.Fatalf("DeleteRecordsBefore = %d %v", got, err)
	}
	// Reading from the new start returns the batch that contains 37.
	bs := readAll(t, l, 37)
	if bs[0].BaseOffset() != 36 {
		t.Fatalf("first batch %d", bs[0].BaseOffset())
	}
	if got, _ := l.DeleteRecordsBefore(10); got != 37 {
		t.Fatalf("start moved backwards to %d", got)
	}
	m.Close()
	m2, l2 := reopen(t, dir)
	defer m2.Close()
	if l2.LogStartOffset() != 37 {
		t.Fatalf("start %d after restart", l2.LogStartOffset())
	}
}

func TestLeaderEpochs(t *testing.T) {
	dir := t.TempDir()
	c := newFakeClock()
	m, l := openTest(t, dir, c, smallConfig())
	for _, e := range []int32{1, 1, 3, 3, 3, 6} {
		if _, err := l.Append(batch(t, 2, "e", 1), e); err != nil {
			t.Fatal(err)
		}
	}
	// Epoch 1 starts at 0, 3 at 4, 6 at 10; LEO 12.
	cases := []struct {
		req   int32
		epoch int32
		off   int64
		ok    bool
	}{
		{6, 6, 12, true},
		{3, 3, 10, true},
		{4, 3, 10, true},
		{1, 1, 4, true},
		{0, 0, 0, true},
		{7, -1, -1, false},
		{-1, -1, -1, false},
	}
	for _, tc := range cases {
		e, o, ok := l.EndOffsetForEpoch(tc.req)
		if e != tc.epoch || o != tc.off || ok != tc.ok {
			t.Errorf("EndOffsetForEpoch(%d) = %d %d %v, want %d %d %v", tc.req, e, o, ok, tc.epoch, tc.off, tc.ok)
		}
	}
	if l.EpochAt(5) != 3 || l.LatestEpoch() != 6 {
		t.Fatalf("EpochAt(5)=%d latest %d", l.EpochAt(5), l.LatestEpoch())
	}
	if err := l.Truncate(6); err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 6 || l.LatestEpoch() != 3 {
		t.Fatalf("after truncate LEO %d epoch %d", l.LogEndOffset(), l.LatestEpoch())
	}
	if got := readAll(t, l, 0); len(got) != 3 {
		t.Fatalf("%d batches after truncate", len(got))
	}
	if info, err := l.Append(batch(t, 1, "x", 1), 7); err != nil || info.FirstOffset != 6 {
		t.Fatalf("append after truncate %+v %v", info, err)
	}
	m.Close()
	data, _ := os.ReadFile(filepath.Join(dir, "orders-3", leaderEpochFile))
	if string(data) != "0\n3\n1 0\n3 4\n7 6\n" {
		t.Fatalf("leader-epoch-checkpoint = %q", data)
	}
}

func TestTruncateAcrossSegmentsRestoresProducerState(t *testing.T) {
	c := newFakeClock()
	m, l := openTest(t, t.TempDir(), c, smallConfig())
	defer m.Close()
	var seq int32
	for i := 0; i < 200; i++ {
		if _, err := l.Append(idemBatch(t, 3, 0, seq, 3, false), 0); err != nil {
			t.Fatal(err)
		}
		seq += 3
	}
	if l.NumSegments() < 3 {
		t.Fatalf("%d segments", l.NumSegments())
	}
	if err := l.Truncate(30); err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 30 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
	// Producer state is back at sequence 30.
	if _, err := l.Append(idemBatch(t, 3, 0, 33, 1, false), 0); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("stale state after truncate: %v", err)
	}
	if _, err := l.Append(idemBatch(t, 3, 0, 30, 1, false), 0); err != nil {
		t.Fatal(err)
	}
}

func TestManagerDeleteAndLayout(t *testing.T) {
	dir := t.TempDir()
	c := newFakeClock()
	m, l := openTest(t, dir, c, smallConfig())
	if _, err := l.Append(batch(t, 1, "x", 1), 0); err != nil {
		t.Fatal(err)
	}
	other, err := m.Create(TopicPartition{Topic: "a-b.c", Partition: 12}, [16]byte{9}, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(TopicPartition{Topic: "a-b.c", Partition: 12}, [16]byte{8}, DefaultConfig()); !errors.Is(err, ErrExists) {
		t.Fatalf("create with another id: %v", err)
	}
	if _, err := m.Create(TopicPartition{Topic: "../x", Partition: 0}, [16]byte{8}, DefaultConfig()); err == nil {
		t.Fatal("path traversal accepted")
	}
	res, _ := l.Read(0, 100, 1<<62, true)
	if err := m.Delete(testTP); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Get(testTP); ok {
		t.Fatal("still listed")
	}
	if _, err := l.Append(batch(t, 1, "x", 1), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("append to deleted log: %v", err)
	}
	if res.Regions[0].Len() == 0 {
		t.Fatal("empty region")
	}
	res.Regions[0].Release()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "orders-3")); !os.IsNotExist(err) {
		t.Fatal("partition dir still there")
	}
	m2, err := Open(dir, testOpts(c))
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if logs := m2.Logs(); len(logs) != 1 || logs[0].TopicPartition() != other.TopicPartition() || logs[0].TopicID() != [16]byte{9} {
		t.Fatalf("logs after restart: %v", logs)
	}
	if p, err := m2.MetaProperties(); err != nil || p["version"] != "1" || p["directory.id"] == "" {
		t.Fatalf("meta.properties %v %v", p, err)
	}
}

func TestFlushPolicies(t *testing.T) {
	c := newFakeClock()
	cfg := smallConfig()
	cfg.FlushMessages = 4
	m, l := openTest(t, t.TempDir(), c, cfg)
	defer m.Close()
	l.Append(batch(t, 2, "f", 1), 0)
	if l.RecoveryPoint() != 0 {
		t.Fatalf("flushed early: %d", l.RecoveryPoint())
	}
	l.Append(batch(t, 2, "f", 1), 0)
	if l.RecoveryPoint() != 4 {
		t.Fatalf("flush.messages=4: recovery point %d", l.RecoveryPoint())
	}
	cfg.FlushMessages = DefaultConfig().FlushMessages
	cfg.FlushMs = time.Minute
	l.SetConfig(cfg)
	l.Append(batch(t, 1, "f", 1), 0)
	m.FlushDue()
	if l.RecoveryPoint() != 4 {
		t.Fatal("flushed before flush.ms")
	}
	c.Advance(time.Minute)
	m.FlushDue()
	if l.RecoveryPoint() != 5 {
		t.Fatalf("flush.ms: recovery point %d", l.RecoveryPoint())
	}
	// Dir-wide dirty-age trigger.
	cfg.FlushMs = DefaultConfig().FlushMs
	l.SetConfig(cfg)
	m.opts.FlushMaxDirtyAge = time.Second
	l.Append(batch(t, 1, "f", 1), 0)
	m.FlushDue()
	if l.RecoveryPoint() != 5 {
		t.Fatal("dirty-age flushed too early")
	}
	c.Advance(2 * time.Second)
	m.FlushDue()
	if l.RecoveryPoint() != 6 {
		t.Fatalf("dirty-age: recovery point %d", l.RecoveryPoint())
	}
}

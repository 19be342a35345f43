package log

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/broker/record"
)

func TestAppendReadAcrossSegmentsAndRestart(t *testing.T) {
	dir := t.TempDir()
	c := newFakeClock()
	m, l := openTest(t, dir, c, smallConfig())
	var want []int64
	for i := 0; i < 100; i++ {
		info, err := l.Append(batch(t, 3, "a", 1000+int64(i)), 5)
		if err != nil {
			t.Fatal(err)
		}
		if info.FirstOffset != int64(i*3) || info.LastOffset != int64(i*3+2) || info.NumRecords != 3 {
			t.Fatalf("append %d: %+v", i, info)
		}
		want = append(want, info.FirstOffset)
	}
	if l.NumSegments() < 3 {
		t.Fatalf("expected rolls with segment.bytes=4096, got %d segments", l.NumSegments())
	}
	check := func(l *Log) {
		t.Helper()
		got := readAll(t, l, 0)
		if len(got) != len(want) {
			t.Fatalf("read %d batches, want %d", len(got), len(want))
		}
		for i, b := range got {
			if b.BaseOffset() != want[i] || b.PartitionLeaderEpoch() != 5 {
				t.Fatalf("batch %d: offset %d epoch %d", i, b.BaseOffset(), b.PartitionLeaderEpoch())
			}
		}
		// A read starting mid-batch returns the whole containing batch.
		res, err := l.Read(4, 1, 1<<62, true)
		if err != nil || len(res.Regions) != 1 {
			t.Fatalf("mid-batch read: %v %v", res, err)
		}
		var buf bytes.Buffer
		res.Regions[0].WriteTo(&buf)
		res.Regions[0].Release()
		if b, _, _ := record.Next(buf.Bytes()); b.BaseOffset() != 3 {
			t.Fatalf("mid-batch read starts at %d", b.BaseOffset())
		}
		// minOne=false with a tiny budget returns nothing.
		if res, _ := l.Read(3, 1, 1<<62, false); len(res.Regions) != 0 {
			t.Fatal("budget ignored")
		}
		// maxOffset excludes batches at or beyond it.
		res, _ = l.Read(0, 1<<20, 5, true)
		buf.Reset()
		for _, r := range res.Regions {
			r.WriteTo(&buf)
			r.Release()
		}
		if n, _ := record.Count(buf.Bytes()); n != 1 {
			t.Fatalf("maxOffset 5 gave %d batches", n)
		}
		if _, err := l.Read(l.LogEndOffset()+1, 100, 1<<62, true); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("beyond LEO: %v", err)
		}
		if res, err := l.Read(l.LogEndOffset(), 100, 1<<62, true); err != nil || len(res.Regions) != 0 {
			t.Fatalf("at LEO: %v %v", res, err)
		}
	}
	check(l)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); err != nil {
		t.Fatalf("no clean shutdown marker: %v", err)
	}
	// Kafka's layout on disk.
	pdir := filepath.Join(dir, "orders-3")
	for _, f := range []string{"00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex",
		"partition.metadata", "leader-epoch-checkpoint"} {
		if _, err := os.Stat(filepath.Join(pdir, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	// As Kafka's TransactionIndex, a .txnindex exists only once an aborted
	// transaction is written to it.
	if _, err := os.Stat(filepath.Join(pdir, "00000000000000000000.txnindex")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf(".txnindex of a log without aborted transactions: %v", err)
	}
	for _, f := range []string{recoveryPointFile, logStartOffsetFile, metaPropertiesFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	if st, _ := os.Stat(filepath.Join(pdir, "00000000000000000000.index")); st.Size()%8 != 0 || st.Size() >= 10<<20 {
		t.Errorf("index not trimmed: %d bytes", st.Size())
	}
	ep, _ := os.ReadFile(filepath.Join(pdir, leaderEpochFile))
	if string(ep) != "0\n1\n5 0\n" {
		t.Errorf("leader-epoch-checkpoint = %q", ep)
	}
	m2, err := Open(dir, testOpts(c))
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if !m2.Stats().CleanShutdown {
		t.Fatal("clean shutdown not detected")
	}
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); !os.IsNotExist(err) {
		t.Fatal("marker not removed at open")
	}
	l2, ok := m2.Get(testTP)
	if !ok || l2.LogEndOffset() != 300 || l2.TopicID() != [16]byte{1, 2, 3} {
		t.Fatalf("after restart: %v leo %d", ok, l2.LogEndOffset())
	}
	check(l2)
	info, err := l2.Append(batch(t, 1, "b", 5000), 5)
	if err != nil || info.FirstOffset != 300 {
		t.Fatalf("append after restart: %+v %v", info, err)
	}
}

func TestAppendValidation(t *testing.T) {
	c := newFakeClock()
	cfg := smallConfig()
	cfg.MaxMessageBytes = 2000
	m, l := openTest(t, t.TempDir(), c, cfg)
	defer m.Close()
	good := batch(t, 2, "x", 1)
	bad := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := []struct {
		name string
		set  []byte
		want error
	}{
		{"empty", nil, ErrInvalidRecord},
		{"crc", bad(func(b []byte) []byte { b[len(b)-1]++; return b }), ErrCorrupt},
		{"truncated", good[:len(good)-3], ErrCorrupt},
		{"trailing garbage", append(append([]byte(nil), good...), 1, 2, 3), ErrCorrupt},
		{"magic", bad(func(b []byte) []byte { b[16] = 1; return b }), ErrInvalidRecord},
		{"too large", batch(t, 200, "big", 1), ErrMessageTooLarge},
	}
	for _, tc := range cases {
		if _, err := l.Append(tc.set, 0); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	ctl := record.ControlBatch(1, 0, true, 0, 1)
	if _, err := l.AppendFromClient(ctl, 0); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("client control batch: %v", err)
	}
	nz := bad(func(b []byte) []byte { record.Batch(b).SetBaseOffset(7); return b })
	if _, err := l.AppendFromClient(nz, 0); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("client base offset: %v", err)
	}
	if l.LogEndOffset() != 0 {
		t.Fatalf("rejected appends moved LEO to %d", l.LogEndOffset())
	}
	// Compacted topics require keys.
	cfg.CleanupPolicy = PolicyCompact
	l.SetConfig(cfg)
	nokey, _ := record.Build(record.NewSpec(record.Rec{Value: []byte("v")}))
	if _, err := l.Append(nokey, 0); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("keyless record on compacted topic: %v", err)
	}
}

func TestLogAppendTimeAndTimestampLookups(t *testing.T) {
	c := newFakeClock()
	cfg := smallConfig()
	m, l := openTest(t, t.TempDir(), c, cfg)
	defer m.Close()
	for i := 0; i < 30; i++ {
		if _, err := l.Append(batch(t, 2, "t", int64(1000+10*i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	// Records have timestamps 1000+10i and 1001+10i at offsets 2i, 2i+1.
	o, ts, _, ok := l.OffsetForTimestamp(1105)
	if !ok || o != 22 || ts != 1110 {
		t.Fatalf("OffsetForTimestamp(1105) = %d %d %v", o, ts, ok)
	}
	if o, _, _, ok := l.OffsetForTimestamp(1001); !ok || o != 1 {
		t.Fatalf("OffsetForTimestamp(1001) = %d %v", o, ok)
	}
	if _, _, _, ok := l.OffsetForTimestamp(99999); ok {
		t.Fatal("found a timestamp beyond the max")
	}
	if o, ts := l.MaxTimestamp(); o != 59 || ts != 1291 {
		t.Fatalf("MaxTimestamp = %d %d", o, ts)
	}
	cfg.TimestampType = LogAppendTime
	l.SetConfig(cfg)
	info, err := l.Append(batch(t, 2, "lat", 5), 0)
	if err != nil || info.LogAppendTime != c.Now().UnixMilli() {
		t.Fatalf("LogAppendTime: %+v %v", info, err)
	}
	got := readAll(t, l, info.FirstOffset)
	if !got[0].LogAppendTime() || got[0].MaxTimestamp() != c.Now().UnixMilli() || got[0].ValidateStored() != nil {
		t.Fatal("stored batch lacks the append time or a valid CRC")
	}
}

func TestRegionSurvivesSegmentDeletion(t *testing.T) {
	c := newFakeClock()
	m, l := openTest(t, t.TempDir(), c, smallConfig())
	defer m.Close()
	for i := 0; i < 40; i++ {
		if _, err := l.Append(batch(t, 3, "r", 1), 0); err != nil {
			t.Fatal(err)
		}
	}
	res, err := l.Read(0, 1<<20, 1<<62, true)
	if err != nil || len(res.Regions) != 1 {
		t.Fatal(err)
	}
	if _, err := l.DeleteRecordsBefore(l.LogEndOffset() - 1); err != nil {
		t.Fatal(err)
	}
	if l.NumSegments() != 1 {
		t.Fatalf("segments below the start not deleted: %d", l.NumSegments())
	}
	var buf bytes.Buffer
	if _, err := res.Regions[0].WriteTo(&buf); err != nil || buf.Len() != res.Size {
		t.Fatalf("region after deletion: %d bytes, %v", buf.Len(), err)
	}
	res.Regions[0].Release()
	res.Regions[0].Release()
	if _, err := l.Read(0, 100, 1<<62, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
}

func TestStickyStorageError(t *testing.T) {
	c := newFakeClock()
	m, l := openTest(t, t.TempDir(), c, smallConfig())
	defer m.Close()
	if _, err := l.Append(batch(t, 1, "s", 1), 0); err != nil {
		t.Fatal(err)
	}
	l.active().h.Load().f.Close() // the disk goes away
	if _, err := l.Append(batch(t, 1, "s", 1), 0); !errors.Is(err, ErrStorage) {
		t.Fatalf("append on a failed disk: %v", err)
	}
	if _, err := l.Read(0, 100, 1<<62, true); !errors.Is(err, ErrStorage) {
		t.Fatalf("read after a storage error: %v", err)
	}
	if !errors.Is(l.Err(), ErrStorage) {
		t.Fatal("error not sticky")
	}
	_ = time.Second
}

func TestAppendZeroAllocs(t *testing.T) {
	c := newFakeClock()
	cfg := DefaultConfig()
	m, l := openTest(t, t.TempDir(), c, cfg)
	defer m.Close()
	b := batch(t, 16, "z", 1)
	for i := 0; i < 10; i++ {
		if _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0.05 {
		t.Fatalf("%.2f allocations per append", allocs)
	}
}

func TestTimestampBounds(t *testing.T) {
	c := newFakeClock()
	cfg := smallConfig()
	m, l := openTest(t, t.TempDir(), c, cfg)
	defer m.Close()
	now := c.Now().UnixMilli()
	if _, err := l.Append(batch(t, 1, "f", now+2*time.Hour.Milliseconds()), 0); !errors.Is(err, ErrInvalidTimestamp) {
		t.Fatalf("two hours ahead with the default one-hour bound: %v", err)
	}
	if _, err := l.Append(batch(t, 1, "f", now+time.Minute.Milliseconds()), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(batch(t, 1, "old", 5), 0); err != nil {
		t.Fatalf("old timestamps are unlimited by default: %v", err)
	}
	cfg.TimestampBeforeMax = time.Hour
	l.SetConfig(cfg)
	if _, err := l.Append(batch(t, 1, "old", 5), 0); !errors.Is(err, ErrInvalidTimestamp) {
		t.Fatalf("before bound: %v", err)
	}
	cfg.TimestampType = LogAppendTime
	l.SetConfig(cfg)
	if _, err := l.Append(batch(t, 1, "old", 5), 0); err != nil {
		t.Fatalf("LogAppendTime topics ignore the bounds: %v", err)
	}
}

// TestCleanShutdownEpoch checks that a clean close records the broker
// epoch it was given, that the next open reports it, and that an open
// after a crash (no close) reports -1.
func TestCleanShutdownEpoch(t *testing.T) {
	c := newFakeClock()
	dir := t.TempDir()
	m, err := Open(dir, testOpts(c))
	if err != nil {
		t.Fatal(err)
	}
	if e := m.Stats().CleanShutdownEpoch; e != -1 {
		t.Fatalf("a new dir reports clean epoch %d", e)
	}
	m.SetBrokerEpoch(42)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m, err = Open(dir, testOpts(c))
	if err != nil {
		t.Fatal(err)
	}
	if st := m.Stats(); !st.CleanShutdown || st.CleanShutdownEpoch != 42 {
		t.Fatalf("after a clean close at epoch 42: %+v", st)
	}
	// A crash: the lock and logs go away without Close.
	m.closeLogs(false)
	m.lock.Close()
	m, err = Open(dir, testOpts(c))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if st := m.Stats(); st.CleanShutdown || st.CleanShutdownEpoch != -1 {
		t.Fatalf("after a crash: %+v", st)
	}
}

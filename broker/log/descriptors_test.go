package log

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/broker/record"
)

// openFDs counts the process's open descriptors.
func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// lowestFreeFD returns the descriptor number the next open(2) would get:
// the kernel refuses it with EMFILE when RLIMIT_NOFILE is at most that.
func lowestFreeFD(t testing.TB) uint64 {
	t.Helper()
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	fd := f.Fd()
	f.Close()
	return uint64(fd)
}

// lowerFileLimit sets the soft RLIMIT_NOFILE to n until the test ends.
func lowerFileLimit(t testing.TB, n uint64) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Skipf("getrlimit: %v", err)
	}
	if old.Cur < n {
		t.Skipf("soft RLIMIT_NOFILE %d is below %d already", old.Cur, n)
	}
	lim := old
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("setrlimit: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
			t.Errorf("restoring RLIMIT_NOFILE: %v", err)
		}
	})
}

// TestManySegmentsUnderLowFileLimit writes batches whose timestamps step
// further than segment.ms, so each rolls a segment, until three partitions
// hold far more segments than RLIMIT_NOFILE allows descriptors; then the
// log dir is reopened after a crash (every segment recovered) and after a
// clean stop, still under that limit, and every batch is read back.
func TestManySegmentsUnderLowFileLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("writes thousands of segments")
	}
	const (
		limit      = 1024
		partitions = 3
		perPart    = 1000 // 3,000 segments: three times the descriptor limit
	)
	lowerFileLimit(t, limit)
	// Descriptors the process may use beyond those open before the test: the
	// handle cache's bound (a quarter of the limit), three files per active
	// segment, and a margin for the directory and snapshot files open
	// during a roll.
	bound := limit/4 + 3*partitions + 32
	dir := t.TempDir()
	c := newFakeClock()
	cfg := DefaultConfig()
	cfg.SegmentMs = time.Hour
	cfg.RetentionMs = -1
	o := testOpts(c)
	o.ConfigFor = func(TopicPartition) Config { return cfg }

	base := openFDs(t)
	m, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	tps := make([]TopicPartition, partitions)
	logs := make([]*Log, partitions)
	for p := range tps {
		tps[p] = TopicPartition{Topic: "steps", Partition: int32(p)}
		if logs[p], err = m.Create(tps[p], [16]byte{9}, cfg); err != nil {
			t.Fatal(err)
		}
	}
	// A client's clock far in the past, stepping two hours per batch.
	ts := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	want := make([][][]byte, partitions)
	peak := 0
	for i := 0; i < perPart; i++ {
		for p, l := range logs {
			b := batch(t, 2, fmt.Sprintf("p%d-%d", p, i), ts+int64(i)*2*time.Hour.Milliseconds())
			if _, err := l.Append(b, 0); err != nil {
				t.Fatalf("append %d to partition %d: %v", i, p, err)
			}
			want[p] = append(want[p], b)
		}
		if i%50 == 0 {
			// Reading old segments opens their files through the cache.
			for _, l := range logs {
				readAll(t, l, 0)
			}
			peak = max(peak, openFDs(t)-base)
		}
	}
	for p, l := range logs {
		if n := l.NumSegments(); n != perPart {
			t.Fatalf("partition %d has %d segments, want one per batch (%d)", p, n, perPart)
		}
	}
	peak = max(peak, openFDs(t)-base)
	t.Logf("%d segments, peak %d descriptors above the %d before (bound %d)", partitions*perPart, peak, base, bound)
	if peak > bound {
		t.Fatalf("%d descriptors open above the %d before, bound %d", peak, base, bound)
	}

	check := func(m *Manager, when string) {
		t.Helper()
		for p, tp := range tps {
			l, ok := m.Get(tp)
			if !ok {
				t.Fatalf("%s: partition %d not loaded", when, p)
			}
			if l.NumSegments() != perPart {
				t.Fatalf("%s: partition %d has %d segments, want %d", when, p, l.NumSegments(), perPart)
			}
			got := readAll(t, l, 0)
			if len(got) != len(want[p]) {
				t.Fatalf("%s: partition %d read %d batches, want %d", when, p, len(got), len(want[p]))
			}
			for i, b := range got {
				w := record.Batch(want[p][i])
				if b.BaseOffset() != int64(2*i) || !bytes.Equal(b[record.HeaderSize:], w[record.HeaderSize:]) {
					t.Fatalf("%s: partition %d batch %d differs", when, p, i)
				}
			}
		}
		if n := openFDs(t) - base; n > bound {
			t.Fatalf("%s: %d descriptors open above the %d before, bound %d", when, n, base, bound)
		}
	}

	// A crash: no checkpoint was written (the interval is an hour), so the
	// restart recovers every segment from offset 0.
	m.crash()
	m, err = Open(dir, o)
	if err != nil {
		t.Fatalf("reopen after a crash under RLIMIT_NOFILE %d: %v", limit, err)
	}
	check(m, "after crash")
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m, err = Open(dir, o)
	if err != nil {
		t.Fatalf("reopen after a clean stop under RLIMIT_NOFILE %d: %v", limit, err)
	}
	check(m, "after clean stop")
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if n := openFDs(t) - base; n > 0 {
		t.Errorf("%d descriptors still open after Close", n)
	}
}

// setCacheLimit bounds the handle cache to n until the test ends.
func setCacheLimit(t testing.TB, n int) {
	t.Helper()
	segFiles.mu.Lock()
	old := segFiles.limit
	segFiles.limit = n
	segFiles.evictLocked() // as the next open would
	segFiles.mu.Unlock()
	t.Cleanup(func() {
		segFiles.mu.Lock()
		segFiles.limit = old
		segFiles.mu.Unlock()
	})
}

// TestSealedSegmentDescriptors checks the cost of segments in descriptors:
// the active segment holds its .log, .index and .timeindex; a sealed one
// holds at most its .log, in the bounded cache; no .txnindex is open or even
// exists without aborted transactions; a Region keeps its file open however
// full the cache, and after its segment is deleted.
func TestSealedSegmentDescriptors(t *testing.T) {
	setCacheLimit(t, 4)
	c := newFakeClock()
	cfg := smallConfig()
	cfg.SegmentMs = time.Hour
	m, l := openTest(t, t.TempDir(), c, cfg)
	logs0, ix0, ti0, txn0 := OpenSegmentFiles()
	const n = 20
	ts := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for i := 0; i < n; i++ {
		if _, err := l.Append(batch(t, 1, fmt.Sprint(i), ts+int64(i)*2*time.Hour.Milliseconds()), 0); err != nil {
			t.Fatal(err)
		}
	}
	if l.NumSegments() != n {
		t.Fatalf("%d segments, want %d", l.NumSegments(), n)
	}
	// Hold a Region of every segment: none of their files may be closed.
	var held []Region
	for off := int64(0); off < n; off++ {
		res, err := l.Read(off, 1<<20, off+1, true)
		if err != nil || len(res.Regions) != 1 {
			t.Fatalf("Read(%d): %v, %d regions", off, err, len(res.Regions))
		}
		held = append(held, res.Regions[0])
	}
	logs, ix, ti, txn := OpenSegmentFiles()
	if logs-logs0 != n-1 || ix != ix0 || ti != ti0 || txn != txn0 {
		t.Fatalf("with a region of each segment open: %d more .log, %d more .index, %d more .timeindex, %d more .txnindex; want %d, 0, 0, 0",
			logs-logs0, ix-ix0, ti-ti0, txn-txn0, n-1)
	}
	// Retention deletes the first segments while their Regions are held.
	if _, err := l.DeleteRecordsBefore(10); err != nil {
		t.Fatal(err)
	}
	for i, r := range held {
		var buf bytes.Buffer
		if _, err := r.WriteTo(&buf); err != nil || buf.Len() != r.Len() {
			t.Fatalf("region %d: %v, %d of %d bytes", i, err, buf.Len(), r.Len())
		}
		r.Release()
	}
	// One more open lets the cache close idle handles down to its bound.
	if res, err := l.Read(10, 1<<20, 11, true); err != nil || len(res.Regions) != 1 {
		t.Fatalf("Read(10): %v, %d regions", err, len(res.Regions))
	} else {
		res.Regions[0].Release()
	}
	if open, limit := CachedSegmentFiles(); open > limit {
		t.Fatalf("%d sealed .log files cached, bound %d", open, limit)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if logs, ix, ti, txn := OpenSegmentFiles(); logs != logs0-1 || ix != ix0-1 || ti != ti0-1 || txn != txn0 {
		t.Fatalf("after Close: %d .log, %d .index, %d .timeindex, %d .txnindex open; want %d, %d, %d, %d",
			logs, ix, ti, txn, logs0-1, ix0-1, ti0-1, txn0)
	}
	// A clean load opens the active segment's files only, and its pinned
	// .log handle is not in the cache (it would count against the bound).
	cached0, _ := CachedSegmentFiles()
	m, l = openTest(t, m.dir, c, cfg)
	if logs, ix, ti, txn := OpenSegmentFiles(); logs != logs0 || ix != ix0 || ti != ti0 || txn != txn0 {
		t.Fatalf("after a clean load of %d segments: %d .log, %d .index, %d .timeindex, %d .txnindex open; want %d, %d, %d, %d",
			l.NumSegments(), logs, ix, ti, txn, logs0, ix0, ti0, txn0)
	}
	if cached, _ := CachedSegmentFiles(); cached != cached0 {
		t.Fatalf("a clean load cached %d .log handles", cached-cached0)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReadOutOfDescriptorsIsNotSticky checks that a read which cannot open
// a sealed segment's file for want of a descriptor fails with ErrStorage
// for that call only: the partition stays online and the next read, with a
// descriptor free, succeeds.
func TestReadOutOfDescriptorsIsNotSticky(t *testing.T) {
	setCacheLimit(t, 1)
	c := newFakeClock()
	cfg := smallConfig()
	cfg.SegmentMs = time.Hour
	m, l := openTest(t, t.TempDir(), c, cfg)
	defer m.Close()
	ts := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for i := 0; i < 4; i++ {
		if _, err := l.Append(batch(t, 1, fmt.Sprint(i), ts+int64(i)*2*time.Hour.Milliseconds()), 0); err != nil {
			t.Fatal(err)
		}
	}
	readOne := func(off int64) error {
		res, err := l.Read(off, 1<<20, off+1, true)
		for _, r := range res.Regions {
			r.Release()
		}
		return err
	}
	// Segment 1 ends up cached; segment 0's file is closed.
	for _, off := range []int64{0, 1, 1} {
		if err := readOne(off); err != nil {
			t.Fatal(err)
		}
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Skipf("getrlimit: %v", err)
	}
	lim := old
	lim.Cur = lowestFreeFD(t) // the next open(2) gets EMFILE
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("setrlimit: %v", err)
	}
	err := readOne(0)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatalf("restoring RLIMIT_NOFILE: %v", err)
	}
	if !errors.Is(err, ErrStorage) || !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("read with no descriptor free: %v, want ErrStorage for EMFILE", err)
	}
	if l.Err() != nil {
		t.Fatalf("partition offline after running out of descriptors: %v", l.Err())
	}
	if err := readOne(0); err != nil {
		t.Fatalf("read once a descriptor is free: %v", err)
	}
}

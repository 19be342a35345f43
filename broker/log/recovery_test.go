package log

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/cascade-kafka/cascade/broker/record"
)

// writeAndCrash appends n batches of 2 records, flushes, and crashes.
func writeAndCrash(t *testing.T, dir string, n int) (sizes []int) {
	t.Helper()
	c := newFakeClock()
	m, l := openTest(t, dir, c, smallConfig())
	for i := 0; i < n; i++ {
		b := batch(t, 2, "r", int64(100+i))
		sizes = append(sizes, len(b))
		if _, err := l.Append(b, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.WriteCheckpoints(); err != nil { // recovery point 0: nothing flushed
		t.Fatal(err)
	}
	m.crash()
	return sizes
}

func lastSegmentLog(t *testing.T, pdir string) string {
	t.Helper()
	bases, _, err := scanPartitionDir(pdir)
	if err != nil || len(bases) == 0 {
		t.Fatal(err)
	}
	return segmentPath(pdir, bases[len(bases)-1], logSuffix)
}

func reopen(t *testing.T, dir string) (*Manager, *Log) {
	t.Helper()
	c := newFakeClock()
	o := testOpts(c)
	o.ConfigFor = func(TopicPartition) Config { return smallConfig() }
	m, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	l, ok := m.Get(testTP)
	if !ok {
		t.Fatal("partition not loaded")
	}
	return m, l
}

func TestRecoveryTornTailEveryByte(t *testing.T) {
	base := t.TempDir()
	tmpl := filepath.Join(base, "tmpl")
	sizes := writeAndCrash(t, tmpl, 5)
	last := sizes[len(sizes)-1]
	pdir := filepath.Join(tmpl, "orders-3")
	logPath := lastSegmentLog(t, pdir)
	full, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if testing.Short() {
		last = min(last, 8)
	}
	for cut := 1; cut <= last; cut++ {
		dir := filepath.Join(base, "c", string(rune('a'+cut%26)), filepath.Base(t.Name())+string(rune(cut)))
		if err := os.CopyFS(dir, os.DirFS(tmpl)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "orders-3", filepath.Base(logPath)), full[:len(full)-cut], 0o644); err != nil {
			t.Fatal(err)
		}
		m, l := reopen(t, dir)
		if l.LogEndOffset() != 8 {
			t.Fatalf("cut %d: LEO %d, want 8", cut, l.LogEndOffset())
		}
		got := readAll(t, l, 0)
		if len(got) != 4 {
			t.Fatalf("cut %d: %d batches served", cut, len(got))
		}
		// The log keeps working after recovery.
		if info, err := l.Append(batch(t, 1, "n", 1), 1); err != nil || info.FirstOffset != 8 {
			t.Fatalf("cut %d: append after recovery %+v %v", cut, info, err)
		}
		m.Close()
		os.RemoveAll(dir)
	}
}

func TestRecoveryFlippedByteInMiddle(t *testing.T) {
	dir := t.TempDir()
	sizes := writeAndCrash(t, dir, 6)
	pdir := filepath.Join(dir, "orders-3")
	logPath := lastSegmentLog(t, pdir)
	data, _ := os.ReadFile(logPath)
	// Flip a byte in the value of the third batch.
	pos := sizes[0] + sizes[1] + sizes[2] - 3
	data[pos] ^= 0xff
	os.WriteFile(logPath, data, 0o644)
	m, l := reopen(t, dir)
	defer m.Close()
	if l.LogEndOffset() != 4 {
		t.Fatalf("LEO %d, want 4 (two valid batches)", l.LogEndOffset())
	}
	if got := readAll(t, l, 0); len(got) != 2 {
		t.Fatalf("%d batches served", len(got))
	}
	if st, _ := os.Stat(logPath); st.Size() != int64(sizes[0]+sizes[1]) {
		t.Fatalf("file not truncated: %d", st.Size())
	}
}

func TestRecoveryDeletesLaterSegments(t *testing.T) {
	dir := t.TempDir()
	c := newFakeClock()
	m, l := openTest(t, dir, c, smallConfig())
	for i := 0; i < 100; i++ {
		if _, err := l.Append(batch(t, 3, "s", 1), 0); err != nil {
			t.Fatal(err)
		}
	}
	nseg := l.NumSegments()
	firstSeg := segmentPath(l.dir, 0, logSuffix)
	m.crash()
	if nseg < 3 {
		t.Fatalf("%d segments", nseg)
	}
	data, _ := os.ReadFile(firstSeg)
	data[len(data)/2] ^= 0x55
	os.WriteFile(firstSeg, data, 0o644)
	m2, l2 := reopen(t, dir)
	defer m2.Close()
	if l2.NumSegments() != 1 {
		t.Fatalf("later segments kept: %d", l2.NumSegments())
	}
	got := readAll(t, l2, 0)
	if len(got) == 0 || got[len(got)-1].NextOffset() != l2.LogEndOffset() {
		t.Fatalf("served %d batches, LEO %d", len(got), l2.LogEndOffset())
	}
}

func TestCleanStartIndexDamage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(pdir string)
	}{
		{"deleted index", func(pdir string) { os.Remove(segmentPath(pdir, 0, indexSuffix)) }},
		{"deleted timeindex", func(pdir string) { os.Remove(segmentPath(pdir, 0, timeIndexSuffix)) }},
		{"truncated index", func(pdir string) {
			p := segmentPath(pdir, 0, indexSuffix)
			st, _ := os.Stat(p)
			os.Truncate(p, st.Size()-3)
		}},
		{"garbage index", func(pdir string) {
			os.WriteFile(segmentPath(pdir, 0, indexSuffix), []byte{0, 0, 0, 9, 0x7f, 0, 0, 0}, 0o644)
		}},
		{"missing checkpoint", func(pdir string) {
			os.Remove(filepath.Join(filepath.Dir(pdir), recoveryPointFile))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c := newFakeClock()
			m, l := openTest(t, dir, c, smallConfig())
			for i := 0; i < 100; i++ {
				if _, err := l.Append(batch(t, 3, "i", int64(i*10)), 0); err != nil {
					t.Fatal(err)
				}
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			tc.damage(filepath.Join(dir, "orders-3"))
			m2, l2 := reopen(t, dir)
			defer m2.Close()
			if l2.LogEndOffset() != 300 {
				t.Fatalf("LEO %d", l2.LogEndOffset())
			}
			if got := readAll(t, l2, 0); len(got) != 100 {
				t.Fatalf("%d batches", len(got))
			}
			for off := int64(0); off < 300; off += 37 {
				res, err := l2.Read(off, 1, 1<<62, true)
				if err != nil || len(res.Regions) != 1 {
					t.Fatalf("read %d: %v", off, err)
				}
				res.Regions[0].Release()
			}
			if o, _, _, ok := l2.OffsetForTimestamp(500); !ok || o != 150 {
				t.Fatalf("timestamp lookup after rebuild: %d %v", o, ok)
			}
		})
	}
}

// TestSwapCompletion simulates a crash in the middle of a segment
// replacement: a .swap file covering two segments is completed at open.
func TestSwapCompletion(t *testing.T) {
	dir := t.TempDir()
	c := newFakeClock()
	m, l := openTest(t, dir, c, smallConfig())
	for i := 0; i < 100; i++ {
		if _, err := l.Append(batch(t, 3, "w", 1), 0); err != nil {
			t.Fatal(err)
		}
	}
	segs := l.segments()
	if len(segs) < 3 {
		t.Fatalf("%d segments", len(segs))
	}
	pdir := l.dir
	b0, b1, b2 := segs[0].base, segs[1].base, segs[2].base
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// The "cleaned" replacement of segments 0 and 1: their batches in one file.
	d0, _ := os.ReadFile(segmentPath(pdir, b0, logSuffix))
	d1, _ := os.ReadFile(segmentPath(pdir, b1, logSuffix))
	os.WriteFile(segmentPath(pdir, b0, logSuffix+swapSuffix), append(d0, d1...), 0o644)
	os.WriteFile(segmentPath(pdir, b0, logSuffix+cleanedSuffix), []byte("junk"), 0o644)
	m2, l2 := reopen(t, dir)
	defer m2.Close()
	if got := l2.segments(); got[0].base != b0 || got[1].base != b2 {
		t.Fatalf("segments after swap: %d, %d", got[0].base, got[1].base)
	}
	if _, err := os.Stat(segmentPath(pdir, b1, logSuffix)); !os.IsNotExist(err) {
		t.Fatal("replaced segment still on disk")
	}
	if got := readAll(t, l2, 0); len(got) != 100 {
		t.Fatalf("%d batches after swap", len(got))
	}
}

// TestPreallocatedIndexAfterCrash checks that a crash-left index,
// preallocated to segment.index.bytes, loads only its real entries.
func TestPreallocatedIndexAfterCrash(t *testing.T) {
	dir := t.TempDir()
	c := newFakeClock()
	m, l := openTest(t, dir, c, smallConfig())
	for i := 0; i < 10; i++ {
		if _, err := l.Append(batch(t, 3, "p", 1), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil { // index entries reach the file
		t.Fatal(err)
	}
	want := l.active().oi.count()
	path := segmentPath(l.dir, l.active().base, indexSuffix)
	m.crash()
	if st, _ := os.Stat(path); st.Size() != int64(smallConfig().SegmentIndexBytes) {
		t.Fatalf("index not preallocated: %d bytes", st.Size())
	}
	ix, err := openIndex(path, offsetEntrySize, smallConfig().SegmentIndexBytes, false, &openFileCounts.index)
	if err != nil {
		t.Fatal(err)
	}
	if want == 0 || ix.count() != want {
		t.Fatalf("loaded %d entries, want %d", ix.count(), want)
	}
}

// TestLastNonZeroSparse checks that the end of an index's entries is found
// through holes exactly as by reading every byte: entries before a
// preallocated hole, data after a hole, a file that is all hole and one
// whose zeros were written rather than left as a hole.
func TestLastNonZeroSparse(t *testing.T) {
	const size = 10 << 20
	cases := []struct {
		name   string
		writes map[int64][]byte
		dense  bool
		want   int64
	}{
		{"entries then hole", map[int64][]byte{0: {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 5, 0, 0, 0, 0}}, false, 16},
		{"data after hole", map[int64][]byte{0: {1}, 5<<20 + 3: {7}}, false, 5<<20 + 8},
		{"all hole", nil, false, 0},
		{"written zeros", map[int64][]byte{0: {0, 0, 0, 9}}, true, 8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.Create(filepath.Join(t.TempDir(), "00000000000000000000.index"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if tc.dense {
				if _, err := f.Write(make([]byte, size)); err != nil {
					t.Fatal(err)
				}
			} else if err := f.Truncate(size); err != nil {
				t.Fatal(err)
			}
			for off, b := range tc.writes {
				if _, err := f.WriteAt(b, off); err != nil {
					t.Fatal(err)
				}
			}
			if end := dataEnd(f, size); end > size {
				t.Fatalf("dataEnd %d beyond size %d", end, size)
			}
			got, err := lastNonZero(f, size, offsetEntrySize)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("lastNonZero = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestRecoveryDirtyOnlyWithData checks which recovered segments are left to
// be fsynced: an empty one with empty indexes has nothing to make durable;
// one whose stale index entries were dropped, or one holding batches, must
// be fsynced before the recovery point passes them.
func TestRecoveryDirtyOnlyWithData(t *testing.T) {
	c := newFakeClock()
	m, l := openTest(t, t.TempDir(), c, smallConfig())
	defer m.Close()
	cfg := smallConfig()
	keep := func(record.Batch) error { return nil }
	s := l.active()
	if _, err := s.recoverSegment(&cfg, math.MaxInt64, keep); err != nil {
		t.Fatal(err)
	}
	if s.dirty.Load() {
		t.Fatal("recovering an empty segment left it to be fsynced")
	}
	// Stale entries in the indexes of an empty segment: emptying them must
	// be made durable.
	if err := s.oi.appendEntry(make([]byte, offsetEntrySize)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.recoverSegment(&cfg, math.MaxInt64, keep); err != nil {
		t.Fatal(err)
	}
	if !s.dirty.Load() || s.oi.count() != 0 {
		t.Fatalf("recovered empty segment with stale index: dirty %v, %d entries", s.dirty.Load(), s.oi.count())
	}
	if err := s.sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(batch(t, 3, "d", 1), 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.recoverSegment(&cfg, math.MaxInt64, keep); err != nil {
		t.Fatal(err)
	}
	if !s.dirty.Load() || s.nextOffset.Load() != 3 {
		t.Fatalf("recovered segment with data: dirty %v, next offset %d", s.dirty.Load(), s.nextOffset.Load())
	}
}

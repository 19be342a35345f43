package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"sync"
	"sync/atomic"
)

// Entry sizes of Kafka's OffsetIndex and TimeIndex.
const (
	offsetEntrySize = 8  // int32 relative offset, int32 position
	timeEntrySize   = 12 // int64 timestamp, int32 relative offset
)

var errIndexCorrupt = errors.New("log: corrupt index")

// index is a sparse, append-only index file shared by OffsetIndex and
// TimeIndex. Entries live in memory and are written to the file with pwrite;
// the file is preallocated to segment.index.bytes and trimmed to its entries
// on roll and close, as Kafka's AbstractIndex does (Kafka maps it; the bytes
// on disk are the same).
//
// The file is held open only while the segment is active (and while
// recovery or the cleaner rebuilds it); otherwise each write, truncation
// or fsync opens it for that operation and closes it again, as Kafka's
// AbstractIndex closes the descriptor once the file is mapped. Lookups read
// the entries in memory and never touch the file.
type index struct {
	path       string   // guarded by wmu
	f          *os.File // open while held; guarded by wmu
	open       *atomic.Int64
	entrySize  int
	maxEntries int
	mu         sync.RWMutex // guards entries for readers; writers hold the log lock too
	entries    []byte
	wmu        sync.Mutex // serialises file writes with truncation
	written    int        // bytes of entries already written to the file
	scratch    [timeEntrySize]byte
}

// openIndex opens or creates an index file, counting its descriptor in
// open. With create, an existing file is truncated and the new file is
// held open. Otherwise the entries are loaded from the file's current size
// and the file is closed again; a missing file loads as empty (the loader
// rebuilds it).
func openIndex(path string, entrySize, maxBytes int, create bool, open *atomic.Int64) (*index, error) {
	ix := &index{path: path, open: open, entrySize: entrySize, maxEntries: max(maxBytes/entrySize, 1)}
	if create {
		if err := ix.hold(os.O_CREATE | os.O_TRUNC); err != nil {
			return nil, err
		}
		return ix, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return ix, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if n := st.Size(); n > 0 {
		n -= n % int64(entrySize)
		// A preallocated index left by a crash ends in zeros; only the
		// entries before them are loaded, so the allocation is bounded by
		// the real entries, not by segment.index.bytes.
		if n, err = lastNonZero(f, n, int64(entrySize)); err != nil {
			return nil, err
		}
		ix.entries = make([]byte, n)
		if _, err := f.ReadAt(ix.entries, 0); err != nil {
			return nil, err
		}
		ix.written = len(ix.entries)
	}
	return ix, nil
}

// hold opens the file (with extra open flags) and keeps it open until
// release.
func (ix *index) hold(flags int) error {
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	if ix.f != nil {
		return nil
	}
	f, err := os.OpenFile(ix.path, os.O_RDWR|flags, 0o644)
	if err != nil {
		return err
	}
	ix.open.Add(1)
	ix.f = f
	return nil
}

// release closes the file held open, if any.
func (ix *index) release() error {
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	return ix.releaseLocked()
}

func (ix *index) releaseLocked() error {
	if ix.f == nil {
		return nil
	}
	err := ix.f.Close()
	ix.open.Add(-1)
	ix.f = nil
	return err
}

// withFileLocked runs fn on the held file, or on the file opened for the
// call and closed after it; the caller holds wmu.
func (ix *index) withFileLocked(fn func(f *os.File) error) error {
	if ix.f != nil {
		return fn(ix.f)
	}
	f, err := os.OpenFile(ix.path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	ix.open.Add(1)
	err = fn(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	ix.open.Add(-1)
	return err
}

// preallocate sizes the file to the maximum, as Kafka does for the active
// segment's indexes.
func (ix *index) preallocate() error {
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	return ix.withFileLocked(func(f *os.File) error { return f.Truncate(int64(ix.maxEntries * ix.entrySize)) })
}

func (ix *index) count() int { return len(ix.entries) / ix.entrySize }

func (ix *index) full() bool { return ix.count() >= ix.maxEntries }

// appendEntry adds one entry; the caller holds the log lock.
func (ix *index) appendEntry(e []byte) error {
	if ix.full() {
		return fmt.Errorf("%w: %s is full", errIndexCorrupt, ix.path)
	}
	// Entries reach the file at the next sync, trim or close, as the pages
	// of Kafka's memory-mapped index reach the disk when flushed; an index
	// lost in a crash is rebuilt by recovery.
	ix.mu.Lock()
	ix.entries = append(ix.entries, e...)
	ix.mu.Unlock()
	return nil
}

// pending returns the entries not yet in the file and where they go; the
// caller holds wmu.
func (ix *index) pendingLocked() ([]byte, int) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	written := min(ix.written, len(ix.entries))
	return ix.entries[written:len(ix.entries):len(ix.entries)], written
}

// persistLocked writes pending entries to f; the caller holds wmu.
func (ix *index) persistLocked(f *os.File, pending []byte, written int) error {
	if len(pending) == 0 {
		return nil
	}
	if _, err := f.WriteAt(pending, int64(written)); err != nil {
		return err
	}
	ix.mu.Lock()
	ix.written = written + len(pending)
	ix.mu.Unlock()
	return nil
}

// persist writes entries not yet in the file.
func (ix *index) persist() error {
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	pending, written := ix.pendingLocked()
	if len(pending) == 0 {
		return nil
	}
	return ix.withFileLocked(func(f *os.File) error { return ix.persistLocked(f, pending, written) })
}

// truncateEntries keeps the first n entries.
func (ix *index) truncateEntries(n int) {
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	ix.mu.Lock()
	ix.entries = ix.entries[:n*ix.entrySize]
	ix.written = min(ix.written, len(ix.entries))
	ix.mu.Unlock()
}

// trim shrinks the file to its entries (AbstractIndex.trimToValidSize).
func (ix *index) trim() error {
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	return ix.withFileLocked(func(f *os.File) error {
		pending, written := ix.pendingLocked()
		if err := ix.persistLocked(f, pending, written); err != nil {
			return err
		}
		return f.Truncate(int64(written + len(pending)))
	})
}

func (ix *index) sync() error {
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	return ix.withFileLocked(func(f *os.File) error {
		pending, written := ix.pendingLocked()
		if err := ix.persistLocked(f, pending, written); err != nil {
			return err
		}
		return f.Sync()
	})
}

// close trims the file and closes it if held.
func (ix *index) close() error {
	err := ix.trim()
	if cerr := ix.release(); err == nil {
		err = cerr
	}
	return err
}

func (ix *index) reset() error {
	ix.truncateEntries(0)
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	return ix.withFileLocked(func(f *os.File) error { return f.Truncate(0) })
}

// rename points the index at its file's new name (a cleaned segment's
// files after the swap).
func (ix *index) rename(path string) {
	ix.wmu.Lock()
	ix.path = path
	ix.wmu.Unlock()
}

// offsetIndex maps relative offsets to file positions (Kafka's OffsetIndex).
type offsetIndex struct {
	*index
	base int64
}

func (oi *offsetIndex) entry(i int) (int64, int64) {
	p := oi.entries[i*offsetEntrySize:]
	return oi.base + int64(int32(binary.BigEndian.Uint32(p))), int64(int32(binary.BigEndian.Uint32(p[4:])))
}

// lastOffset returns the offset of the last entry, or the base offset.
func (oi *offsetIndex) lastOffset() int64 {
	oi.mu.RLock()
	defer oi.mu.RUnlock()
	if n := oi.count(); n > 0 {
		o, _ := oi.entry(n - 1)
		return o
	}
	return oi.base
}

// lookup returns the largest entry whose offset is <= target, or the base
// offset at position 0 (OffsetIndex.lookup).
func (oi *offsetIndex) lookup(target int64) (offset, pos int64) {
	oi.mu.RLock()
	defer oi.mu.RUnlock()
	n := oi.count()
	i := sort.Search(n, func(i int) bool { o, _ := oi.entry(i); return o > target })
	if i == 0 {
		return oi.base, 0
	}
	return oi.entry(i - 1)
}

func (oi *offsetIndex) add(offset, pos int64) error {
	binary.BigEndian.PutUint32(oi.scratch[0:], uint32(offset-oi.base))
	binary.BigEndian.PutUint32(oi.scratch[4:], uint32(pos))
	return oi.appendEntry(oi.scratch[:offsetEntrySize])
}

// sanityCheck applies OffsetIndex.sanityCheck plus monotonicity and bounds
// against the log file size.
func (oi *offsetIndex) sanityCheck(logSize int64) error {
	oi.mu.RLock()
	defer oi.mu.RUnlock()
	prevO, prevP := int64(-1), int64(-1)
	for i := 0; i < oi.count(); i++ {
		o, p := oi.entry(i)
		if o < oi.base || o <= prevO || p < prevP || p >= logSize {
			return fmt.Errorf("%w: %s entry %d (offset %d, position %d)", errIndexCorrupt, oi.path, i, o, p)
		}
		prevO, prevP = o, p
	}
	return nil
}

// timeIndex maps timestamps to relative offsets (Kafka's TimeIndex).
type timeIndex struct {
	*index
	base int64
}

func (ti *timeIndex) entry(i int) (int64, int64) {
	p := ti.entries[i*timeEntrySize:]
	return int64(binary.BigEndian.Uint64(p)), ti.base + int64(int32(binary.BigEndian.Uint32(p[8:])))
}

// last returns the last entry, or (-1, base) when empty.
func (ti *timeIndex) last() (ts, offset int64) {
	ti.mu.RLock()
	defer ti.mu.RUnlock()
	if n := ti.count(); n > 0 {
		return ti.entry(n - 1)
	}
	return -1, ti.base
}

// lookup returns the entry with the largest timestamp <= target, or
// (-1, base) (TimeIndex.lookup).
func (ti *timeIndex) lookup(target int64) (ts, offset int64) {
	ti.mu.RLock()
	defer ti.mu.RUnlock()
	n := ti.count()
	i := sort.Search(n, func(i int) bool { t, _ := ti.entry(i); return t > target })
	if i == 0 {
		return -1, ti.base
	}
	return ti.entry(i - 1)
}

// maybeAdd appends an entry if ts is larger than the last entry's, as
// TimeIndex.maybeAppend.
func (ti *timeIndex) maybeAdd(ts, offset int64) error {
	if lastTS, _ := ti.last(); ts <= lastTS || ts < 0 {
		return nil
	}
	if ti.full() {
		return nil
	}
	binary.BigEndian.PutUint64(ti.scratch[0:], uint64(ts))
	binary.BigEndian.PutUint32(ti.scratch[8:], uint32(offset-ti.base))
	return ti.appendEntry(ti.scratch[:timeEntrySize])
}

// sanityCheck applies TimeIndex.sanityCheck: timestamps and offsets never
// decrease and offsets are not below the base.
func (ti *timeIndex) sanityCheck() error {
	ti.mu.RLock()
	defer ti.mu.RUnlock()
	prevT, prevO := int64(-1), int64(-1)
	for i := 0; i < ti.count(); i++ {
		t, o := ti.entry(i)
		if o < ti.base || t < prevT || o < prevO {
			return fmt.Errorf("%w: %s entry %d (timestamp %d, offset %d)", errIndexCorrupt, ti.path, i, t, o)
		}
		prevT, prevO = t, o
	}
	return nil
}

// lastNonZero returns the length of the file's prefix up to the end of the
// last entry holding a non-zero byte, reading backwards in chunks from the
// end of the file's data: the preallocated tail of an index is a hole, so
// it is skipped without being read (a 10 MiB index with a few entries costs
// one block read, not 10 MiB).
func lastNonZero(f *os.File, size, entrySize int64) (int64, error) {
	buf := make([]byte, 64<<10)
	for end := dataEnd(f, size); end > 0; {
		start := max(end-int64(len(buf)), 0)
		chunk := buf[:end-start]
		if _, err := f.ReadAt(chunk, start); err != nil {
			return 0, err
		}
		for i := len(chunk) - 1; i >= 0; i-- {
			if chunk[i] != 0 {
				last := start + int64(i) + 1
				return (last + entrySize - 1) / entrySize * entrySize, nil
			}
		}
		end = start
	}
	return 0, nil
}

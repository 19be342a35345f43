package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
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
type index struct {
	path       string
	f          *os.File
	entrySize  int
	maxEntries int
	mu         sync.RWMutex // guards entries for readers; writers hold the log lock too
	entries    []byte
	wmu        sync.Mutex // serialises file writes with truncation
	written    int        // bytes of entries already written to the file
	scratch    [timeEntrySize]byte
}

// openIndex opens or creates an index file. With create, an existing file is
// truncated. The file is preallocated to maxBytes rounded down to whole
// entries; entries are loaded from the file's current size when loading.
func openIndex(path string, entrySize, maxBytes int, create bool) (*index, error) {
	flags := os.O_RDWR | os.O_CREATE
	if create {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return nil, err
	}
	ix := &index{path: path, f: f, entrySize: entrySize, maxEntries: max(maxBytes/entrySize, 1)}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if n := st.Size(); n > 0 {
		n -= n % int64(entrySize)
		// A preallocated index left by a crash ends in zeros; only the
		// entries before them are loaded, so the allocation is bounded by
		// the real entries, not by segment.index.bytes.
		if n, err = lastNonZero(f, n, int64(entrySize)); err != nil {
			f.Close()
			return nil, err
		}
		ix.entries = make([]byte, n)
		if _, err := f.ReadAt(ix.entries, 0); err != nil {
			f.Close()
			return nil, err
		}
		ix.written = len(ix.entries)
	}
	return ix, nil
}

// preallocate sizes the file to the maximum, as Kafka does for the active
// segment's indexes.
func (ix *index) preallocate() error {
	return ix.f.Truncate(int64(ix.maxEntries * ix.entrySize))
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

// persist writes entries not yet in the file.
func (ix *index) persist() error {
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	ix.mu.RLock()
	written := min(ix.written, len(ix.entries))
	pending := ix.entries[written:len(ix.entries):len(ix.entries)]
	ix.mu.RUnlock()
	if len(pending) == 0 {
		return nil
	}
	if _, err := ix.f.WriteAt(pending, int64(written)); err != nil {
		return err
	}
	ix.mu.Lock()
	ix.written = written + len(pending)
	ix.mu.Unlock()
	return nil
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
	if err := ix.persist(); err != nil {
		return err
	}
	return ix.f.Truncate(int64(len(ix.entries)))
}

func (ix *index) sync() error {
	if err := ix.persist(); err != nil {
		return err
	}
	return ix.f.Sync()
}

func (ix *index) close() error {
	err := ix.trim()
	if cerr := ix.f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (ix *index) reset() error {
	ix.truncateEntries(0)
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	return ix.f.Truncate(0)
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

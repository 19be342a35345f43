package log

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cascade-kafka/cascade/broker/record"
)

// File suffixes of a segment, as Kafka's LogFileUtils.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	txnIndexSuffix  = ".txnindex"
	// cleanedSuffix and swapSuffix mark files of a compaction in progress
	// (LogCleaner writes .cleaned, renames to .swap, then replaces the
	// segments); deletedSuffix marks files awaiting deletion.
	cleanedSuffix = ".cleaned"
	swapSuffix    = ".swap"
	deletedSuffix = ".deleted"
)

func segmentPath(dir string, base int64, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, suffix))
}

// segment is one Kafka log segment: the .log file of batches and its
// .index, .timeindex and .txnindex. Appends happen under the owning log's
// lock; readers use the published size and never see a partial batch.
//
// The active segment holds its .log, .index and .timeindex files open. A
// sealed segment holds none while idle: its index entries are in memory,
// and its .log file is opened when read and closed by the handle cache
// (files.go) once idle, so thousands of segments fit a modest descriptor
// limit.
type segment struct {
	dir    string
	base   int64
	suffix string // appended to the file names while a cleaned segment is written

	h      atomic.Pointer[fileHandle] // the open .log file, nil when closed
	hmu    sync.Mutex                 // serialises opening the .log file
	pinned *fileHandle                // held open (active or retired); guarded by hmu
	gone   bool                       // files removed or renamed: never opened by name again; guarded by hmu

	oi  *offsetIndex
	ti  *timeIndex
	txn *txnIndex

	size       atomic.Int64 // bytes of whole batches readable
	nextOffset atomic.Int64 // offset after the last batch
	dirty      atomic.Bool  // written since the last fsync

	tsMu          sync.Mutex
	maxTS         int64 // largest batch max timestamp, -1 when none
	offsetOfMaxTS int64 // last offset of the batch holding it

	// Append state, guarded by the log lock.
	bytesSinceIndex int
	rollingTS       int64 // first batch's max timestamp, -1 unknown
	created         time.Time

	refs atomic.Int32 // the log's reference plus one per live Region
}

func newSegmentStruct(dir string, base int64, created time.Time) *segment {
	s := &segment{dir: dir, base: base, maxTS: -1, offsetOfMaxTS: -1, rollingTS: -1, created: created}
	s.nextOffset.Store(base)
	s.refs.Store(1)
	return s
}

// createSegment makes a new empty active segment with preallocated indexes.
func createSegment(dir string, base int64, cfg *Config, now time.Time) (*segment, error) {
	s := newSegmentStruct(dir, base, now)
	if err := s.createFiles(cfg, ""); err != nil {
		return nil, err
	}
	if err := s.oi.preallocate(); err != nil {
		s.closeFiles()
		return nil, err
	}
	if err := s.ti.preallocate(); err != nil {
		s.closeFiles()
		return nil, err
	}
	return s, nil
}

// openSegment loads an existing segment sealed: its size from the .log
// file's metadata and its index entries into memory, holding no file open.
func openSegment(dir string, base int64, cfg *Config) (*segment, error) {
	s := newSegmentStruct(dir, base, time.Time{})
	st, err := os.Stat(segmentPath(dir, base, logSuffix))
	if err != nil {
		return nil, err
	}
	s.size.Store(st.Size())
	s.created = st.ModTime()
	ix, err := openIndex(segmentPath(dir, base, indexSuffix), offsetEntrySize, cfg.SegmentIndexBytes, false, &openFileCounts.index)
	if err != nil {
		return nil, err
	}
	s.oi = &offsetIndex{index: ix, base: base}
	tx, err := openIndex(segmentPath(dir, base, timeIndexSuffix), timeEntrySize, cfg.SegmentIndexBytes, false, &openFileCounts.timeIndex)
	if err != nil {
		return nil, err
	}
	s.ti = &timeIndex{index: tx, base: base}
	txn, err := openTxnIndex(segmentPath(dir, base, txnIndexSuffix), false)
	if err != nil {
		return nil, err
	}
	s.txn = txn
	return s, nil
}

// createFiles creates the segment's files with extra appended to each name
// (the cleaner's .cleaned files), truncating any left there, and holds them
// open as the active segment's.
func (s *segment) createFiles(cfg *Config, extra string) error {
	s.suffix = extra
	s.hmu.Lock()
	h, err := s.openHandleLocked(os.O_RDWR | os.O_CREATE | os.O_TRUNC)
	if err == nil {
		s.pinned = h
	}
	s.hmu.Unlock()
	if err != nil {
		return err
	}
	ix, err := openIndex(segmentPath(s.dir, s.base, indexSuffix+extra), offsetEntrySize, cfg.SegmentIndexBytes, true, &openFileCounts.index)
	if err != nil {
		s.closeFiles()
		return err
	}
	s.oi = &offsetIndex{index: ix, base: s.base}
	tx, err := openIndex(segmentPath(s.dir, s.base, timeIndexSuffix+extra), timeEntrySize, cfg.SegmentIndexBytes, true, &openFileCounts.timeIndex)
	if err != nil {
		s.closeFiles()
		return err
	}
	s.ti = &timeIndex{index: tx, base: s.base}
	txn, err := openTxnIndex(segmentPath(s.dir, s.base, txnIndexSuffix+extra), true)
	if err != nil {
		s.closeFiles()
		return err
	}
	s.txn = txn
	return nil
}

// renamed points the segment at its files' final names, once a cleaned
// segment's .cleaned files were renamed into place.
func (s *segment) renamed() {
	s.hmu.Lock()
	s.suffix = ""
	s.hmu.Unlock()
	s.oi.rename(segmentPath(s.dir, s.base, indexSuffix))
	s.ti.rename(segmentPath(s.dir, s.base, timeIndexSuffix))
	s.txn.rename(segmentPath(s.dir, s.base, txnIndexSuffix))
}

// activate holds the files of the segment that becomes the log's active
// one open while it is appended to.
func (s *segment) activate() error {
	s.hmu.Lock()
	err := s.pinLocked()
	s.hmu.Unlock()
	if err != nil {
		return err
	}
	if err := s.oi.hold(os.O_CREATE); err != nil {
		return err
	}
	return s.ti.hold(os.O_CREATE)
}

// seal closes the files a sealed segment does not need open: the indexes
// (their entries stay in memory) and the .txnindex, and hands the .log file
// to the handle cache, as Kafka's LazyIndex and AbstractIndex keep at most
// the .log descriptor of an inactive segment.
func (s *segment) seal() error {
	s.hmu.Lock()
	s.unpinLocked()
	s.hmu.Unlock()
	err := s.oi.release()
	if e := s.ti.release(); err == nil {
		err = e
	}
	if e := s.txn.close(); err == nil {
		err = e
	}
	return err
}

// isGone reports whether the segment's files were removed or replaced.
func (s *segment) isGone() bool {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	return s.gone
}

func (s *segment) closeFiles() error {
	var first error
	keep := func(err error) {
		if first == nil && err != nil {
			first = err
		}
	}
	s.closeLogFile()
	if s.oi != nil {
		keep(s.oi.release())
	}
	if s.ti != nil {
		keep(s.ti.release())
	}
	if s.txn != nil {
		keep(s.txn.close())
	}
	return first
}

// tryRef takes a reader's reference unless the segment is already gone.
func (s *segment) tryRef() bool {
	for {
		n := s.refs.Load()
		if n <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// unref drops a reference; the last one closes the files.
func (s *segment) unref() {
	if s.refs.Add(-1) == 0 {
		s.closeFiles()
	}
}

func (s *segment) maxTimestamp() (ts, offset int64) {
	s.tsMu.Lock()
	defer s.tsMu.Unlock()
	return s.maxTS, s.offsetOfMaxTS
}

func (s *segment) observeTimestamp(ts, lastOffset int64) {
	s.tsMu.Lock()
	if ts > s.maxTS {
		s.maxTS, s.offsetOfMaxTS = ts, lastOffset
	}
	s.tsMu.Unlock()
}

// indexBatch updates the indexes for a batch at pos, as LogSegment.append.
func (s *segment) indexBatch(b record.Batch, pos int64, interval int) error {
	s.observeTimestamp(b.MaxTimestamp(), b.LastOffset())
	if s.bytesSinceIndex > interval {
		if err := s.oi.add(b.LastOffset(), pos); err != nil {
			return err
		}
		ts, off := s.maxTimestamp()
		if err := s.ti.maybeAdd(ts, off); err != nil {
			return err
		}
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += len(b)
	return nil
}

// append writes a record set whose offsets are assigned and indexes it.
func (s *segment) append(set []byte, interval int) error {
	pos := s.size.Load()
	if pos == 0 {
		if b, _, err := record.Next(set); err == nil && len(b) > 0 {
			s.rollingTS = b.MaxTimestamp()
		}
	}
	h, err := s.logFile()
	if err != nil {
		return err
	}
	_, err = h.f.WriteAt(set, pos)
	h.release()
	if err != nil {
		return err
	}
	s.dirty.Store(true)
	p := pos
	last := s.nextOffset.Load() - 1
	for rest := set; len(rest) > 0; {
		b, r, err := record.Next(rest)
		if err != nil {
			return err
		}
		if err := s.indexBatch(b, p, interval); err != nil {
			return err
		}
		p += int64(len(b))
		last = b.LastOffset()
		rest = r
	}
	s.size.Store(p)
	s.nextOffset.Store(last + 1)
	return nil
}

// onRoll writes the final time index entry and trims both indexes, as
// LogSegment.onBecomeInactiveSegment.
func (s *segment) onRoll() error {
	ts, off := s.maxTimestamp()
	if off >= 0 {
		if err := s.ti.maybeAdd(ts, off); err != nil {
			return err
		}
	}
	if err := s.oi.trim(); err != nil {
		return err
	}
	return s.ti.trim()
}

// sync fsyncs the segment's files if anything was written since the last
// sync (LogSegment.flush).
func (s *segment) sync() error {
	if !s.dirty.Swap(false) {
		return nil
	}
	if err := s.syncFiles(); err != nil {
		if s.isGone() {
			return nil // deleted meanwhile: nothing of it must survive
		}
		s.dirty.Store(true)
		return err
	}
	return nil
}

func (s *segment) syncFiles() error {
	h, err := s.logFile()
	if err != nil {
		return err
	}
	err = h.f.Sync()
	h.release()
	if err != nil {
		return err
	}
	for _, f := range []func() error{s.oi.sync, s.ti.sync, s.txn.sync} {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// remove unlinks the segment's files; open Regions, and readers holding a
// reference, keep reading until released.
func (s *segment) remove() error {
	s.retire()
	var first error
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		if err := os.Remove(segmentPath(s.dir, s.base, suf)); err != nil && !os.IsNotExist(err) && first == nil {
			first = err
		}
	}
	s.unref()
	return first
}

// scanner walks batch headers of a segment file through a read buffer, so a
// read of many small batches costs few system calls.
//
// The read buffer comes from a pool and goes back on release, so a Read in
// steady state allocates no buffer; the hot path keeps the scanner itself
// on its stack (reset instead of newScanner). Concurrent readers each hold
// their own buffer: nothing mutable is shared.
type scanner struct {
	f      *os.File
	pos    int64 // position of the next batch
	end    int64
	bufp   *[]byte // pooled; nil after release
	buf    []byte
	bufPos int64
	bufLen int
}

var scanBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func newScanner(f *os.File, pos, end int64) *scanner {
	sc := &scanner{}
	sc.reset(f, pos, end)
	return sc
}

// reset points the scanner at [pos, end) of f, taking a pooled buffer if
// it holds none.
func (sc *scanner) reset(f *os.File, pos, end int64) {
	sc.f, sc.pos, sc.end = f, pos, end
	sc.bufPos, sc.bufLen = 0, 0
	if sc.bufp == nil {
		sc.bufp = scanBufs.Get().(*[]byte)
	}
	sc.buf = *sc.bufp
}

// release returns the read buffer to the pool; the scanner and any header
// it returned must not be used afterwards.
func (sc *scanner) release() {
	if sc.bufp != nil {
		scanBufs.Put(sc.bufp)
		sc.bufp, sc.buf = nil, nil
	}
}

// next returns the header of the batch at sc.pos (a view valid until the
// next call) and advances. ok is false at the end; an error means the bytes
// at pos are not a whole batch within end.
func (sc *scanner) next() (hdr record.Batch, pos int64, ok bool, err error) {
	if sc.pos >= sc.end {
		return nil, 0, false, nil
	}
	if sc.end-sc.pos < record.HeaderSize {
		return nil, sc.pos, false, fmt.Errorf("%w: %d trailing bytes at position %d", ErrCorrupt, sc.end-sc.pos, sc.pos)
	}
	off := sc.pos - sc.bufPos
	if sc.pos < sc.bufPos || off+record.HeaderSize > int64(sc.bufLen) {
		n, rerr := sc.f.ReadAt(sc.buf, sc.pos)
		if n < record.HeaderSize {
			if rerr == nil || rerr == io.EOF {
				rerr = io.ErrUnexpectedEOF
			}
			return nil, sc.pos, false, rerr
		}
		sc.bufPos, sc.bufLen, off = sc.pos, n, 0
	}
	hdr = record.Batch(sc.buf[off : off+record.HeaderSize])
	size := int64(hdr.BatchLength()) + record.LogOverhead
	if hdr.BatchLength() < record.HeaderSize-record.LogOverhead || sc.pos+size > sc.end {
		return nil, sc.pos, false, fmt.Errorf("%w: batch length %d at position %d", ErrCorrupt, hdr.BatchLength(), sc.pos)
	}
	pos = sc.pos
	sc.pos += size
	return hdr, pos, true, nil
}

// find returns the position of the first batch whose last offset is >= target,
// starting from the index (LogSegment.translateOffset). found is false when
// the segment holds no such batch.
// The caller provides the scanner (reset here) and releases it.
func (s *segment) find(f *os.File, sc *scanner, target int64, end int64) (pos int64, hdr record.Batch, found bool, err error) {
	_, start := s.oi.lookup(target)
	sc.reset(f, start, end)
	for {
		h, p, ok, err := sc.next()
		if err != nil || !ok {
			return 0, nil, false, err
		}
		if h.LastOffset() >= target {
			return p, h, true, nil
		}
	}
}

// read returns the byte range of whole batches starting with the batch that
// holds offset, none with a last offset at or beyond maxOffset, within
// maxBytes unless minOne allows a larger first batch (LogSegment.read).
// f is the segment's open .log file.
func (s *segment) read(f *os.File, offset int64, maxBytes int, maxOffset int64, minOne bool) (start, length int64, found bool, err error) {
	end := s.size.Load()
	var sc scanner
	defer sc.release()
	pos, h, found, err := s.find(f, &sc, offset, end)
	if err != nil || !found {
		return 0, 0, false, err
	}
	start, stop := pos, pos
	for {
		if h.LastOffset() >= maxOffset {
			break
		}
		size := int64(h.BatchLength()) + record.LogOverhead
		if stop-start+size > int64(maxBytes) && !(stop == start && minOne) {
			break
		}
		stop += size
		var ok bool
		h, _, ok, err = sc.next()
		if err != nil {
			return 0, 0, true, err
		}
		if !ok {
			break
		}
	}
	return start, stop - start, true, nil
}

// readBatch reads the whole batch at pos of f, the segment's .log file,
// whose header is hdr.
func readBatch(f *os.File, pos int64, hdr record.Batch, buf []byte) (record.Batch, error) {
	size := int(hdr.BatchLength()) + record.LogOverhead
	if cap(buf) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	if _, err := f.ReadAt(buf, pos); err != nil {
		return nil, err
	}
	b := record.Batch(buf)
	if err := b.ValidateStored(); err != nil {
		return nil, fmt.Errorf("%w: at position %d: %v", ErrCorrupt, pos, err)
	}
	return b, nil
}

// recordTimestamp is a record's timestamp as Kafka reports it: the batch's
// max timestamp for LogAppendTime batches.
func recordTimestamp(b record.Batch, r record.Record) int64 {
	if b.LogAppendTime() {
		return b.MaxTimestamp()
	}
	return b.BaseTimestamp() + r.TimestampDelta
}

// findByTimestamp returns the first record at or after startOffset with a
// timestamp >= ts, as LogSegment.findOffsetByTimestamp.
func (s *segment) findByTimestamp(ts, startOffset int64, limit int) (offset, timestamp int64, epoch int32, ok bool, err error) {
	_, tsOff := s.ti.lookup(ts)
	_, pos := s.oi.lookup(max(tsOff, startOffset))
	fh, err := s.logFile()
	if errors.Is(err, errSegmentGone) {
		return 0, 0, 0, false, nil // deleted meanwhile: the caller reads the current list
	}
	if err != nil {
		return 0, 0, 0, false, err
	}
	defer fh.release()
	sc := newScanner(fh.f, pos, s.size.Load())
	defer sc.release()
	var buf []byte
	for {
		h, p, more, err := sc.next()
		if err != nil || !more {
			return 0, 0, 0, false, err
		}
		if h.MaxTimestamp() < ts || h.LastOffset() < startOffset {
			continue
		}
		b, err := readBatch(fh.f, p, h, buf)
		if err != nil {
			return 0, 0, 0, false, err
		}
		buf = b
		it, err := b.Records(limit, nil)
		if err != nil {
			return 0, 0, 0, false, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		for r, more := it.Next(); more; r, more = it.Next() {
			o := b.BaseOffset() + int64(r.OffsetDelta)
			if t := recordTimestamp(b, r); t >= ts && o >= startOffset {
				return o, t, b.PartitionLeaderEpoch(), true, nil
			}
		}
		if it.Err() != nil {
			return 0, 0, 0, false, fmt.Errorf("%w: %v", ErrCorrupt, it.Err())
		}
	}
}

// recoverSegment re-reads every batch, validating each, rebuilds the
// indexes and replays producer state (LogSegment.recover). It truncates the
// file at the first invalid batch and returns the number of bytes dropped.
// onBatch sees each valid batch (for producer state and the txn index).
//
// The base offset is outside the CRC, so as LogSegment.ensureOffsetInRange
// each batch must also fit the segment: offsets not below the previous
// batch's end, relative offsets within int32, and below limit (the next
// segment's base offset).
func (s *segment) recoverSegment(cfg *Config, limit int64, onBatch func(b record.Batch) error) (int64, error) {
	s.txn.mu.RLock()
	hadEntries := s.oi.count() > 0 || s.ti.count() > 0 || len(s.txn.entries) > 0
	s.txn.mu.RUnlock()
	// The indexes are rewritten whole: held open (and created if missing)
	// until the segment is sealed or becomes the active one.
	if err := s.oi.hold(os.O_CREATE); err != nil {
		return 0, err
	}
	if err := s.ti.hold(os.O_CREATE); err != nil {
		return 0, err
	}
	fh, err := s.logFile()
	if err != nil {
		return 0, err
	}
	defer fh.release()
	if err := s.oi.reset(); err != nil {
		return 0, err
	}
	if err := s.ti.reset(); err != nil {
		return 0, err
	}
	if err := s.txn.truncateTo(-1); err != nil {
		return 0, err
	}
	s.tsMu.Lock()
	s.maxTS, s.offsetOfMaxTS = -1, -1
	s.tsMu.Unlock()
	s.bytesSinceIndex, s.rollingTS = 0, -1
	st, err := fh.f.Stat()
	if err != nil {
		return 0, err
	}
	fileSize := st.Size()
	// Buffers are sized to the file, so recovering the many nearly empty
	// partitions of a fresh broker (__consumer_offsets) allocates little.
	r := bufio.NewReaderSize(io.NewSectionReader(fh.f, 0, fileSize), int(min(fileSize, 1<<20)))
	var pos int64
	next := s.base
	buf := make([]byte, min(fileSize, 64<<10))
	for {
		b, err := readValidBatch(r, &buf, fileSize-pos, next)
		if err != nil {
			break // torn or corrupt from here on
		}
		if b.LastOffset()-s.base > math.MaxInt32 || b.LastOffset() >= limit {
			break
		}
		if pos == 0 {
			s.rollingTS = b.MaxTimestamp()
		}
		if err := s.indexBatch(b, pos, cfg.IndexIntervalBytes); err != nil {
			return 0, err
		}
		if err := onBatch(b); err != nil {
			return 0, err
		}
		pos += int64(len(b))
		next = b.NextOffset()
	}
	dropped := fileSize - pos
	if dropped > 0 {
		if err := fh.f.Truncate(pos); err != nil {
			return 0, err
		}
	}
	s.size.Store(pos)
	s.nextOffset.Store(next)
	if fileSize > 0 || hadEntries {
		// Batches kept or bytes dropped must reach the disk before the
		// recovery point moves past them, and so must the emptying of
		// indexes that held entries. An empty segment whose indexes were
		// already empty (a fresh partition's, the common case after a
		// crash) leaves nothing to make durable, so it costs no fsync.
		s.dirty.Store(true)
	}
	if err := s.oi.preallocate(); err != nil {
		return 0, err
	}
	return dropped, s.ti.preallocate()
}

// readValidBatch reads one batch from r and validates it as stored data: a
// length within what remains, the CRC, and offsets not below next.
func readValidBatch(r *bufio.Reader, buf *[]byte, remain int64, next int64) (record.Batch, error) {
	if remain < record.HeaderSize {
		return nil, io.ErrUnexpectedEOF
	}
	head, err := r.Peek(record.LogOverhead)
	if err != nil {
		return nil, err
	}
	size := int64(record.Batch(head[:record.LogOverhead]).BatchLength()) + record.LogOverhead
	if size < record.HeaderSize || size > remain {
		return nil, ErrCorrupt
	}
	if int64(cap(*buf)) < size {
		*buf = make([]byte, size)
	}
	b := record.Batch((*buf)[:size])
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	if err := b.ValidateStored(); err != nil {
		return nil, err
	}
	if b.BaseOffset() < next {
		return nil, fmt.Errorf("%w: offset %d below %d", ErrCorrupt, b.BaseOffset(), next)
	}
	return b, nil
}

package log

// This file keeps the descriptors of segment files few: a sealed segment's
// .log file is opened when read and closed again once idle, through a
// process-wide cache of open handles bounded by a share of RLIMIT_NOFILE.
// doc.go says why it is done this way rather than as Kafka does.

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
)

// errSegmentGone is returned when a segment whose files were deleted or
// replaced has no open handle left to read from; readers retry on the
// current segment list.
var errSegmentGone = errors.New("log: segment files removed")

// openFileCounts counts the segment files open in this process, by kind.
var openFileCounts struct {
	log, index, timeIndex, txnIndex atomic.Int64
}

// OpenSegmentFiles returns how many segment files this process holds open
// now: .log files (active segments' and cached sealed ones'), the .index
// and .timeindex files of active segments and of segments being recovered
// or cleaned, and .txnindex files written since their last fsync.
func OpenSegmentFiles() (log, index, timeIndex, txnIndex int64) {
	c := &openFileCounts
	return c.log.Load(), c.index.Load(), c.timeIndex.Load(), c.txnIndex.Load()
}

// CachedSegmentFiles returns how many sealed segments' .log files are open
// in the handle cache and the cache's current bound.
func CachedSegmentFiles() (open, limit int) {
	segFiles.mu.Lock()
	defer segFiles.mu.Unlock()
	return len(segFiles.list), segFiles.capacity()
}

// fileHandle is one open descriptor of a segment's .log file, shared by
// every reader of the segment while it is open.
type fileHandle struct {
	f      *os.File
	seg    *segment
	refs   atomic.Int32 // users; -1 once closed
	used   atomic.Bool  // the CLOCK reference bit: used since the hand passed
	doomed atomic.Bool  // close on the last release (the segment is closed)
	slot   int          // index in segFiles.list, -1 when not listed; guarded by segFiles.mu
}

// tryAcquire takes a use reference unless the handle was closed.
func (h *fileHandle) tryAcquire() bool {
	for {
		n := h.refs.Load()
		if n < 0 {
			return false
		}
		if h.refs.CompareAndSwap(n, n+1) {
			if !h.used.Load() {
				h.used.Store(true)
			}
			return true
		}
	}
}

// release drops a use reference; a handle whose segment is closed is
// closed by its last user.
func (h *fileHandle) release() {
	if h.refs.Add(-1) != 0 {
		return
	}
	if h.doomed.Load() {
		segFiles.closeIdle(h)
	} else if segFiles.over.Load() {
		// The cache was left over its bound with every handle in use;
		// this one is idle now.
		segFiles.shrink()
	}
}

// closeLocked closes the descriptor of a handle whose refs are already -1
// and unlists it; the caller holds segFiles.mu.
func (h *fileHandle) closeLocked(c *fileCache) {
	if h.slot >= 0 {
		c.removeLocked(h)
	}
	h.seg.h.CompareAndSwap(h, nil)
	h.f.Close()
	openFileCounts.log.Add(-1)
}

// fileCache bounds the open .log files of sealed segments. Handles in use
// are never closed; idle ones are closed by a CLOCK sweep (second chance
// for recently used ones) when the cache holds more than its bound. Handles
// of active segments are pinned and not listed.
type fileCache struct {
	mu   sync.Mutex
	list []*fileHandle
	hand int
	over atomic.Bool // the list is over its bound: the next release sweeps
	// limit, when set, replaces the bound derived from RLIMIT_NOFILE.
	limit int
}

// segFiles is shared by every log dir of the process, because the
// descriptor limit is the process's.
var segFiles = fileCache{}

// capacity is the cache's bound: a quarter of the soft RLIMIT_NOFILE, at
// least 16 and at most 8192, so sockets, active segments and the metadata
// log keep the rest. The limit is read at each use, so lowering it with
// setrlimit takes effect at the next open.
func (c *fileCache) capacity() int {
	if c.limit > 0 {
		return c.limit
	}
	return min(max(int(softFileLimit()/4), 16), 8192)
}

// add lists a handle that is open and not pinned, then closes idle handles
// beyond the bound.
func (c *fileCache) add(h *fileHandle) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.slot < 0 && h.refs.Load() >= 0 {
		h.slot = len(c.list)
		c.list = append(c.list, h)
	}
	c.evictLocked()
}

func (c *fileCache) removeLocked(h *fileHandle) {
	last := len(c.list) - 1
	moved := c.list[last]
	c.list[h.slot] = moved
	moved.slot = h.slot
	c.list[last] = nil
	c.list = c.list[:last]
	h.slot = -1
}

// evictLocked sweeps the CLOCK hand over the list, closing idle handles
// until the list fits its bound. Two passes at most: when every handle is
// in use the list stays over its bound until some are released.
func (c *fileCache) evictLocked() {
	limit := c.capacity()
	for steps := 2*len(c.list) + 1; len(c.list) > limit && steps > 0; steps-- {
		if c.hand >= len(c.list) {
			c.hand = 0
		}
		h := c.list[c.hand]
		if h.refs.Load() != 0 || h.used.Swap(false) || !h.refs.CompareAndSwap(0, -1) {
			c.hand++
			continue
		}
		h.closeLocked(c) // moves the last handle to c.hand
	}
	c.over.Store(len(c.list) > limit)
}

// shrink closes idle handles beyond the bound.
func (c *fileCache) shrink() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evictLocked()
}

// unlist takes h out of the list, if it is listed.
func (c *fileCache) unlist(h *fileHandle) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.slot >= 0 {
		c.removeLocked(h)
	}
}

// closeIdle closes h if nobody uses it.
func (c *fileCache) closeIdle(h *fileHandle) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.refs.CompareAndSwap(0, -1) {
		h.closeLocked(c)
	}
}

// logFile returns the segment's open .log handle with a use reference,
// opening the file if no handle is open; the caller releases it.
func (s *segment) logFile() (*fileHandle, error) {
	if h := s.h.Load(); h != nil && h.tryAcquire() {
		return h, nil
	}
	s.hmu.Lock()
	defer s.hmu.Unlock()
	if h := s.h.Load(); h != nil && h.tryAcquire() {
		return h, nil
	}
	if s.gone {
		return nil, errSegmentGone
	}
	h, err := s.openHandleLocked(os.O_RDWR)
	if err != nil {
		return nil, err
	}
	if s.pinned == nil {
		segFiles.add(h)
	}
	return h, nil
}

// openHandleLocked opens the .log file into a new handle holding one use
// reference and publishes it; the caller holds s.hmu.
func (s *segment) openHandleLocked(flags int) (*fileHandle, error) {
	f, err := os.OpenFile(segmentPath(s.dir, s.base, logSuffix+s.suffix), flags, 0o644)
	if err != nil {
		return nil, err
	}
	openFileCounts.log.Add(1)
	h := &fileHandle{f: f, seg: s, slot: -1}
	h.refs.Store(1)
	h.used.Store(true)
	s.h.Store(h)
	return h, nil
}

// pinLocked keeps the .log file open until unpinned (the active segment,
// and a segment whose files are about to be removed while readers may
// still hold it); the caller holds s.hmu.
func (s *segment) pinLocked() error {
	if s.pinned != nil {
		return nil
	}
	if h := s.h.Load(); h != nil && h.tryAcquire() {
		s.pinned = h
		segFiles.unlist(h) // pinned handles do not count against the bound
		return nil
	}
	if s.gone {
		return errSegmentGone
	}
	h, err := s.openHandleLocked(os.O_RDWR)
	if err != nil {
		return err
	}
	s.pinned = h
	return nil
}

// unpinLocked lets the cache close the .log file once idle; the caller
// holds s.hmu.
func (s *segment) unpinLocked() {
	h := s.pinned
	if h == nil {
		return
	}
	s.pinned = nil
	h.release()
	segFiles.add(h)
}

// retire prepares the segment's files for deletion or renaming: the .log
// file is held open so that readers holding the segment keep reading it,
// and nothing is opened by name again. If the file cannot be opened
// (descriptor limit) readers that come later see errSegmentGone and retry.
func (s *segment) retire() {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	s.pinLocked()
	s.gone = true
}

// forget stops the .log file being opened by name again, for a segment of
// a log being closed or deleted: a reader still holding the segment reads
// the handle open now, or gets errSegmentGone.
func (s *segment) forget() {
	s.hmu.Lock()
	s.gone = true
	s.hmu.Unlock()
}

// closeLogFile closes the .log file once its last user releases it; the
// segment is done with (its last reference dropped, or it never went live).
func (s *segment) closeLogFile() {
	s.hmu.Lock()
	s.gone = true
	p := s.pinned
	s.pinned = nil
	h := s.h.Load()
	s.hmu.Unlock()
	if h == nil {
		if p != nil {
			p.release()
		}
		return
	}
	h.doomed.Store(true)
	if p != nil {
		p.release() // closes h when it was the last use
	}
	segFiles.closeIdle(h)
}

package log

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/cascade-kafka/cascade/broker/record"
)

// loadParams carries what the Manager knows about a partition from the
// log-dir checkpoints.
type loadParams struct {
	tp            TopicPartition
	dir           string
	topicID       [16]byte
	hasTopicID    bool
	cfg           Config
	recoveryPoint int64 // -1 when the checkpoint has no entry
	logStart      int64
	clean         bool // the log dir had a clean-shutdown marker
}

// openLog loads a partition directory, recovering it when the last stop was
// not clean, as Kafka's LogLoader.
func openLog(p loadParams, opts *Options, m *Manager) (*Log, error) {
	l := &Log{tp: p.tp, dir: p.dir, topicID: p.topicID, opts: opts, m: m}
	cfg := p.cfg.normalize()
	l.cfg.Store(&cfg)
	l.firstUnstable.Store(-1)
	l.cleanPoint.Store(-1)
	l.lastFlushNs.Store(opts.Clock().UnixNano())
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return nil, err
	}
	if p.hasTopicID {
		if err := writePartitionMetadata(p.dir, p.topicID); err != nil {
			return nil, err
		}
	} else if id, ok, err := readPartitionMetadata(p.dir); err != nil {
		return nil, err
	} else if ok {
		l.topicID = id
	}
	epochs, err := loadEpochCache(filepath.Join(p.dir, leaderEpochFile))
	if err != nil {
		return nil, err
	}
	l.epochs = epochs
	bases, missingIndex, err := scanPartitionDir(p.dir)
	if err != nil {
		return nil, err
	}
	var segs []*segment
	closeAll := func() {
		for _, s := range segs {
			s.closeFiles()
		}
	}
	for _, b := range bases {
		s, err := openSegment(p.dir, b, &cfg)
		if err != nil {
			closeAll()
			return nil, err
		}
		segs = append(segs, s)
	}
	if len(segs) == 0 {
		s, err := createSegment(p.dir, max(p.logStart, 0), &cfg, opts.Clock())
		if err != nil {
			return nil, err
		}
		segs = append(segs, s)
		if err := syncDir(p.dir); err != nil {
			closeAll()
			return nil, err
		}
	}
	// Decide where recovery starts: the segment holding the recovery point
	// after an unclean stop, or the first segment whose index is missing or
	// fails the sanity check.
	recoverFrom := len(segs)
	if !p.clean {
		rp := p.recoveryPoint
		if rp < 0 {
			rp = 0
		}
		recoverFrom = floorSegment(segs, rp)
		if rp < segs[0].base {
			recoverFrom = 0
		}
	}
	for i, s := range segs {
		if i >= recoverFrom {
			break
		}
		if missingIndex[s.base] || s.oi.sanityCheck(s.size.Load()) != nil || s.ti.sanityCheck() != nil {
			opts.Logger.Warn("rebuilding segment indexes", "partition", p.tp.String(), "segment", s.base)
			recoverFrom = i
			break
		}
	}
	l.segs.Store(&segs)
	// Producer state up to the recovery start (or the end on a clean start).
	bound := int64(-1)
	if recoverFrom < len(segs) {
		bound = segs[recoverFrom].base
	}
	if err := l.loadProducerState(bound); err != nil {
		closeAll()
		return nil, err
	}
	if recoverFrom < len(segs) {
		if err := l.recoverFrom(recoverFrom); err != nil {
			closeAll()
			return nil, err
		}
	} else if err := l.loadTail(); err != nil {
		// The active segment's tail did not scan cleanly: recover it.
		opts.Logger.Warn("recovering active segment", "partition", p.tp.String(), "err", err)
		last := len(segs) - 1
		if err := l.loadProducerState(segs[last].base); err != nil {
			closeAll()
			return nil, err
		}
		if err := l.recoverFrom(last); err != nil {
			closeAll()
			return nil, err
		}
	}
	segs = l.segments()
	leo := segs[len(segs)-1].nextOffset.Load()
	l.leo.Store(leo)
	l.logStart.Store(max(p.logStart, segs[0].base))
	if l.logStart.Load() > leo {
		l.logStart.Store(leo)
	}
	if p.clean && recoverFrom == len(segs) && p.recoveryPoint >= 0 {
		l.recoveryPoint.Store(min(p.recoveryPoint, leo))
	} else {
		l.recoveryPoint.Store(leo)
	}
	if err := l.epochs.truncateFromEnd(leo); err != nil {
		closeAll()
		return nil, err
	}
	if err := l.deleteSnapshotsOutside(segs[0].base, leo); err != nil {
		closeAll()
		return nil, err
	}
	// The active segment holds its files open and gets preallocated
	// indexes again.
	act := segs[len(segs)-1]
	if err := act.activate(); err != nil {
		closeAll()
		return nil, err
	}
	if err := act.oi.preallocate(); err != nil {
		closeAll()
		return nil, err
	}
	if err := act.ti.preallocate(); err != nil {
		closeAll()
		return nil, err
	}
	l.publishUnstable()
	return l, nil
}

// scanPartitionDir lists segment base offsets and cleans up leftovers of
// interrupted operations: temporary checkpoint files, .cleaned and .deleted
// files are removed, .swap files complete their swap (LogLoader.removeTempFilesAndCollectSwapFiles).
func scanPartitionDir(dir string) (bases []int64, missingIndex map[int64]bool, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, ".tmp"), strings.HasSuffix(name, cleanedSuffix), strings.HasSuffix(name, deletedSuffix):
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return nil, nil, err
			}
		}
	}
	swapped, err := completeSwaps(dir)
	if err != nil {
		return nil, nil, err
	}
	ents, err = os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	have := map[string]bool{}
	for _, e := range ents {
		have[e.Name()] = true
	}
	missingIndex = map[int64]bool{}
	for _, b := range swapped {
		missingIndex[b] = true // a swapped-in segment is recovered, as LogLoader does
	}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, logSuffix) {
			continue
		}
		b, err := strconv.ParseInt(strings.TrimSuffix(name, logSuffix), 10, 64)
		if err != nil || b < 0 {
			continue
		}
		bases = append(bases, b)
		stem := strings.TrimSuffix(name, logSuffix)
		if !have[stem+indexSuffix] || !have[stem+timeIndexSuffix] {
			missingIndex[b] = true
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, missingIndex, nil
}

// loadTail establishes the active segment's end offset, max timestamp and
// index position by scanning from its last index entry, and takes each
// inactive segment's max timestamp from its time index (clean start).
func (l *Log) loadTail() error {
	segs := l.segments()
	for i, s := range segs {
		ts, off := s.ti.last()
		if ts >= 0 {
			s.observeTimestamp(ts, off)
		}
		if i+1 < len(segs) {
			s.nextOffset.Store(segs[i+1].base)
		}
	}
	// As LogSegment.append counts it, the bytes since the last index entry
	// start with the indexed batch itself.
	s := segs[len(segs)-1]
	lastOff, pos := s.oi.lookup(1<<62 - 1)
	next := s.base
	if pos > 0 {
		next = lastOff + 1
	}
	s.bytesSinceIndex = 0
	fh, err := s.logFile()
	if err != nil {
		return err
	}
	defer fh.release()
	sc := newScanner(fh.f, pos, s.size.Load())
	defer sc.release()
	for {
		h, p, ok, err := sc.next()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if p == 0 {
			s.rollingTS = h.MaxTimestamp()
		}
		s.observeTimestamp(h.MaxTimestamp(), h.LastOffset())
		s.bytesSinceIndex += int(h.BatchLength()) + record.LogOverhead
		next = h.NextOffset()
	}
	if s.size.Load() > 0 && s.rollingTS < 0 && pos > 0 {
		// The first batch precedes the last index entry: read its header.
		first := newScanner(fh.f, 0, s.size.Load())
		if h, _, ok, err := first.next(); err == nil && ok {
			s.rollingTS = h.MaxTimestamp()
		}
		first.release()
	}
	s.nextOffset.Store(next)
	return nil
}

// loadProducerState rebuilds producer state up to bound (the end of the log
// when bound < 0) from the latest snapshot at or below it plus the batch
// headers after the snapshot (ProducerStateManager.truncateAndReload and
// UnifiedLog.rebuildProducerState).
func (l *Log) loadProducerState(bound int64) error {
	segs := l.segments()
	snaps, err := listSnapshots(l.dir)
	if err != nil {
		return err
	}
	l.ps = newProducerState()
	from := segs[0].base
	for i := len(snaps) - 1; i >= 0; i-- {
		if bound >= 0 && snaps[i] > bound {
			continue
		}
		data, err := os.ReadFile(snapshotPath(l.dir, snaps[i]))
		if err != nil {
			return err
		}
		ps, err := decodeSnapshot(data)
		if err != nil {
			l.opts.Logger.Warn("discarding producer snapshot", "partition", l.tp.String(), "offset", snaps[i], "err", err)
			if err := os.Remove(snapshotPath(l.dir, snaps[i])); err != nil {
				return err
			}
			continue
		}
		l.ps, from = ps, snaps[i]
		break
	}
	for i, s := range segs {
		if bound >= 0 && s.base >= bound {
			break
		}
		if i+1 < len(segs) && segs[i+1].base <= from {
			continue // wholly below the snapshot: nothing to read or open
		}
		if err := l.replaySegment(s, from, bound); err != nil {
			return err
		}
	}
	return nil
}

// replaySegment applies the batches of s in [from, bound) to producer state
// without validation, as when Kafka rebuilds state from the log.
func (l *Log) replaySegment(s *segment, from, bound int64) error {
	end := s.size.Load()
	if end == 0 {
		return nil
	}
	_, pos := s.oi.lookup(from)
	fh, err := s.logFile()
	if err != nil {
		return err
	}
	defer fh.release()
	sc := newScanner(fh.f, pos, end)
	defer sc.release()
	var buf []byte
	for {
		h, p, ok, err := sc.next()
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		if h.LastOffset() < from || h.ProducerID() < 0 {
			continue
		}
		if bound >= 0 && h.BaseOffset() >= bound {
			return nil
		}
		b := record.Batch(append(buf[:0], h...))
		if h.Control() {
			if b, err = readBatch(fh.f, p, h, buf); err != nil {
				return err
			}
		}
		buf = b
		l.ps.reset()
		if _, _, err := l.ps.stage(b, false); err != nil {
			return err
		}
		l.ps.commit()
		l.ps.reset()
	}
}

// recoverFrom recovers segments from index i on (LogLoader.recoverLog):
// each is re-read and validated with its indexes rebuilt; at the first bad
// batch the segment is truncated and all later segments are deleted.
func (l *Log) recoverFrom(i int) error {
	segs := l.segments()
	cfg := l.cfg.Load()
	for ; i < len(segs); i++ {
		s := segs[i]
		limit := int64(math.MaxInt64)
		if i+1 < len(segs) {
			limit = segs[i+1].base
		}
		dropped, err := s.recoverSegment(cfg, limit, func(b record.Batch) error {
			l.ps.reset()
			if _, _, err := l.ps.stage(b, false); err != nil {
				return err
			}
			l.ps.commit()
			for _, t := range l.ps.completed {
				if t.aborted {
					if err := s.txn.add(AbortedTxn{ProducerID: t.pid, FirstOffset: t.firstOffset, LastOffset: t.lastOffset, LastStable: l.ps.lastStableFor(t)}); err != nil {
						return err
					}
				}
			}
			l.ps.reset()
			return nil
		})
		if err != nil {
			return err
		}
		if err := s.sync(); err != nil {
			return err
		}
		if dropped > 0 || (i+1 < len(segs) && segs[i+1].base < s.nextOffset.Load()) {
			if dropped > 0 {
				l.opts.Logger.Warn("truncated corrupt or torn log tail", "partition", l.tp.String(),
					"segment", s.base, "bytes", dropped)
			}
			for _, later := range segs[i+1:] {
				if err := later.remove(); err != nil {
					return err
				}
			}
			segs = segs[:i+1]
			l.segs.Store(&segs)
			if err := syncDir(l.dir); err != nil {
				return err
			}
			break
		}
		if i+1 < len(segs) {
			if err := s.onRoll(); err != nil {
				return err
			}
			if err := s.seal(); err != nil {
				return err
			}
		}
	}
	return nil
}

// deleteSnapshotsOutside removes producer snapshots below the first segment
// or above the log end (ProducerStateManager.truncateAndReload).
func (l *Log) deleteSnapshotsOutside(lo, hi int64) error {
	snaps, err := listSnapshots(l.dir)
	if err != nil {
		return err
	}
	for _, o := range snaps {
		if o < lo || o > hi {
			if err := os.Remove(snapshotPath(l.dir, o)); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
	}
	return nil
}

// Truncate removes every batch at or after offset, as UnifiedLog.truncateTo
// for a follower whose log diverged from its leader's, rounding down to a
// batch boundary as LogSegment.truncateTo does. The segments after it, the
// indexes, the transaction index, producer state (rebuilt from the latest
// snapshot at or below the truncated segment), producer snapshots beyond
// the new end, leader epochs starting at or after it, the recovery point,
// the cleaner checkpoint and the recorded high watermark follow; the log
// start offset moves down to the new end if it was beyond it. An offset
// below the first segment's base empties the log and starts it there
// (TruncateFullyAndStartAt), as Kafka does; one at or past the log end cuts
// only the leader epochs starting at or after the log end, as
// UnifiedLog.truncateTo.
func (l *Log) Truncate(offset int64) error { return l.truncate(offset, false) }

// truncate is Truncate, or TruncateFullyAndStartAt when full. As Kafka's
// LogManager.truncateTo, the log dir's checkpoints are written before it
// returns: a recovery point left beyond the new end would let recovery after
// a crash skip the unflushed appends that follow the truncation.
func (l *Log) truncate(offset int64, full bool) error {
	if offset < 0 {
		return fmt.Errorf("%w: truncate to %d", ErrOffsetOutOfRange, offset)
	}
	cut, err := l.truncateOnce(offset, full)
	if err != nil || !cut || l.m == nil {
		return err
	}
	return l.m.WriteCheckpoints()
}

func (l *Log) truncateOnce(offset int64, full bool) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.Err(); err != nil {
		return false, err
	}
	if !full && offset >= l.leo.Load() {
		// As Kafka's UnifiedLog.truncateTo: the epoch cache is cut at
		// the log end all the same, for a conflicting entry there (this
		// replica led an epoch and appended nothing before another
		// leader was elected).
		if err := l.epochs.truncateFromEnd(l.leo.Load()); err != nil {
			return false, l.fail(err)
		}
		return false, nil
	}
	var err error
	if full || offset < l.segments()[0].base {
		err = l.truncateFullyLocked(offset)
	} else {
		err = l.truncateLocked(offset)
	}
	if err != nil {
		return false, l.fail(err)
	}
	if leo := l.leo.Load(); l.logStart.Load() > leo {
		l.logStart.Store(leo)
	}
	return true, nil
}

func (l *Log) truncateLocked(offset int64) error {
	l.truncatedForCleaner(offset)
	segs := l.segments()
	i := floorSegment(segs, offset)
	for _, s := range segs[i+1:] {
		if err := s.remove(); err != nil {
			return err
		}
	}
	kept := append([]*segment(nil), segs[:i+1]...)
	l.segs.Store(&kept)
	s := kept[i]
	// The segment truncated into becomes the active one.
	if err := s.activate(); err != nil {
		return err
	}
	fh, err := s.logFile()
	if err != nil {
		return err
	}
	defer fh.release()
	var sc scanner
	pos, _, found, err := s.find(fh.f, &sc, offset, s.size.Load())
	sc.release()
	if err != nil {
		return err
	}
	if found {
		if err := fh.f.Truncate(pos); err != nil {
			return err
		}
		s.size.Store(pos)
		s.dirty.Store(true) // the truncation is fsynced even when nothing is left
	}
	// Rebuild the truncated segment's indexes and producer state from the
	// latest snapshot at or below the segment.
	if err := l.loadProducerState(s.base); err != nil {
		return err
	}
	if err := l.recoverFrom(i); err != nil {
		return err
	}
	kept = l.segments()
	leo := kept[len(kept)-1].nextOffset.Load()
	l.leo.Store(leo)
	if l.recoveryPoint.Load() > leo {
		l.recoveryPoint.Store(leo)
	}
	if l.hwTracked && l.hw.Load() > leo {
		l.hw.Store(leo)
	}
	if err := l.epochs.truncateFromEnd(leo); err != nil {
		return err
	}
	if err := l.deleteSnapshotsOutside(kept[0].base, leo); err != nil {
		return err
	}
	l.publishUnstable()
	return syncDir(l.dir)
}

// close flushes the log, trims the active segment's indexes, writes a
// producer snapshot at the log end and releases the files (used by the
// Manager on shutdown and deletion).
func (l *Log) close(flush bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Swap(true) {
		return nil
	}
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	segs := l.segments()
	if flush && l.err.Load() == nil {
		// Trim the active segment's indexes first so the fsync covers them.
		act := segs[len(segs)-1]
		keep(act.onRoll())
		act.dirty.Store(true)
		for _, s := range segs {
			keep(s.sync())
		}
		if first == nil {
			l.recoveryPoint.Store(l.leo.Load())
			keep(writeFileAtomic(snapshotPath(l.dir, l.leo.Load()), l.ps.encodeSnapshot()))
		}
	}
	for _, s := range segs {
		// The directory may be renamed for deletion next; readers still
		// holding a segment must not reopen a file by its old name.
		s.forget()
		s.unref()
	}
	return first
}

// completeSwaps finishes a segment replacement interrupted by a crash, as
// LogLoader does for .swap files: the segments whose base offsets fall in a
// swapped segment's offset range are deleted, then the .swap files are
// renamed to their final names.
func completeSwaps(dir string) ([]int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var logs []int64
	var swaps []int64
	for _, e := range ents {
		name := e.Name()
		if b, err := strconv.ParseInt(strings.TrimSuffix(name, logSuffix+swapSuffix), 10, 64); err == nil && strings.HasSuffix(name, logSuffix+swapSuffix) {
			swaps = append(swaps, b)
		} else if b, err := strconv.ParseInt(strings.TrimSuffix(name, logSuffix), 10, 64); err == nil && strings.HasSuffix(name, logSuffix) {
			logs = append(logs, b)
		}
	}
	for _, base := range swaps {
		next, err := nextOffsetOfFile(segmentPath(dir, base, logSuffix+swapSuffix), base)
		if err != nil {
			return nil, err
		}
		for _, b := range logs {
			if b > base && b < next {
				for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
					if err := os.Remove(segmentPath(dir, b, suf)); err != nil && !os.IsNotExist(err) {
						return nil, err
					}
				}
			}
		}
	}
	for _, e := range ents {
		if name := e.Name(); strings.HasSuffix(name, swapSuffix) {
			if err := os.Rename(filepath.Join(dir, name), filepath.Join(dir, strings.TrimSuffix(name, swapSuffix))); err != nil {
				return nil, err
			}
		}
	}
	if len(swaps) > 0 {
		return swaps, syncDir(dir)
	}
	return nil, nil
}

// nextOffsetOfFile returns the offset after the last whole batch of a
// segment file, or base when it has none.
func nextOffsetOfFile(path string, base int64) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	next := base
	sc := newScanner(f, 0, st.Size())
	for {
		h, _, ok, err := sc.next()
		if err != nil || !ok {
			return next, nil
		}
		next = h.NextOffset()
	}
}

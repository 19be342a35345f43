package log

// This file is the log cleaner's scheduling half, as Kafka's LogCleaner
// (the cleaner thread) and LogCleanerManager (which log to clean, the
// cleanable range, the cleaner-offset-checkpoint). cleaner_pass.go cleans
// one log; cleaner_swap.go swaps cleaned segments in.

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/cascade-kafka/cascade/broker/record"
)

// cleanerCheckpointFile is LogCleanerManager.OFFSET_CHECKPOINT_FILE: per
// partition, the first dirty offset, in the OffsetCheckpointFile format.
const cleanerCheckpointFile = "cleaner-offset-checkpoint"

// errCleaningAborted ends a pass whose log changed underneath it
// (truncation, retention, deletion, shutdown), as LogCleaningAbortedException.
var errCleaningAborted = errors.New("log: cleaning aborted")

// CleanStats describes one cleaning pass (Kafka's CleanerStats).
type CleanStats struct {
	Partition       TopicPartition
	FirstDirty      int64 // first dirty offset when the pass started
	EndOffset       int64 // first offset not cleaned: the next pass's first dirty offset
	Segments        int   // source segments rewritten
	Groups          int   // cleaned segments swapped in
	BytesRead       int64 // bytes of the source segments
	BytesWritten    int64 // bytes of the cleaned segments
	RecordsRead     int64
	RecordsRetained int64
	MapKeys         int // keys in the dedupe map
	Duration        time.Duration
}

// cleanerState is the Manager's LogCleanerManager: one pass at a time per
// log dir and the partitions that failed to clean.
type cleanerState struct {
	mu          sync.Mutex // held for a whole pass
	uncleanable map[TopicPartition]bool
	// hook, when set by tests, runs at named steps of a swap; an error
	// stops the swap there, as a crash would.
	hook func(step string) error
}

// logToClean is a candidate log with its cleanable range (LogToClean).
type logToClean struct {
	l              *Log
	firstDirty     int64
	upper          int64 // base of the first uncleanable segment
	cleanBytes     int64
	cleanableBytes int64
	needNow        bool // max.compaction.lag.ms has passed for a dirty segment
	forceCkpt      bool // the checkpointed offset was invalid and was reset
}

// ratio is LogToClean.cleanableRatio.
func (t logToClean) ratio() float64 {
	total := t.cleanBytes + t.cleanableBytes
	if total == 0 {
		return 0
	}
	return float64(t.cleanableBytes) / float64(total)
}

// cleanableRange computes where cleaning of l may start and stop
// (LogCleanerManager.cleanableOffsets and calculateCleanableBytes). The
// cleaner never passes the active segment, the last stable offset (the
// first offset of the earliest open transaction; on one node the high
// watermark is the log end), or the first dirty segment holding a record
// newer than min.compaction.lag.ms. The stop is rounded down to a segment
// base, so only whole segments are cleaned.
func (l *Log) cleanableRange(now time.Time) logToClean {
	cfg := l.cfg.Load()
	segs := l.segments()
	t := logToClean{l: l}
	logStart, leo := l.logStart.Load(), l.leo.Load()
	cp := l.cleanPoint.Load()
	switch {
	case cp < 0:
		t.firstDirty = logStart
	case cp < logStart:
		// Retention or DeleteRecords moved the start past the checkpoint.
		t.firstDirty, t.forceCkpt = logStart, true
	case cp > leo:
		l.opts.Logger.Warn("cleaner checkpoint beyond the log end; cleaning from the log start",
			"partition", l.tp.String(), "checkpoint", cp, "logEnd", leo)
		t.firstDirty, t.forceCkpt = logStart, true
	default:
		t.firstDirty = cp
	}
	active := segs[len(segs)-1]
	unc := active.base
	if o, ok := l.FirstUnstableOffset(); ok {
		unc = min(unc, o)
	}
	nowMs := now.UnixMilli()
	first := floorSegment(segs, t.firstDirty)
	if lag := cfg.MinCompactionLagMs.Milliseconds(); lag > 0 {
		for _, s := range segs[first : len(segs)-1] {
			if ts, _ := s.maxTimestamp(); ts > nowMs-lag {
				unc = min(unc, s.base)
				break
			}
		}
	}
	unc = max(unc, t.firstDirty)
	t.upper = segs[floorSegment(segs, unc)].base
	for i, s := range segs {
		next := int64(1<<63 - 1)
		if i+1 < len(segs) {
			next = segs[i+1].base
		}
		if s.base < t.firstDirty && next > logStart {
			t.cleanBytes += s.size.Load()
		}
		if s.base < t.upper && next > min(t.firstDirty, t.upper) {
			t.cleanableBytes += s.size.Load()
		}
	}
	// LogCleanerManager.maxCompactionDelay: the first batch timestamp of
	// the dirty non-active segments against max.compaction.lag.ms.
	if until := nowMs - cfg.MaxCompactionLagMs.Milliseconds(); cfg.MaxCompactionLagMs >= 0 && until > 0 {
		for _, s := range segs[first : len(segs)-1] {
			if ts := s.firstBatchTimestamp(); ts > 0 && ts < until {
				t.needNow = true
				break
			}
		}
	}
	return t
}

// firstBatchTimestamp is LogSegment.getFirstBatchTimestamp: the max
// timestamp of the segment's first batch, or -1 when it has none. It reads
// the header from the file, so it holds after a restart too.
func (s *segment) firstBatchTimestamp() int64 {
	if s.size.Load() < record.HeaderSize || !s.tryRef() {
		return -1
	}
	defer s.unref()
	fh, err := s.logFile()
	if err != nil {
		return -1
	}
	defer fh.release()
	var h [record.HeaderSize]byte
	if _, err := fh.f.ReadAt(h[:], 0); err != nil {
		return -1
	}
	return record.Batch(h[:]).MaxTimestamp()
}

// truncatedForCleaner is called with the log lock held before a
// truncation: a pass in progress is aborted at its swap and the checkpoint
// never points past the new end (LogCleanerManager.maybeTruncateCheckpoint).
func (l *Log) truncatedForCleaner(offset int64) {
	l.cleanGen.Add(1)
	for {
		cp := l.cleanPoint.Load()
		if cp <= offset || l.cleanPoint.CompareAndSwap(cp, offset) {
			return
		}
	}
}

// CleanerCheckpoint returns the log's first dirty offset as recorded in
// cleaner-offset-checkpoint, or -1 if it was never cleaned.
func (l *Log) CleanerCheckpoint() int64 { return l.cleanPoint.Load() }

// grabFilthiest picks the compacted log with the highest cleanable ratio
// above its min.cleanable.dirty.ratio, or any with a dirty segment older
// than max.compaction.lag.ms (LogCleanerManager.grabFilthiestCompactedLog).
func (m *Manager) grabFilthiest(now time.Time) (logToClean, bool) {
	var best logToClean
	found, forced := false, false
	for _, l := range m.Logs() {
		cfg := l.cfg.Load()
		if cfg.CleanupPolicy&PolicyCompact == 0 || m.cleaner.uncleanable[l.tp] || l.Err() != nil {
			continue
		}
		t := l.cleanableRange(now)
		if t.forceCkpt {
			l.cleanPoint.Store(t.firstDirty)
			forced = true
		}
		if t.cleanBytes+t.cleanableBytes == 0 {
			continue
		}
		if !(t.needNow && t.cleanableBytes > 0) && !(t.ratio() > cfg.MinCleanableDirtyRatio) {
			continue
		}
		if !found || t.ratio() > best.ratio() {
			best, found = t, true
		}
	}
	if forced {
		if err := m.writeCleanerCheckpoint(); err != nil {
			m.opts.Logger.Error("writing cleaner checkpoint", "err", err)
		}
	}
	return best, found
}

// CleanOnce runs one iteration of Kafka's cleaner thread on this log dir:
// it picks the filthiest compacted log, cleans it from its first dirty
// offset as far as the dedupe buffer allows, and records the new first
// dirty offset in cleaner-offset-checkpoint. It reports whether a log was
// cleaned. The background cleaner calls it; tests call it directly with
// the Manager's injected clock.
func (m *Manager) CleanOnce() (CleanStats, bool, error) {
	m.cleaner.mu.Lock()
	defer m.cleaner.mu.Unlock()
	now := m.opts.Clock()
	t, ok := m.grabFilthiest(now)
	if !ok {
		return CleanStats{}, false, nil
	}
	slots := int(float64(m.opts.CleanerDedupeBufferSize/offsetMapEntryBytes) * m.opts.CleanerIOBufferLoadFactor)
	gen := t.l.cleanGen.Load()
	stats, err := t.l.clean(cleanParams{firstDirty: t.firstDirty, upper: t.upper, now: now,
		stop: m.stop, slots: max(slots, 1), hook: m.cleaner.hook})
	switch {
	case err == nil:
	case errors.Is(err, errCleaningAborted) || (!errors.Is(err, ErrStorage) && (t.l.cleanGen.Load() != gen || t.l.closed.Load())):
		// A truncation or deletion under the pass can also surface as a
		// short read; either way the pass is abandoned, not the log.
		m.opts.Logger.Info("log cleaning aborted", "partition", t.l.tp.String())
		return stats, false, nil
	case errors.Is(err, ErrStorage):
		return stats, false, err
	default:
		// As LogCleaner.tryCleanFilthiestLog: an unexpected error marks
		// the partition uncleanable instead of retrying it forever.
		if m.cleaner.uncleanable == nil {
			m.cleaner.uncleanable = map[TopicPartition]bool{}
		}
		m.cleaner.uncleanable[t.l.tp] = true
		m.opts.Logger.Error("log cleaning failed; partition marked uncleanable", "partition", t.l.tp.String(), "err", err)
		return stats, false, fmt.Errorf("cleaning %s: %w", t.l.tp, err)
	}
	t.l.cleanPoint.Store(stats.EndOffset)
	if err := m.writeCleanerCheckpoint(); err != nil {
		return stats, true, err
	}
	m.opts.Logger.Debug("log cleaned", "partition", t.l.tp.String(), "firstDirty", stats.FirstDirty,
		"endOffset", stats.EndOffset, "bytesRead", stats.BytesRead, "bytesWritten", stats.BytesWritten,
		"duration", stats.Duration)
	return stats, true, nil
}

// UncleanablePartitions lists the partitions the cleaner gave up on.
func (m *Manager) UncleanablePartitions() []TopicPartition {
	m.cleaner.mu.Lock()
	defer m.cleaner.mu.Unlock()
	var out []TopicPartition
	for tp := range m.cleaner.uncleanable {
		out = append(out, tp)
	}
	return out
}

// cleanerLoop is the background cleaner thread of the log dir
// (LogCleaner.CleanerThread): clean while there is work, else sleep for
// log.cleaner.backoff.ms.
func (m *Manager) cleanerLoop() {
	defer m.wg.Done()
	for {
		_, cleaned, err := m.CleanOnce()
		if err != nil {
			m.opts.Logger.Error("log cleaner", "err", err)
		}
		if cleaned {
			select {
			case <-m.stop:
				return
			default:
				continue
			}
		}
		t := time.NewTimer(m.opts.CleanerBackoff)
		select {
		case <-m.stop:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// startCleaner loads cleaner-offset-checkpoint into the logs and starts
// the background cleaner unless it is disabled.
func (m *Manager) startCleaner() {
	cps, err := readOffsetCheckpoint(filepath.Join(m.dir, cleanerCheckpointFile))
	if err != nil {
		m.opts.Logger.Warn("ignoring unreadable cleaner checkpoint", "err", err)
		cps = nil
	}
	for tp, o := range cps {
		if l, ok := m.logs[tp]; ok {
			l.cleanPoint.Store(o)
		}
	}
	if m.opts.CleanerBackoff > 0 {
		m.wg.Add(1)
		go m.cleanerLoop()
	}
}

// forgetCleaner drops a deleted partition from the cleaner's state and
// checkpoint.
func (m *Manager) forgetCleaner(tp TopicPartition) error {
	m.cleaner.mu.Lock()
	delete(m.cleaner.uncleanable, tp)
	m.cleaner.mu.Unlock()
	return m.writeCleanerCheckpoint()
}

// writeCleanerCheckpoint writes every log's first dirty offset.
func (m *Manager) writeCleanerCheckpoint() error {
	m.ckptMu.Lock()
	defer m.ckptMu.Unlock()
	cps := map[TopicPartition]int64{}
	for _, l := range m.Logs() {
		if o := l.cleanPoint.Load(); o >= 0 {
			cps[l.tp] = o
		}
	}
	if err := writeOffsetCheckpoint(filepath.Join(m.dir, cleanerCheckpointFile), cps); err != nil {
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	return nil
}

package log

import (
	"sync"
	"time"
)

// Flush fsyncs every segment written since the last flush and advances the
// recovery point to the log end offset read before the fsync
// (UnifiedLog.flush). Concurrent callers share one fsync where possible.
func (l *Log) Flush() error { return l.flushTo(l.leo.Load()) }

// flushTo makes offsets below target durable. Waiters whose target an
// earlier fsync already covered return at once: group commit per log.
func (l *Log) flushTo(target int64) error {
	if err := l.Err(); err != nil {
		return err
	}
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	if l.recoveryPoint.Load() >= target {
		return nil
	}
	leo := l.leo.Load()
	msgs, dirty := l.unflushedMsgs.Load(), l.dirtyBytes.Load()
	l.firstDirtyNs.Store(0)
	for _, s := range l.segments() {
		// A segment deleted meanwhile by retention needs no fsync.
		if !s.tryRef() {
			continue
		}
		err := s.sync()
		s.unref()
		if err != nil {
			return l.failOpen(err)
		}
	}
	l.unflushedMsgs.Add(-msgs)
	l.dirtyBytes.Add(-dirty)
	if l.dirtyBytes.Load() > 0 {
		// Appends raced with the fsync; they are dirty again from now.
		l.firstDirtyNs.CompareAndSwap(0, l.opts.Clock().UnixNano())
	}
	l.lastFlushNs.Store(l.opts.Clock().UnixNano())
	for {
		rp := l.recoveryPoint.Load()
		if rp >= leo || l.recoveryPoint.CompareAndSwap(rp, leo) {
			break
		}
	}
	return nil
}

// needsFlush reports whether the background flusher should flush l now:
// flush.ms elapsed since the last flush (Kafka's LogManager.flushDirtyLogs),
// or the dir-wide dirty-age or dirty-bytes trigger fired.
func (l *Log) needsFlush(now time.Time, o *Options) bool {
	if l.dirtyBytes.Load() == 0 && l.recoveryPoint.Load() >= l.leo.Load() {
		return false
	}
	cfg := l.cfg.Load()
	if cfg.FlushMs < time.Duration(1<<62) && now.Sub(time.Unix(0, l.lastFlushNs.Load())) >= cfg.FlushMs {
		return true
	}
	if fd := l.firstDirtyNs.Load(); o.FlushMaxDirtyAge > 0 && fd != 0 && now.Sub(time.Unix(0, fd)) >= o.FlushMaxDirtyAge {
		return true
	}
	if o.FlushMaxDirtyBytes > 0 && l.dirtyBytes.Load() >= o.FlushMaxDirtyBytes {
		return true
	}
	// A rolled segment is flushed in the background, as Kafka schedules
	// flushUptoOffsetExclusive after a roll.
	segs := l.segments()
	return len(segs) > 1 && segs[len(segs)-2].dirty.Load()
}

// flusher is a log dir's background flusher: one goroutine that fsyncs
// every log due for it in one pass (group commit across partitions).
type flusher struct {
	m      *Manager
	wake   chan struct{}
	stop   chan struct{}
	done   sync.WaitGroup
	rounds int64 // completed passes, for tests
	mu     sync.Mutex
}

func newFlusher(m *Manager) *flusher {
	return &flusher{m: m, wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

// noteDirty wakes the flusher early when a log crosses the dirty-bytes trigger.
func (f *flusher) noteDirty(l *Log) {
	if f.m.opts.FlushMaxDirtyBytes > 0 && l.dirtyBytes.Load() >= f.m.opts.FlushMaxDirtyBytes {
		select {
		case f.wake <- struct{}{}:
		default:
		}
	}
}

func (f *flusher) run() {
	defer f.done.Done()
	t := time.NewTicker(f.m.opts.FlushCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
		case <-f.wake:
		}
		f.FlushDue()
	}
}

// FlushDue runs one pass of the flusher: every log that needs it is flushed.
func (f *flusher) FlushDue() {
	now := f.m.opts.Clock()
	for _, l := range f.m.Logs() {
		if l.needsFlush(now, &f.m.opts) {
			if err := l.Flush(); err != nil {
				f.m.opts.Logger.Error("background flush failed", "partition", l.tp.String(), "err", err)
			}
		}
	}
	f.mu.Lock()
	f.rounds++
	f.mu.Unlock()
}

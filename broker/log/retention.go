package log

import (
	"fmt"
	"time"
)

// ApplyRetention deletes whole segments from the start of the log that
// breach retention.ms, retention.bytes (when cleanup.policy includes
// delete) or lie wholly below the log start offset, in that order, as
// UnifiedLog.deleteOldSegments. It returns the number of segments deleted.
// The Manager calls it every log.retention.check.interval.ms.
func (l *Log) ApplyRetention() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.Err(); err != nil {
		return 0, err
	}
	cfg := l.cfg.Load()
	now := l.opts.Clock()
	total := 0
	if cfg.CleanupPolicy&PolicyDelete != 0 {
		if cfg.RetentionMs >= 0 {
			limit := cfg.RetentionMs.Milliseconds()
			n := l.deletableLocked(func(s, _ *segment) bool {
				ts, _ := s.maxTimestamp()
				if ts < 0 {
					ts = s.created.UnixMilli()
				}
				return now.UnixMilli()-ts > limit
			})
			if err := l.deleteOldestLocked(n, now); err != nil {
				return total, l.fail(err)
			}
			total += n
		}
		if cfg.RetentionBytes >= 0 {
			diff := l.Size() - cfg.RetentionBytes
			n := l.deletableLocked(func(s, _ *segment) bool {
				if diff-s.size.Load() >= 0 {
					diff -= s.size.Load()
					return true
				}
				return false
			})
			if err := l.deleteOldestLocked(n, now); err != nil {
				return total, l.fail(err)
			}
			total += n
		}
	}
	n := l.deletableLocked(func(_, next *segment) bool {
		return next != nil && next.base <= l.logStart.Load()
	})
	if err := l.deleteOldestLocked(n, now); err != nil {
		return total, l.fail(err)
	}
	return total + n, nil
}

// deletableLocked counts segments from the oldest for which pred holds,
// stopping at the first that fails; an empty active segment never counts
// (UnifiedLog.deletableSegments).
func (l *Log) deletableLocked(pred func(s, next *segment) bool) int {
	segs := l.segments()
	n := 0
	for i, s := range segs {
		var next *segment
		if i+1 < len(segs) {
			next = segs[i+1]
		}
		if next == nil && s.size.Load() == 0 {
			break
		}
		// Nothing above the high watermark (the log end on one node) is
		// deleted by time or size.
		if !pred(s, next) {
			break
		}
		n++
	}
	return n
}

// deleteOldestLocked deletes the n oldest segments, rolling first when all
// would go, and advances the log start offset.
func (l *Log) deleteOldestLocked(n int, now time.Time) error {
	if n == 0 {
		return nil
	}
	if n == len(l.segments()) {
		if err := l.rollLocked(now); err != nil {
			return err
		}
	}
	segs := l.segments()
	kept := append([]*segment(nil), segs[n:]...)
	l.segs.Store(&kept)
	for _, s := range segs[:n] {
		if err := s.remove(); err != nil {
			return err
		}
	}
	if kept[0].base > l.logStart.Load() {
		l.logStart.Store(kept[0].base)
	}
	if err := l.epochs.truncateFromStart(l.logStart.Load()); err != nil {
		return err
	}
	if err := l.deleteSnapshotsOutside(kept[0].base, l.leo.Load()); err != nil {
		return err
	}
	if err := syncDir(l.dir); err != nil {
		return err
	}
	if l.m != nil {
		l.m.logStartChanged()
	}
	return nil
}

// DeleteRecordsBefore advances the log start offset to offset (the
// DeleteRecords API, UnifiedLog.maybeIncrementLogStartOffset) and deletes
// segments wholly below it. Offsets beyond the log end are out of range.
func (l *Log) DeleteRecordsBefore(offset int64) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.Err(); err != nil {
		return 0, err
	}
	if offset < 0 || offset > l.leo.Load() {
		return l.logStart.Load(), fmt.Errorf("%w: %d beyond log end %d", ErrOffsetOutOfRange, offset, l.leo.Load())
	}
	if offset <= l.logStart.Load() {
		return l.logStart.Load(), nil
	}
	l.logStart.Store(offset)
	if err := l.epochs.truncateFromStart(offset); err != nil {
		return offset, l.fail(err)
	}
	n := l.deletableLocked(func(_, next *segment) bool { return next != nil && next.base <= offset })
	if err := l.deleteOldestLocked(n, l.opts.Clock()); err != nil {
		return offset, l.fail(err)
	}
	if n == 0 && l.m != nil {
		l.m.logStartChanged()
	}
	return offset, nil
}

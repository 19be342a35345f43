package log

import (
	"errors"
	"fmt"
	"math"
	"os"

	"github.com/cascade-kafka/cascade/broker/record"
)

// This file holds what a follower replica needs from its log beyond a
// leader's: appending batches fetched from the leader as they are, and
// starting over at an offset the leader chose.

// Errors of AppendAsFollower.
var (
	// ErrUnexpectedAppendOffset is Kafka's UnexpectedAppendOffsetException:
	// the fetched batches start below the log end offset. The error is an
	// *AppendOffsetError.
	ErrUnexpectedAppendOffset = errors.New("log: unexpected append offset")
	// ErrOffsetsOutOfOrder is Kafka's OffsetsOutOfOrderException: a batch
	// of the fetched set starts below the end of the batch before it.
	ErrOffsetsOutOfOrder = errors.New("log: offsets out of order")
)

// AppendOffsetError says where a follower append was refused: the first
// batch's base and last offsets and the log end offset it had to continue.
// A follower whose log is empty (log start = log end) may start over at
// First (TruncateFullyAndStartAt) and append again, as Kafka's
// Partition.appendRecordsToFollowerOrFutureReplica does when the leader's
// log start falls inside a batch.
type AppendOffsetError struct {
	First, Last, LogEnd int64
}

func (e *AppendOffsetError) Error() string {
	return fmt.Sprintf("%v: batch %d..%d below log end offset %d", ErrUnexpectedAppendOffset, e.First, e.Last, e.LogEnd)
}

// Is makes errors.Is(err, ErrUnexpectedAppendOffset) hold.
func (e *AppendOffsetError) Is(target error) bool { return target == ErrUnexpectedAppendOffset }

// AppendAsFollower appends batches fetched from the partition's leader,
// as UnifiedLog.appendAsFollower: offsets, partition leader epochs,
// timestamps and CRCs stay exactly as the leader wrote them. Each batch is
// checked as stored data (length, magic, CRC; not the records, not
// max.message.bytes, as Kafka skips both for replication), the offsets must
// increase from batch to batch and the first batch must not start below the
// log end offset; gaps are allowed, since a compacted leader log has them.
// A trailing partial batch is ignored, as Kafka's batch iterator stops at
// one. Producer state and the transaction index follow the batches as for
// a leader append, without the producer checks (AppendOrigin.REPLICATION);
// the leader epoch cache gets every batch's epoch at its base offset.
// An empty set (or only a partial batch) appends nothing.
func (l *Log) AppendAsFollower(records []byte) (AppendInfo, error) {
	set, info, err := validateFollowerSet(records)
	if err != nil {
		return AppendInfo{}, err
	}
	l.mu.Lock()
	res, err := l.appendFollowerLocked(set, info)
	l.mu.Unlock()
	if err != nil || res.LastOffset < res.FirstOffset {
		return res, err // refused, or nothing to append
	}
	if err := l.flushIfDue(l.cfg.Load(), res.LastOffset+1); err != nil {
		return AppendInfo{}, err
	}
	return res, nil
}

// followerSet summarises a validated follower record set.
type followerSet struct {
	first, last, next int64
	records           int
	maxTimestamp      int64
	offsetOfMaxTS     int64 // last offset of the first batch with maxTimestamp
}

// validateFollowerSet checks the batches of a fetched record set and
// returns the whole batches (without a trailing partial one).
func validateFollowerSet(records []byte) ([]byte, followerSet, error) {
	info := followerSet{first: -1, last: -1, maxTimestamp: -1, offsetOfMaxTS: -1}
	valid := 0
	for rest := records; len(rest) > 0; {
		b, r, err := record.Next(rest)
		if errors.Is(err, record.ErrShort) {
			break
		}
		if err != nil {
			return nil, info, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		if err := b.ValidateStored(); err != nil {
			if errors.Is(err, record.ErrMagic) {
				return nil, info, fmt.Errorf("%w: %v", ErrInvalidRecord, err)
			}
			return nil, info, fmt.Errorf("%w: batch at offset %d: %v", ErrCorrupt, b.BaseOffset(), err)
		}
		if info.first < 0 {
			info.first = b.BaseOffset()
		} else if b.BaseOffset() < info.next {
			return nil, info, fmt.Errorf("%w: batch at %d follows one ending at %d", ErrOffsetsOutOfOrder, b.BaseOffset(), info.next-1)
		}
		info.last, info.next = b.LastOffset(), b.NextOffset()
		info.records += int(b.RecordCount())
		if ts := b.MaxTimestamp(); ts > info.maxTimestamp {
			info.maxTimestamp, info.offsetOfMaxTS = ts, b.LastOffset()
		}
		valid += len(b)
		rest = r
	}
	return records[:valid], info, nil
}

func (l *Log) appendFollowerLocked(set []byte, info followerSet) (AppendInfo, error) {
	if err := l.Err(); err != nil {
		return AppendInfo{}, err
	}
	leo := l.leo.Load()
	if len(set) == 0 {
		return AppendInfo{FirstOffset: leo, LastOffset: leo - 1, LogAppendTime: -1, LogStartOffset: l.logStart.Load(), OffsetOfMaxTimestamp: -1}, nil
	}
	if info.first < leo {
		first, _, _ := record.Next(set)
		return AppendInfo{}, &AppendOffsetError{First: info.first, Last: first.LastOffset(), LogEnd: leo}
	}
	ps := l.ps
	ps.reset()
	for rest := set; len(rest) > 0; {
		b, r, _ := record.Next(rest) // validated already
		rest = r
		if _, _, err := ps.stage(b, false); err != nil {
			ps.reset()
			return AppendInfo{}, err
		}
	}
	now := l.opts.Clock()
	cfg := l.cfg.Load()
	if err := l.writeLocked(set, info.first, info.next, info.maxTimestamp, cfg, now); err != nil {
		return AppendInfo{}, err
	}
	// UnifiedLog.appendAsFollower: the epoch stamped on each batch by its
	// leader starts at the batch's base offset.
	for rest := set; len(rest) > 0; {
		b, r, _ := record.Next(rest)
		rest = r
		if err := l.epochs.assign(b.PartitionLeaderEpoch(), b.BaseOffset()); err != nil {
			return AppendInfo{}, l.fail(err)
		}
	}
	l.publishLocked(info.next, info.records, len(set), now)
	return AppendInfo{FirstOffset: info.first, LastOffset: info.last, LogAppendTime: -1,
		LogStartOffset: l.logStart.Load(), NumRecords: info.records, OffsetOfMaxTimestamp: info.offsetOfMaxTS}, nil
}

// TruncateFullyAndStartAt deletes every segment and starts the log empty
// at offset, as UnifiedLog.truncateFullyAndStartAt: a follower does this
// when the leader's log starts beyond its own end, or when the first batch
// it fetched begins below its (empty) log's start. The log start, log end,
// recovery point and high watermark become offset; the leader epoch cache,
// producer state and its snapshots are cleared.
func (l *Log) TruncateFullyAndStartAt(offset int64) error { return l.truncate(offset, true) }

func (l *Log) truncateFullyLocked(offset int64) error {
	l.truncatedForCleaner(offset)
	for _, s := range l.segments() {
		if err := s.remove(); err != nil {
			return err
		}
	}
	s, err := createSegment(l.dir, offset, l.cfg.Load(), l.opts.Clock())
	if err != nil {
		return err
	}
	segs := []*segment{s}
	l.segs.Store(&segs)
	if err := syncDir(l.dir); err != nil {
		return err
	}
	if err := l.epochs.clear(); err != nil {
		return err
	}
	l.ps = newProducerState()
	if err := l.deleteSnapshotsOutside(math.MaxInt64, -1); err != nil { // every one
		return err
	}
	l.leo.Store(offset)
	l.logStart.Store(offset)
	l.recoveryPoint.Store(offset)
	l.unflushedMsgs.Store(0)
	l.dirtyBytes.Store(0)
	l.firstDirtyNs.Store(0)
	l.publishUnstable()
	if l.hwTracked {
		l.hw.Store(offset)
	}
	return nil
}

// flushIfDue fsyncs up to next before an append is acknowledged when
// flush.messages appends are unflushed, coalesced with concurrent
// appenders (see flush.go).
func (l *Log) flushIfDue(cfg *Config, next int64) error {
	if l.unflushedMsgs.Load() >= cfg.FlushMessages {
		return l.flushTo(next)
	}
	return nil
}

// HighWatermark returns the high watermark recorded for the log dir's
// replication-offset-checkpoint, within [log start, log end], and whether
// the log dir keeps one (Options.HighWatermarkCheckpoint). A partition
// that replicates starts its high watermark here after a restart, as
// Kafka's Partition.createLogIfNotExists does from the checkpoint.
func (l *Log) HighWatermark() (int64, bool) {
	if !l.hwTracked {
		return 0, false
	}
	return l.boundHighWatermark(l.hw.Load()), true
}

// UpdateHighWatermark records the partition's high watermark, bounded by
// the log start and end offsets as UnifiedLog.updateHighWatermark, for the
// next replication-offset-checkpoint, and returns the value recorded. When
// the log dir keeps no checkpoint it records nothing and returns hw bounded.
func (l *Log) UpdateHighWatermark(hw int64) int64 {
	hw = l.boundHighWatermark(hw)
	if l.hwTracked {
		l.hw.Store(hw)
	}
	return hw
}

func (l *Log) boundHighWatermark(hw int64) int64 {
	if start := l.logStart.Load(); hw < start {
		return start
	}
	if end := l.leo.Load(); hw > end {
		return end
	}
	return hw
}

// clear empties the cache (LeaderEpochFileCache.clearAndFlush).
func (c *epochCache) clear() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = nil
	if _, err := os.Stat(c.path); os.IsNotExist(err) {
		return nil
	}
	return writeEpochCheckpoint(c.path, nil)
}

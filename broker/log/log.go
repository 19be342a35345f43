package log

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cascade-kafka/cascade/broker/record"
)

// Log is one partition's log: a list of segments, the producer state, the
// leader epoch cache and the offsets that bound it. Appends are serialised by
// a per-log mutex held only around offset assignment and the write; reads
// take no lock and see whole batches up to the published log end offset.
type Log struct {
	tp      TopicPartition
	dir     string
	topicID [16]byte
	opts    *Options
	cfg     atomic.Pointer[Config]
	m       *Manager // nil for a log opened without a manager (tests)

	mu     sync.Mutex // the append lock
	segs   atomic.Pointer[[]*segment]
	ps     *producerState
	epochs *epochCache

	leo           atomic.Int64
	logStart      atomic.Int64
	recoveryPoint atomic.Int64 // offsets below it are fsynced
	firstUnstable atomic.Int64 // -1 when no transaction is open
	// The high watermark kept for replication-offset-checkpoint, when
	// the log dir keeps one (see follower.go).
	hwTracked bool
	hw        atomic.Int64
	err       atomic.Pointer[error]
	closed    atomic.Bool

	// Cleaner state (see cleaner.go): the first dirty offset from
	// cleaner-offset-checkpoint (-1 when none), and a generation bumped by
	// every truncation so that a cleaning pass overlapping one is aborted.
	cleanPoint atomic.Int64
	cleanGen   atomic.Int64

	// Flush bookkeeping (see flush.go).
	flushMu       sync.Mutex
	unflushedMsgs atomic.Int64
	dirtyBytes    atomic.Int64
	firstDirtyNs  atomic.Int64 // clock time of the oldest unflushed append, 0 when clean
	lastFlushNs   atomic.Int64
}

// TopicPartition returns the partition this log belongs to.
func (l *Log) TopicPartition() TopicPartition { return l.tp }

// TopicID returns the topic id recorded in partition.metadata.
func (l *Log) TopicID() [16]byte { return l.topicID }

// Dir returns the partition directory.
func (l *Log) Dir() string { return l.dir }

// Config returns the log's current configuration.
func (l *Log) Config() Config { return *l.cfg.Load() }

// SetConfig replaces the configuration; it applies to later appends, rolls
// and retention checks.
func (l *Log) SetConfig(c Config) {
	c = c.normalize()
	l.cfg.Store(&c)
}

// Err returns the sticky storage error, if any. After a storage error the
// log refuses appends and reads.
func (l *Log) Err() error {
	if p := l.err.Load(); p != nil {
		return *p
	}
	if l.closed.Load() {
		return ErrClosed
	}
	return nil
}

// fail records a storage error; the first one sticks.
func (l *Log) fail(err error) error {
	if errors.Is(err, ErrStorage) {
		return err
	}
	wrapped := fmt.Errorf("%w: %s: %w", ErrStorage, l.tp, err)
	l.err.CompareAndSwap(nil, &wrapped)
	l.opts.Logger.Error("log storage error; partition offline", "partition", l.tp.String(), "err", err)
	return *l.err.Load()
}

// failOpen is fail for the errors of reads and fsyncs, which may open a
// sealed segment's file on demand: running out of descriptors (EMFILE,
// ENFILE) fails only this call, as nothing on disk is wrong and a later
// call may find a descriptor free; any other error is sticky, as with fail.
func (l *Log) failOpen(err error) error {
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		l.opts.Logger.Warn("out of file descriptors", "partition", l.tp.String(), "err", err)
		return fmt.Errorf("%w: %s: %w", ErrStorage, l.tp, err)
	}
	return l.fail(err)
}

// String formats a TopicPartition as Kafka does: topic-partition.
func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// LogStartOffset returns the first offset readable.
func (l *Log) LogStartOffset() int64 { return l.logStart.Load() }

// LogEndOffset returns the offset the next record will get.
func (l *Log) LogEndOffset() int64 { return l.leo.Load() }

// RecoveryPoint returns the offset below which everything is fsynced.
func (l *Log) RecoveryPoint() int64 { return l.recoveryPoint.Load() }

// FirstUnstableOffset returns the first offset of the earliest open
// transaction (ProducerStateManager.firstUndecidedOffset).
func (l *Log) FirstUnstableOffset() (int64, bool) {
	if o := l.firstUnstable.Load(); o >= 0 {
		return o, true
	}
	return 0, false
}

func (l *Log) segments() []*segment { return *l.segs.Load() }

func (l *Log) active() *segment {
	s := l.segments()
	return s[len(s)-1]
}

// Size returns the total size of the segment files in bytes.
func (l *Log) Size() int64 {
	var n int64
	for _, s := range l.segments() {
		n += s.size.Load()
	}
	return n
}

// NumSegments returns the number of segments.
func (l *Log) NumSegments() int { return len(l.segments()) }

// Append validates and appends one produce record set (one or more v2
// batches), as UnifiedLog.appendAsLeader with the coordinator's origin:
// control batches (transaction markers) are accepted. The batches' base
// offset, leader epoch and, where LogValidator would change them, timestamp
// type, max timestamp and CRC are rewritten in place in records; a
// compressed batch whose inner offsets are out of sequence is rebuilt into
// a new buffer, as LogValidator rebuilds it.
func (l *Log) Append(records []byte, leaderEpoch int32) (AppendInfo, error) {
	return l.append(records, leaderEpoch, false)
}

// AppendFromClient is Append with the checks Kafka applies to records from
// a producer (AppendOrigin.CLIENT): control batches are refused and every
// batch's base offset must be 0 (LogValidator.validateBatch).
func (l *Log) AppendFromClient(records []byte, leaderEpoch int32) (AppendInfo, error) {
	return l.append(records, leaderEpoch, true)
}

// setInfo summarises a validated record set.
type setInfo struct {
	batches, records int
	maxTimestamp     int64
	// maxTimestampDelta is the position in the set (offset minus the
	// first offset) of the first record with maxTimestamp.
	maxTimestampDelta int64
	compressed        bool  // some batch is compressed
	offsetDelta       int64 // sum over batches of lastOffsetDelta+1
}

// validateSet checks every batch of a record set before the lock is taken,
// as UnifiedLog.analyzeAndValidateRecords and LogValidator do. It returns
// the set to append: set itself, its headers rewritten in place, unless a
// batch had to be rebuilt (inner offsets out of sequence in a compressed
// batch), when it is a new set holding the rebuilt batch.
func (l *Log) validateSet(set []byte, cfg *Config, client bool) (setInfo, []byte, error) {
	info, rebuilt, err := l.validateBatches(set, cfg, client)
	if err != nil || len(rebuilt) == 0 {
		return info, set, err
	}
	out := make([]byte, 0, len(set))
	prev := 0
	for _, r := range rebuilt {
		out = append(append(out, set[prev:r.at]...), r.b...)
		prev = r.at + r.size
	}
	return info, append(out, set[prev:]...), nil
}

// rebuiltBatch is a batch of a produce set that validation rebuilt: the
// original's position and size in the set, and the new bytes.
type rebuiltBatch struct {
	at, size int
	b        record.Batch
}

// validateBatches validates each batch of set, rewriting headers in place,
// and returns the batches it had to rebuild.
func (l *Log) validateBatches(set []byte, cfg *Config, client bool) (setInfo, []rebuiltBatch, error) {
	info := setInfo{maxTimestamp: -1, maxTimestampDelta: -1}
	var rebuilt []rebuiltBatch
	if len(set) == 0 {
		return info, nil, fmt.Errorf("%w: empty record set", ErrInvalidRecord)
	}
	now := l.opts.Clock().UnixMilli()
	for rest := set; len(rest) > 0; {
		b, r, err := record.Next(rest)
		if err != nil {
			return info, nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		rest = r
		if len(b) > cfg.MaxMessageBytes {
			return info, nil, fmt.Errorf("%w: batch of %d bytes exceeds max.message.bytes %d", ErrMessageTooLarge, len(b), cfg.MaxMessageBytes)
		}
		if b.Magic() != 2 {
			return info, nil, fmt.Errorf("%w: magic %d", ErrInvalidRecord, b.Magic())
		}
		// One pass computes the CRC: length and CRC failures are corruption
		// (CorruptRecordException), the rest invalid records.
		if err := b.Validate(); err != nil {
			if errors.Is(err, record.ErrCRC) || errors.Is(err, record.ErrShort) || errors.Is(err, record.ErrBadLength) || errors.Is(err, record.ErrCodec) {
				return info, nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
			}
			return info, nil, fmt.Errorf("%w: %v", ErrInvalidRecord, err)
		}
		if client && b.Control() {
			return info, nil, fmt.Errorf("%w: clients may not write control records", ErrInvalidRecord)
		}
		if client && b.BaseOffset() != 0 {
			return info, nil, fmt.Errorf("%w: batch base offset %d, should be 0", ErrInvalidRecord, b.BaseOffset())
		}
		checks := l.recordChecks(b, cfg, now)
		res, err := b.Check(checks)
		if err != nil {
			return info, nil, recordError(err)
		}
		if res.Rebuild {
			// LogValidator.buildRecordsAndAssignOffsets; the new
			// batch's size is checked again (messageSizeMaybeChanged).
			nb, err := b.Rebuild(checks.Limits)
			if err != nil {
				return info, nil, recordError(err)
			}
			if len(nb) > cfg.MaxMessageBytes {
				return info, nil, fmt.Errorf("%w: rebuilt batch of %d bytes exceeds max.message.bytes %d", ErrMessageTooLarge, len(nb), cfg.MaxMessageBytes)
			}
			rebuilt = append(rebuilt, rebuiltBatch{at: len(set) - len(rest) - len(b), size: len(b), b: nb})
			b = nb
		}
		// As LogValidator: a CreateTime batch carries the true maximum of
		// its records' timestamps, whatever the producer wrote in the
		// header, so that the time index and ListOffsets by timestamp
		// find its records (setMaxTimestamp rewrites only a wrong header).
		if cfg.TimestampType == CreateTime {
			b.SetMaxTimestamp(false, res.MaxTimestamp)
		}
		if res.MaxTimestamp > info.maxTimestamp {
			info.maxTimestamp = res.MaxTimestamp
			info.maxTimestampDelta = info.offsetDelta + int64(res.MaxTimestampDelta)
		}
		info.compressed = info.compressed || b.Codec() != record.CodecNone
		info.batches++
		info.records += int(b.RecordCount())
		info.offsetDelta += int64(b.LastOffsetDelta()) + 1
	}
	return info, rebuilt, nil
}

// unlimitedMs is how a timestamp bound Kafka leaves unlimited
// (Long.MAX_VALUE ms) arrives here: durations of half the range and more.
const unlimitedMs = time.Duration(math.MaxInt64) / 2

// boundMs converts message.timestamp.before.max.ms or after.max.ms to
// Kafka's milliseconds, Long.MAX_VALUE when unlimited.
func boundMs(d time.Duration) int64 {
	if d >= unlimitedMs {
		return math.MaxInt64
	}
	return d.Milliseconds()
}

// recordChecks returns the per-record checks LogValidator.validateRecord
// applies to b under cfg: keys on a compacted topic, and for CreateTime the
// message.timestamp.before.max.ms and after.max.ms bounds around now.
// Control batches, which only the coordinators write with their own
// clock, are not held to the timestamp bounds.
func (l *Log) recordChecks(b record.Batch, cfg *Config, now int64) record.Checks {
	return record.Checks{
		Limits:             record.Limits{MaxBytes: l.opts.MaxDecompressedBytes, MaxMemory: l.opts.MaxDecodeMemory},
		RequireKeys:        cfg.CleanupPolicy&PolicyCompact != 0 && !b.Control(),
		TopicLogAppendTime: cfg.TimestampType == LogAppendTime,
		CheckTimestamps:    cfg.TimestampType == CreateTime && !b.Control(),
		NowMs:              now,
		BeforeMaxMs:        boundMs(cfg.TimestampBeforeMax),
		AfterMaxMs:         boundMs(cfg.TimestampAfterMax),
		Partition:          &l.tp,
	}
}

// recordError maps an error of record.Batch.Check to the log's errors: the
// records a check refused keep their *record.ValidationError (for the
// produce answer's record errors) under INVALID_TIMESTAMP or
// INVALID_RECORD; a payload past the decompressed size is
// MESSAGE_TOO_LARGE; one whose decoder would need more memory than allowed
// (a zstd frame declaring too large a window) is CORRUPT_MESSAGE.
func recordError(err error) error {
	var verr *record.ValidationError
	switch {
	case errors.As(err, &verr) && verr.Timestamp:
		return fmt.Errorf("%w: %w", ErrInvalidTimestamp, verr)
	case errors.As(err, &verr):
		return fmt.Errorf("%w: %w", ErrInvalidRecord, verr)
	case errors.Is(err, record.ErrTooLarge):
		return fmt.Errorf("%w: %v", ErrMessageTooLarge, err)
	case errors.Is(err, record.ErrDecodeMemory):
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return fmt.Errorf("%w: %v", ErrInvalidRecord, err)
}

func (l *Log) append(set []byte, leaderEpoch int32, client bool) (AppendInfo, error) {
	cfg := l.cfg.Load()
	info, set, err := l.validateSet(set, cfg, client)
	if err != nil {
		return AppendInfo{}, err
	}
	l.mu.Lock()
	res, err := l.appendLocked(set, leaderEpoch, cfg, info)
	l.mu.Unlock()
	if err != nil || res.Duplicate {
		return res, err
	}
	if err := l.flushIfDue(cfg, res.LastOffset+1); err != nil {
		return AppendInfo{}, err
	}
	return res, nil
}

func (l *Log) appendLocked(set []byte, leaderEpoch int32, cfg *Config, info setInfo) (AppendInfo, error) {
	if err := l.Err(); err != nil {
		return AppendInfo{}, err
	}
	ps := l.ps
	ps.reset()
	now := l.opts.Clock()
	appendTime := int64(-1)
	maxTS := info.maxTimestamp
	if cfg.TimestampType == LogAppendTime {
		appendTime = now.UnixMilli()
		maxTS = appendTime
	}
	first := l.leo.Load()
	next := first
	for rest := set; len(rest) > 0; {
		b, r, _ := record.Next(rest) // validated already
		rest = r
		// Offsets and the log append time are assigned before the
		// producer state sees the batch, as LogValidator runs before
		// ProducerAppendInfo.append: the cached batch's timestamp is the
		// one stored.
		b.SetBaseOffset(next)
		if appendTime >= 0 {
			b.SetLogAppendTime(appendTime)
			b.UpdateCRC()
		}
		dup, isDup, err := ps.stage(b, true)
		if err != nil {
			ps.reset()
			return AppendInfo{}, err
		}
		if isDup {
			// As UnifiedLog.append: the original offsets, and the
			// original batch's timestamp as the log append time.
			ps.reset()
			return AppendInfo{FirstOffset: dup.firstOffset, LastOffset: dup.lastOffset, LogAppendTime: dup.timestamp,
				LogStartOffset: l.logStart.Load(), NumRecords: int(dup.lastOffset-dup.firstOffset) + 1, Duplicate: true, OffsetOfMaxTimestamp: -1}, nil
		}
		next = b.NextOffset()
	}
	for rest := set; len(rest) > 0; {
		b, r, _ := record.Next(rest)
		rest = r
		b.SetPartitionLeaderEpoch(leaderEpoch)
	}
	if err := l.writeLocked(set, first, next, maxTS, cfg, now); err != nil {
		return AppendInfo{}, err
	}
	if leaderEpoch >= 0 {
		if last, ok := l.epochs.latest(); !ok || leaderEpoch > last.Epoch {
			if err := l.epochs.assign(leaderEpoch, first); err != nil {
				return AppendInfo{}, l.fail(err)
			}
		}
	}
	l.publishLocked(next, info.records, len(set), now)
	// LogValidator's offsetOfMaxTimestamp: with LogAppendTime the last
	// offset, or the first of a compressed batch.
	offMax := int64(-1)
	switch {
	case appendTime >= 0 && info.compressed:
		offMax = first
	case appendTime >= 0:
		offMax = next - 1
	case info.maxTimestampDelta >= 0:
		offMax = first + info.maxTimestampDelta
	}
	return AppendInfo{FirstOffset: first, LastOffset: next - 1, LogAppendTime: appendTime,
		LogStartOffset: l.logStart.Load(), NumRecords: info.records, OffsetOfMaxTimestamp: offMax}, nil
}

// writeLocked writes a record set whose offsets are final and whose batches
// are staged in the producer state: it rolls when the set does not fit the
// active segment (a new segment starting at first), writes and indexes the
// set, commits the producer state, records aborted transactions in the
// transaction index. With publishLocked it is the part of an append the
// leader and follower paths share (UnifiedLog.append after validation).
// Errors are sticky.
func (l *Log) writeLocked(set []byte, first, next, maxTS int64, cfg *Config, now time.Time) error {
	ps := l.ps
	if err := l.maybeRollLocked(len(set), maxTS, first, next-1, cfg, now); err != nil {
		ps.reset()
		return l.fail(err)
	}
	seg := l.active()
	if err := seg.append(set, cfg.IndexIntervalBytes); err != nil {
		ps.reset()
		return l.fail(err)
	}
	ps.commit()
	for _, t := range ps.completed {
		if !t.aborted {
			continue
		}
		a := AbortedTxn{ProducerID: t.pid, FirstOffset: t.firstOffset, LastOffset: t.lastOffset, LastStable: ps.lastStableFor(t)}
		if err := seg.txn.add(a); err != nil {
			ps.reset()
			return l.fail(err)
		}
	}
	ps.reset()
	l.publishUnstable()
	return nil
}

// publishLocked makes an append of records in size bytes, written by
// writeLocked, visible: the log end offset moves to next and the flusher
// learns of the unflushed bytes.
func (l *Log) publishLocked(next int64, records, size int, now time.Time) {
	l.leo.Store(next)
	l.unflushedMsgs.Add(int64(records))
	l.dirtyBytes.Add(int64(size))
	l.firstDirtyNs.CompareAndSwap(0, now.UnixNano())
	if l.m != nil {
		l.m.flusher.noteDirty(l)
	}
}

func (l *Log) publishUnstable() {
	if o, ok := l.ps.firstUnstable(); ok {
		l.firstUnstable.Store(o)
	} else {
		l.firstUnstable.Store(-1)
	}
}

// maybeRollLocked rolls to a new segment when the append would not fit, as
// UnifiedLog.maybeRoll and LogSegment.shouldRoll.
// A new segment starts at base, the first offset of the set: the log end
// offset for a leader's append, the first batch's base offset for a
// follower's, which may lie beyond the log end where the leader's log was
// compacted.
func (l *Log) maybeRollLocked(setSize int, maxTS, base, lastOffset int64, cfg *Config, now time.Time) error {
	s := l.active()
	size := s.size.Load()
	var waited int64
	if s.rollingTS >= 0 && maxTS >= 0 {
		waited = maxTS - s.rollingTS
	} else {
		waited = now.Sub(s.created).Milliseconds()
	}
	roll := (size > 0 && waited > cfg.SegmentMs.Milliseconds()) ||
		size > cfg.SegmentBytes-int64(setSize) ||
		(size > 0 && (s.oi.full() || s.ti.full())) ||
		lastOffset-s.base > math.MaxInt32
	if !roll || (size == 0 && lastOffset-s.base <= math.MaxInt32) {
		// An empty active segment takes the set whatever its size.
		return nil
	}
	return l.rollAtLocked(base, now)
}

// rollLocked starts a new active segment at the log end offset and takes a
// producer state snapshot there (UnifiedLog.roll).
func (l *Log) rollLocked(now time.Time) error { return l.rollAtLocked(l.leo.Load(), now) }

// rollAtLocked starts a new active segment at base, at or beyond the log
// end offset.
func (l *Log) rollAtLocked(base int64, now time.Time) error {
	old := l.active()
	if old.size.Load() == 0 && old.base == base {
		return nil
	}
	if err := old.onRoll(); err != nil {
		return err
	}
	if err := old.seal(); err != nil {
		return err
	}
	s, err := createSegment(l.dir, base, l.cfg.Load(), now)
	if err != nil {
		return err
	}
	if err := syncDir(l.dir); err != nil {
		s.remove()
		return err
	}
	segs := append(append([]*segment(nil), l.segments()...), s)
	l.segs.Store(&segs)
	if err := writeFileAtomic(snapshotPath(l.dir, base), l.ps.encodeSnapshot()); err != nil {
		return err
	}
	return nil
}

// Roll forces a new segment at the log end offset.
func (l *Log) Roll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.Err(); err != nil {
		return err
	}
	if err := l.rollLocked(l.opts.Clock()); err != nil {
		return l.fail(err)
	}
	return nil
}

// floorSegment returns the index of the last segment whose base is <= offset.
func floorSegment(segs []*segment, offset int64) int {
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > offset })
	return max(i-1, 0)
}

// Read returns whole batches starting at the batch that contains offset,
// none with a last offset at or beyond maxOffset, up to maxBytes, and at
// least one batch when minOne even if it is larger (LocalLog.read). Like
// Kafka it reads from one segment per call. An offset outside
// [LogStartOffset, LogEndOffset] is ErrOffsetOutOfRange.
func (l *Log) Read(offset int64, maxBytes int, maxOffset int64, minOne bool) (ReadResult, error) {
	if err := l.Err(); err != nil {
		return ReadResult{}, err
	}
	for attempt := 0; ; attempt++ {
		start, end := l.logStart.Load(), l.leo.Load()
		res := ReadResult{LogStartOffset: start, LogEndOffset: end}
		if offset < start || offset > end {
			return res, fmt.Errorf("%w: %d not in [%d, %d] of %s", ErrOffsetOutOfRange, offset, start, end, l.tp)
		}
		if offset == end || maxOffset <= offset {
			return res, nil
		}
		segs := l.segments()
		retry := false
		for i := floorSegment(segs, offset); i < len(segs); i++ {
			s := segs[i]
			if !s.tryRef() {
				retry = true
				break
			}
			fh, err := s.logFile()
			if errors.Is(err, errSegmentGone) {
				s.unref()
				retry = true
				break
			}
			if err != nil {
				s.unref()
				return res, l.failOpen(err)
			}
			pos, n, found, err := s.read(fh.f, offset, maxBytes, maxOffset, minOne)
			if err != nil || !found || n == 0 {
				fh.release()
				s.unref()
			}
			if err != nil {
				return res, l.failOpen(err)
			}
			if !found {
				continue
			}
			if n == 0 {
				return res, nil
			}
			// One allocation holds the region and the slice naming it.
			h := &oneRegion{r: region{s: s, h: fh, off: pos, n: n}}
			h.arr[0] = &h.r
			res.Regions = h.arr[:]
			res.Size = int(n)
			return res, nil
		}
		if !retry || attempt > 3 {
			return res, nil
		}
	}
}

// OffsetForTimestamp returns the first record at or after the log start
// with a timestamp >= ts (UnifiedLog.fetchOffsetByTimestamp for a real
// timestamp), with its batch's leader epoch.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, leaderEpoch int32, ok bool) {
	if l.Err() != nil {
		return 0, 0, 0, false
	}
	start := l.logStart.Load()
	for _, s := range l.segments() {
		if maxTS, _ := s.maxTimestamp(); maxTS < ts {
			continue
		}
		if !s.tryRef() {
			continue
		}
		o, t, e, found, err := s.findByTimestamp(ts, start, l.opts.MaxDecompressedBytes)
		s.unref()
		if err != nil {
			l.failOpen(err)
			return 0, 0, 0, false
		}
		if found {
			return o, t, e, true
		}
	}
	return 0, 0, 0, false
}

// MaxTimestamp returns the record with the largest timestamp and that
// timestamp (ListOffsets MAX_TIMESTAMP, KIP-734), or (-1, -1) when empty.
func (l *Log) MaxTimestamp() (offset, timestamp int64) {
	var best *segment
	bestTS := int64(-1)
	for _, s := range l.segments() {
		if ts, _ := s.maxTimestamp(); ts > bestTS {
			best, bestTS = s, ts
		}
	}
	if best == nil || !best.tryRef() {
		return -1, -1
	}
	defer best.unref()
	_, batchLast := best.maxTimestamp()
	// The batch holding the max timestamp ends at batchLast; find the first
	// record in it carrying that timestamp.
	o, t, _, found, err := best.findByTimestamp(bestTS, max(l.logStart.Load(), 0), l.opts.MaxDecompressedBytes)
	if err != nil {
		l.failOpen(err)
		return -1, -1
	}
	if !found || t != bestTS {
		return batchLast, bestTS
	}
	return o, t
}

// AbortedTxns returns the aborted transactions overlapping [from, to), from
// the transaction indexes (UnifiedLog.collectAbortedTransactions).
func (l *Log) AbortedTxns(from, to int64) []AbortedTxn {
	var out []AbortedTxn
	segs := l.segments()
	for i := floorSegment(segs, from); i < len(segs); i++ {
		out = segs[i].txn.collect(out, from, to)
	}
	return out
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch: the largest epoch <= the
// requested one and the offset where it ended (LeaderEpochFileCache.endOffsetFor).
func (l *Log) EndOffsetForEpoch(epoch int32) (foundEpoch int32, endOffset int64, ok bool) {
	return l.epochs.endOffsetFor(epoch, l.leo.Load())
}

// AssignEpochStartOffset records that leader epoch starts at offset, as a
// new leader does on election.
func (l *Log) AssignEpochStartOffset(epoch int32, offset int64) error {
	if err := l.epochs.assign(epoch, offset); err != nil {
		return l.fail(err)
	}
	return nil
}

// LatestEpoch returns the latest leader epoch recorded, or -1.
func (l *Log) LatestEpoch() int32 {
	if e, ok := l.epochs.latest(); ok {
		return e.Epoch
	}
	return -1
}

// EpochAt returns the leader epoch of the given offset, or -1 if unknown.
func (l *Log) EpochAt(offset int64) int32 { return l.epochs.epochAt(offset) }

// ActiveProducers lists the producer state (for DescribeProducers).
func (l *Log) ActiveProducers() []ProducerInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]ProducerInfo, 0, len(l.ps.producers))
	for pid, e := range l.ps.producers {
		seq := int32(-1)
		if m, ok := e.last(); ok {
			seq = m.lastSeq
		}
		out = append(out, ProducerInfo{ProducerID: pid, ProducerEpoch: e.epoch, LastSequence: seq,
			LastTimestamp: e.lastTimestamp, CoordinatorEpoch: e.coordinatorEpoch, CurrentTxnStartOffset: e.txnFirstOffset})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}

// ProducerTxnState returns producer pid's epoch in this log and whether it
// has a transaction open here; known is false for a producer the log has no
// state for. Kafka's UnifiedLog.maybeStartTransactionVerification uses both:
// an older epoch is refused at once, and a batch of an open transaction at
// the same epoch needs no check with the transaction coordinator.
func (l *Log) ProducerTxnState(pid int64) (epoch int16, ongoing, known bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.ps.producers[pid]
	if !ok {
		return 0, false, false
	}
	return e.epoch, e.txnFirstOffset >= 0, true
}

// ExpireProducers drops the state of producers idle for longer than
// producer.id.expiration.ms (by their last batch timestamp, as Kafka) and
// with no open transaction. It returns how many were dropped.
func (l *Log) ExpireProducers() int {
	if l.opts.ProducerIDExpiration <= 0 {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ps.expire(l.opts.Clock().Add(-l.opts.ProducerIDExpiration).UnixMilli())
}

package partition

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/replica"
)

// ErrDeleted is returned by operations on a partition whose topic was deleted
// (or which was otherwise removed from this broker). The handler edge answers
// NOT_LEADER_OR_FOLLOWER, as Kafka does for a replica it no longer hosts.
var ErrDeleted = errors.New("partition: removed from this broker")

// ErrNotLeader is returned by a leader append (a client's or a
// coordinator's) to a replicated partition this broker does not lead: it
// never started leading (MakeLeader), or stopped (StopLeading). It wraps
// replica.ErrNotLeaderOrFollower, which the handler edge answers with
// NOT_LEADER_OR_FOLLOWER and the coordinators with NOT_COORDINATOR.
var ErrNotLeader = fmt.Errorf("partition: not the leader: %w", replica.ErrNotLeaderOrFollower)

// Isolation selects the upper bound of a read, as Kafka's FetchIsolation.
type Isolation int8

const (
	// ReadHighWatermark reads up to the high watermark (read_uncommitted).
	ReadHighWatermark Isolation = iota
	// ReadCommitted reads up to the last stable offset (read_committed).
	ReadCommitted
	// ReadLogEnd reads up to the log end offset (follower fetches).
	ReadLogEnd
)

// Partition is this broker's replica of one topic-partition. Appends are
// serialised by a per-partition lock; reads take no lock and are bounded by
// the published high watermark or last stable offset.
type Partition struct {
	tp      log.TopicPartition
	topicID [16]byte
	log     Log

	appendMu sync.Mutex
	epoch    atomic.Int32
	// leading is, on a replicated partition, the leader epoch this broker
	// leads and stamps its appends with, -1 while it does not lead. It is
	// set by MakeLeader and StopLeading under appendMu, so an append holds
	// the role it checked until it is written, as Kafka's
	// Partition.appendRecordsToLeader holds leaderIsrUpdateLock.
	leading int32
	deleted atomic.Bool

	// hw is the published high watermark; every write holds hwMu so that
	// a truncation's move down and an advance do not interleave.
	hw         atomic.Int64
	hwMu       sync.Mutex
	replicated atomic.Bool // the high watermark does not follow appends

	notifyMu sync.Mutex
	notify   chan struct{}
	waiters  map[*Waiter]struct{}
}

// Waiter is one long-polling fetch waiting on several partitions at once: any
// leader append, high watermark move, truncation or removal of a partition
// it is registered with signals C (without blocking).
type Waiter struct {
	C chan struct{}
}

// NewWaiter returns a waiter whose channel holds one pending signal.
func NewWaiter() *Waiter { return &Waiter{C: make(chan struct{}, 1)} }

func (w *Waiter) signal() {
	select {
	case w.C <- struct{}{}:
	default:
	}
}

// AddWaiter registers w to be signalled by the next change (a leader append,
// a high watermark move, a truncation or removal). Register before reading,
// so a change between the read and the wait is not missed. A signal
// unregisters w; register again to wait again.
func (p *Partition) AddWaiter(w *Waiter) {
	p.notifyMu.Lock()
	defer p.notifyMu.Unlock()
	if p.deleted.Load() {
		w.signal()
		return
	}
	if p.waiters == nil {
		p.waiters = map[*Waiter]struct{}{}
	}
	p.waiters[w] = struct{}{}
}

// RemoveWaiter unregisters w; fetches call it when they stop waiting so an
// idle partition does not accumulate waiters.
func (p *Partition) RemoveWaiter(w *Waiter) {
	p.notifyMu.Lock()
	delete(p.waiters, w)
	p.notifyMu.Unlock()
}

// New returns a partition over lg, led by this broker at leaderEpoch. The
// high watermark starts where the log dir's replication-offset-checkpoint
// left it when the log dir keeps one (a replicated broker, as Kafka's
// Partition.createLogIfNotExists); otherwise, as a single node is its own
// in-sync replica set, at the log end offset recovered from disk.
func New(tp log.TopicPartition, topicID [16]byte, leaderEpoch int32, lg Log) *Partition {
	p := &Partition{tp: tp, topicID: topicID, log: lg, notify: make(chan struct{}), leading: -1}
	p.epoch.Store(leaderEpoch)
	if hw, ok := lg.HighWatermark(); ok {
		p.hw.Store(hw)
	} else {
		p.hw.Store(lg.LogEndOffset())
	}
	return p
}

// TopicPartition returns the partition's name.
func (p *Partition) TopicPartition() log.TopicPartition { return p.tp }

// TopicID returns the id of the partition's topic.
func (p *Partition) TopicID() [16]byte { return p.topicID }

// Log returns the underlying log, for admin paths (DescribeLogDirs, flush).
func (p *Partition) Log() Log { return p.log }

// LeaderEpoch returns the current leader epoch.
func (p *Partition) LeaderEpoch() int32 { return p.epoch.Load() }

// SetLeaderEpoch records a new leader epoch from the metadata image. Epochs
// never go backwards.
func (p *Partition) SetLeaderEpoch(e int32) {
	for {
		cur := p.epoch.Load()
		if e <= cur || p.epoch.CompareAndSwap(cur, e) {
			return
		}
	}
}

// Append appends one produce record set from a client (Kafka's
// AppendOrigin.CLIENT: no control batches) under the partition's append
// lock, then advances the high watermark and wakes fetch waiters.
func (p *Partition) Append(records []byte) (log.AppendInfo, error) {
	return p.append(records, true)
}

// AppendCoordinator appends records written by a coordinator on this broker
// (transaction markers, group metadata): control batches are allowed, as
// Kafka's AppendOrigin.COORDINATOR.
func (p *Partition) AppendCoordinator(records []byte) (log.AppendInfo, error) {
	return p.append(records, false)
}

func (p *Partition) append(records []byte, client bool) (log.AppendInfo, error) {
	if p.deleted.Load() {
		return log.AppendInfo{}, ErrDeleted
	}
	p.appendMu.Lock()
	epoch := p.epoch.Load()
	if p.replicated.Load() {
		// As Kafka's Partition.appendRecordsToLeader: only the leader
		// appends, stamping the epoch it leads. The epoch of the
		// metadata image (SetLeaderEpoch) may already be a newer
		// leader's: a batch stamped with it would give this replica,
		// once a follower, that leader's latest epoch over records the
		// leader never had, and its fetches would then hide them from
		// the divergence check (KIP-595's last fetched epoch).
		if p.leading < 0 {
			p.appendMu.Unlock()
			return log.AppendInfo{}, ErrNotLeader
		}
		epoch = p.leading
	}
	var info log.AppendInfo
	var err error
	if client {
		info, err = p.log.AppendFromClient(records, epoch)
	} else {
		info, err = p.log.Append(records, epoch)
	}
	if err == nil && !info.Duplicate && !p.replicated.Load() {
		p.advanceHighWatermarkLocked()
	}
	p.appendMu.Unlock()
	if err != nil {
		return info, err
	}
	if !info.Duplicate {
		p.wake()
	}
	return info, nil
}

// advanceHighWatermarkLocked moves the high watermark to the log end offset:
// with no followers the leader alone is the ISR (Kafka's
// Partition.maybeIncrementLeaderHW with a one-member ISR).
func (p *Partition) advanceHighWatermarkLocked() {
	leo := p.log.LogEndOffset()
	p.hwMu.Lock()
	if leo > p.hw.Load() {
		p.storeHighWatermarkLocked(leo)
	}
	p.hwMu.Unlock()
}

// HighWatermark returns the published high watermark.
func (p *Partition) HighWatermark() int64 { return p.hw.Load() }

// LastStableOffset returns min(high watermark, first unstable offset), as
// Kafka's UnifiedLog.lastStableOffset.
func (p *Partition) LastStableOffset() int64 {
	hw := p.hw.Load()
	if fu, ok := p.log.FirstUnstableOffset(); ok && fu < hw {
		return fu
	}
	return hw
}

// LogStartOffset returns the log start offset.
func (p *Partition) LogStartOffset() int64 { return p.log.LogStartOffset() }

// LogEndOffset returns the log end offset.
func (p *Partition) LogEndOffset() int64 { return p.log.LogEndOffset() }

// Bound returns the exclusive upper offset a read at isolation may return.
func (p *Partition) Bound(iso Isolation) int64 {
	switch iso {
	case ReadCommitted:
		return p.LastStableOffset()
	case ReadLogEnd:
		return p.log.LogEndOffset()
	}
	return p.hw.Load()
}

// ReadResult is a read's batches with the offsets a Fetch response reports.
type ReadResult struct {
	log.ReadResult
	HighWatermark    int64
	LastStableOffset int64
}

// Read returns whole batches from offset, none at or beyond the isolation's
// bound, up to maxBytes (at least one batch when minOne). As Kafka's
// LocalLog.read, an offset below the log start or beyond the log end offset is
// log.ErrOffsetOutOfRange; an offset between the bound and the log end
// offset reads nothing.
func (p *Partition) Read(offset int64, maxBytes int, iso Isolation, minOne bool) (ReadResult, error) {
	if p.deleted.Load() {
		return ReadResult{}, ErrDeleted
	}
	// Load the bounds before the log's own end so that a concurrent append
	// can only make the log longer than the bound, never shorter.
	hw := p.hw.Load()
	lso := p.LastStableOffset()
	bound := hw
	switch iso {
	case ReadCommitted:
		bound = lso
	case ReadLogEnd:
		bound = p.log.LogEndOffset()
	}
	start, end := p.log.LogStartOffset(), p.log.LogEndOffset()
	res := ReadResult{HighWatermark: hw, LastStableOffset: lso}
	res.LogStartOffset, res.LogEndOffset = start, end
	if offset < start || offset > end {
		return res, fmt.Errorf("%w: %d not in [%d, %d]", log.ErrOffsetOutOfRange, offset, start, end)
	}
	if offset >= bound {
		return res, nil
	}
	rr, err := p.log.Read(offset, maxBytes, bound, minOne)
	if err != nil {
		return res, err
	}
	res.ReadResult = rr
	return res, nil
}

// Changed returns a channel closed by the next change to this partition (as
// for AddWaiter). Take it before reading so that a change between the read
// and the wait is not missed.
func (p *Partition) Changed() <-chan struct{} {
	p.notifyMu.Lock()
	defer p.notifyMu.Unlock()
	return p.notify
}

func (p *Partition) wake() {
	p.notifyMu.Lock()
	close(p.notify)
	p.notify = make(chan struct{})
	for w := range p.waiters {
		w.signal()
		delete(p.waiters, w)
	}
	p.notifyMu.Unlock()
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch as Kafka's
// LeaderEpochFileCache.endOffsetFor: the largest known epoch not above epoch
// and the offset where the next epoch began (the log end offset for the
// latest one); (-1, -1) for an undefined epoch, an epoch above every known
// one, or an empty cache.
func (p *Partition) EndOffsetForEpoch(epoch int32) (int32, int64) {
	if e, off, ok := p.log.EndOffsetForEpoch(epoch); ok {
		return e, off
	}
	return -1, -1
}

// DeleteRecordsBefore advances the log start offset (DeleteRecords). The
// offset may not pass the high watermark, as in Kafka's
// Partition.deleteRecordsOnLeader.
func (p *Partition) DeleteRecordsBefore(offset int64) (int64, error) {
	if p.deleted.Load() {
		return 0, ErrDeleted
	}
	hw := p.hw.Load()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return 0, fmt.Errorf("%w: %d beyond high watermark %d", log.ErrOffsetOutOfRange, offset, hw)
	}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	return p.log.DeleteRecordsBefore(offset)
}

// markDeleted fences the partition and wakes its waiters.
func (p *Partition) markDeleted() {
	if p.deleted.CompareAndSwap(false, true) {
		p.wake()
	}
}

// Deleted reports whether the partition was removed from this broker.
func (p *Partition) Deleted() bool { return p.deleted.Load() }

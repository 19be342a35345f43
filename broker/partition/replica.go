package partition

import (
	"errors"

	"github.com/cascade-kafka/cascade/broker/log"
)

// This file holds what the replication shell calls: the follower's append
// and truncation, and the high watermark moved from outside the partition
// (by the leader's replica state machine, or by the leader's answer to a
// follower's fetch) instead of by each append.

// SetReplicated chooses who moves the high watermark. Off (the default, a
// single node) every leader append moves it to the log end offset, the
// leader alone being the ISR. On, appends leave it where it is: a leader's
// moves by AdvanceHighWatermark from its replica state machine (the ISR's
// log end offsets), a follower's by SetHighWatermark from its leader.
func (p *Partition) SetReplicated(on bool) { p.replicated.Store(on) }

// Replicated reports whether the high watermark is moved from outside.
func (p *Partition) Replicated() bool { return p.replicated.Load() }

// MakeLeader records that this broker leads the partition from leaderEpoch
// on, as Kafka's Partition.makeLeader: the epoch starts at the log end
// offset in the leader epoch cache, so that OffsetForLeaderEpoch answers a
// follower of the previous epoch with where it ended before the new leader
// appended anything, and a replicated partition's appends are stamped with
// it until StopLeading. An epoch not above the cache's latest changes
// nothing there; one older than the partition's leader epoch is not led.
func (p *Partition) MakeLeader(leaderEpoch int32) error {
	if p.deleted.Load() {
		return ErrDeleted
	}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	p.SetLeaderEpoch(leaderEpoch)
	if leaderEpoch >= p.epoch.Load() {
		p.leading = leaderEpoch
	}
	if leaderEpoch <= p.log.LatestEpoch() {
		return nil
	}
	return p.log.AssignEpochStartOffset(leaderEpoch, p.log.LogEndOffset())
}

// StopLeading records that this broker no longer leads the replicated
// partition (it follows another leader, or holds no role), as Kafka's
// Partition.makeFollower under leaderIsrUpdateLock: an append under way
// finishes first, stamped with the epoch this broker led, and every later
// leader append is refused with ErrNotLeader.
func (p *Partition) StopLeading() {
	p.appendMu.Lock()
	p.leading = -1
	p.appendMu.Unlock()
}

// Leading returns the leader epoch this broker leads the replicated
// partition in, and false when it does not lead it.
func (p *Partition) Leading() (int32, bool) {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	return p.leading, p.leading >= 0
}

// AdvanceHighWatermark moves the leader's high watermark forward to hw,
// bounded by the log end offset, as Kafka's Partition.maybeIncrementLeaderHW
// after the replica state machine computed it; a lower hw leaves it. It
// returns the high watermark and whether it moved; a move wakes the fetch
// waiters, so a consumer waiting at the old high watermark sees the records
// it now covers.
func (p *Partition) AdvanceHighWatermark(hw int64) (int64, bool) {
	p.hwMu.Lock()
	hw = min(hw, p.log.LogEndOffset())
	cur := p.hw.Load()
	if hw <= cur {
		p.hwMu.Unlock()
		return cur, false
	}
	p.storeHighWatermarkLocked(hw)
	p.hwMu.Unlock()
	p.wake()
	return hw, true
}

// SetHighWatermark sets a follower's high watermark from its leader's, as
// UnifiedLog.maybeUpdateHighWatermark: bounded by the follower's log start
// and log end offsets (so min(leader's high watermark, own log end)), and
// free to move down. It returns the high watermark; a move wakes the fetch
// waiters (KIP-392 consumers read from followers up to it).
func (p *Partition) SetHighWatermark(hw int64) int64 {
	p.hwMu.Lock()
	hw = max(min(hw, p.log.LogEndOffset()), p.log.LogStartOffset())
	moved := hw != p.hw.Load()
	if moved {
		p.storeHighWatermarkLocked(hw)
	}
	p.hwMu.Unlock()
	if moved {
		p.wake()
	}
	return hw
}

// storeHighWatermarkLocked publishes hw and records it for the log dir's
// replication-offset-checkpoint. The caller holds hwMu.
func (p *Partition) storeHighWatermarkLocked(hw int64) {
	p.hw.Store(hw)
	p.log.UpdateHighWatermark(hw)
}

// AppendAsFollower appends batches fetched from the leader as they are
// (log.Log.AppendAsFollower). It does not move the high watermark, which a
// follower takes from its leader (SetHighWatermark). When the log is empty
// and the first batch starts below its start but reaches it (the leader's
// log start fell inside a batch, after DeleteRecords), the log starts over
// at the batch's base offset and the append is retried, as Kafka's
// Partition.appendRecordsToFollowerOrFutureReplica does.
func (p *Partition) AppendAsFollower(records []byte) (log.AppendInfo, error) {
	if p.deleted.Load() {
		return log.AppendInfo{}, ErrDeleted
	}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	info, err := p.log.AppendAsFollower(records)
	var oe *log.AppendOffsetError
	if !errors.As(err, &oe) {
		return info, err
	}
	if leo := p.log.LogEndOffset(); leo != p.log.LogStartOffset() || oe.First >= leo || oe.Last < leo {
		return info, err
	}
	if err := p.truncateFullyLocked(oe.First); err != nil {
		return log.AppendInfo{}, err
	}
	return p.log.AppendAsFollower(records)
}

// TruncateTo removes the records at and after offset (log.Log.Truncate), as
// a follower does where its log diverged from its leader's (the answer to
// OffsetForLeaderEpoch, or its high watermark). A high watermark beyond the
// new log end comes down to it. Fetch waiters are woken, so a fetch parked
// beyond the new end finds out.
func (p *Partition) TruncateTo(offset int64) error {
	return p.truncate(func() error { return p.log.Truncate(offset) })
}

// TruncateFullyAndStartAt empties the log and starts it at offset
// (log.Log.TruncateFullyAndStartAt), as a follower does when its leader's
// log starts beyond its own end; the high watermark becomes offset.
func (p *Partition) TruncateFullyAndStartAt(offset int64) error {
	return p.truncate(func() error { return p.log.TruncateFullyAndStartAt(offset) })
}

// truncate runs a truncation of the log under the append lock, then bounds
// the high watermark by the new log and wakes the fetch waiters.
func (p *Partition) truncate(cut func() error) error {
	if p.deleted.Load() {
		return ErrDeleted
	}
	p.appendMu.Lock()
	err := cut()
	if err == nil {
		p.boundHighWatermarkLocked()
	}
	p.appendMu.Unlock()
	if err != nil {
		return err
	}
	p.wake()
	return nil
}

func (p *Partition) truncateFullyLocked(offset int64) error {
	if err := p.log.TruncateFullyAndStartAt(offset); err != nil {
		return err
	}
	p.boundHighWatermarkLocked()
	return nil
}

// boundHighWatermarkLocked brings the high watermark within the log start
// and end offsets after a truncation. The caller holds appendMu.
func (p *Partition) boundHighWatermarkLocked() {
	p.hwMu.Lock()
	defer p.hwMu.Unlock()
	hw := max(min(p.hw.Load(), p.log.LogEndOffset()), p.log.LogStartOffset())
	if hw != p.hw.Load() {
		p.storeHighWatermarkLocked(hw)
	}
}

package replication

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/partition"
	"github.com/cascade-kafka/cascade/broker/replica"
)

// fetcher replicates the partitions this node follows from one leader, as
// Kafka's ReplicaFetcherThread: one Fetch at a time holding every
// partition not backing off, each answer applied before the next fetch.
type fetcher struct {
	m      *Manager
	leader int32

	mu    sync.Mutex
	parts map[log.TopicPartition]*fetchState
	wake  chan struct{} // signalled when partitions are added
	done  chan struct{}
	once  sync.Once
}

// fetchState is one partition of a fetcher.
type fetchState struct {
	s           *pstate
	leaderEpoch int32
	delayUntil  time.Time
}

func newFetcher(m *Manager, leader int32) *fetcher {
	return &fetcher{m: m, leader: leader, parts: map[log.TopicPartition]*fetchState{},
		wake: make(chan struct{}, 1), done: make(chan struct{})}
}

func (f *fetcher) add(s *pstate, epoch int32) {
	f.mu.Lock()
	f.parts[s.tp] = &fetchState{s: s, leaderEpoch: epoch}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// remove drops tp and returns how many partitions are left.
func (f *fetcher) remove(tp log.TopicPartition) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.parts, tp)
	return len(f.parts)
}

func (f *fetcher) stop() { f.once.Do(func() { close(f.done) }) }

func (f *fetcher) stopped() bool {
	select {
	case <-f.done:
		return true
	case <-f.m.ctx.Done():
		return true
	default:
		return false
	}
}

// sleep waits d, or less if the fetcher stops; false when it stopped.
func (f *fetcher) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-f.done:
	case <-f.m.ctx.Done():
	}
	return false
}

func (f *fetcher) run() {
	backoff := max(f.m.cfg.FetchBackoff, 10*time.Millisecond)
	for !f.stopped() {
		req, states, wait := f.request()
		if req == nil {
			select {
			case <-f.wake:
			case <-f.done:
			case <-f.m.ctx.Done():
			case <-time.After(wait):
			}
			continue
		}
		addr, ok := f.m.leaderAddr(f.leader)
		if !ok {
			f.sleep(backoff)
			continue
		}
		resp, err := f.m.clients.fetch(f.m.ctx, addr, req)
		if err != nil {
			if !f.stopped() {
				f.m.log.Debug("replica fetch failed", "leader", f.leader, "addr", addr, "err", err)
			}
			f.sleep(backoff)
			continue
		}
		if resp.ErrorCode != 0 {
			f.m.log.Info("replica fetch refused", "leader", f.leader, "err", kerr.ErrorForCode(resp.ErrorCode))
			f.sleep(backoff)
			continue
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				fs := states[partKey{id: rt.TopicID, partition: rp.Partition}]
				if fs == nil {
					continue
				}
				if err := f.process(addr, fs, &rp); err != nil {
					f.m.log.Info("replica fetch: partition backs off", "topic", fs.s.tp.Topic, "partition", fs.s.tp.Partition,
						"leader", f.leader, "err", err)
					f.mu.Lock()
					fs.delayUntil = f.m.now().Add(backoff)
					f.mu.Unlock()
				}
			}
		}
	}
}

type partKey struct {
	id        [16]byte
	partition int32
}

// request builds the next Fetch (nil when every partition backs off, with
// how long until the first may fetch again).
func (f *fetcher) request() (*kmsg.FetchRequest, map[partKey]*fetchState, time.Duration) {
	cfg := f.m.cfg
	now := f.m.now()
	r := kmsg.NewPtrFetchRequest()
	r.ReplicaID = cfg.NodeID
	r.ReplicaState.ID, r.ReplicaState.Epoch = cfg.NodeID, f.m.ctl.BrokerEpoch()
	r.MaxWaitMillis = int32(cfg.FetchWaitMax.Milliseconds())
	r.MinBytes = max(cfg.FetchMinBytes, 1)
	r.MaxBytes = cfg.FetchResponseMaxBytes
	r.SessionID, r.SessionEpoch = 0, -1 // full fetches, no session
	states := map[partKey]*fetchState{}
	wait := time.Second
	byTopic := map[[16]byte]int{}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fs := range f.parts {
		if d := fs.delayUntil.Sub(now); d > 0 {
			wait = min(wait, d)
			continue
		}
		p := fs.s.p
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition = fs.s.tp.Partition
		fp.CurrentLeaderEpoch = fs.leaderEpoch
		fp.FetchOffset = p.LogEndOffset()
		fp.LastFetchedEpoch = max(p.Log().LatestEpoch(), -1)
		fp.LogStartOffset = p.LogStartOffset()
		fp.PartitionMaxBytes = cfg.FetchMaxBytes
		fp.HighWatermark = p.HighWatermark()
		i, ok := byTopic[fs.s.topicID]
		if !ok {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = fs.s.tp.Topic, fs.s.topicID
			r.Topics = append(r.Topics, t)
			i = len(r.Topics) - 1
			byTopic[fs.s.topicID] = i
		}
		r.Topics[i].Partitions = append(r.Topics[i].Partitions, fp)
		states[partKey{id: fs.s.topicID, partition: fp.Partition}] = fs
	}
	if len(states) == 0 {
		return nil, nil, wait
	}
	return r, states, 0
}

// errStale is a fetch answer for a partition that moved on meanwhile.
var errStale = errors.New("replication: partition changed during the fetch")

// process applies one partition's answer, as
// AbstractFetcherThread.processFetchRequest: records appended as the leader
// wrote them, then its high watermark and log start; a diverging epoch
// truncates; OFFSET_OUT_OF_RANGE truncates or starts over at the leader's
// log start.
func (f *fetcher) process(addr string, fs *fetchState, rp *kmsg.FetchResponseTopicPartition) error {
	switch rp.ErrorCode {
	case 0:
	case kerr.OffsetOutOfRange.Code:
		return f.outOfRange(addr, fs)
	default:
		return kerr.ErrorForCode(rp.ErrorCode)
	}
	s := fs.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.staleLocked(fs) {
		return nil
	}
	p := s.p
	if d := rp.DivergingEpoch; d.EndOffset >= 0 {
		return f.truncate(s, replica.EpochEndOffset{Epoch: d.Epoch, EndOffset: d.EndOffset})
	}
	if len(rp.RecordBatches) > 0 {
		if _, err := p.AppendAsFollower(rp.RecordBatches); err != nil {
			if errors.Is(err, partition.ErrDeleted) {
				return errStale
			}
			return fmt.Errorf("follower append: %w", err)
		}
		s.st.LocalAppend(p.LogEndOffset(), f.m.now())
	}
	s.st.LeaderHighWatermark(rp.HighWatermark)
	p.SetHighWatermark(s.st.HighWatermark())
	if start := min(rp.LogStartOffset, p.HighWatermark()); start > p.LogStartOffset() {
		if _, err := p.DeleteRecordsBefore(start); err != nil {
			return fmt.Errorf("follower log start: %w", err)
		}
		s.st.LogStartMoved(p.LogStartOffset())
	}
	return nil
}

// truncate cuts the log where it diverges from the leader's, as
// AbstractFetcherThread.truncateOnFetchResponse. s.mu is held.
func (f *fetcher) truncate(s *pstate, div replica.EpochEndOffset) error {
	p := s.p
	leo := p.LogEndOffset()
	tr := truncationFor(p, leo, p.HighWatermark(), div)
	// A truncation at or past the log end still runs: as Kafka's
	// UnifiedLog.truncateTo, it drops a conflicting epoch entry at the
	// log end (this replica led an epoch and appended nothing in it),
	// which would otherwise be the last fetched epoch of every fetch, each
	// answered with the same diverging epoch.
	if err := p.TruncateTo(min(tr.Offset, leo)); err != nil {
		return fmt.Errorf("truncate: %w", err)
	}
	if tr.Offset >= leo {
		return nil
	}
	s.st.Truncated(p.LogEndOffset())
	f.m.log.Info("follower truncated", "topic", s.tp.Topic, "partition", s.tp.Partition, "from", leo, "to", tr.Offset,
		"leader_epoch", div.Epoch)
	return nil
}

// truncationFor is replica.TruncationFor over the partition's own epoch
// cache.
func truncationFor(p *partition.Partition, leo, hw int64, div replica.EpochEndOffset) replica.Truncation {
	switch {
	case div.EndOffset == replica.UndefinedOffset:
		return replica.Truncation{Offset: hw, Complete: true}
	case div.Epoch == replica.UndefinedEpoch:
		return replica.Truncation{Offset: min(div.EndOffset, leo), Complete: true}
	}
	e, end := p.EndOffsetForEpoch(div.Epoch)
	cache := []replica.EpochEntry{}
	if end >= 0 {
		// One entry answers EndOffsetFor for div.Epoch as the whole
		// cache would: the local epoch found and where it ends.
		cache = append(cache, replica.EpochEntry{Epoch: e, StartOffset: 0})
		if e != div.Epoch || end != leo {
			cache = append(cache, replica.EpochEntry{Epoch: max(e, div.Epoch) + 1, StartOffset: end})
		}
	}
	return replica.TruncationFor(cache, leo, hw, div)
}

// staleLocked reports whether the partition moved on (another role,
// leader or epoch) since fs was fetched. s.mu is held.
func (f *fetcher) staleLocked(fs *fetchState) bool {
	st := fs.s.st
	return fs.s.gone || st.Role() != replica.RoleFollower || st.Leader() != f.leader || st.LeaderEpoch() != fs.leaderEpoch
}

// outOfRange asks the leader for its log start and end and truncates or
// starts over, as AbstractFetcherThread.fetchOffsetAndTruncate.
func (f *fetcher) outOfRange(addr string, fs *fetchState) error {
	s := fs.s
	ctx, cancel := context.WithTimeout(f.m.ctx, f.m.cfg.SocketTimeout)
	defer cancel()
	start, err := f.m.clients.listOffset(ctx, addr, f.m.cfg.NodeID, s.tp, fs.leaderEpoch, -2)
	if err != nil {
		return err
	}
	end, err := f.m.clients.listOffset(ctx, addr, f.m.cfg.NodeID, s.tp, fs.leaderEpoch, -1)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.staleLocked(fs) {
		return nil
	}
	p := s.p
	tr := replica.OutOfRangeTruncation(p.LogEndOffset(), start, end)
	switch {
	case tr.Full:
		if err := p.TruncateFullyAndStartAt(tr.Offset); err != nil {
			return err
		}
		s.st.TruncatedFully(tr.Offset)
	case tr.Offset < p.LogEndOffset():
		if err := p.TruncateTo(tr.Offset); err != nil {
			return err
		}
		s.st.Truncated(p.LogEndOffset())
	}
	f.m.log.Info("follower out of range", "topic", s.tp.Topic, "partition", s.tp.Partition,
		"leader_log_start", start, "leader_log_end", end, "now_at", p.LogEndOffset())
	return nil
}

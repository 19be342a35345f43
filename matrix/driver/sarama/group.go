package sarama

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// groupHandler collects up to count messages across the claims of one
// session, marks each one it keeps, and commits the marks at the end of
// the session when asked to.
type groupHandler struct {
	mu     sync.Mutex
	count  int
	commit bool
	recs   []driver.Record
	done   context.CancelFunc
}

func (h *groupHandler) Setup(sarama.ConsumerGroupSession) error { return nil }

func (h *groupHandler) Cleanup(s sarama.ConsumerGroupSession) error {
	if h.commit {
		s.Commit() // Synchronous with auto-commit off; failures go to Errors().
	}
	return nil
}

func (h *groupHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for {
		select {
		case <-s.Context().Done():
			return nil
		case m, ok := <-c.Messages():
			if !ok {
				return nil
			}
			h.mu.Lock()
			if len(h.recs) < h.count {
				r := driver.Record{Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value, TimestampMs: m.Timestamp.UnixMilli()}
				for _, hd := range m.Headers {
					r.Headers = append(r.Headers, driver.Header{Key: string(hd.Key), Value: hd.Value})
				}
				h.recs = append(h.recs, r)
				s.MarkMessage(m, "")
				if len(h.recs) == h.count {
					h.done()
				}
			}
			h.mu.Unlock()
		}
	}
}

func (d *drv) GroupConsume(ctx context.Context, req driver.GroupConsume) (driver.GroupConsumeResult, error) {
	if req.Protocol != "" && req.Protocol != "classic" {
		return driver.GroupConsumeResult{}, driver.Unsupported("sarama implements only the classic group protocol, not KIP-848")
	}
	cfg := baseConfig()
	cfg.ClientID = "matrix-sarama-group"
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	// With auto-commit, sarama commits the offsets of marked messages in
	// the background and when the session ends; the handler marks each
	// message it keeps.
	cfg.Consumer.Offsets.AutoCommit.Enable = req.AutoCommitIntervalMs > 0
	if req.AutoCommitIntervalMs > 0 {
		cfg.Consumer.Offsets.AutoCommit.Interval = time.Duration(req.AutoCommitIntervalMs) * time.Millisecond
	}
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	switch req.Assignor {
	case "":
	case "range":
		cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	case "roundrobin":
		cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRoundRobin()}
	case "sticky":
		cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategySticky()}
	default:
		return driver.GroupConsumeResult{}, driver.Unsupported("sarama has no assignor %q", req.Assignor)
	}
	if req.InstanceID != "" {
		cfg.Consumer.Group.InstanceId = req.InstanceID
	}
	if req.SessionTimeoutMs > 0 {
		st := time.Duration(req.SessionTimeoutMs) * time.Millisecond
		cfg.Consumer.Group.Session.Timeout, cfg.Consumer.Group.Heartbeat.Interval = st, st/4
	}
	if err := secure(cfg, d.sec); err != nil {
		return driver.GroupConsumeResult{}, err
	}
	g, err := sarama.NewConsumerGroup(d.addrs, req.Group, cfg)
	if err != nil {
		return driver.GroupConsumeResult{}, kafkaErr(err)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Duration(req.TimeoutMs)*time.Millisecond)
	defer cancel()
	h := &groupHandler{count: req.Count, commit: req.Commit, done: cancel}
	var (
		errMu    sync.Mutex
		groupErr error
	)
	errsDone := make(chan struct{})
	go func() {
		defer close(errsDone)
		for e := range g.Errors() {
			errMu.Lock()
			if groupErr == nil {
				groupErr = e
			}
			errMu.Unlock()
		}
	}()
	// Consume returns at the end of each session: when cctx ends (count
	// reached or timeout) or on a rebalance, after which the member joins
	// again, as sarama's documentation loops.
	var consumeErr error
	for consumeErr == nil && cctx.Err() == nil {
		consumeErr = g.Consume(cctx, []string{req.Topic}, h)
	}
	var closeErr error
	if req.Crash {
		// No Close, hence no LeaveGroup; the session's heartbeats ended
		// with Consume. The process is killed next.
		d.abandoned = append(d.abandoned, g)
	} else {
		closeErr = g.Close() // Leaves the group, except for a static member.
		<-errsDone
	}
	h.mu.Lock()
	res := driver.GroupConsumeResult{Records: append([]driver.Record{}, h.recs...)}
	h.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	errMu.Lock()
	firstGroupErr := groupErr
	errMu.Unlock()
	for _, err := range []error{consumeErr, firstGroupErr, closeErr} {
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			return res, kafkaErr(err)
		}
	}
	if req.Commit && len(res.Records) > 0 {
		res.Committed = driver.NextOffsets(res.Records)
	}
	return res, nil
}

func (d *drv) FetchCommitted(ctx context.Context, req driver.FetchCommitted) (int64, error) {
	r, err := d.admin.ListConsumerGroupOffsets(req.Group, map[string][]int32{req.Topic: {req.Partition}})
	if err != nil {
		return 0, kafkaErr(err)
	}
	if r.Err != sarama.ErrNoError {
		return 0, &driver.Error{Code: codeName(r.Err), Message: r.Err.Error()}
	}
	b := r.GetBlock(req.Topic, req.Partition)
	if b == nil {
		return -1, nil
	}
	if b.Err != sarama.ErrNoError {
		return 0, &driver.Error{Code: codeName(b.Err), Message: b.Err.Error()}
	}
	return b.Offset, nil
}

func (d *drv) DeleteGroup(ctx context.Context, group string) error {
	if err := d.admin.DeleteConsumerGroup(group); err != nil {
		return kafkaErr(err)
	}
	return nil
}

func (d *drv) DescribeGroup(ctx context.Context, group string) (driver.GroupDescription, error) {
	gs, err := d.admin.DescribeConsumerGroups([]string{group})
	if err != nil {
		return driver.GroupDescription{}, kafkaErr(err)
	}
	for _, g := range gs {
		if g.GroupId != group {
			continue
		}
		if g.Err != sarama.ErrNoError {
			return driver.GroupDescription{}, &driver.Error{Code: codeName(g.Err), Message: g.Err.Error()}
		}
		res := driver.GroupDescription{Group: group, State: g.State, Members: []driver.GroupMemberDetail{}}
		for _, m := range g.Members {
			md := driver.GroupMemberDetail{MemberID: m.MemberId, ClientID: m.ClientId, Assignment: []driver.TopicPartition{}}
			a, err := m.GetMemberAssignment()
			if err != nil {
				return driver.GroupDescription{}, fmt.Errorf("sarama: decode the assignment of %s: %w", m.MemberId, err)
			}
			if a != nil {
				for t, ps := range a.Topics {
					for _, p := range ps {
						md.Assignment = append(md.Assignment, driver.TopicPartition{Topic: t, Partition: p})
					}
				}
			}
			res.Members = append(res.Members, md)
		}
		sort.Slice(res.Members, func(i, j int) bool { return res.Members[i].MemberID < res.Members[j].MemberID })
		return res, nil
	}
	return driver.GroupDescription{}, fmt.Errorf("sarama: DescribeGroups answered without group %s", group)
}

func (d *drv) ListGroups(ctx context.Context) ([]string, error) {
	gs, err := d.admin.ListConsumerGroups()
	if err != nil {
		return nil, kafkaErr(err)
	}
	out := make([]string, 0, len(gs))
	for g := range gs {
		out = append(out, g)
	}
	sort.Strings(out)
	return out, nil
}

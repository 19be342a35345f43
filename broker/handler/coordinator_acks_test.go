package handler

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/replica"
	"github.com/cascade-kafka/cascade/broker/replication"
	"github.com/cascade-kafka/cascade/broker/txn"
)

// heldReplication is a Replication of partition 0 of every topic whose
// acks=all waits the test ends, one at a time, with the answer it chooses.
type heldReplication struct {
	mu    sync.Mutex
	check error // CheckAppend's answer
	waits chan heldWait
}

type heldWait struct {
	tp       log.TopicPartition
	required int64
	done     chan error
}

func newHeldReplication() *heldReplication { return &heldReplication{waits: make(chan heldWait)} }

func (h *heldReplication) Replicated(tp log.TopicPartition) bool { return tp.Partition == 0 }

func (h *heldReplication) FollowerFetch(log.TopicPartition, int32, int64, int64, int64) (int64, error) {
	return -1, nil
}

func (h *heldReplication) ReadReplicas(log.TopicPartition, int64) (replication.ReadReplica, []replication.ReadReplica, bool) {
	return replication.ReadReplica{}, nil, false
}

func (h *heldReplication) CheckAppend(log.TopicPartition, int16) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.check
}

func (h *heldReplication) setCheck(err error) {
	h.mu.Lock()
	h.check = err
	h.mu.Unlock()
}

func (h *heldReplication) Appended(log.TopicPartition) {}

func (h *heldReplication) AwaitAcks(ctx context.Context, tp log.TopicPartition, required int64, _ time.Time) error {
	w := heldWait{tp: tp, required: required, done: make(chan error)}
	select {
	case h.waits <- w:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// next returns the next acks=all wait, which must be on topic's partition 0
// past offset 0.
func (h *heldReplication) next(t *testing.T, topic string) heldWait {
	t.Helper()
	select {
	case w := <-h.waits:
		if w.tp != (log.TopicPartition{Topic: topic, Partition: 0}) || w.required <= 0 {
			t.Fatalf("wait for %s up to %d, want %s-0", w.tp, w.required, topic)
		}
		return w
	case <-time.After(10 * time.Second):
		t.Fatalf("no wait for %s-0's high watermark", topic)
		return heldWait{}
	}
}

// TestClusterGroupWriteAwaitsHighWatermark checks that a group write to a
// replicated __consumer_offsets partition is answered only once the high
// watermark passes it, with the failures of the wait mapped as Kafka's
// CoordinatorOperationExceptionHelper maps them, while a partition of one
// replica answers at its append.
func TestClusterGroupWriteAwaitsHighWatermark(t *testing.T) {
	c := newClusterTestEnv(t)
	h := newHeldReplication()
	c.env.Replication = h
	g0, g2 := keyOn(t, "group", 0), keyOn(t, "group", 2)
	eventually(t, "partitions 0 and 2 loaded", func() bool {
		_, code0 := fetchOffset(c, g0)
		_, code2 := fetchOffset(c, g2)
		return code0 == 0 && code2 == 0
	})
	if code := commitOffset(c, g2, 3); code != 0 {
		t.Fatalf("commit on a partition of one replica: code %d", code)
	}
	for i, tc := range []struct {
		name string
		err  error
		want int16
	}{
		{"committed", nil, 0},
		{"committed as the ISR shrank", replica.ErrNotEnoughReplicasAfterAppend, 0},
		{"timed out", replication.ErrRequestTimedOut, kerr.CoordinatorNotAvailable.Code},
		{"leadership lost", replica.ErrNotLeaderOrFollower, kerr.NotCoordinator.Code},
	} {
		answered := make(chan int16, 1)
		go func() { answered <- commitOffset(c, g0, int64(10+i)) }()
		w := h.next(t, consumerOffsetsTopic)
		select {
		case code := <-answered:
			t.Fatalf("%s: commit answered (code %d) before its write was committed", tc.name, code)
		default:
		}
		// The loop serves other groups meanwhile.
		if code := commitOffset(c, g2, int64(4+i)); code != 0 {
			t.Fatalf("%s: commit of another partition's group while one waits: code %d", tc.name, code)
		}
		w.done <- tc.err
		if code := <-answered; code != tc.want {
			t.Fatalf("%s: commit code %d, want %d", tc.name, code, tc.want)
		}
	}

	// With the high watermark behind the last write (a follower not
	// caught up), a read of the partition's groups waits for it too, so
	// that it never shows what a failover could lose.
	p := c.env.Partitions.Get(log.TopicPartition{Topic: consumerOffsetsTopic, Partition: 0})
	p.SetReplicated(true)
	if err := p.MakeLeader(p.LeaderEpoch()); err != nil { // as replication makes a leader
		t.Fatal(err)
	}
	answered := make(chan int16, 1)
	go func() { answered <- commitOffset(c, g0, 20) }()
	h.next(t, consumerOffsetsTopic).done <- nil
	if code := <-answered; code != 0 {
		t.Fatalf("commit: code %d", code)
	}
	type fetched struct {
		at   int64
		code int16
	}
	read := make(chan fetched, 1)
	go func() {
		at, code := fetchOffset(c, g0)
		read <- fetched{at, code}
	}()
	w := h.next(t, consumerOffsetsTopic)
	select {
	case f := <-read:
		t.Fatalf("offset fetch answered (%+v) with the high watermark behind the commit", f)
	default:
	}
	w.done <- nil
	if f := <-read; f.code != 0 || f.at != 20 {
		t.Fatalf("offset fetch: %+v, want 20", f)
	}
	// Once the high watermark has passed, reads answer at once.
	p.AdvanceHighWatermark(p.LogEndOffset())
	if at, code := fetchOffset(c, g0); code != 0 || at != 20 {
		t.Fatalf("offset fetch with the write committed: %d code %d", at, code)
	}
}

// TestClusterTxnWriteAwaitsHighWatermark checks that the transaction
// coordinator appends its state with acks=-1 (NOT_ENOUGH_REPLICAS refused
// before the append, as COORDINATOR_NOT_AVAILABLE), answers once the high
// watermark passes the write, keeps the transactional id busy meanwhile
// (CONCURRENT_TRANSACTIONS) without holding up its loop, maps a failed wait
// as TransactionStateManager does, and writes markers with acks=-1,
// retrying one whose wait timed out.
func TestClusterTxnWriteAwaitsHighWatermark(t *testing.T) {
	c := newClusterTestEnv(t)
	h := newHeldReplication()
	c.env.Replication = h
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	here := keyOn(t, "txn", 0)
	h.setCheck(replica.ErrNotEnoughReplicas)
	eventually(t, "InitProducerId refused for too few replicas in sync", func() bool {
		_, _, err := c.env.Txn.InitProducerID(ctx, here, 60000, -1, -1)
		if errors.Is(err, txn.ErrCoordinatorLoading) {
			return false
		}
		if !errors.Is(err, txn.ErrCoordinatorNotAvailable) {
			t.Fatalf("InitProducerId with the ISR under min.isr: %v, want COORDINATOR_NOT_AVAILABLE", err)
		}
		return true
	})
	h.setCheck(nil)

	type initResult struct {
		pid   int64
		epoch int16
		err   error
	}
	initID := func() chan initResult {
		ch := make(chan initResult, 1)
		go func() {
			pid, epoch, err := c.env.Txn.InitProducerID(ctx, here, 60000, -1, -1)
			ch <- initResult{pid, epoch, err}
		}()
		return ch
	}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"timed out", replication.ErrRequestTimedOut, txn.ErrCoordinatorNotAvailable},
		{"leadership lost", replica.ErrNotLeaderOrFollower, txn.ErrNotCoordinator},
	} {
		res := initID()
		w := h.next(t, TransactionStateTopic)
		w.done <- tc.err
		if r := <-res; !errors.Is(r.err, tc.want) {
			t.Fatalf("%s: InitProducerId: %v, want %v", tc.name, r.err, tc.want)
		}
	}
	res := initID()
	w := h.next(t, TransactionStateTopic)
	select {
	case r := <-res:
		t.Fatalf("InitProducerId answered (%+v) before its write was committed", r)
	default:
	}
	if _, _, err := c.env.Txn.InitProducerID(ctx, here, 60000, -1, -1); !errors.Is(err, txn.ErrConcurrentTransactions) {
		t.Fatalf("InitProducerId while the id's write waits: %v, want CONCURRENT_TRANSACTIONS", err)
	}
	w.done <- nil
	r := <-res
	if r.err != nil {
		t.Fatalf("InitProducerId: %v", r.err)
	}

	// A commit: the partition's add and the decision wait for the high
	// watermark, then the marker (acks=-1, retried after a timeout), then
	// the completion.
	tp := txn.TopicPartition{Topic: "data", Partition: 0}
	added := make(chan error, 1)
	go func() { added <- c.env.Txn.AddPartitions(ctx, here, r.pid, r.epoch, []txn.TopicPartition{tp}, 0) }()
	h.next(t, TransactionStateTopic).done <- nil
	if err := <-added; err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() {
		_, _, err := c.env.Txn.EndTxn(ctx, here, r.pid, r.epoch, true, 0)
		ended <- err
	}()
	h.next(t, TransactionStateTopic).done <- nil
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	h.next(t, "data").done <- replication.ErrRequestTimedOut
	h.next(t, "data").done <- nil
	h.next(t, TransactionStateTopic).done <- nil
	eventually(t, "the transaction complete", func() bool {
		d, err := c.env.Txn.DescribeTransaction(ctx, here)
		return err == nil && d.State == txn.CompleteCommit
	})
}

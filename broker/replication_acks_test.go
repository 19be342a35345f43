package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/replica"
	"github.com/cascade-kafka/cascade/broker/replication"
)

// fakeReplication answers the Produce handler as a replicated leader
// would: checkErr before the append, ackErr when the produce waits for the
// ISR, and records what it was asked to wait for.
type fakeReplication struct {
	checkErr, ackErr error
	waited           []int64
	appended         int
}

func (f *fakeReplication) Replicated(log.TopicPartition) bool { return true }
func (f *fakeReplication) FollowerFetch(log.TopicPartition, int32, int64, int64, int64) (int64, error) {
	return -1, nil
}
func (f *fakeReplication) CheckAppend(_ log.TopicPartition, acks int16) error {
	if acks == -1 {
		return f.checkErr
	}
	return nil
}
func (f *fakeReplication) Appended(log.TopicPartition) { f.appended++ }
func (f *fakeReplication) AwaitAcks(_ context.Context, _ log.TopicPartition, required int64, _ time.Time) error {
	f.waited = append(f.waited, required)
	return f.ackErr
}
func (f *fakeReplication) ReadReplicas(log.TopicPartition, int64) (replication.ReadReplica, []replication.ReadReplica, bool) {
	return replication.ReadReplica{}, nil, false
}

// TestProduceAcksAllCodes checks the Produce handler's acks=all path over
// a replicated partition: NOT_ENOUGH_REPLICAS refuses before the append,
// the wait is for the batch's last offset plus one, its outcome is the
// partition's error code (NOT_ENOUGH_REPLICAS_AFTER_APPEND,
// REQUEST_TIMED_OUT) with the base offset kept, as Kafka's DelayedProduce;
// acks=1 does not wait.
func TestProduceAcksAllCodes(t *testing.T) {
	b := brokertest.Start(t)
	createTopic(t, b, "acks", 1)
	env := b.Handlers()
	f := &fakeReplication{}
	env.Replication = f
	ctx := context.Background()
	produce := func(acks int16, values ...string) kmsg.ProduceResponseTopicPartition {
		t.Helper()
		resp, err := env.Dispatch(ctx, wireRequest(produceReq(9, acks, "acks", 0, batch(t, -1, -1, -1, values...))))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	}
	leo := func() int64 {
		return b.Partitions().Get(log.TopicPartition{Topic: "acks", Partition: 0}).LogEndOffset()
	}

	f.checkErr = replica.ErrNotEnoughReplicas
	if p := produce(-1, "a"); p.ErrorCode != kerr.NotEnoughReplicas.Code || leo() != 0 || len(f.waited) != 0 {
		t.Fatalf("under min.insync.replicas: code %d, log end %d, waited %v; want NOT_ENOUGH_REPLICAS and nothing appended", p.ErrorCode, leo(), f.waited)
	}
	f.checkErr = nil
	if p := produce(-1, "a", "b"); p.ErrorCode != 0 || p.BaseOffset != 0 || len(f.waited) != 1 || f.waited[0] != 2 {
		t.Fatalf("acks=all: code %d base %d, waited for %v; want 0, 0, [2]", p.ErrorCode, p.BaseOffset, f.waited)
	}
	f.ackErr = replica.ErrNotEnoughReplicasAfterAppend
	if p := produce(-1, "c"); p.ErrorCode != kerr.NotEnoughReplicasAfterAppend.Code || p.BaseOffset != 2 {
		t.Fatalf("ISR shrank during the wait: code %d base %d", p.ErrorCode, p.BaseOffset)
	}
	f.ackErr = replication.ErrRequestTimedOut
	if p := produce(-1, "d"); p.ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("timed out: code %d", p.ErrorCode)
	}
	waits := len(f.waited)
	if p := produce(1, "e"); p.ErrorCode != 0 || len(f.waited) != waits {
		t.Fatalf("acks=1: code %d, waited %v", p.ErrorCode, f.waited[waits:])
	}
	if f.appended != 4 {
		t.Fatalf("%d appends reported to replication, want 4", f.appended)
	}
}

// blockingReplication holds every acks=all produce until release closes.
type blockingReplication struct {
	fakeReplication
	waiting chan struct{}
	release chan struct{}
}

func (f *blockingReplication) AwaitAcks(ctx context.Context, _ log.TopicPartition, _ int64, _ time.Time) error {
	close(f.waiting)
	select {
	case <-f.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestProduceWaitingForAcksFreesBudget checks that an acks=all produce
// waiting for its ISR holds none of queued.max.request.bytes, as Kafka
// frees a produce's records once appended, so that waiting producers do
// not hold back other connections' requests.
func TestProduceWaitingForAcksFreesBudget(t *testing.T) {
	b := brokertest.Start(t)
	createTopic(t, b, "held", 1)
	f := &blockingReplication{waiting: make(chan struct{}), release: make(chan struct{})}
	b.Handlers().Replication = f
	values := make([]string, 64)
	for i := range values {
		values[i] = string(make([]byte, 4096))
	}
	rc := dial(t, b)
	req := produceReq(9, -1, "held", 0, batch(t, -1, -1, -1, values...))
	corr := rc.send(req)
	select {
	case <-f.waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the produce never waited for acks")
	}
	if n := b.RequestBudget().InUse(); n != 0 {
		t.Fatalf("%d bytes of the request budget held by a produce waiting for acks", n)
	}
	close(f.release)
	if p := rc.recv(req, corr).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 {
		t.Fatalf("produce answered %d", p.ErrorCode)
	}
}

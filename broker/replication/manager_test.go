package replication

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/metadata"
	"github.com/cascade-kafka/cascade/broker/partition"
	"github.com/cascade-kafka/cascade/broker/record"
	"github.com/cascade-kafka/cascade/broker/replica"
)

// dirLogs is the partition manager's LogManager over one log dir.
type dirLogs struct{ m *log.Manager }

func (d dirLogs) Open(tp log.TopicPartition, id [16]byte, cfg log.Config) (partition.Log, error) {
	if l, ok := d.m.Get(tp); ok {
		return l, nil
	}
	return d.m.Create(tp, id, cfg)
}

func (d dirLogs) Delete(tp log.TopicPartition) error { return d.m.Delete(tp) }

// fakeController answers AlterPartition with the ISR and leader recovery
// state asked for and the next partition epoch, and keeps the requests.
// While answerLRS holds values, each answer takes the next as its leader
// recovery state instead.
type fakeController struct {
	mu        sync.Mutex
	reqs      []*kmsg.AlterPartitionRequest
	answerLRS []int8
}

func (c *fakeController) AlterPartition(_ context.Context, r *kmsg.AlterPartitionRequest) (*kmsg.AlterPartitionResponse, error) {
	c.mu.Lock()
	c.reqs = append(c.reqs, r)
	c.mu.Unlock()
	resp := r.ResponseKind().(*kmsg.AlterPartitionResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewAlterPartitionResponseTopic()
		rt.TopidID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionResponseTopicPartition()
			rp.Partition, rp.LeaderID, rp.LeaderEpoch, rp.PartitionEpoch = p.Partition, r.BrokerID, p.LeaderEpoch, p.PartitionEpoch+1
			rp.LeaderRecoveryState = p.LeaderRecoveryState
			c.mu.Lock()
			if len(c.answerLRS) > 0 {
				rp.LeaderRecoveryState, c.answerLRS = c.answerLRS[0], c.answerLRS[1:]
			}
			c.mu.Unlock()
			for _, m := range p.NewEpochISR {
				rp.ISR = append(rp.ISR, m.BrokerID)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (c *fakeController) BrokerEpoch() int64 { return 10 }

func (c *fakeController) lastISR() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.reqs) == 0 {
		return nil
	}
	var isr []int32
	for _, m := range c.reqs[len(c.reqs)-1].Topics[0].Partitions[0].NewEpochISR {
		isr = append(isr, m.BrokerID)
	}
	return isr
}

var tp0 = log.TopicPartition{Topic: "t", Partition: 0}

// image is topic t, one partition on brokers 1-3 led by 1, with
// min.insync.replicas=2.
func image(t *testing.T) *metadata.Image {
	return imageOf(t, []int32{1, 2, 3}, metadata.LeaderRecovered)
}

// imageOf is image with the partition's ISR and leader recovery state.
func imageOf(t *testing.T, isr []int32, lrs int8) *metadata.Image {
	t.Helper()
	two := "2"
	recs := []metadata.Record{
		metadata.TopicRecord{Name: "t", ID: metadata.UUID{1}},
		metadata.PartitionRecord{TopicID: metadata.UUID{1}, Replicas: []int32{1, 2, 3}, ISR: isr, Leader: 1, LeaderRecoveryState: lrs},
		metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: "t", Name: "min.insync.replicas", Value: &two},
	}
	for id := int32(1); id <= 3; id++ {
		recs = append(recs, metadata.RegisterBrokerRecord{BrokerID: id, BrokerEpoch: int64(id) * 10})
	}
	img, err := metadata.Apply(metadata.Empty(), recs)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func batch(t *testing.T, n int) []byte {
	t.Helper()
	recs := make([]record.Rec, n)
	for i := range recs {
		recs[i] = record.Rec{Timestamp: 1000, Value: []byte("v")}
	}
	b, err := record.Build(record.NewSpec(recs...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// leaderSetup is a manager leading tp0 over a real log, with a clock the
// test moves.
func leaderSetup(t *testing.T) (*Manager, *partition.Partition, *fakeController, *atomic.Int64) {
	t.Helper()
	return leaderSetupOf(t, image(t), &fakeController{})
}

// leaderSetupOf is leaderSetup from img with ctl as the controller.
func leaderSetupOf(t *testing.T, img *metadata.Image, ctl *fakeController) (*Manager, *partition.Partition, *fakeController, *atomic.Int64) {
	t.Helper()
	lm, err := log.Open(t.TempDir(), log.Options{RetentionCheckInterval: -1, CleanerBackoff: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lm.Close() })
	parts := partition.NewManager(dirLogs{lm})
	if err := parts.Sync([]partition.Spec{{TP: tp0, TopicID: [16]byte{1}, Config: log.DefaultConfig(), Replicated: true}}); err != nil {
		t.Fatal(err)
	}
	var clock atomic.Int64
	clock.Store(time.Unix(1000, 0).UnixNano())
	m := New(Config{NodeID: 1, LagTimeMax: 100 * time.Millisecond, MinInsyncReplicas: 1, FetchBackoff: 10 * time.Millisecond,
		NumFetchers: 1, SocketTimeout: time.Second, Now: func() time.Time { return time.Unix(0, clock.Load()) }}, parts, ctl)
	t.Cleanup(m.Close)
	m.Apply(img)
	return m, parts.Get(tp0), ctl, &clock
}

// TestUncleanLeaderRecovers is a leader elected uncleanly (KIP-704): the
// image says RECOVERING with an ISR of the leader alone; as Kafka's
// Partition, the leader counts the partition recovered and its
// expansion, when a follower catches up, says RECOVERED. An answer with
// an unknown leader recovery state is an error retried, as Kafka's
// DefaultAlterPartitionManager has it (UNKNOWN_SERVER_ERROR).
func TestUncleanLeaderRecovers(t *testing.T) {
	ctl := &fakeController{answerLRS: []int8{7}}
	m, p, _, _ := leaderSetupOf(t, imageOf(t, []int32{1}, metadata.LeaderRecovering), ctl)
	if err := m.CheckAppend(tp0, -1); !errors.Is(err, replica.ErrNotEnoughReplicas) {
		t.Fatalf("acks=all with the unclean leader alone in the ISR: %v", err)
	}
	if _, err := p.Append(batch(t, 3)); err != nil {
		t.Fatal(err)
	}
	m.Appended(tp0)
	if _, err := m.FollowerFetch(tp0, 2, 20, 3, 0); err != nil {
		t.Fatal(err)
	}
	bound := time.Now().Add(10 * time.Second)
	for m.CheckAppend(tp0, -1) != nil {
		if time.Now().After(bound) {
			t.Fatal("ISR not expanded after the follower caught up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	if len(ctl.reqs) != 2 {
		t.Fatalf("%d AlterPartition requests, want the expansion and its retry", len(ctl.reqs))
	}
	for i, r := range ctl.reqs {
		rp := r.Topics[0].Partitions[0]
		if rp.LeaderRecoveryState != metadata.LeaderRecovered || len(rp.NewEpochISR) != 2 {
			t.Fatalf("AlterPartition %d: leader recovery state %d, ISR %+v; want RECOVERED with brokers 1 and 2", i, rp.LeaderRecoveryState, rp.NewEpochISR)
		}
	}
}

// TestLeaderAcksAllAndISR drives a leader as its followers' fetches and
// the clock would: acks=all is answered when both followers fetched past
// the batch, times out while they have not, and once they lag past
// replica.lag.time.max.ms the ISR shrinks through AlterPartition and
// acks=all is refused before the append.
func TestLeaderAcksAllAndISR(t *testing.T) {
	m, p, ctl, clock := leaderSetup(t)
	if err := m.CheckAppend(tp0, -1); err != nil {
		t.Fatalf("CheckAppend with a full ISR: %v", err)
	}
	if _, err := p.Append(batch(t, 3)); err != nil {
		t.Fatal(err)
	}
	m.Appended(tp0)
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d before any follower fetched", hw)
	}
	deadline := func(d time.Duration) time.Time { return time.Unix(0, clock.Load()).Add(d) }
	if err := m.AwaitAcks(context.Background(), tp0, 3, deadline(0)); !errors.Is(err, ErrRequestTimedOut) {
		t.Fatalf("AwaitAcks before the followers fetched: %v, want a timeout", err)
	}

	done := make(chan error, 1)
	go func() { done <- m.AwaitAcks(context.Background(), tp0, 3, deadline(time.Hour)) }()
	if _, err := m.FollowerFetch(tp0, 2, 20, 3, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("acks=all answered (%v) with one follower of two at the batch's end", err)
	case <-time.After(50 * time.Millisecond):
	}
	hw, err := m.FollowerFetch(tp0, 3, 30, 3, 0)
	if err != nil || hw != 3 {
		t.Fatalf("FollowerFetch: hw %d, %v; want 3", hw, err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("acks=all: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("acks=all not answered after the ISR fetched past the batch")
	}
	if _, err := m.FollowerFetch(tp0, 4, 40, 3, 0); !errors.Is(err, replica.ErrNotLeaderOrFollower) {
		t.Fatalf("a fetch from a broker that is no replica: %v", err)
	}

	// The followers stop fetching while the leader appends: after the
	// lag time the ISR shrinks to the leader alone.
	if _, err := p.Append(batch(t, 2)); err != nil {
		t.Fatal(err)
	}
	m.Appended(tp0)
	clock.Add(int64(time.Second))
	bound := time.Now().Add(5 * time.Second)
	for m.CheckAppend(tp0, -1) == nil {
		if time.Now().After(bound) {
			t.Fatalf("ISR not shrunk; last AlterPartition ISR %v", ctl.lastISR())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if isr := ctl.lastISR(); len(isr) != 1 || isr[0] != 1 {
		t.Fatalf("AlterPartition ISR %v, want [1]", isr)
	}
	if err := m.CheckAppend(tp0, -1); !errors.Is(err, replica.ErrNotEnoughReplicas) {
		t.Fatalf("acks=all with an ISR of 1 under min.insync.replicas=2: %v", err)
	}
	if err := m.CheckAppend(tp0, 1); err != nil {
		t.Fatalf("acks=1 with an ISR of 1: %v", err)
	}
}

// TestTruncationForMatchesCache checks that a follower's truncation
// computed over its partition's own epoch cache is the one
// replica.TruncationFor computes over the whole cache.
func TestTruncationForMatchesCache(t *testing.T) {
	_, p, _, _ := leaderSetup(t)
	// Epoch 0 (MakeLeader by the image) holds offsets 0-2, epoch 2 3-5.
	if _, err := p.Append(batch(t, 3)); err != nil {
		t.Fatal(err)
	}
	if err := p.MakeLeader(2); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(batch(t, 3)); err != nil {
		t.Fatal(err)
	}
	cache := []replica.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 3}}
	leo := p.LogEndOffset()
	for _, div := range []replica.EpochEndOffset{
		{Epoch: 2, EndOffset: 4}, {Epoch: 2, EndOffset: 9}, {Epoch: 1, EndOffset: 3}, {Epoch: 0, EndOffset: 2},
		{Epoch: 0, EndOffset: 3}, {Epoch: 3, EndOffset: 5}, {Epoch: -1, EndOffset: 1},
	} {
		want := replica.TruncationFor(cache, leo, 1, div)
		if got := truncationFor(p, leo, 1, div); got != want {
			t.Errorf("diverging %+v: truncation %+v, want %+v", div, got, want)
		}
	}
}

// TestShrinkToLeaderAlone checks a reassignment that leaves the leader the
// only replica: the partition leaves replication and, the ISR being the
// leader alone, everything in its log is committed at once, as in Kafka.
func TestShrinkToLeaderAlone(t *testing.T) {
	m, p, _, _ := leaderSetup(t)
	if _, err := p.Append(batch(t, 3)); err != nil {
		t.Fatal(err)
	}
	m.Appended(tp0)
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d before any follower fetched", hw)
	}
	img, err := metadata.Apply(image(t), []metadata.Record{metadata.PartitionChangeRecord{TopicID: metadata.UUID{1},
		Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderRecoveryState: metadata.LeaderRecoveryNoChange}})
	if err != nil {
		t.Fatal(err)
	}
	// As the broker does: the partitions first, then replication.
	if err := m.parts.Sync([]partition.Spec{{TP: tp0, TopicID: [16]byte{1}, LeaderEpoch: 1, Config: log.DefaultConfig()}}); err != nil {
		t.Fatal(err)
	}
	m.Apply(img)
	if m.Replicated(tp0) {
		t.Fatal("a partition with one replica is still replicated")
	}
	if hw := p.HighWatermark(); hw != 3 {
		t.Fatalf("high watermark %d after the shrink to the leader alone, want the log end 3", hw)
	}
}

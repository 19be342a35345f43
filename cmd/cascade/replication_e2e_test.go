package main

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metadataTopic returns topic as node id's Metadata says, nil on failure.
func (c *testCluster) metadataTopic(id int, topic string) *kmsg.MetadataResponseTopic {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	m, err := req.RequestWith(ctx, c.cl.Broker(id))
	if err != nil || len(m.Topics) != 1 || m.Topics[0].ErrorCode != 0 {
		return nil
	}
	return &m.Topics[0]
}

// partitionOn returns partition 0 of topic as node id's Metadata says:
// its leader and ISR; leader -1 when unknown.
func (c *testCluster) partitionOn(id int, topic string) (leader int32, isr []int32) {
	t := c.metadataTopic(id, topic)
	if t == nil || len(t.Partitions) != 1 {
		return -1, nil
	}
	p := t.Partitions[0]
	if p.ErrorCode != 0 && p.ErrorCode != kerr.ReplicaNotAvailable.Code {
		return -1, nil
	}
	return p.Leader, p.ISR
}

// ackLog is what a producer had acknowledged, in acknowledgement order.
type ackLog struct {
	mu      sync.Mutex
	acked   []string
	times   []time.Time
	offsets map[string]int64
	errs    map[string]int
}

func (a *ackLog) record(r *kgo.Record, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.errs[err.Error()]++
		return
	}
	a.acked = append(a.acked, string(r.Value))
	a.times = append(a.times, time.Now())
	a.offsets[string(r.Value)] = r.Offset
}

// ackedSince counts the acknowledgements after t and returns the offset
// of the last one.
func (a *ackLog) ackedSince(t time.Time) (n int, last int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, at := range a.times {
		if at.After(t) {
			n++
			last = a.offsets[a.acked[i]]
		}
	}
	return n, last
}

// longestGap is the longest time without an acknowledgement from t on,
// up to the last acknowledgement, and when it ended.
func (a *ackLog) longestGap(t time.Time) (gap time.Duration, ended time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	prev := t
	for _, at := range a.times {
		if at.Before(t) {
			continue
		}
		if d := at.Sub(prev); d > gap {
			gap, ended = d, at
		}
		prev = at
	}
	return gap, ended
}

// firstAckAfter is the time of the first acknowledgement after t.
func (a *ackLog) firstAckAfter(t time.Time) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, at := range a.times {
		if at.After(t) {
			return at, true
		}
	}
	return time.Time{}, false
}

func (a *ackLog) snapshot() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.acked...)
}

// TestClusterReplicationFailover runs three combined cascade processes
// with an RF=3, min.insync.replicas=2 topic written by a franz-go
// idempotent acks=all producer: SIGKILL of the partition's leader elects a
// new one from the ISR and acknowledgements resume; the killed node,
// restarted behind a log start that DeleteRecords moved meanwhile, starts
// over at the leader's log start and rejoins the ISR; a leader that dies
// with records only it had is truncated when it returns; with one node down
// a topic needing three in-sync replicas refuses acks=all with
// NOT_ENOUGH_REPLICAS; with two of three nodes down (no controller quorum
// left, so the ISR cannot shrink) acks=all is never acknowledged; and
// every acknowledged record is read back exactly once, in order.
func TestClusterReplicationFailover(t *testing.T) {
	c := startTestCluster(t, fastReplication...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic = "durable"
	c.createReplicated(ctx, topic, 1, 2)

	prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(30*time.Second),
		kgo.ProduceRequestTimeout(10*time.Second), kgo.MetadataMinAge(50*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.MaxBufferedRecords(200), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	acks := &ackLog{errs: map[string]int{}, offsets: map[string]int64{}}
	finish := produceNumbers(ctx, prod, acks, 2*time.Millisecond)
	waitFor(t, 20*time.Second, "acknowledgements before the kill", func() bool { return len(acks.snapshot()) >= 200 })

	leader, _ := c.partitionOn(1, topic)
	if leader < 0 {
		t.Fatal("no leader")
	}
	other := 1
	if other == int(leader) {
		other = 2
	}
	wasController := c.controller(other) == leader
	killed := time.Now()
	c.procs[leader-1].kill()
	newLeaderIn := waitFor(t, 30*time.Second, "a new leader from the ISR", func() bool {
		l, isr := c.partitionOn(other, topic)
		return l >= 0 && l != leader && len(isr) >= 2
	})
	waitFor(t, 30*time.Second, "an acknowledgement after the kill", func() bool {
		_, ok := acks.firstAckAfter(killed.Add(newLeaderIn))
		return ok
	})
	newLeader, _ := c.partitionOn(other, topic)
	t.Logf("leader %d killed (the active controller too: %v): new leader %d seen after %v", leader, wasController, newLeader, newLeaderIn)

	// While it is down the log start moves past its log end: restarted,
	// it finds its fetch offset out of range and starts over at the
	// leader's log start.
	var logStart int64
	waitFor(t, 30*time.Second, "100 acknowledgements after the kill", func() bool {
		n, last := acks.ackedSince(killed.Add(newLeaderIn))
		logStart = last
		return n >= 100
	})
	var dr kadm.Offsets
	dr.Add(kadm.Offset{Topic: topic, Partition: 0, At: logStart})
	drs, err := c.adm.DeleteRecords(ctx, dr)
	if err == nil {
		err = drs.Error()
	}
	if err != nil {
		t.Fatalf("DeleteRecords before %d: %v", logStart, err)
	}
	c.procs[leader-1].start(t, c.bin, c.logs[leader-1])
	rejoinIn := waitFor(t, 45*time.Second, "the restarted node back in the ISR", func() bool {
		_, isr := c.partitionOn(other, topic)
		return len(isr) == 3
	})
	if !strings.Contains(c.logs[leader-1].String(), "follower out of range") {
		t.Fatalf("node %d, restarted behind the leader's log start %d, did not start over there", leader, logStart)
	}
	t.Logf("node %d restarted behind the log start: started over at %d and back in the ISR after %v", leader, logStart, rejoinIn)
	// Acknowledgements resumed: the longest pause after the kill is the
	// failover (acknowledgements of records the old leader committed just
	// before it died may come in between).
	gap, resumed := acks.longestGap(killed)
	t.Logf("acknowledgements paused at most %v after the kill, resuming %v after it", gap, resumed.Sub(killed))

	// A divergent tail: the leader appends what its followers (both
	// paused) never fetch, then dies; the followers resume and elect a
	// new leader from the ISR in a new epoch, and the old leader,
	// restarted, truncates what it alone had before it rejoins the ISR.
	oldLeader := int(newLeader)
	var followers []int
	for id := 1; id <= 3; id++ {
		if id != oldLeader {
			followers = append(followers, id)
		}
	}
	for _, id := range followers {
		c.procs[id-1].cmd.Process.Signal(syscall.SIGSTOP)
	}
	// What the leader alone appends: acks=1 records, acknowledged by the
	// leader alone (so Kafka allows them to be lost), and the idempotent
	// producer's batch in flight.
	tail, err := kgo.NewClient(kgo.SeedBrokers(c.seeds[oldLeader-1]), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.RecordDeliveryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	tctx, tcancel := context.WithTimeout(ctx, 5*time.Second)
	for i := range 5 {
		if err := tail.ProduceSync(tctx, &kgo.Record{Value: []byte("tail-" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("acks=1 to the leader with its followers paused: %v", err)
		}
	}
	tcancel()
	tail.Close()
	c.procs[oldLeader-1].kill()
	for _, id := range followers {
		c.procs[id-1].cmd.Process.Signal(syscall.SIGCONT)
	}
	waitFor(t, 30*time.Second, "a leader once the paused followers resume", func() bool {
		l, _ := c.partitionOn(followers[0], topic)
		return l >= 0 && l != int32(oldLeader)
	})
	newLeader, _ = c.partitionOn(followers[0], topic)
	c.procs[oldLeader-1].start(t, c.bin, c.logs[oldLeader-1])
	rejoinIn = waitFor(t, 45*time.Second, "the leader with a divergent tail back in the ISR", func() bool {
		_, isr := c.partitionOn(int(newLeader), topic)
		return len(isr) == 3
	})
	if !strings.Contains(c.logs[oldLeader-1].String(), "follower truncated") {
		t.Fatalf("node %d, restarted with records no other replica had, did not truncate", oldLeader)
	}
	t.Logf("node %d restarted with a divergent tail: truncated and back in the ISR after %v", oldLeader, rejoinIn)

	// One node down: a topic that needs three in-sync replicas refuses
	// acks=all before appending.
	down := int(newLeader)%3 + 1 // a node that is not the leader
	if _, err := c.adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": kmsg.StringPtr("3")}, "strict"); err != nil {
		t.Fatalf("CreateTopic strict: %v", err)
	}
	waitFor(t, 20*time.Second, "strict's ISR of three", func() bool {
		_, isr := c.partitionOn(int(newLeader), "strict")
		return len(isr) == 3
	})
	c.procs[down-1].kill()
	waitFor(t, 30*time.Second, "the killed node out of strict's ISR", func() bool {
		_, isr := c.partitionOn(int(newLeader), "strict")
		return len(isr) == 2
	})
	strictErr := produceOnce(t, c, "strict", 10*time.Second)
	if !errors.Is(strictErr, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with an ISR of 2 under min.insync.replicas=3: %v, want NOT_ENOUGH_REPLICAS", strictErr)
	}

	// Stop the producer with everything it sent answered.
	finish(t, 40*time.Second)
	acked := acks.snapshot()
	t.Logf("%d records acknowledged; failures: %v", len(acked), acks.errs)

	// Two of three down: the leader alone cannot commit anything.
	third := 6 - down - int(newLeader)
	c.procs[third-1].kill()
	twoDownErr := produceOnce(t, c, topic, 6*time.Second)
	if twoDownErr == nil {
		t.Fatal("acks=all acknowledged with two of three nodes down")
	}
	t.Logf("acks=all with two of three nodes down: %v", twoDownErr)

	// Every acknowledged record is on the surviving leader, once, in order.
	got := readAll(t, c.seeds[newLeader-1], topic)
	seen := positions(t, got)
	last, deleted := -1, 0
	for _, v := range acked {
		if acks.offsets[v] < logStart {
			deleted++
			continue // deleted by DeleteRecords
		}
		pos, ok := seen[v]
		if !ok {
			t.Fatalf("acknowledged record %s missing (read %d records)", v, len(got))
		}
		if pos < last {
			t.Fatalf("acknowledged record %s out of order", v)
		}
		last = pos
	}
	t.Logf("read back %d records; all %d acknowledged at or after the log start present once, in order (%d deleted before it)",
		len(got), len(acked)-deleted, deleted)
}

// fastReplication are the replication timings of the failover tests: a
// follower out of the ISR after 4 s, fetches answered within 200 ms.
var fastReplication = []string{"replica.lag.time.max.ms=4000", "replica.fetch.wait.max.ms=200", "replica.fetch.backoff.ms=100"}

// produceNumbers produces 0, 1, 2, ... with prod every pause until ctx
// ends or finish is called, recording the outcomes in acks. finish stops
// and flushes, failing the test if some record is unanswered after bound.
func produceNumbers(ctx context.Context, prod *kgo.Client, acks *ackLog, pause time.Duration) (finish func(t *testing.T, bound time.Duration)) {
	return produceValues(ctx, prod, acks, "", pause)
}

// produceValues is produceNumbers with each value after prefix.
func produceValues(ctx context.Context, prod *kgo.Client, acks *ackLog, prefix string, pause time.Duration) (finish func(t *testing.T, bound time.Duration)) {
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; pctx.Err() == nil; i++ {
			prod.Produce(pctx, &kgo.Record{Value: []byte(prefix + strconv.Itoa(i))}, acks.record)
			time.Sleep(pause)
		}
	})
	return func(t *testing.T, bound time.Duration) {
		t.Helper()
		stop()
		wg.Wait()
		fctx, cancel := context.WithTimeout(ctx, bound)
		defer cancel()
		if err := prod.Flush(fctx); err != nil {
			t.Fatalf("flush: %v", err)
		}
	}
}

// latestOffset is partition 0 of topic's high watermark (ListOffsets
// latest) as r answers, -1 on failure.
func latestOffset(ctx context.Context, r kmsg.Requestor, topic string) int64 {
	resp, err := latestOffsetRequest(topic, -1).RequestWith(ctx, r)
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		return -1
	}
	return resp.Topics[0].Partitions[0].Offset
}

// produceOnce sends one acks=all record to topic with a fresh client and
// returns its outcome within about bound.
func produceOnce(t *testing.T, c *testCluster, topic string, bound time.Duration) error {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(bound), kgo.ProduceRequestTimeout(bound/2),
		// Not idempotent, so that the retry limit holds and the
		// broker's error is what comes back.
		kgo.DisableIdempotentWrite(), kgo.RecordRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), bound+5*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, &kgo.Record{Value: []byte("probe")}).FirstErr()
}

// positions returns the position of each value in got, failing the test
// on a value read twice.
func positions(t *testing.T, got []string) map[string]int {
	t.Helper()
	at := map[string]int{}
	for i, v := range got {
		if j, dup := at[v]; dup {
			t.Fatalf("record %s at positions %d and %d", v, j, i)
		}
		at[v] = i
	}
	return at
}

// readAll consumes topic partition 0 from its start up to its high
// watermark through the broker at addr.
func readAll(t *testing.T, addr, topic string) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var hw int64 = -1
	for hw < 0 && ctx.Err() == nil {
		if hw = latestOffset(ctx, cl, topic); hw < 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	var out []string
	next := int64(0)
	for next < hw {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s", next, hw, topic)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, string(r.Value))
			next = r.Offset + 1
		})
	}
	return out
}

package main

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// replicaLog reads partition 0 of topic from node id's own replica, as a
// consumer that may read from any replica does (Fetch v11+), from the log
// start to that replica's high watermark, and returns each offset's value
// and the high watermark.
func (c *testCluster) replicaLog(id int, topic string) (map[int64]string, int64) {
	c.t.Helper()
	out := map[int64]string{}
	next, hw := int64(0), int64(-1)
	for hw < 0 || next < hw {
		rp := c.rawFetch(id, topic, next, "", 0)
		if rp.ErrorCode != 0 {
			c.t.Fatalf("Fetch of %s at %d from node %d: error code %d", topic, next, id, rp.ErrorCode)
		}
		hw = rp.HighWatermark
		fp, after := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: next, Topic: topic},
			&rp, kgo.DefaultDecompressor(), nil)
		if fp.Err != nil {
			c.t.Fatalf("Fetch of %s at %d from node %d: %v", topic, next, id, fp.Err)
		}
		for _, r := range fp.Records {
			out[r.Offset] = string(r.Value)
		}
		if after <= next && next < hw {
			c.t.Fatalf("Fetch of %s at %d from node %d: no progress below its high watermark %d", topic, next, id, hw)
		}
		next = after
	}
	return out, hw
}

// TestClusterPausedLeaderTruncates pauses (SIGSTOP) the leader of an RF=3,
// min.insync.replicas=2 partition after it appended records its followers
// never fetched, and with a produce in its socket it has not read: the
// followers elect a new leader in a newer epoch, which acknowledges acks=all
// writes at the same offsets. Resumed (SIGCONT), the old leader learns it
// follows, truncates what it alone had and rejoins the ISR, and the three
// replicas then hold the same records at every offset, every acknowledged
// record at the offset it was acknowledged at; the produce it read after
// resuming is never acknowledged unless it is there too.
func TestClusterPausedLeaderTruncates(t *testing.T) {
	c := startTestCluster(t, append(slices.Clone(fastReplication),
		"broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500")...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic = "paused"
	c.createReplicated(ctx, topic, 1, 2)

	acked := map[string]int64{}
	var ackedMu sync.Mutex
	produce := func(cl *kgo.Client, prefix string, n int) {
		t.Helper()
		for i := range n {
			v := prefix + strconv.Itoa(i)
			r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).First()
			if err != nil {
				t.Fatalf("acks=all produce of %s: %v", v, err)
			}
			ackedMu.Lock()
			acked[v] = r.Offset
			ackedMu.Unlock()
		}
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(60*time.Second), kgo.MetadataMinAge(50*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produce(prod, "before-", 20)

	leader, _ := c.partitionOn(1, topic)
	if leader < 0 {
		t.Fatal("no leader")
	}
	followers := others(leader)
	oldEpoch := c.metadataTopic(int(leader), topic).Partitions[0].LeaderEpoch

	// The followers stop fetching; the leader appends acks=1 records
	// that only it will have (but for what answers to fetches already on
	// their way carry).
	for _, id := range followers {
		if err := c.procs[id-1].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	tail, err := kgo.NewClient(kgo.SeedBrokers(c.seeds[leader-1]), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.RecordDeliveryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := tail.ProduceSync(ctx, &kgo.Record{Value: []byte("tail-" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("acks=1 to the leader with its followers paused: %v", err)
		}
	}
	// The leader pauses with an acks=all produce on its connection that it
	// reads only once resumed.
	late, err := kgo.NewClient(kgo.SeedBrokers(c.seeds[leader-1]), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(), kgo.RecordRetries(0),
		kgo.RecordDeliveryTimeout(30*time.Second), kgo.ProduceRequestTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	if err := late.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.procs[leader-1].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	lateDone := make(chan struct{})
	var lateRec *kgo.Record
	var lateErr error
	go func() {
		defer close(lateDone)
		lateRec, lateErr = late.ProduceSync(ctx, &kgo.Record{Value: []byte("late")}).First()
	}()
	for _, id := range followers {
		if err := c.procs[id-1].cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 45*time.Second, "a new leader among the resumed followers", func() bool {
		l, _ := c.partitionOn(followers[0], topic)
		return l >= 0 && l != leader
	})
	newLeader, _ := c.partitionOn(followers[0], topic)
	newEpoch := c.metadataTopic(int(newLeader), topic).Partitions[0].LeaderEpoch
	if newEpoch <= oldEpoch {
		t.Fatalf("new leader %d in epoch %d, not after epoch %d", newLeader, newEpoch, oldEpoch)
	}
	produce(prod, "after-", 20)
	resumed := time.Now()
	if err := c.procs[leader-1].cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	rejoin := waitFor(t, 45*time.Second, "the resumed leader back in the ISR", func() bool {
		_, isr := c.partitionOn(int(newLeader), topic)
		return len(isr) == 3
	})
	t.Logf("leader %d (epoch %d) paused; %d leads epoch %d; resumed, back in the ISR after %v", leader, oldEpoch, newLeader, newEpoch, rejoin)
	produce(prod, "rejoined-", 10)
	<-lateDone
	t.Logf("the produce read after resuming: %v (%v after the resume)", lateErr, time.Since(resumed))
	if lateErr == nil {
		acked["late"] = lateRec.Offset
	}
	if !strings.Contains(c.logs[leader-1].String(), "follower truncated") {
		t.Fatalf("node %d resumed with records no other replica had, and did not truncate", leader)
	}

	// Every replica holds the same records, every acknowledged one where
	// it was acknowledged.
	var logs []map[int64]string
	var want int64
	waitFor(t, 30*time.Second, "every replica's high watermark at the leader's", func() bool {
		logs = logs[:0]
		_, want = c.replicaLog(int(newLeader), topic)
		for id := 1; id <= 3; id++ {
			l, hw := c.replicaLog(id, topic)
			if hw != want {
				return false
			}
			logs = append(logs, l)
		}
		return true
	})
	for off := range want {
		v := logs[0][off]
		for i, l := range logs[1:] {
			if l[off] != v {
				t.Fatalf("offset %d: node 1 holds %q, node %d %q", off, v, i+2, l[off])
			}
		}
	}
	for v, off := range acked {
		if logs[0][off] != v {
			t.Fatalf("acknowledged %s at offset %d, which holds %q", v, off, logs[0][off])
		}
	}
	t.Logf("%d records on each replica, the %d acknowledged ones in place", want, len(acked))
}

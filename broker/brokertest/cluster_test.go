package brokertest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

// produce writes values from..to-1 of key "k" to topic with acks=all and
// fails the test unless every one is acknowledged.
func produce(t *testing.T, cl *kgo.Client, topic string, from, to int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce %d..%d: %v", from, to-1, err)
	}
}

// consumeAll reads topic's partition 0 from the start with a new client
// and fails unless it holds exactly the values 0..n-1 in order.
func consumeAll(t *testing.T, c *brokertest.Cluster, topic string, n int) {
	t.Helper()
	cl := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var got []string
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v", len(got), n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	for i, v := range got {
		if v != fmt.Sprint(i) {
			t.Fatalf("record %d is %q, want %d (read %d records)", i, v, i, len(got))
		}
	}
	if len(got) != n {
		t.Fatalf("read %d records, want %d", len(got), n)
	}
}

// TestClusterKillRestartLeader crashes the leader of a partition with
// replication factor 3 and min.insync.replicas=2 between acks=all
// produces, restarts it, moves the leadership back to it, and reads every
// acknowledged record back in order through franz-go.
func TestClusterKillRestartLeader(t *testing.T) {
	c := brokertest.StartCluster(t, 3, brokertest.WithOverrides(map[string]string{"min.insync.replicas": "2"}))
	c.CreateTopic(t, "orders", 1, 3, nil)
	first, err := c.Leader("orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	replicas, err := c.Replicas("orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	cl := c.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()))
	produce(t, cl, "orders", 0, 100)

	if err := c.Kill(first); err != nil {
		t.Fatal(err)
	}
	// A crash leaves the log dir unclean, as SIGKILL would.
	if _, err := os.Stat(filepath.Join(c.Node(first).Dir, "data", ".kafka_cleanshutdown")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after Kill the clean-shutdown marker is there (stat: %v)", err)
	}
	next, err := c.Leader("orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	if next == first {
		t.Fatalf("node %d still leads after its Kill", first)
	}
	if err := c.WaitISR("orders", 0, 2); err != nil {
		t.Fatal(err)
	}
	produce(t, cl, "orders", 100, 200)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Restart(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitISR("orders", 0, 3); err != nil {
		t.Fatal(err)
	}
	if err := c.MoveLeader("orders", 0, replicas[0]); err != nil {
		t.Fatal(err)
	}
	if l, err := c.Leader("orders", 0); err != nil || l != replicas[0] {
		t.Fatalf("after MoveLeader to %d the leader is %d (%v)", replicas[0], l, err)
	}
	produce(t, cl, "orders", 200, 300)
	consumeAll(t, c, "orders", 300)
}

// TestClusterControllerKill kills the active controller: another voter
// takes over, a topic can be created through it, and the old controller
// rejoins on Restart.
func TestClusterControllerKill(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	ctl, err := c.Controller()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(ctl); err != nil {
		t.Fatal(err)
	}
	next, err := c.Controller()
	if err != nil {
		t.Fatal(err)
	}
	if next == ctl {
		t.Fatalf("killed node %d still leads the quorum", ctl)
	}
	c.CreateTopic(t, "after", 1, 2, nil)
	cl := c.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()))
	produce(t, cl, "after", 0, 10)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Restart(ctx, ctl); err != nil {
		t.Fatal(err)
	}
	consumeAll(t, c, "after", 10)
}

// TestClusterStopAndControls stops a leader cleanly (its log dir gets the
// clean-shutdown marker and the leadership moves), checks that MoveLeader
// moves the leadership to a replica that is not first and refuses a node
// with no replica.
func TestClusterStopAndControls(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	if got := len(c.Seeds()); got != 3 || c.Bootstrap() == "" {
		t.Fatalf("Seeds() has %d addresses, Bootstrap() %q", got, c.Bootstrap())
	}
	c.CreateTopic(t, "stop", 1, 3, nil)
	leader, err := c.Leader("stop", 0)
	if err != nil {
		t.Fatal(err)
	}
	replicas, err := c.Replicas("stop", 0)
	if err != nil {
		t.Fatal(err)
	}
	// The second replica leads after a reorder and a preferred election.
	if err := c.MoveLeader("stop", 0, replicas[1]); err != nil {
		t.Fatalf("MoveLeader to the second replica: %v", err)
	}
	if got, err := c.Replicas("stop", 0); err != nil || got[0] != replicas[1] {
		t.Fatalf("after MoveLeader the replicas are %v (%v), want %d first", got, err, replicas[1])
	}
	if l, err := c.Leader("stop", 0); err != nil || l != replicas[1] {
		t.Fatalf("after MoveLeader the leader is %d (%v), want %d", l, err, replicas[1])
	}
	leader = replicas[1]
	c.CreateTopic(t, "single", 1, 1, nil)
	one, err := c.Replicas("single", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MoveLeader("single", 0, 1+one[0]%3); !errors.Is(err, brokertest.ErrNotReplica) {
		t.Fatalf("MoveLeader to a node with no replica: %v, want ErrNotReplica", err)
	}
	if err := c.Stop(leader); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(c.Node(leader).Dir, "data", ".kafka_cleanshutdown")); err != nil {
		t.Fatalf("after Stop the clean-shutdown marker is missing: %v", err)
	}
	if next, err := c.Leader("stop", 0); err != nil || next == leader {
		t.Fatalf("after Stop of leader %d the leader is %d (%v)", leader, next, err)
	}
	if err := c.WaitISR("stop", 0, 2); err != nil {
		t.Fatal(err)
	}
}

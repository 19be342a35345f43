package brokertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

// These examples start clusters, which needs a test's t: each is written
// as the body of a test function and compiled, not run (a cluster's
// leaders and timings differ from run to run, so there is no output to
// compare). controlsBody in controls_test.go runs the same steps.
var t = new(testing.T)

// A partition leader is crashed and restarted while a producer with
// acks=all keeps writing.
func ExampleStartCluster() {
	c := brokertest.StartCluster(t, 3,
		brokertest.WithOverrides(map[string]string{"min.insync.replicas": "2"}))
	c.CreateTopic(t, "orders", 1, 3, nil) // waits for a full ISR
	cl := c.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := context.Background()
	produce := func() {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce()

	leader, err := c.Leader("orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(leader); err != nil { // abrupt: no controlled shutdown
		t.Fatal(err)
	}
	if err := c.WaitISR("orders", 0, 2); err != nil { // the survivors
		t.Fatal(err)
	}
	produce() // the client moves to the new leader
	if err := c.Restart(ctx, leader); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitISR("orders", 0, 3); err != nil {
		t.Fatal(err)
	}
	if err := c.MoveLeader("orders", 0, leader); err != nil { // preferred election back
		t.Fatal(err)
	}
}

// A leader is cut from its peers: it still answers its clients but cannot
// acknowledge an acks=all write; the others elect a leader, and after the
// heal it catches up and rejoins the ISR.
func ExampleCluster_Isolate() {
	c := brokertest.StartCluster(t, 3,
		brokertest.WithOverrides(map[string]string{"min.insync.replicas": "2"}))
	c.CreateTopic(t, "orders", 1, 3, nil)
	leader, _ := c.Leader("orders", 0)

	if err := c.Isolate(leader); err != nil {
		t.Fatal(err)
	}
	next, err := c.Leader("orders", 0) // waits for a leader the others elected
	if err != nil || next == leader {
		t.Fatalf("leader %d (%v)", next, err)
	}
	if err := c.Heal(leader); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitISR("orders", 0, 3); err != nil {
		t.Fatal(err)
	}
}

// A node's connections freeze, as with a SIGSTOP of its process, until
// Resume; its own timers keep running (Cluster.Pause).
func ExampleCluster_Pause() {
	c := brokertest.StartCluster(t, 3)
	ctl, _ := c.Controller()
	if err := c.Pause(ctl); err != nil {
		t.Fatal(err)
	}
	if next, err := c.Controller(); err != nil || next == ctl { // another voter leads
		t.Fatalf("controller %d (%v)", next, err)
	}
	if err := c.Resume(ctl); err != nil {
		t.Fatal(err)
	}
}

// The same controls on cmd/cascade processes: Kill is SIGKILL, Pause is
// SIGSTOP, and with WithNetworkNamespaces (root) Isolate drops packets.
func ExampleStartProcessCluster() {
	c := brokertest.StartProcessCluster(t, 3, brokertest.WithNetworkNamespaces(),
		brokertest.WithOverrides(map[string]string{"min.insync.replicas": "2"}))
	c.CreateTopic(t, "orders", 1, 3, nil)
	leader, _ := c.Leader("orders", 0)
	if err := c.Pause(leader); err != nil { // SIGSTOP
		t.Fatal(err)
	}
	if err := c.WaitISR("orders", 0, 2); err != nil { // fenced after broker.session.timeout.ms
		t.Fatal(err)
	}
	if err := c.Resume(leader); err != nil { // SIGCONT
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Kill(leader); err != nil { // SIGKILL
		t.Fatal(err)
	}
	if err := c.Restart(ctx, leader); err != nil {
		t.Fatal(err)
	}
}

// One test body for both kinds of cluster.
func ExampleControls() {
	check := func(c brokertest.Controls) {
		c.CreateTopic(t, "orders", 1, 3, nil)
		leader, _ := c.Leader("orders", 0)
		if err := c.Isolate(leader); err != nil {
			t.Fatal(err) // ErrNoIsolation on processes without WithNetworkNamespaces
		}
		if err := c.WaitISR("orders", 0, 2); err != nil {
			t.Fatal(err)
		}
		if err := c.Heal(leader); err != nil {
			t.Fatal(err)
		}
	}
	check(brokertest.StartCluster(t, 3))
	check(brokertest.StartProcessCluster(t, 3, brokertest.WithNetworkNamespaces()))
}

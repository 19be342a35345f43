package cascadecontainer_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/broker/brokertest/clusterctl"
	"github.com/cascade-kafka/cascade/docker/cascadecontainer"
)

// TestRunClusterControls starts three containers and drives every node
// control of RunCluster while a franz-go producer writes with acks=all to
// a partition with replication factor 3 and min.insync.replicas=2, checks
// each control's effect as a client sees it, and reads every
// acknowledged record back in order at the end:
//
//   - Kill of the leader (docker kill): another leader, ISR 2, writes go
//     on; Start: ISR 3 again; MoveLeader: the preferred replica leads.
//   - Stop of the leader (docker stop): the broker exits 0 after its
//     controlled shutdown, and the leadership has moved.
//   - Kill of the active controller (Controller): another voter leads.
//   - Pause of the leader (docker pause): the engine reports it paused,
//     the others fence it and elect a leader, writes go on; Resume: ISR 3.
func TestRunClusterControls(t *testing.T) {
	img := image(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := cascadecontainer.RunCluster(ctx, 3, cascadecontainer.WithImage(img),
		cascadecontainer.WithOverride("min.insync.replicas", "2"),
		// Kafka's session is 9 s; a paused node is fenced sooner.
		cascadecontainer.WithOverride("broker.session.timeout.ms", "4000"),
		cascadecontainer.WithOverride("broker.heartbeat.interval.ms", "500"))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if t.Failed() && c != nil {
			t.Logf("logs:\n%s", c.Target().Logs(3000))
		}
		if err := c.Terminate(ctx); err != nil {
			t.Errorf("terminate: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	brokers, err := c.Brokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProduceRequestTimeout(3*time.Second), kgo.RequestTimeoutOverhead(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// Every broker must be registered and unfenced for three replicas.
	poll(t, ctx, func() error {
		resp, err := adm.CreateTopic(ctx, 1, 3, nil, "events")
		if err == nil {
			err = resp.Err
		}
		return err
	})
	must(t, c.WaitISR(ctx, "events", 0, 3))
	replicas, err := c.Replicas(ctx, "events", 0)
	must(t, err)

	next := 0
	produce := func(n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := next; i < next+n; i++ {
			recs = append(recs, &kgo.Record{Topic: "events", Value: []byte(fmt.Sprint(i))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce %d..%d: %v", next, next+n-1, err)
		}
		next += n
	}
	leader := func() int {
		t.Helper()
		l, err := c.Leader(ctx, "events", 0)
		must(t, err)
		return l
	}
	// moved waits until a node other than old leads with an ISR of 2.
	moved := func(old int, why string) {
		t.Helper()
		must(t, c.WaitISR(ctx, "events", 0, 2))
		if l := leader(); l == old {
			t.Fatalf("node %d still leads after its %s", old, why)
		}
	}
	start := func(id int) {
		t.Helper()
		must(t, c.Start(ctx, id))
		must(t, c.WaitISR(ctx, "events", 0, 3))
	}
	state := func(id int) (running, paused bool, exit int) {
		t.Helper()
		nd, err := c.Node(id)
		must(t, err)
		st, err := nd.State(ctx)
		must(t, err)
		return st.Running, st.Paused, st.ExitCode
	}
	produce(50)

	first := leader()
	must(t, c.Kill(ctx, first))
	if running, _, exit := state(first); running || exit != 137 {
		t.Fatalf("node %d after Kill: running %v, exit code %d, want 137 (SIGKILL)", first, running, exit)
	}
	moved(first, "Kill")
	produce(50)
	start(first)
	must(t, c.MoveLeader(ctx, "events", 0, replicas[0]))
	if l := leader(); l != replicas[0] {
		t.Fatalf("after MoveLeader to %d the leader is %d", replicas[0], l)
	}

	must(t, c.Stop(ctx, replicas[0]))
	if running, _, exit := state(replicas[0]); running || exit != 0 {
		t.Fatalf("node %d after Stop: running %v, exit code %d, want a clean exit", replicas[0], running, exit)
	}
	moved(replicas[0], "Stop")
	produce(50)
	start(replicas[0])

	ctl, err := c.Controller(ctx)
	must(t, err)
	must(t, c.Kill(ctx, ctl))
	if now, err := c.Controller(ctx); err != nil || now == ctl {
		t.Fatalf("after Kill of controller %d the controller is %d (%v)", ctl, now, err)
	}
	produce(50)
	start(ctl)

	paused := leader()
	must(t, c.Pause(ctx, paused))
	if running, isPaused, _ := state(paused); !running || !isPaused || c.Target().Live(paused) {
		t.Fatalf("node %d after Pause: running %v, paused %v", paused, running, isPaused)
	}
	moved(paused, "Pause")
	produce(50)
	must(t, c.Resume(ctx, paused))
	must(t, c.WaitISR(ctx, "events", 0, 3))
	produce(50)

	rd, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("events"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	must(t, err)
	defer rd.Close()
	var got []string
	for len(got) < next && ctx.Err() == nil {
		rd.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if len(got) != next {
		t.Fatalf("read %d records, want %d", len(got), next)
	}
	for i, v := range got {
		if v != fmt.Sprint(i) {
			t.Fatalf("record %d is %q", i, v)
		}
	}
	if _, err := c.Target().Request(ctx, 9, nil); err == nil {
		t.Fatal("a request to node 9 of 3 succeeded")
	}
	if err := clusterctl.MoveLeader(ctx, c.Target(), "events", 0, 9); !errors.Is(err, clusterctl.ErrNotReplica) {
		t.Fatalf("MoveLeader to a node with no replica: %v, want ErrNotReplica", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// poll calls f until it succeeds or ctx ends.
func poll(t *testing.T, ctx context.Context, f func() error) {
	t.Helper()
	for {
		err := f()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%v (last: %v)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

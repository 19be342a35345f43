package cascadecontainer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/docker/cascadecontainer"
)

// TestRunClusterKillNode starts three containers, produces with
// replication factor 3 and min.insync.replicas=2, kills the partition
// leader's container with SIGKILL, produces again, and reads every
// acknowledged record back; then starts the killed container again, waits
// for it to rejoin the ISR, and pauses and resumes a follower.
func TestRunClusterKillNode(t *testing.T) {
	img := image(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, err := cascadecontainer.RunCluster(ctx, 3, cascadecontainer.WithImage(img),
		cascadecontainer.WithOverride("min.insync.replicas", "2"))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
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
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequiredAcks(kgo.AllISRAcks()))
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
	leader := isr(t, ctx, adm, 3)

	produce := func(from, to int) {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Topic: "events", Value: []byte(fmt.Sprint(i))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce %d..%d: %v", from, to-1, err)
		}
	}
	produce(0, 100)
	if err := c.Kill(ctx, leader); err != nil {
		t.Fatal(err)
	}
	if next := isr(t, ctx, adm, 2); next == leader {
		t.Fatalf("killed node %d still leads", leader)
	}
	produce(100, 200)

	rd, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("events"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var got []string
	for len(got) < 200 && ctx.Err() == nil {
		rd.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if len(got) != 200 {
		t.Fatalf("read %d records, want 200", len(got))
	}
	for i, v := range got {
		if v != fmt.Sprint(i) {
			t.Fatalf("record %d is %q", i, v)
		}
	}

	if err := c.Start(ctx, leader); err != nil {
		t.Fatal(err)
	}
	now := isr(t, ctx, adm, 3)

	// A paused follower is frozen (the engine says so) and, resumed,
	// still in sync.
	follower := now%3 + 1
	if err := c.Pause(ctx, follower); err != nil {
		t.Fatal(err)
	}
	nd, err := c.Node(follower)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := nd.State(ctx); err != nil || !st.Paused {
		t.Fatalf("node %d after Pause: state %+v (%v)", follower, st, err)
	}
	if err := c.Resume(ctx, follower); err != nil {
		t.Fatal(err)
	}
	if st, err := nd.State(ctx); err != nil || st.Paused || !st.Running {
		t.Fatalf("node %d after Resume: state %+v (%v)", follower, st, err)
	}
	produce(200, 210)
	isr(t, ctx, adm, 3)
}

// isr waits until events-0 has a leader and n in-sync replicas and returns
// the leader.
func isr(t *testing.T, ctx context.Context, adm *kadm.Client, n int) int {
	t.Helper()
	leader := -1
	poll(t, ctx, func() error {
		md, err := adm.Metadata(ctx, "events")
		if err != nil {
			return err
		}
		p := md.Topics["events"].Partitions[0]
		if p.Err != nil || p.Leader < 0 || len(p.ISR) != n {
			return fmt.Errorf("events-0: leader %d, ISR %v, err %v", p.Leader, p.ISR, p.Err)
		}
		leader = int(p.Leader)
		return nil
	})
	return leader
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

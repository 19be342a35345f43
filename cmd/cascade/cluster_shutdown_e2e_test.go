package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterControlledShutdown stops nodes of a three-process cluster
// with SIGTERM. The active controller's node asks to shut down, is let go
// once its partitions are leaderless (replication factor 1) and it is
// fenced, hands the quorum leadership over and exits 0; Metadata stops
// listing it and its partitions have no leader at once, far inside
// broker.session.timeout.ms (30 s here), and another controller is active.
// Restarted, it leads its partitions again and serves them. A node that is
// not the controller stops the same way, without a hand-over.
func TestClusterControlledShutdown(t *testing.T) {
	c := startTestCluster(t, "broker.session.timeout.ms=30000")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const topic = "drain"
	placed := c.createTopic(topic, 6)
	ctl := c.controller(1)
	asked := 1 + int(ctl)%3
	var mine []int32
	for p, l := range placed {
		if l == ctl {
			mine = append(mine, p)
		}
	}
	if len(mine) == 0 {
		t.Fatalf("the controller %d leads nothing: %v", ctl, placed)
	}
	for _, p := range mine {
		if err := c.cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("before")}).FirstErr(); err != nil {
			t.Fatalf("produce to %d: %v", p, err)
		}
	}

	took, log := c.stop(int(ctl), 20*time.Second)
	stopped := time.Now()
	for _, want := range []string{"controlled shutdown: the controller let this broker go", "handed the quorum leadership over"} {
		if !strings.Contains(log, want) {
			t.Fatalf("node %d's log lacks %q", ctl, want)
		}
	}
	// Fenced before it exited: the first Metadata after the exit has it
	// gone and its partitions leaderless.
	if b := c.liveOn(asked); len(b) != 2 || b[ctl] {
		t.Fatalf("Metadata right after the controlled shutdown of %d lists %v", ctl, b)
	}
	for _, p := range mine {
		if l := c.leadersOn(asked, topic); l[p] != -1 {
			t.Fatalf("partition %d of the stopped broker has leader %d", p, l[p])
		}
	}
	newCtl := waitFor(t, 10*time.Second, "another active controller", func() bool {
		id := c.controller(asked)
		return id > 0 && id != ctl
	})
	t.Logf("SIGTERM of active controller %d: exited 0 after %v; another controller seen %v after the exit", ctl, took, newCtl)
	if time.Since(stopped) > 15*time.Second {
		t.Fatalf("checks took %v, near the 30 s session timeout: fencing by the session cannot be told apart", time.Since(stopped))
	}

	c.procs[ctl-1].start(t, c.bin, c.logs[ctl-1])
	waitFor(t, 60*time.Second, "the restarted broker leading its partitions", func() bool {
		l := c.leadersOn(asked, topic)
		for _, p := range mine {
			if l[p] != ctl {
				return false
			}
		}
		return len(c.liveOn(asked)) == 3
	})
	for _, p := range mine {
		if err := c.cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("after")}).FirstErr(); err != nil {
			t.Fatalf("produce to %d after the restart: %v", p, err)
		}
	}
	offs := map[int32]kgo.Offset{}
	for _, p := range mine {
		offs[p] = kgo.NewOffset().AtStart()
	}
	cc, err := kgo.NewClient(kgo.SeedBrokers(c.seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	got := map[string]bool{}
	for deadline := time.Now().Add(30 * time.Second); len(got) < 2*len(mine) && time.Now().Before(deadline); {
		pc, pcancel := context.WithTimeout(ctx, 2*time.Second)
		cc.PollFetches(pc).EachRecord(func(r *kgo.Record) { got[fmt.Sprintf("%d:%s", r.Partition, r.Value)] = true })
		pcancel()
	}
	if len(got) != 2*len(mine) {
		t.Fatalf("read back %v from partitions %v", got, mine)
	}

	// A node that is not the controller.
	ctl = c.controller(asked)
	follower := 1 + int(ctl)%3
	took, log = c.stop(follower, 20*time.Second)
	if !strings.Contains(log, "controlled shutdown: the controller let this broker go") || strings.Contains(log, "handed the quorum leadership over") {
		t.Fatalf("node %d (controller %d) stopped without the controlled shutdown or with a hand-over", follower, ctl)
	}
	other := 1 + follower%3
	if b := c.liveOn(other); len(b) != 2 || b[int32(follower)] {
		t.Fatalf("Metadata right after the controlled shutdown of %d lists %v", follower, b)
	}
	t.Logf("SIGTERM of broker %d (not the controller): exited 0 after %v", follower, took)
}

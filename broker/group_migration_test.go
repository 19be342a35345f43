package broker_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

// owned tracks the partitions a group consumer holds, from its rebalance
// callbacks.
type owned struct {
	mu    sync.Mutex
	parts map[int32]bool
}

func (o *owned) opts(topic string) []kgo.Opt {
	o.parts = map[int32]bool{}
	set := func(m map[string][]int32, v bool) {
		o.mu.Lock()
		defer o.mu.Unlock()
		for _, p := range m[topic] {
			if v {
				o.parts[p] = true
			} else {
				delete(o.parts, p)
			}
		}
	}
	return []kgo.Opt{
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { set(m, true) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { set(m, false) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { set(m, false) }),
	}
}

func (o *owned) get() []int32 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []int32
	for p := range o.parts {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// pollUntilStopped polls cl in the background until the returned stop is
// called; stop waits for the poller, then closes the client (a group member
// leaves its group).
func pollUntilStopped(cl *kgo.Client) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	return func() {
		cancel()
		<-done
		cl.Close()
	}
}

// groupType asks ListGroups v5 for the type of group.
func groupType(ctx context.Context, t *testing.T, cl *kgo.Client, group string) string {
	t.Helper()
	req := kmsg.NewPtrListGroupsRequest()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("ListGroups: %v", err)
	}
	for _, g := range resp.Groups {
		if g.Group == group {
			return g.GroupType
		}
	}
	return ""
}

// waitFor polls cond every 50 ms until it holds or ctx ends, then reports
// what it last saw.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	for {
		ok, state := cond()
		if ok {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("timed out waiting for %s; last state: %s", what, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestGroupOnlineMigration is KIP-848's online migration end to end with
// franz-go: a classic (cooperative-sticky) consumer owns every partition; a
// second consumer joins the same group with the consumer protocol
// (ConsumerGroupHeartbeat), which upgrades the group; both end with disjoint
// assignments covering all partitions, the classic member being driven by
// the server-side assignor through JoinGroup/SyncGroup/Heartbeat. When the
// consumer protocol member leaves, the group downgrades to classic and the
// classic member takes every partition back.
func TestGroupOnlineMigration(t *testing.T) {
	onlineMigration(t, startGroupBroker(t).Addr(), "migrate")
}

// TestGroupOnlineMigrationOracle runs the same scenario against Apache
// Kafka, which is the specification.
func TestGroupOnlineMigrationOracle(t *testing.T) {
	onlineMigration(t, oracleAddr(t), oracleTopic("migrate"))
}

// startGroupBroker starts Cascade for the KIP-848 migration scenarios: no
// topic auto-creation, no initial rebalance delay and a short consumer
// heartbeat interval, so a scenario's rebalances fit its time budget.
func startGroupBroker(t *testing.T) *brokertest.Broker {
	return brokertest.Start(t, map[string]string{
		"auto.create.topics.enable":            "false",
		"group.initial.rebalance.delay.ms":     "0",
		"group.consumer.heartbeat.interval.ms": "200",
	})
}

// oracleTopic names a scenario's topic on the shared Apache Kafka oracle,
// unique per run as the oracle outlives the test.
func oracleTopic(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
}

// groupScenarioTopic creates topic with parts partitions at addr and
// returns a context bounding the scenario to 20 s and the admin client that
// created it; both end with the test.
func groupScenarioTopic(t *testing.T, addr, topic string, parts int32) (context.Context, *kgo.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr), fastMeta)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, parts, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	return ctx, admin
}

func onlineMigration(t *testing.T, addr, topic string) {
	const parts = 4
	group := topic + "-group"
	ctx, admin := groupScenarioTopic(t, addr, topic, parts)
	common := []kgo.Opt{
		fastMeta, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.HeartbeatInterval(100 * time.Millisecond), kgo.SessionTimeout(6 * time.Second),
		kgo.RebalanceTimeout(5 * time.Second),
	}

	var classicOwned owned
	classic, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(addr)}, common...), classicOwned.opts(topic)...)...)
	if err != nil {
		t.Fatal(err)
	}
	stopClassic := pollUntilStopped(classic)
	defer stopClassic()
	waitFor(ctx, t, "the classic member to own every partition", func() (bool, string) {
		got := classicOwned.get()
		return len(got) == parts && groupType(ctx, t, admin, group) == "classic", fmt.Sprint(got)
	})

	var nextOwned owned
	next, err := kgo.NewClient(append(append([]kgo.Opt{
		kgo.SeedBrokers(addr), kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()),
	}, common...), nextOwned.opts(topic)...)...)
	if err != nil {
		t.Fatal(err)
	}
	stopNext := pollUntilStopped(next)
	waitFor(ctx, t, "disjoint assignments covering every partition in a consumer group", func() (bool, string) {
		a, c := classicOwned.get(), nextOwned.get()
		state := fmt.Sprintf("classic %v, consumer protocol %v", a, c)
		if len(a) == 0 || len(c) == 0 || len(a)+len(c) != parts {
			return false, state
		}
		all := map[int32]bool{}
		for _, p := range append(a, c...) {
			all[p] = true
		}
		typ := groupType(ctx, t, admin, group)
		return len(all) == parts && typ == "consumer", state + " type " + typ
	})

	// The group describes one member of each protocol (KIP-1099).
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	types := map[int8]int{}
	for _, m := range resp.Groups[0].Members {
		types[m.MemberType]++
	}
	if types[0] != 1 || types[1] != 1 {
		t.Fatalf("ConsumerGroupDescribe member types %v, want one classic (0) and one consumer (1)", types)
	}

	stopNext()
	waitFor(ctx, t, "the downgrade back to a classic group owning every partition", func() (bool, string) {
		got := classicOwned.get()
		typ := groupType(ctx, t, admin, group)
		return len(got) == parts && typ == "classic", fmt.Sprintf("classic %v, type %s", got, typ)
	})
}

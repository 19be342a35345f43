package apachekafka

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// TestClusterFailoverTimes measures how long a three-node Apache Kafka
// cluster with Kafka's default timings takes to recover from kill -9 of the
// active controller, of a partition leader and of a group coordinator: the
// figures Cascade's cluster is compared against (docs/benchmarks.md).
// CASCADE_FAILOVER_ROUNDS (default 1) sets how often each is measured.
func TestClusterFailoverTimes(t *testing.T) {
	// A measurement of three JVMs killed and restarted for about a minute
	// a round: asked for by name, so that the default run, which runs the
	// matrix beside this package on two cores, stays quiet.
	s := os.Getenv("CASCADE_FAILOVER_ROUNDS")
	if s == "" {
		t.Skip("a failover measurement; run with CASCADE_FAILOVER_ROUNDS=N (1 to 10)")
	}
	rounds := 1
	{
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 10 {
			t.Fatalf("CASCADE_FAILOVER_ROUNDS=%q: want 1 to 10", s)
		}
		rounds = n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute+time.Duration(rounds)*4*time.Minute)
	defer cancel()
	c := startClusterOrSkip(t, ctx, ClusterOptions{})
	m := map[string][]time.Duration{}
	for r := 0; r < rounds; r++ {
		for _, s := range []struct {
			name string
			run  func(context.Context, *testing.T, *Cluster, int, map[string][]time.Duration)
		}{
			{"controller", measureControllerKill},
			{"leader", measureLeaderKill},
			{"coordinator", measureCoordinatorKill},
		} {
			if err := waitHealthy(ctx, c); err != nil {
				t.Fatalf("round %d before %s kill: %v", r, s.name, err)
			}
			s.run(ctx, t, c, r, m)
			if t.Failed() {
				return
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d rounds, Apache Kafka %s, three combined nodes:\n", rounds, c.Version())
	fmt.Fprintf(&b, "| %-52s | %7s | %7s | %7s | %s\n", "after kill -9 (s)", "min", "median", "max", "runs")
	for _, k := range failoverFigures {
		fmt.Fprintf(&b, "| %-52s | %s\n", k, summarize(m[k]))
	}
	t.Log("\n" + b.String())
}

// The figures, in report order.
const (
	figControllerElected = "controller: new active controller (DescribeQuorum)"
	figControllerCreate  = "controller: CreateTopics succeeds again"
	figLeaderFenced      = "leader: dead broker fenced (gone from Metadata)"
	figLeaderElected     = "leader: partition has a new leader"
	figLeaderAck         = "leader: first acks=all idempotent produce acked"
	figRestartReady      = "leader: restarted node registered (from start)"
	figRestartISR        = "leader: restarted node in every ISR (from start)"
	figCoordinatorCommit = "coordinator: group commits accepted again"
)

var failoverFigures = []string{figControllerElected, figControllerCreate, figLeaderFenced, figLeaderElected,
	figLeaderAck, figRestartReady, figRestartISR, figCoordinatorCommit}

func summarize(ds []time.Duration) string {
	s, ok := cluster.SpreadOf(ds)
	if !ok {
		return "none"
	}
	return fmt.Sprintf("%7s | %7s | %7s | %s", s.Min, s.Median, s.Max, strings.Join(s.Runs, " "))
}

// waitHealthy waits until every node runs, every broker is registered and
// in every ISR it belongs to, and the quorum has a leader.
func waitHealthy(ctx context.Context, c *Cluster) error {
	hctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, n := range c.Nodes() {
		if !n.Running() {
			return fmt.Errorf("node %d is not running", n.ID)
		}
	}
	if err := c.WaitForBrokers(hctx, c.BrokerIDs()...); err != nil {
		return err
	}
	for _, id := range c.BrokerIDs() {
		if err := c.WaitForNodeInISRs(hctx, id); err != nil {
			return err
		}
	}
	return poll(hctx, func() error { _, err := c.ActiveController(hctx); return err })
}

// restartHealthy restarts a killed node and waits for the cluster to heal.
func restartHealthy(ctx context.Context, t *testing.T, c *Cluster, id int) {
	t.Helper()
	if err := c.Restart(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := waitHealthy(ctx, c); err != nil {
		t.Fatalf("after restart of node %d: %v", id, err)
	}
}

func measureControllerKill(ctx context.Context, t *testing.T, c *Cluster, round int, m map[string][]time.Duration) {
	q, err := c.ActiveController(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := q.LeaderID
	start := time.Now()
	if err := c.Kill(old); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	nq, err := c.WaitForControllerChange(wctx, old)
	if err != nil {
		t.Fatalf("round %d: no new controller after killing node %d: %v", round, old, err)
	}
	m[figControllerElected] = append(m[figControllerElected], time.Since(start))
	if nq.LeaderEpoch <= q.LeaderEpoch {
		t.Fatalf("new controller %d at epoch %d, not above %d", nq.LeaderID, nq.LeaderEpoch, q.LeaderEpoch)
	}

	// Each attempt names a new topic, so a create that committed after its
	// request timed out cannot make a later one fail. Replication factor 2
	// fits on the two live brokers whether or not the dead one is fenced
	// yet. The request goes to a live broker, which forwards it to the
	// active controller (KIP-590).
	live := slices.DeleteFunc(c.BrokerIDs(), func(id int) bool { return id == old })
	attempt := 0
	err = poll(wctx, func() error {
		attempt++
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 1500
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = fmt.Sprintf("controller-kill-%d-%d", round, attempt)
		rt.NumPartitions, rt.ReplicationFactor = 1, 2
		req.Topics = append(req.Topics, rt)
		resp, err := c.Request(wctx, live[attempt%len(live)], req)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode)
	})
	if err != nil {
		t.Fatalf("round %d: CreateTopics never succeeded after killing controller %d: %v", round, old, err)
	}
	m[figControllerCreate] = append(m[figControllerCreate], time.Since(start))
	t.Logf("round %d: killed controller %d (epoch %d); node %d leads at epoch %d after %v; CreateTopics after %v (%d attempts)",
		round, old, q.LeaderEpoch, nq.LeaderID, nq.LeaderEpoch, m[figControllerElected][round].Round(time.Millisecond),
		m[figControllerCreate][round].Round(time.Millisecond), attempt)
	restartHealthy(ctx, t, c, old)
}

// createAssigned creates a one-partition topic of replication factor 3 and
// min.insync.replicas 2 whose preferred leader is leader, and waits for it.
func createAssigned(ctx context.Context, t *testing.T, c *Cluster, topic string, leader int) {
	t.Helper()
	replicas := []int32{int32(leader)}
	for _, id := range c.BrokerIDs() {
		if id != leader {
			replicas = append(replicas, int32(id))
		}
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 1500
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, replicas
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name, cfg.Value = "min.insync.replicas", kmsg.StringPtr("2")
	rt.Configs = append(rt.Configs, cfg)
	req.Topics = append(req.Topics, rt)
	resp, err := c.Request(ctx, leader, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	ps, err := c.WaitForISR(ctx, topic, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if ps.Leader != leader {
		t.Fatalf("%s: leader %d, want the preferred %d", topic, ps.Leader, leader)
	}
}

// ackLog records when each produce or commit was acknowledged.
type ackLog struct {
	mu   sync.Mutex
	at   []time.Time
	errs []error
}

func (a *ackLog) add(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.errs = append(a.errs, err)
		return
	}
	a.at = append(a.at, time.Now())
}

func (a *ackLog) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.at)
}

// firstAfter returns the first acknowledgement after t.
func (a *ackLog) firstAfter(t time.Time) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, at := range a.at {
		if at.After(t) {
			return at, true
		}
	}
	return time.Time{}, false
}

func (a *ackLog) waitAfter(ctx context.Context, t time.Time) (time.Time, error) {
	var at time.Time
	err := poll(ctx, func() error {
		var ok bool
		if at, ok = a.firstAfter(t); !ok {
			return errors.New("no acknowledgement yet")
		}
		return nil
	})
	return at, err
}

// nonController returns a broker that is not the active controller.
func nonController(ctx context.Context, t *testing.T, c *Cluster) (node, controller int) {
	t.Helper()
	q, err := c.ActiveController(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range c.BrokerIDs() {
		if id != q.LeaderID {
			return id, q.LeaderID
		}
	}
	t.Fatal("every broker is the controller")
	return 0, 0
}

func measureLeaderKill(ctx context.Context, t *testing.T, c *Cluster, round int, m map[string][]time.Duration) {
	leader, ctrl := nonController(ctx, t, c)
	topic := fmt.Sprintf("leader-kill-%d", round)
	createAssigned(ctx, t, c, topic, leader)

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BrokerAddrs()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pctx, stop := context.WithCancel(ctx)
	var acks ackLog
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; pctx.Err() == nil; i++ {
			err := cl.ProduceSync(pctx, &kgo.Record{Partition: 0, Value: []byte(strconv.Itoa(i))}).FirstErr()
			if pctx.Err() != nil {
				return
			}
			acks.add(err)
			time.Sleep(10 * time.Millisecond)
		}
	}()
	defer func() { stop(); <-done }()
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := poll(wctx, func() error {
		if acks.count() < 5 {
			return errors.New("fewer than 5 acknowledgements")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	dead := time.Now()
	fenced := make(chan error, 1)
	var fencedAfter time.Duration
	others := slices.DeleteFunc(c.BrokerIDs(), func(id int) bool { return id == leader })
	go func() {
		err := c.WaitForBrokers(wctx, others...)
		fencedAfter = time.Since(start)
		fenced <- err
	}()
	ps, err := c.WaitForLeaderChange(wctx, topic, 0, leader)
	if err != nil {
		t.Fatalf("round %d: %s kept no leader after killing %d: %v", round, topic, leader, err)
	}
	m[figLeaderElected] = append(m[figLeaderElected], time.Since(start))
	at, err := acks.waitAfter(wctx, dead)
	if err != nil {
		t.Fatalf("round %d: no produce acknowledged after killing leader %d: %v", round, leader, err)
	}
	m[figLeaderAck] = append(m[figLeaderAck], at.Sub(start))
	if err := <-fenced; err != nil {
		t.Fatalf("round %d: node %d never fenced: %v", round, leader, err)
	}
	m[figLeaderFenced] = append(m[figLeaderFenced], fencedAfter)
	stop()
	<-done
	if len(acks.errs) > 0 {
		t.Fatalf("round %d: the idempotent producer failed %d records, first %v", round, len(acks.errs), acks.errs[0])
	}

	restart := time.Now()
	if err := c.Restart(ctx, leader); err != nil {
		t.Fatal(err)
	}
	ready := time.Since(restart)
	if err := c.WaitForNodeInISRs(wctx, leader); err != nil {
		t.Fatalf("round %d: restarted node %d: %v", round, leader, err)
	}
	inISR := time.Since(restart)
	m[figRestartReady] = append(m[figRestartReady], ready)
	m[figRestartISR] = append(m[figRestartISR], inISR)
	t.Logf("round %d: killed leader %d (controller %d); fenced after %v; node %d leads (epoch %d) after %v; first ack after %v; restarted node registered %v and in every ISR %v after its start",
		round, leader, ctrl, fencedAfter.Round(time.Millisecond), ps.Leader, ps.LeaderEpoch,
		m[figLeaderElected][round].Round(time.Millisecond), at.Sub(start).Round(time.Millisecond),
		ready.Round(time.Millisecond), inISR.Round(time.Millisecond))
}

// findCoordinator asks live brokers for a group's coordinator until one
// answers without error (the first call creates __consumer_offsets).
func findCoordinator(ctx context.Context, c *Cluster, group string) (int, error) {
	id := -1
	err := poll(ctx, func() error {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey, req.CoordinatorKeys = group, []string{group}
		var errs []error
		for _, b := range c.BrokerIDs() {
			if !c.Live(b) {
				continue
			}
			resp, err := c.Request(ctx, b, req)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			r := resp.(*kmsg.FindCoordinatorResponse)
			code, node := r.ErrorCode, r.NodeID
			if len(r.Coordinators) > 0 {
				code, node = r.Coordinators[0].ErrorCode, r.Coordinators[0].NodeID
			}
			if err := kerr.ErrorForCode(code); err != nil {
				errs = append(errs, err)
				continue
			}
			id = int(node)
			return nil
		}
		return errors.Join(errs...)
	})
	return id, err
}

func measureCoordinatorKill(ctx context.Context, t *testing.T, c *Cluster, round int, m map[string][]time.Duration) {
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	_, ctrl := nonController(ctx, t, c)
	// A group whose coordinator is not the active controller, so that only
	// the coordinator is lost.
	group, coord := "", -1
	for k := 0; k < 30 && group == ""; k++ {
		g := fmt.Sprintf("coordinator-kill-%d-%d", round, k)
		id, err := findCoordinator(wctx, c, g)
		if err != nil {
			t.Fatal(err)
		}
		if id != ctrl {
			group, coord = g, id
		}
	}
	if group == "" {
		t.Fatalf("every group's coordinator is the controller %d", ctrl)
	}
	// The topic's leader is the controller, not the coordinator, so that
	// fetching goes on and there is always something new to commit.
	topic := fmt.Sprintf("coordinator-kill-%d", round)
	createAssigned(wctx, t, c, topic, ctrl)

	prod, err := kgo.NewClient(kgo.SeedBrokers(c.BrokerAddrs()...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.BrokerAddrs()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pctx, stop := context.WithCancel(wctx)
	var commits ackLog
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; pctx.Err() == nil; i++ {
			prod.Produce(pctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}, nil)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	go func() {
		defer wg.Done()
		for pctx.Err() == nil {
			fctx, fcancel := context.WithTimeout(pctx, time.Second)
			cons.PollFetches(fctx)
			fcancel()
			if pctx.Err() != nil || len(cons.UncommittedOffsets()) == 0 {
				continue
			}
			cctx, ccancel := context.WithTimeout(pctx, 3*time.Second)
			err := cons.CommitUncommittedOffsets(cctx)
			ccancel()
			if pctx.Err() != nil {
				return
			}
			if err == nil {
				commits.add(nil)
			}
		}
	}()
	defer func() { stop(); wg.Wait() }()
	if err := poll(wctx, func() error {
		if commits.count() < 2 {
			return errors.New("fewer than 2 commits")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	if err := c.Kill(coord); err != nil {
		t.Fatal(err)
	}
	at, err := commits.waitAfter(wctx, time.Now())
	if err != nil {
		t.Fatalf("round %d: no commit of group %s accepted after killing its coordinator %d: %v", round, group, coord, err)
	}
	m[figCoordinatorCommit] = append(m[figCoordinatorCommit], at.Sub(start))
	after, err := findCoordinator(wctx, c, group)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("round %d: killed coordinator %d of %s (controller %d); commits accepted again after %v, coordinator now %d",
		round, coord, group, ctrl, at.Sub(start).Round(time.Millisecond), after)
	stop()
	wg.Wait()
	restartHealthy(ctx, t, c, coord)
}

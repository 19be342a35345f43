package matrix_test

import (
	"context"
	"errors"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/matrix"
	"github.com/cascade-kafka/cascade/matrix/cluster"
	"github.com/cascade-kafka/cascade/matrix/driver"
	"github.com/cascade-kafka/cascade/matrix/driver/confluent"
	"github.com/cascade-kafka/cascade/matrix/driver/franzgo"
)

// rf3Topic is the measured topic: three partitions of replication factor
// 3, each preferring a different leader, min.insync.replicas 2.
const rf3Topic = "rf3-failover"

const rf3Partitions = 3

// rf3StrictTopic has rf3Topic's placement and min.insync.replicas 3: with
// a node down, acks=all to it is refused.
const rf3StrictTopic = "rf3-failover-strict"

// The rows of TestClusterReplicatedFailoverSideBySide, per cluster.
const (
	rf3RowLeader = "new leader of the killed leader's partition (Metadata of a live broker)"
	rf3RowAck    = "first acknowledged produce to that partition, %s"
	rf3RowStall  = "longest gap between acknowledgements on the partitions the killed node did not lead, %s; the ordinary gap before the kill"
	rf3RowReady  = "restarted node registered, in its own Metadata, from its start"
	rf3RowISR    = "restarted node back in the ISR of every partition it holds, from its start"
)

// rf3Round is what one round measured, before the read-back dates the
// acknowledgements.
type rf3Round struct {
	victim    int
	partition int32
	epoch     int32 // The partition's leader epoch before the kill.
	kill      time.Time
	restart   time.Time // When the killed node was started again.
	leader    time.Duration
	ready     time.Duration
	isr       time.Duration
	strict    string // What the first round's min.insync.replicas=3 produce got.
}

// rf3Result is one cluster's figures and checks.
type rf3Result struct {
	name    string
	rows    map[string][]time.Duration
	normal  map[string][]time.Duration // A stall row's ordinary gaps.
	twoDown []string                   // What each loop got with two nodes down.
	strict  string
	failed  []string // What the loops' unacknowledged commands got while a leader was down.
	acked   int
}

// TestClusterReplicatedFailoverSideBySide runs, on a three-node Apache
// Kafka cluster and a three-node Cascade cluster one after the other, a
// topic of three RF=3 partitions with min.insync.replicas=2 under a steady
// load of idempotent acks=all producers of every selected client (by
// default franz-go, confluent-kafka-go and Java, through the matrix
// drivers, each command a new producer, and one franz-go client with its
// defaults kept for the whole run; per client one loop writing the
// partitions whose leader is killed, one the rest). Each round kills
// (SIGKILL) a node that leads a partition and is not the active
// controller, measures how long until a live broker's
// Metadata names a new leader, until each client's first produce to that
// partition is acknowledged (appended at the new leader's epoch), how long
// the partitions it did not lead go without an acknowledgement, and how long the
// restarted node takes to be back in every ISR; in the first round, a
// produce to a topic of min.insync.replicas=3 must be refused with
// NOT_ENOUGH_REPLICAS once the dead node left its ISR. Then two of the three
// nodes are killed at once: no produce started while they are down may be
// acknowledged. Both are restarted, and every acknowledged record must be
// read back once, at its offset, in each producer's order, and the
// recorded history must check (linearizability.Check). The timings are
// reported (log, and replicated-failover.md and .html in the report
// directory), never asserted. CASCADE_FAILOVER_ROUNDS (1 to 10) sets the
// rounds and turns the test on; MATRIX_TARGETS and MATRIX_CLIENTS select.
func TestClusterReplicatedFailoverSideBySide(t *testing.T) {
	rounds := failoverRounds(t)
	clients := matrix.SelectedClients([]string{franzgo.Client, confluent.Client, "java", longLivedClient})
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute+time.Duration(rounds)*4*time.Minute)
	defer cancel()
	dir := reportDir(t)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var results []*rf3Result
	for _, target := range selectedClusterTargets() {
		t.Run(target.name, func(t *testing.T) {
			res := runRF3Failover(ctx, t, target, clients, rounds, dir)
			if res != nil {
				results = append(results, res)
			}
		})
	}
	report := rf3Report(results, clients, rounds)
	t.Log("\n" + report)
	if err := os.WriteFile(filepath.Join(dir, "replicated-failover.md"), []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	page := "<!doctype html><meta charset=utf-8><title>Replicated failover</title><pre>" + html.EscapeString(report) + "</pre>\n"
	if err := os.WriteFile(filepath.Join(dir, "replicated-failover.html"), []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("report: %s", filepath.Join(dir, "replicated-failover.md"))
}

func runRF3Failover(ctx context.Context, t *testing.T, target clusterTarget, clients []string, rounds int, dir string) *rf3Result {
	c := startCluster(t, ctx, target)
	res := &rf3Result{name: c.Name(), rows: map[string][]time.Duration{}, normal: map[string][]time.Duration{}}
	if err := createRF3Topic(ctx, c); err != nil {
		t.Fatal(err)
	}
	histPath := filepath.Join(dir, target.name+"-replicated-failover-history.jsonl")
	h, err := matrix.NewHistory(histPath)
	if err != nil {
		t.Fatal(err)
	}
	var victimParts atomic.Pointer[[]int32]
	victimParts.Store(&[]int32{0})
	loops, err := startRF3Loops(ctx, c, h, clients, &victimParts)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		for _, l := range loops {
			l.stop.Store(true)
		}
		for _, l := range loops {
			<-l.done
			l.d.Close()
		}
	}
	defer stop()

	var measured []rf3Round
	for r := 0; r < rounds; r++ {
		round, err := rf3KillLeader(ctx, t, c, target.active, loops, &victimParts, r)
		if err != nil {
			t.Fatalf("round %d: %v", r, err)
		}
		measured = append(measured, round)
	}
	res.twoDown, err = rf3TwoDown(ctx, t, c, loops)
	if err != nil {
		t.Fatal(err)
	}
	stop()

	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	reads, ends, err := readBack(rctx, c, rf3Topic, rf3Partitions)
	if err != nil {
		t.Fatal(err)
	}
	acked, problems := checkReadBack(loops, reads)
	res.acked = acked
	if len(problems) > 0 {
		t.Errorf("%s: %d acknowledged records; the read-back found:\n%s", c.Name(), acked, strings.Join(problems, "\n"))
	}
	t.Logf("%s: %d records acknowledged, read back once each at their offsets and in order; log ends %v", c.Name(), acked, ends)
	if err := recordReadBack(rctx, c, h, ends); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	checkHistory(t, target.name+" replicated failover", histPath)

	for _, round := range measured {
		if round.strict != "" {
			res.strict = round.strict
		}
		res.rows[rf3RowLeader] = append(res.rows[rf3RowLeader], round.leader)
		res.rows[rf3RowReady] = append(res.rows[rf3RowReady], round.ready)
		res.rows[rf3RowISR] = append(res.rows[rf3RowISR], round.isr)
		for _, l := range loops {
			if l.role != "leader" {
				continue
			}
			at, ok := firstAckAfter(l, round.partition, round.epoch, reads)
			if !ok {
				t.Errorf("%s round killing node %d: %s has no acknowledgement at a leader epoch above %d", c.Name(), round.victim, l.client, round.epoch)
				continue
			}
			row := fmt.Sprintf(rf3RowAck, l.client)
			res.rows[row] = append(res.rows[row], at.Sub(round.kill))
		}
		for _, l := range loops {
			if u := unacknowledged(l, round.kill, round.restart); u != "" {
				res.failed = append(res.failed, fmt.Sprintf("node %d killed, %s: %s", round.victim, l.name(), u))
			}
		}
		for _, l := range loops {
			if l.role == "others" {
				// Up to the restart, which waited for every loop to be
				// acknowledged after the new leader was seen.
				gap, normal := longestAckGap(l, round.kill, round.restart)
				row := fmt.Sprintf(rf3RowStall, l.client)
				res.rows[row] = append(res.rows[row], gap)
				res.normal[row] = append(res.normal[row], normal)
			}
		}
	}
	return res
}

// createRF3Topic creates rf3Topic (min.insync.replicas 2) and
// rf3StrictTopic (3), partition p of each led by node p+1, and waits until
// every live broker shows all three replicas in every ISR.
func createRF3Topic(ctx context.Context, c cluster.Cluster) error {
	ids := c.BrokerIDs()
	var assign [][]int32
	for p := range rf3Partitions {
		var rs []int32
		for i := range ids {
			rs = append(rs, int32(ids[(p+i)%len(ids)]))
		}
		assign = append(assign, rs)
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	for topic, minISR := range map[string]string{rf3Topic: "2", rf3StrictTopic: "3"} {
		rt := newTopic(topic, -1, -1, assign...)
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = "min.insync.replicas", kmsg.StringPtr(minISR)
		rt.Configs = append(rt.Configs, cfg)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := c.Request(ctx, ids[0], req)
	if err != nil {
		return err
	}
	for _, rt := range resp.(*kmsg.CreateTopicsResponse).Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			return fmt.Errorf("create %s: %w", rt.Topic, err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := waitFullISRs(wctx, c, rf3StrictTopic); err != nil {
		return err
	}
	return waitFullISRs(wctx, c, rf3Topic)
}

// waitFullISRs waits until every live broker's Metadata shows every
// partition of topic with a leader and every broker in its ISR.
func waitFullISRs(ctx context.Context, c cluster.Cluster, topic string) error {
	return cluster.Poll(ctx, cluster.PollInterval, func() error {
		for _, id := range cluster.LiveBrokers(c) {
			md, err := metadataOn(ctx, c, id, []string{topic})
			if err != nil {
				return fmt.Errorf("node %d: %w", id, err)
			}
			if len(md.Topics) != 1 || len(md.Topics[0].Partitions) != rf3Partitions {
				return fmt.Errorf("node %d: Metadata of %s incomplete", id, topic)
			}
			for _, p := range md.Topics[0].Partitions {
				if p.Leader < 0 || len(p.ISR) != len(c.BrokerIDs()) {
					return fmt.Errorf("node %d: %s/%d leader %d ISR %v", id, topic, p.Partition, p.Leader, p.ISR)
				}
			}
		}
		return nil
	})
}

// rf3Strict checks, with node down killed, that an acks=all produce to a
// partition of rf3StrictTopic (min.insync.replicas 3) that a live node
// leads is refused with NOT_ENOUGH_REPLICAS once the dead node has left
// its ISR, as Kafka's Partition.appendRecordsToLeader refuses it before
// the append. It returns the partition and its ISR.
func rf3Strict(ctx context.Context, c cluster.Cluster, down int) (string, error) {
	var part kmsg.MetadataResponseTopicPartition
	err := cluster.Poll(ctx, cluster.PollInterval, func() error {
		md, err := cluster.Metadata(ctx, c, []string{rf3StrictTopic}, down)
		if err != nil {
			return err
		}
		for _, p := range md.Topics[0].Partitions {
			if p.Leader >= 0 && int(p.Leader) != down &&
				len(p.ISR) == len(c.BrokerIDs())-1 && !slices.Contains(p.ISR, int32(down)) {
				part = p
				return nil
			}
		}
		return fmt.Errorf("no partition of %s led by a live node with node %d out of its ISR", rf3StrictTopic, down)
	})
	if err != nil {
		return "", err
	}
	// Not idempotent and one retry, so that the broker's answer is what
	// comes back (franz-go retries NOT_ENOUGH_REPLICAS).
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Seeds()...), kgo.DefaultProduceTopic(rf3StrictTopic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(), kgo.RecordRetries(1),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(20*time.Second))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	err = cl.ProduceSync(ctx, &kgo.Record{Partition: part.Partition, Value: []byte("strict")}).FirstErr()
	where := fmt.Sprintf("%s/%d (leader %d, ISR %v)", rf3StrictTopic, part.Partition, part.Leader, part.ISR)
	if !errors.Is(err, kerr.NotEnoughReplicas) {
		return "", fmt.Errorf("acks=all to %s: %v, want NOT_ENOUGH_REPLICAS", where, err)
	}
	return where, nil
}

// startRF3Loops opens two drivers per client, each recorded in h, and
// starts their loops: one writing the partitions *victim names (those the
// node a round kills leads), one the others.
func startRF3Loops(ctx context.Context, c cluster.Cluster, h *matrix.History, clients []string, victim *atomic.Pointer[[]int32]) ([]*rf3Loop, error) {
	bootstrap := strings.Join(c.Seeds(), ",")
	var loops []*rf3Loop
	for _, client := range clients {
		open, ok := driver.Lookup(client)
		if client == longLivedClient {
			open, ok = func(context.Context, string) (driver.Driver, error) { return openLongLived(c.Seeds()) }, true
		}
		if !ok {
			return nil, fmt.Errorf("no driver registered for client %q", client)
		}
		for _, role := range []string{"leader", "others"} {
			d, err := open(ctx, bootstrap)
			if err != nil {
				for _, l := range loops {
					l.d.Close()
				}
				return nil, fmt.Errorf("open %s: %w", client, err)
			}
			l := &rf3Loop{client: client, role: role, topic: rf3Topic, done: make(chan struct{}),
				d: matrix.Record(d, h, client+"-"+role)}
			// An out-of-process driver is killed when a command outlives
			// its context; the Java and librdkafka producers bound each
			// record by their own delivery timeout (15 s), franz-go's
			// only by the context.
			l.timeout = 20 * time.Second
			if _, killable := d.(driver.Killer); killable {
				l.timeout = 45 * time.Second
			}
			if role == "leader" {
				l.target = func() []int32 { return *victim.Load() }
			} else {
				l.target = func() []int32 {
					v := *victim.Load()
					var ps []int32
					for p := int32(0); p < rf3Partitions; p++ {
						if !slices.Contains(v, p) {
							ps = append(ps, p)
						}
					}
					return ps
				}
			}
			loops = append(loops, l)
		}
	}
	for _, l := range loops {
		go l.run()
	}
	return loops, nil
}

// rf3KillLeader runs one round: it picks a node that is not the active
// controller and leads as few partitions as any such node (the rounds take
// turns among those), points the leader loops at the partitions it leads
// and the others at the rest, and kills it once they write them; the
// round's partition is the first it leads.
func rf3KillLeader(ctx context.Context, t *testing.T, c cluster.Cluster, active activeFunc, loops []*rf3Loop, victimParts *atomic.Pointer[[]int32], r int) (rf3Round, error) {
	var round rf3Round
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := waitClusterHealthy(wctx, c, active); err != nil {
		return round, err
	}
	if err := waitFullISRs(wctx, c, rf3Topic); err != nil {
		return round, err
	}
	ctl, err := active(wctx, c)
	if err != nil {
		return round, err
	}
	md, err := cluster.Metadata(wctx, c, []string{rf3Topic}, 0)
	if err != nil {
		return round, err
	}
	led := map[int][]kmsg.MetadataResponseTopicPartition{}
	for _, p := range md.Topics[0].Partitions {
		if int(p.Leader) != ctl {
			led[int(p.Leader)] = append(led[int(p.Leader)], p)
		}
	}
	var nodes []int
	for id, ps := range led {
		if len(nodes) == 0 || len(ps) < len(led[nodes[0]]) {
			nodes = []int{id}
		} else if len(ps) == len(led[nodes[0]]) {
			nodes = append(nodes, id)
		}
	}
	if len(nodes) == 0 || len(led[nodes[0]]) == rf3Partitions {
		return round, fmt.Errorf("no node but the controller %d leads a partition, or one leads all: %v", ctl, led)
	}
	slices.Sort(nodes)
	victimLeads := led[nodes[r%len(nodes)]]
	sort.Slice(victimLeads, func(i, j int) bool { return victimLeads[i].Partition < victimLeads[j].Partition })
	p := victimLeads[0]
	round.partition, round.victim, round.epoch = p.Partition, int(p.Leader), p.LeaderEpoch
	var parts []int32
	for _, vp := range victimLeads {
		parts = append(parts, vp.Partition)
	}
	set := time.Now()
	victimParts.Store(&parts)
	if err := waitLoops(wctx, loops, set, 3, func(l *rf3Loop) int32 {
		if l.role == "leader" {
			return p.Partition
		}
		return -1
	}); err != nil {
		return round, fmt.Errorf("before the kill: %w", err)
	}

	round.kill = time.Now()
	if err := c.Kill(round.victim); err != nil {
		return round, err
	}
	err = cluster.Poll(wctx, cluster.PollInterval, func() error {
		md, err := cluster.Metadata(wctx, c, []string{rf3Topic}, round.victim)
		if err != nil {
			return err
		}
		for _, mp := range md.Topics[0].Partitions {
			if mp.Partition == round.partition {
				if mp.Leader < 0 || int(mp.Leader) == round.victim {
					return fmt.Errorf("%s/%d leader %d", rf3Topic, mp.Partition, mp.Leader)
				}
				return nil
			}
		}
		return fmt.Errorf("%s/%d not in Metadata", rf3Topic, round.partition)
	})
	if err != nil {
		return round, fmt.Errorf("no new leader after killing node %d: %w", round.victim, err)
	}
	round.leader = time.Since(round.kill)
	seen := time.Now()
	// Every loop gets acknowledgements again: the leader loops from the
	// new leader, the others from theirs.
	if err := waitLoops(wctx, loops, seen, 1, func(l *rf3Loop) int32 {
		if l.role == "leader" {
			return round.partition
		}
		return -1
	}); err != nil {
		return round, fmt.Errorf("after killing node %d: %w", round.victim, err)
	}
	if r == 0 {
		where, err := rf3Strict(wctx, c, round.victim)
		if err != nil {
			return round, err
		}
		round.strict = fmt.Sprintf("node %d down: acks=all to %s refused with NOT_ENOUGH_REPLICAS", round.victim, where)
		t.Log(round.strict)
	}
	round.restart = time.Now()
	if err := c.Restart(wctx, round.victim); err != nil {
		return round, err
	}
	round.ready = time.Since(round.restart)
	if err := cluster.WaitInEveryISR(wctx, c, round.victim); err != nil {
		return round, fmt.Errorf("restarted node %d: %w", round.victim, err)
	}
	round.isr = time.Since(round.restart)
	t.Logf("round %d: killed node %d, leader of %s/%d at epoch %d (controller %d); new leader seen after %v; restarted node registered %v and in every ISR %v after its start",
		r, round.victim, rf3Topic, round.partition, round.epoch, ctl, round.leader.Round(time.Millisecond),
		round.ready.Round(time.Millisecond), round.isr.Round(time.Millisecond))
	return round, nil
}

// rf3TwoDownHold is how long two of the three nodes stay down.
const rf3TwoDownHold = 20 * time.Second

// rf3TwoDown kills two of the three nodes at once, keeping the leader of
// partition 0, for rf3TwoDownHold: no produce started while they are down
// may be acknowledged before they are restarted. It then
// restarts both (together: each waits for a controller quorum) and waits
// for full ISRs. It returns what each loop's refused commands got.
func rf3TwoDown(ctx context.Context, t *testing.T, c cluster.Cluster, loops []*rf3Loop) ([]string, error) {
	wctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	if err := waitFullISRs(wctx, c, rf3Topic); err != nil {
		return nil, err
	}
	md, err := cluster.Metadata(wctx, c, []string{rf3Topic}, 0)
	if err != nil {
		return nil, err
	}
	keep := int(md.Topics[0].Partitions[0].Leader)
	var down []int
	for _, id := range c.BrokerIDs() {
		if id != keep {
			down = append(down, id)
		}
	}
	for _, id := range down {
		if err := c.Kill(id); err != nil {
			return nil, err
		}
	}
	killed := time.Now()
	// The two stay down for rf3TwoDownHold: longer than the Java and
	// librdkafka producers' delivery timeout (15 s), so that their
	// commands started meanwhile return what the cluster refused with;
	// franz-go retries without a delivery timeout and waits.
	select {
	case <-wctx.Done():
		return nil, wctx.Err()
	case <-time.After(rf3TwoDownHold):
	}
	restart := time.Now()
	var out []string
	for _, l := range loops {
		for _, cmd := range l.commands() {
			if cmd.start.After(killed) && cmd.ackedAny() && !cmd.end.After(restart) {
				t.Errorf("%s: a produce started %v after nodes %v were killed was acknowledged with only node %d running",
					l.name(), cmd.start.Sub(killed).Round(time.Millisecond), down, keep)
			}
		}
		// What came back meanwhile: also the commands sent before the
		// kills, which might have been acknowledged.
		var parts []string
		if u := unacknowledged(l, killed, restart); u != "" {
			parts = append(parts, u)
		}
		if busy := l.busy.Load(); busy != 0 {
			parts = append(parts, fmt.Sprintf("one waiting at the restart, started %+.1f s from the kills", float64(busy-killed.UnixNano())/1e9))
		}
		out = append(out, fmt.Sprintf("%s: %s", l.name(), strings.Join(parts, ", ")))
	}
	t.Logf("nodes %v killed, node %d alone for %v; unacknowledged meanwhile: %s", down, keep,
		restart.Sub(killed).Round(time.Millisecond), strings.Join(out, "; "))
	var wg sync.WaitGroup
	errs := make([]error, len(down))
	for i, id := range down {
		wg.Go(func() { errs[i] = c.Restart(wctx, id) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if err := waitFullISRs(wctx, c, rf3Topic); err != nil {
		return nil, fmt.Errorf("after restarting nodes %v: %w", down, err)
	}
	// The loops write again before they stop.
	if err := waitLoops(wctx, loops, time.Now(), 2, func(*rf3Loop) int32 { return -1 }); err != nil {
		return nil, fmt.Errorf("after restarting nodes %v: %w", down, err)
	}
	return out, nil
}

// recordReadBack reads every partition once more through a recorded
// franz-go driver, so that the history holds the final log.
func recordReadBack(ctx context.Context, c cluster.Cluster, h *matrix.History, ends map[int32]int64) error {
	open, ok := driver.Lookup(franzgo.Client)
	if !ok {
		return fmt.Errorf("no %s driver", franzgo.Client)
	}
	d, err := open(ctx, strings.Join(c.Seeds(), ","))
	if err != nil {
		return err
	}
	d = matrix.Record(d, h, "reader")
	defer d.Close()
	for p := int32(0); p < rf3Partitions; p++ {
		res, err := d.Consume(ctx, driver.Consume{Topic: rf3Topic, Partition: p, From: 0, Count: int(ends[p]), TimeoutMs: 60000})
		if err != nil {
			return fmt.Errorf("read %s/%d: %w", rf3Topic, p, err)
		}
		if res.Error != nil || int64(len(res.Records)) != ends[p] {
			return fmt.Errorf("read %s/%d: %d of %d records (%v)", rf3Topic, p, len(res.Records), ends[p], res.Error)
		}
	}
	return nil
}

// rf3Stats renders "min / median / max (each run)" in seconds with two
// decimals.
func rf3Stats(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	sec := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) }
	var runs []string
	for _, d := range ds {
		runs = append(runs, sec(d))
	}
	return fmt.Sprintf("%s / %s / %s (%s)", sec(sorted[0]), sec(sorted[len(sorted)/2]), sec(sorted[len(sorted)-1]), strings.Join(runs, " "))
}

// rf3Report renders the figures of every cluster side by side.
func rf3Report(results []*rf3Result, clients []string, rounds int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Replicated failover side by side\n\n%d rounds; three combined nodes each; topic of 3 partitions, RF=3, min.insync.replicas=2; "+
		"idempotent acks=all producers (%s; per client one loop on the partitions the killed node leads and one on the rest); "+
		"Kafka's default timings; seconds after SIGKILL (restart: after the node's start) as min / median / max (each round)\n\n",
		rounds, strings.Join(clients, ", "))
	rows := []string{rf3RowLeader}
	for _, cl := range clients {
		rows = append(rows, fmt.Sprintf(rf3RowAck, cl))
	}
	for _, cl := range clients {
		rows = append(rows, fmt.Sprintf(rf3RowStall, cl))
	}
	rows = append(rows, rf3RowReady, rf3RowISR)
	fmt.Fprintf(&b, "| measure |")
	for _, r := range results {
		fmt.Fprintf(&b, " %s |", r.name)
	}
	fmt.Fprintf(&b, "\n| --- |%s\n", strings.Repeat(" --- |", len(results)))
	for _, row := range rows {
		fmt.Fprintf(&b, "| %s |", row)
		for _, r := range results {
			cell := rf3Stats(r.rows[row])
			if n, ok := r.normal[row]; ok {
				cell += "; ordinary " + rf3Stats(n)
			}
			fmt.Fprintf(&b, " %s |", cell)
		}
		b.WriteString("\n")
	}
	b.WriteString("\nProduce commands that returned with nothing acknowledged between a leader's kill and its restart:\n\n")
	for _, r := range results {
		failed := "none"
		if len(r.failed) > 0 {
			failed = strings.Join(r.failed, "; ")
		}
		fmt.Fprintf(&b, "- %s: %s\n", r.name, failed)
	}
	b.WriteString("\nOne node down, a topic of min.insync.replicas=3:\n\n")
	for _, r := range results {
		fmt.Fprintf(&b, "- %s: %s\n", r.name, r.strict)
	}
	b.WriteString("\nTwo of three nodes down for 20 s: no produce command started meanwhile was acknowledged; what the commands that returned unacknowledged meanwhile got, and what was still waiting when the two were restarted:\n\n")
	for _, r := range results {
		fmt.Fprintf(&b, "- %s: %s; %d records acknowledged in the whole run, all read back once, at their offsets, in order\n",
			r.name, strings.Join(r.twoDown, "; "), r.acked)
	}
	return b.String()
}

package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/group"
	"github.com/cascade-kafka/cascade/broker/txn"
)

// partitionLeaders returns the leader of every partition of topic as
// Metadata names it, nil when Metadata fails.
func partitionLeaders(ctx context.Context, adm *kadm.Client, topic string) map[int32]int32 {
	c, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	m, err := adm.Metadata(c, topic)
	if err != nil {
		return nil
	}
	out := map[int32]int32{}
	for _, p := range m.Topics[topic].Partitions {
		out[p.Partition] = p.Leader
	}
	return out
}

// findCoordinator asks node for the coordinator of key (coordinator type
// typ: 0 group, 1 transaction) and returns its node id and error code; a
// request that fails answers -1, -1.
func findCoordinator(ctx context.Context, cl *kgo.Client, node int, typ int8, key string) (int32, int16) {
	c, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType, fc.CoordinatorKey, fc.CoordinatorKeys = typ, key, []string{key}
	resp, err := fc.RequestWith(c, cl.Broker(node))
	if err != nil {
		return -1, -1
	}
	if resp.Version < 4 {
		return resp.NodeID, resp.ErrorCode
	}
	if len(resp.Coordinators) != 1 {
		return -1, -1
	}
	return resp.Coordinators[0].NodeID, resp.Coordinators[0].ErrorCode
}

// TestClusterCoordinators checks on three processes, with internal topics
// of one replica, that group and transaction coordinators follow the leadership of their internal-topic
// partitions: with one group and one transactional id whose partition each
// node leads, every node's FindCoordinator names that leader, a consumer
// group on each commits and reads its offsets back, a transactional
// producer on each commits and aborts on partitions of two nodes and a
// read_committed consumer sees exactly the committed records, and a
// consume-transform-produce session whose transactional id, group and
// partitions are on different nodes copies a topic exactly once; after
// kill -9 of the node leading one
// group's partition FindCoordinator answers COORDINATOR_NOT_AVAILABLE for
// that group while the other groups keep committing, and the restarted
// node serves the group's offsets again.
func TestClusterCoordinators(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/cascade and starts three processes")
	}
	const parts = 6
	// Internal topics of one replica: a coordinator's node down leaves its
	// keys without a coordinator (cluster_failover_e2e_test.go runs them
	// replicated).
	tc := startTestCluster(t, "offsets.topic.num.partitions=6", "transaction.state.log.num.partitions=6",
		"group.initial.rebalance.delay.ms=0", "offsets.topic.replication.factor=1",
		"transaction.state.log.replication.factor=1", "transaction.state.log.min.isr=1")
	cl, adm := tc.cl, tc.adm
	// The whole test is bounded: it takes 10 to 20 s on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	started := time.Now()

	waitFor(t, 60*time.Second, "three brokers in Metadata", func() bool {
		c, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		m, err := adm.BrokerMetadata(c)
		return err == nil && len(m.Brokers) == 3
	})
	leaders := func(topic string) map[int32]int32 { return partitionLeaders(ctx, adm, topic) }
	// spread reports whether every partition has a leader and each node
	// leads one.
	spread := func(l map[int32]int32, n int) bool {
		by := map[int32]bool{}
		for _, id := range l {
			if id < 1 {
				return false
			}
			by[id] = true
		}
		return len(l) == n && len(by) == 3
	}

	// FindCoordinator creates the internal topics on first use, placed
	// over the three brokers.
	var offLeaders, txnLeaders map[int32]int32
	waitFor(t, 30*time.Second, "both internal topics created and spread", func() bool {
		findCoordinator(ctx, cl, 1, 0, "probe")
		findCoordinator(ctx, cl, 1, 1, "probe")
		offLeaders, txnLeaders = leaders("__consumer_offsets"), leaders("__transaction_state")
		return spread(offLeaders, parts) && spread(txnLeaders, parts)
	})
	// The internal topics have the configured factors.
	for _, name := range []string{"__consumer_offsets", "__transaction_state"} {
		m, err := adm.Metadata(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m.Topics[name].Partitions {
			if len(p.Replicas) != 1 {
				t.Fatalf("%s-%d has replicas %v, want 1", name, p.Partition, p.Replicas)
			}
		}
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "__transaction_state")
	if err != nil {
		t.Fatal(err)
	}
	if rc, err := rcs.On("__transaction_state", nil); err != nil {
		t.Fatal(err)
	} else if v := configValue(rc.Configs, "min.insync.replicas"); v != "1" {
		t.Fatalf("__transaction_state min.insync.replicas %q, want 1", v)
	}
	// pick returns, for each node, an id whose partition it leads.
	pick := func(prefix string, l map[int32]int32, partitionFor func(string, int32) int32) map[int32]string {
		out := map[int32]string{}
		for i := 0; len(out) < 3 && i < 1000; i++ {
			id := fmt.Sprintf("%s-%d", prefix, i)
			if leader := l[partitionFor(id, parts)]; out[leader] == "" {
				out[leader] = id
			}
		}
		if len(out) != 3 {
			t.Fatalf("no %s id for every node: %v over leaders %v", prefix, out, l)
		}
		return out
	}
	groups := pick("group", offLeaders, group.PartitionFor)
	txnIDs := pick("txn", txnLeaders, txn.PartitionFor)
	t.Logf("groups by coordinator %v, transactional ids by coordinator %v", groups, txnIDs)
	for _, p := range tc.procs {
		for leader := int32(1); leader <= 3; leader++ {
			for typ, key := range map[int8]string{0: groups[leader], 1: txnIDs[leader]} {
				waitFor(t, 10*time.Second, fmt.Sprintf("FindCoordinator(%d, %s) on node %d naming node %d", typ, key, p.id, leader), func() bool {
					id, code := findCoordinator(ctx, cl, p.id, typ, key)
					return code == 0 && id == leader
				})
			}
		}
	}

	const topic = "coords"
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	var placed map[int32]int32
	waitFor(t, 20*time.Second, "the data topic spread", func() bool {
		placed = leaders(topic)
		return spread(placed, parts)
	})
	ledBy := map[int32][]int32{}
	for p, l := range placed {
		ledBy[l] = append(ledBy[l], p)
	}
	for p := range int32(parts) {
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := cl.ProduceSync(c, &kgo.Record{Topic: topic, Partition: p, Value: []byte("plain")}).FirstErr()
		cancel()
		if err != nil {
			t.Fatalf("produce to %s-%d: %v", topic, p, err)
		}
	}

	// A consumer group on each coordinator reads the six records, commits
	// and reads its offsets back.
	committed := func(g string, want int64) bool {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		offs, err := adm.FetchOffsets(c, g)
		if err != nil || offs.Error() != nil {
			return false
		}
		for p := range int32(parts) {
			if o, ok := offs.Lookup(topic, p); !ok || o.At != want {
				return false
			}
		}
		return true
	}
	for leader := int32(1); leader <= 3; leader++ {
		g := groups[leader]
		gc, err := kgo.NewClient(kgo.SeedBrokers(tc.seeds...), kgo.ConsumerGroup(g), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond),
			kgo.DisableAutoCommit())
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		deadline := time.Now().Add(30 * time.Second)
		for n < parts && time.Now().Before(deadline) {
			c, cancel := context.WithTimeout(ctx, 3*time.Second)
			n += gc.PollFetches(c).NumRecords()
			cancel()
		}
		if n < parts {
			gc.Close()
			t.Fatalf("group %s (coordinator %d) read %d of %d records", g, leader, n, parts)
		}
		if err := gc.CommitUncommittedOffsets(ctx); err != nil {
			gc.Close()
			t.Fatalf("group %s (coordinator %d) commit: %v", g, leader, err)
		}
		gc.Close()
		waitFor(t, 20*time.Second, "group "+g+" offsets read back", func() bool { return committed(g, 1) })
	}

	// A transactional producer on each coordinator commits one
	// transaction and aborts one, on a partition its coordinator's node
	// leads and on one the next node leads (markers and verification go
	// between the nodes); a read_committed consumer sees exactly the
	// committed records in both.
	for leader := int32(1); leader <= 3; leader++ {
		id := txnIDs[leader]
		ps := []int32{ledBy[leader][0], ledBy[leader%3+1][1]}
		tp, err := kgo.NewClient(kgo.SeedBrokers(tc.seeds...), kgo.TransactionalID(id),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequestTimeoutOverhead(5*time.Second),
			kgo.RetryTimeout(20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for _, commit := range []bool{true, false} {
			if err := tp.BeginTransaction(); err != nil {
				t.Fatalf("%s: BeginTransaction: %v", id, err)
			}
			for i := range 2 {
				for _, p := range ps {
					v := fmt.Sprintf("%s-%v-%d", id, commit, i)
					if err := tp.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
						t.Fatalf("%s: transactional produce to %s-%d: %v", id, topic, p, err)
					}
				}
			}
			if err := tp.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
				t.Fatalf("%s: EndTransaction(commit %v): %v", id, commit, err)
			}
		}
		tp.Close()
		end := "end-" + id
		for _, p := range ps {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(end)}).FirstErr(); err != nil {
				t.Fatalf("produce to %s-%d: %v", topic, p, err)
			}
			rc, err := kgo.NewClient(kgo.SeedBrokers(tc.seeds...), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
				kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}}))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			deadline := time.Now().Add(30 * time.Second)
			for !slices.Contains(got, end) && time.Now().Before(deadline) {
				c, cancel := context.WithTimeout(ctx, 2*time.Second)
				rc.PollFetches(c).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
				cancel()
			}
			rc.Close()
			want := []string{"plain", id + "-true-0", id + "-true-1", end}
			if !slices.Equal(got, want) {
				t.Fatalf("read_committed %s-%d (led by %d) after %s's transactions (coordinator %d): %q, want %q",
					topic, p, placed[p], id, leader, got, want)
			}
		}
	}
	t.Logf("groups and transactions on all three coordinators done %v after start", time.Since(started))

	// Exactly once across the nodes: a transactional id coordinated by
	// node 1 consumes the data topic in a group coordinated by node 2 and
	// copies it to a topic spread over all three; its coordinator sends
	// markers to every partition's leader, and the leaders verify with it.
	eosID, eosGroup := pick("eos", txnLeaders, txn.PartitionFor)[1], pick("eos-group", offLeaders, group.PartitionFor)[2]
	const out = "coords-out"
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, out); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	waitFor(t, 20*time.Second, "the output topic spread", func() bool { return spread(leaders(out), parts) })
	const inputs = parts + 2*3*3 // plain, then two committed and an end per partition of each transactional id
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(tc.seeds...), kgo.TransactionalID(eosID),
		kgo.ConsumerGroup(eosGroup), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.FetchMaxWait(500*time.Millisecond), kgo.RequestTimeoutOverhead(5*time.Second), kgo.RetryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	copied := 0
	next := map[int32]int64{} // past the last record copied, per partition
	deadline := time.Now().Add(45 * time.Second)
	for copied < inputs && time.Now().Before(deadline) {
		c, cancel := context.WithTimeout(ctx, 3*time.Second)
		fs := sess.PollFetches(c)
		cancel()
		if fs.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Fatalf("%s: Begin: %v", eosID, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Topic: out, Partition: r.Partition, Value: r.Value}, nil)
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatalf("%s: End: %v", eosID, err)
		}
		if committed {
			copied += fs.NumRecords()
			fs.EachRecord(func(r *kgo.Record) { next[r.Partition] = max(next[r.Partition], r.Offset+1) })
		}
	}
	sess.Close()
	if copied != inputs {
		t.Fatalf("%s copied %d of %d records", eosID, copied, inputs)
	}
	// The group's offsets are past the last records copied (an abort
	// marker written after a partition's last record is not consumed).
	var lastOffsets string
	defer func() {
		if t.Failed() {
			t.Logf("group %s offsets last seen: %s; want %v", eosGroup, lastOffsets, next)
		}
	}()
	waitFor(t, 20*time.Second, "the group's offsets past the records copied", func() bool {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		offs, err := adm.FetchOffsets(c, eosGroup)
		lastOffsets = fmt.Sprintf("%v (err %v)", offs, err)
		if err != nil || offs.Error() != nil {
			return false
		}
		for p := range int32(parts) {
			if o, ok := offs.Lookup(topic, p); !ok || o.At != next[p] {
				return false
			}
		}
		return true
	})
	oc, err := kgo.NewClient(kgo.SeedBrokers(tc.seeds...), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	outPer := map[int32]int{}
	seen := 0
	deadline = time.Now().Add(30 * time.Second)
	for seen < inputs && time.Now().Before(deadline) {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		oc.PollFetches(c).EachRecord(func(r *kgo.Record) { outPer[r.Partition]++; seen++ })
		cancel()
	}
	// A little longer: nothing more may come.
	c, cancelMore := context.WithTimeout(ctx, time.Second)
	seen += oc.PollFetches(c).NumRecords()
	cancelMore()
	oc.Close()
	if seen != inputs || len(outPer) != parts {
		t.Fatalf("read_committed %s: %d records over partitions %v, want %d over %d", out, seen, outPer, inputs, parts)
	}
	t.Logf("%s (coordinator 1) copied %d records in group %s (coordinator 2) to %s on every node", eosID, copied, eosGroup, out)

	// kill -9 of a node (not the active controller, so it is fenced at
	// once) leading one group's partition.
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	victim := int32(1)
	for victim == md.Controller {
		victim++
	}
	vp := tc.procs[victim-1]
	killed := time.Now()
	vp.kill()
	var survivors []int
	for _, p := range tc.procs {
		if int32(p.id) != victim {
			survivors = append(survivors, p.id)
		}
	}
	waitFor(t, 30*time.Second, "COORDINATOR_NOT_AVAILABLE for the killed node's group", func() bool {
		for _, id := range survivors {
			if _, code := findCoordinator(ctx, cl, id, 0, groups[victim]); code != kerr.CoordinatorNotAvailable.Code {
				return false
			}
		}
		return true
	})
	t.Logf("kill -9 of node %d: its group %s COORDINATOR_NOT_AVAILABLE %v after the kill", victim, groups[victim], time.Since(killed))
	for leader, g := range groups {
		if leader == victim {
			continue
		}
		for _, id := range survivors {
			if cid, code := findCoordinator(ctx, cl, id, 0, g); code != 0 || cid != leader {
				t.Fatalf("FindCoordinator(%s) on node %d with node %d down: node %d code %d, want %d", g, id, victim, cid, code, leader)
			}
		}
		var offs kadm.Offsets
		for p := range int32(parts) {
			offs.AddOffset(topic, p, 2, -1)
		}
		waitFor(t, 20*time.Second, "group "+g+" committing with node "+strconv.Itoa(int(victim))+" down", func() bool {
			c, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			r, err := adm.CommitOffsets(c, g, offs)
			return err == nil && r.Error() == nil && committed(g, 2)
		})
	}

	vp.start(t, tc.bin, tc.logs[victim-1])
	restarted := time.Now()
	waitFor(t, 60*time.Second, "the restarted node coordinating its group again", func() bool {
		for _, p := range tc.procs {
			if id, code := findCoordinator(ctx, cl, p.id, 0, groups[victim]); code != 0 || id != victim {
				return false
			}
		}
		return true
	})
	waitFor(t, 30*time.Second, "group "+groups[victim]+"'s offsets back", func() bool { return committed(groups[victim], 1) })
	t.Logf("restarted node %d serves group %s's offsets %v after its start; test took %v", victim, groups[victim],
		time.Since(restarted), time.Since(started))
}

// configValue returns the value of key among configs, "" when absent.
func configValue(configs []kadm.Config, key string) string {
	for _, c := range configs {
		if c.Key == key && c.Value != nil {
			return *c.Value
		}
	}
	return ""
}

package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// failoverProps are the settings of the coordinator failover tests:
// internal topics left at a cluster's defaults (three replicas,
// transaction.state.log.min.isr 2), few partitions, and replica fetch
// timings that let a follower catch up quickly.
var failoverProps = []string{"offsets.topic.num.partitions=3", "transaction.state.log.num.partitions=3",
	"group.initial.rebalance.delay.ms=0", "replica.lag.time.max.ms=4000", "replica.fetch.wait.max.ms=200",
	"replica.fetch.backoff.ms=100"}

// internalReplicated waits until FindCoordinator for key (typ 0 group, 1
// transaction) has created topic and every partition of it has three
// replicas, all in the ISR.
func (c *testCluster) internalReplicated(ctx context.Context, typ int8, key, topic string) {
	c.t.Helper()
	waitFor(c.t, 60*time.Second, topic+" created with three replicas in sync", func() bool {
		if _, code := findCoordinator(ctx, c.cl, 1, typ, key); code != 0 {
			return false
		}
		t := c.metadataTopic(1, topic)
		if t == nil || len(t.Partitions) == 0 {
			return false
		}
		for _, p := range t.Partitions {
			if len(p.Replicas) != 3 || len(p.ISR) != 3 {
				return false
			}
		}
		return true
	})
}

// coordinatorOf returns the node every live node names as key's
// coordinator, waiting until they agree on one that is not avoid.
func (c *testCluster) coordinatorOf(ctx context.Context, typ int8, key string, avoid int32, live []int) int32 {
	c.t.Helper()
	var coord int32
	waitFor(c.t, 60*time.Second, fmt.Sprintf("a coordinator for %q other than node %d", key, avoid), func() bool {
		coord = -1
		for _, id := range live {
			n, code := findCoordinator(ctx, c.cl, id, typ, key)
			if code != 0 || n == avoid || (coord >= 0 && n != coord) {
				return false
			}
			coord = n
		}
		return coord > 0
	})
	return coord
}

// createReplicated creates topic with parts partitions of three replicas
// and min.insync.replicas minISR, and waits until every partition's ISR
// is full.
func (c *testCluster) createReplicated(ctx context.Context, topic string, parts int32, minISR int) {
	c.t.Helper()
	cfg := map[string]*string{"min.insync.replicas": kmsg.StringPtr(strconv.Itoa(minISR))}
	if _, err := c.adm.CreateTopic(ctx, parts, 3, cfg, topic); err != nil {
		c.t.Fatalf("CreateTopic %s RF=3: %v", topic, err)
	}
	waitFor(c.t, 30*time.Second, topic+" in sync on three replicas", func() bool {
		t := c.metadataTopic(1, topic)
		if t == nil || len(t.Partitions) != int(parts) {
			return false
		}
		for _, p := range t.Partitions {
			if p.Leader < 0 || len(p.ISR) != 3 {
				return false
			}
		}
		return true
	})
}

// others returns the node ids other than id.
func others(id int32) []int {
	var out []int
	for n := 1; n <= 3; n++ {
		if int32(n) != id {
			out = append(out, n)
		}
	}
	return out
}

// offsetWatch polls a group's committed offsets and remembers, per
// partition, the highest seen and whether any fetch returned a lower one.
type offsetWatch struct {
	mu        sync.Mutex
	max       map[int32]int64
	backwards []string
}

func (w *offsetWatch) poll(ctx context.Context, adm *kadm.Client, group, topic string) {
	c, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	offs, err := adm.FetchOffsets(c, group)
	if err != nil || offs.Error() != nil {
		return // the coordinator may be failing over
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic != topic {
			return
		}
		if prev, ok := w.max[o.Partition]; ok && o.At < prev {
			w.backwards = append(w.backwards, fmt.Sprintf("%s-%d: %d after %d", topic, o.Partition, o.At, prev))
		}
		w.max[o.Partition] = max(w.max[o.Partition], o.At)
	})
}

// TestClusterGroupCoordinatorFailover runs franz-go consumers of one group,
// committing after every poll, against three processes with a replicated
// __consumer_offsets while a producer keeps writing; SIGKILL of the
// group's coordinator moves the group to the new leader of its partition,
// where commits are accepted again, no committed offset (acknowledged
// before the kill or after) is lost or goes backwards, every record
// produced is consumed, and the restarted node rejoins the ISR of every
// __consumer_offsets partition.
func TestClusterGroupCoordinatorFailover(t *testing.T) {
	c := startTestCluster(t, failoverProps...)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const group, topic, parts = "failover-group", "failover-in", 3
	c.internalReplicated(ctx, 0, group, "__consumer_offsets")
	c.createReplicated(ctx, topic, parts, 2)
	coord := c.coordinatorOf(ctx, 0, group, -1, []int{1, 2, 3})

	prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(60*time.Second), kgo.ProducerLinger(0),
		kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var pmu sync.Mutex
	acked := map[string]bool{}
	var produceErr error
	pctx, stopProducing := context.WithCancel(ctx)
	var producing sync.WaitGroup
	producing.Go(func() {
		for i := 0; pctx.Err() == nil && i < 20000; i++ {
			v := strconv.Itoa(i)
			prod.Produce(pctx, &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
				pmu.Lock()
				defer pmu.Unlock()
				if err == nil {
					acked[v] = true
				} else if pctx.Err() == nil && produceErr == nil {
					produceErr = err
				}
			})
			time.Sleep(5 * time.Millisecond)
		}
	})

	// Two consumers of the group, each committing what it polled.
	var cmu sync.Mutex
	consumed := map[string]bool{}
	ackedCommits := map[int32]int64{} // highest commit acknowledged, per partition
	var commitTimes []time.Time
	cctx, stopConsuming := context.WithCancel(ctx)
	var consuming sync.WaitGroup
	for range 2 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
			kgo.FetchMaxWait(500*time.Millisecond), kgo.RequestTimeoutOverhead(5*time.Second),
			kgo.RetryTimeout(30*time.Second), kgo.MetadataMinAge(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		consuming.Go(func() {
			defer cl.Close()
			for cctx.Err() == nil {
				pc, pcancel := context.WithTimeout(cctx, 2*time.Second)
				fs := cl.PollRecords(pc, 50)
				pcancel()
				recs := fs.Records()
				if len(recs) == 0 {
					continue
				}
				cmu.Lock()
				for _, r := range recs {
					consumed[string(r.Value)] = true
				}
				cmu.Unlock()
				cl.CommitRecords(cctx, recs...)
				// CommitRecords answers no error: read what the
				// coordinator acknowledged from the client.
				cmu.Lock()
				if offs := cl.CommittedOffsets()[topic]; offs != nil {
					for p, o := range offs {
						if o.Offset > ackedCommits[p] {
							ackedCommits[p] = o.Offset
							commitTimes = append(commitTimes, time.Now())
						}
					}
				}
				cmu.Unlock()
			}
		})
	}
	defer func() {
		stopConsuming()
		consuming.Wait()
	}()
	watch := &offsetWatch{max: map[int32]int64{}}
	commitsSince := func(at time.Time) int {
		cmu.Lock()
		defer cmu.Unlock()
		n := 0
		for _, ct := range commitTimes {
			if ct.After(at) {
				n++
			}
		}
		return n
	}
	waitFor(t, 60*time.Second, "commits before the kill", func() bool {
		watch.poll(ctx, c.adm, group, topic)
		return commitsSince(time.Time{}) >= 10
	})

	killed := time.Now()
	c.procs[coord-1].kill()
	cmu.Lock()
	before := map[int32]int64{}
	for p, o := range ackedCommits {
		before[p] = o
	}
	cmu.Unlock()
	live := others(coord)
	next := c.coordinatorOf(ctx, 0, group, coord, live)
	t.Logf("group coordinator %d killed; node %d coordinates %s %v later; commits acknowledged before: %v",
		coord, next, group, time.Since(killed), before)
	waitFor(t, 90*time.Second, "commits acknowledged by the new coordinator", func() bool {
		watch.poll(ctx, c.adm, group, topic)
		return commitsSince(killed) >= 30
	})
	t.Logf("commits accepted again %v after the kill", time.Since(killed))

	// The killed node returns and catches up on every partition of
	// __consumer_offsets.
	c.procs[coord-1].start(t, c.bin, c.logs[coord-1])
	restarted := time.Now()
	c.waitInEveryISR(t, next, "__consumer_offsets", coord, func() { watch.poll(ctx, c.adm, group, topic) })
	waitFor(t, 60*time.Second, "commits after the restart", func() bool {
		watch.poll(ctx, c.adm, group, topic)
		return commitsSince(restarted) >= 10
	})

	stopProducing()
	producing.Wait()
	pmu.Lock()
	want := len(acked)
	perr := produceErr
	pmu.Unlock()
	if perr != nil {
		t.Fatalf("produce failed: %v", perr)
	}
	waitFor(t, 90*time.Second, "every acknowledged record consumed", func() bool {
		watch.poll(ctx, c.adm, group, topic)
		cmu.Lock()
		defer cmu.Unlock()
		pmu.Lock()
		defer pmu.Unlock()
		for v := range acked {
			if !consumed[v] {
				return false
			}
		}
		return true
	})
	// The group's offsets, read from the coordinator, hold every commit
	// acknowledged, before the kill and after.
	var final map[int32]int64
	waitFor(t, 30*time.Second, "the committed offsets read back", func() bool {
		fc, fcancel := context.WithTimeout(ctx, 5*time.Second)
		defer fcancel()
		offs, err := c.adm.FetchOffsets(fc, group)
		if err != nil || offs.Error() != nil {
			return false
		}
		final = map[int32]int64{}
		offs.Each(func(o kadm.OffsetResponse) { final[o.Partition] = o.At })
		return true
	})
	stopConsuming()
	consuming.Wait()
	for p, o := range before {
		if final[p] < o {
			t.Errorf("%s-%d: committed offset %d, below %d acknowledged before the kill", topic, p, final[p], o)
		}
	}
	watch.mu.Lock()
	defer watch.mu.Unlock()
	if len(watch.backwards) > 0 {
		t.Errorf("committed offsets went backwards: %v", watch.backwards)
	}
	t.Logf("%d records produced and consumed; committed offsets %v", want, final)
}

// TestClusterTxnCoordinatorFailover runs a consume-transform-produce loop
// (a franz-go GroupTransactSession, as franz-go's TestTxnEtl) copying a
// topic to another with read_committed, against three processes with a
// replicated __transaction_state, and SIGKILLs the transaction
// coordinator's node while transactions are being committed: the new
// leader of its __transaction_state partition loads the transaction state
// and completes or aborts what was open, the loop carries on, and the
// output read with read_committed holds every input record exactly once.
func TestClusterTxnCoordinatorFailover(t *testing.T) {
	c := startTestCluster(t, failoverProps...)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const txnID, group, in, out, parts, records = "failover-etl", "failover-etl-group", "etl-in", "etl-out", 3, 3000
	c.internalReplicated(ctx, 1, txnID, "__transaction_state")
	c.internalReplicated(ctx, 0, group, "__consumer_offsets")
	c.createReplicated(ctx, in, parts, 2)
	c.createReplicated(ctx, out, parts, 2)
	for i := range records {
		c.cl.Produce(ctx, &kgo.Record{Topic: in, Partition: int32(i % parts), Value: []byte(strconv.Itoa(i))}, nil)
	}
	if err := c.cl.Flush(ctx); err != nil {
		t.Fatalf("producing the input: %v", err)
	}
	coord := c.coordinatorOf(ctx, 1, txnID, -1, []int{1, 2, 3})

	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(c.seeds...), kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(20*time.Second), kgo.ConsumerGroup(group), kgo.ConsumeTopics(in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.FetchMaxWait(500*time.Millisecond),
		kgo.RequestTimeoutOverhead(5*time.Second), kgo.RetryTimeout(60*time.Second),
		kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	// readOut counts the committed records of the output.
	readOut := func(bound time.Duration) map[string]int {
		rc, err := kgo.NewClient(kgo.SeedBrokers(c.seeds...), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		got := map[string]int{}
		quiet := 0
		for deadline := time.Now().Add(bound); time.Now().Before(deadline) && quiet < 3; {
			pc, pcancel := context.WithTimeout(ctx, time.Second)
			fs := rc.PollFetches(pc)
			pcancel()
			if fs.NumRecords() == 0 {
				quiet++
				continue
			}
			quiet = 0
			fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)]++ })
		}
		return got
	}

	committed, aborted, endErrs := 0, 0, 0
	var killed time.Time
	for deadline := time.Now().Add(3 * time.Minute); committed < records && time.Now().Before(deadline); {
		pc, pcancel := context.WithTimeout(ctx, 3*time.Second)
		fs := sess.PollRecords(pc, 100)
		pcancel()
		if fs.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Fatalf("Begin: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Topic: out, Partition: r.Partition, Value: r.Value}, nil)
		})
		if killed.IsZero() && committed >= records/4 {
			// The coordinator dies with a transaction open: its
			// records are on their way, EndTxn is not sent yet.
			killed = time.Now()
			c.procs[coord-1].kill()
			t.Logf("transaction coordinator %d killed with a transaction open, after %d records committed", coord, committed)
		}
		ok, err := sess.End(ctx, kgo.TryCommit)
		switch {
		case err != nil:
			// The session aborted and rewinds to the group's offsets.
			endErrs++
			t.Logf("End: %v", err)
		case ok:
			committed += fs.NumRecords()
		default:
			aborted += fs.NumRecords()
		}
	}
	if killed.IsZero() {
		t.Fatalf("the loop committed %d of %d records before the kill", committed, records)
	}
	next := c.coordinatorOf(ctx, 1, txnID, coord, others(coord))
	t.Logf("committed %d records, aborted %d, End failed %d times; node %d coordinates %s after node %d",
		committed, aborted, endErrs, next, txnID, coord)
	if committed < records {
		got := readOut(10 * time.Second)
		t.Fatalf("the loop committed %d of %d records within its bound; the output has %d", committed, records, len(got))
	}

	// The restarted node rejoins; the output holds every record once.
	c.procs[coord-1].start(t, c.bin, c.logs[coord-1])
	var got map[string]int
	waitFor(t, 60*time.Second, "every input record in the committed output", func() bool {
		got = readOut(20 * time.Second)
		return len(got) == records
	})
	var dup []string
	for v, n := range got {
		if n != 1 {
			dup = append(dup, fmt.Sprintf("%s×%d", v, n))
		}
	}
	for i := range records {
		if got[strconv.Itoa(i)] == 0 {
			t.Errorf("input record %d missing from the committed output", i)
		}
	}
	if len(dup) > 0 {
		slices.Sort(dup)
		t.Fatalf("%d input records more than once in the committed output: %v", len(dup), dup[:min(len(dup), 20)])
	}
	t.Logf("%d records exactly once in %s across the kill of coordinator %d", records, out, coord)
}

// txnStateOn returns the state of transactional id as node's
// DescribeTransactions answers it, "" when the node does not.
func (c *testCluster) txnStateOn(ctx context.Context, node int32, id string) string {
	dc, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	resp, err := req.RequestWith(dc, c.cl.Broker(int(node)))
	if err != nil || len(resp.TransactionStates) != 1 || resp.TransactionStates[0].ErrorCode != 0 {
		return ""
	}
	return resp.TransactionStates[0].State
}

// TestClusterTxnCoordinatorFailoverMidCommit kills a transaction's
// coordinator in PrepareCommit, then another's in PrepareAbort: the
// decision is in __transaction_state and the producer was told, but a
// marker cannot be written because the leader of one of the transaction's
// partitions is stopped (SIGSTOP). The new leader of the coordinator's
// __transaction_state partition loads the prepared transaction and sends
// its markers again, so once the stopped node resumes the transaction
// completes as decided: a read_committed consumer sees every record of the
// committed one once, on every partition, and none of the aborted one.
func TestClusterTxnCoordinatorFailoverMidCommit(t *testing.T) {
	c := startTestCluster(t, failoverProps...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, commit := range []bool{true, false} {
		c.killPrepared(ctx, commit)
	}
}

// killPrepared runs one round of TestClusterTxnCoordinatorFailoverMidCommit
// with its own transactional id and topic.
func (c *testCluster) killPrepared(ctx context.Context, commit bool) {
	t := c.t
	t.Helper()
	prepared, complete := "PrepareCommit", "CompleteCommit"
	if !commit {
		prepared, complete = "PrepareAbort", "CompleteAbort"
	}
	txnID, topic := "failover-"+prepared, strings.ToLower(prepared)
	const parts = 3
	c.internalReplicated(ctx, 1, txnID, "__transaction_state")
	c.createReplicated(ctx, topic, parts, 2)
	coord := c.coordinatorOf(ctx, 1, txnID, -1, []int{1, 2, 3})
	// stopped leads a partition of the transaction and is neither the
	// coordinator nor, where possible, the active controller.
	leaders := c.leadersOn(1, topic)
	ctl := c.controller(1)
	stopped := int32(-1)
	for _, l := range leaders {
		if l != coord && (stopped < 0 || stopped == ctl) {
			stopped = l
		}
	}
	if stopped < 0 {
		t.Fatalf("no partition of %s led by a node other than coordinator %d: %v", topic, coord, leaders)
	}

	prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds...), kgo.TransactionalID(txnID),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequestTimeoutOverhead(30*time.Second),
		kgo.RetryTimeout(60*time.Second), kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	const perPartition = 5
	for p := range int32(parts) {
		for i := range perPartition {
			prod.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("%d-%d", p, i))}, nil)
		}
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatalf("transactional produce: %v", err)
	}
	sp := c.procs[stopped-1]
	if err := sp.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			sp.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	if err := prod.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("EndTxn(commit %v) with node %d stopped: %v", commit, stopped, err)
	}
	// The decision is logged; the marker for node stopped's partition
	// waits for it.
	if s := c.txnStateOn(ctx, coord, txnID); s != prepared {
		t.Fatalf("coordinator %d describes %s as %q after EndTxn, want %s", coord, txnID, s, prepared)
	}
	c.procs[coord-1].kill()
	if err := sp.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	t.Logf("coordinator %d killed in %s with node %d (leading a partition of the transaction) stopped", coord, prepared, stopped)
	next := c.coordinatorOf(ctx, 1, txnID, coord, others(coord))
	waitFor(t, 90*time.Second, "the transaction completed by the new coordinator", func() bool {
		return c.txnStateOn(ctx, next, txnID) == complete
	})
	t.Logf("node %d completed %s as %s", next, txnID, complete)

	// A record after the transaction on each partition: read_committed
	// reads past the transaction's records only once its marker is there.
	for p := range int32(parts) {
		pc, pcancel := context.WithTimeout(ctx, 30*time.Second)
		err := c.cl.ProduceSync(pc, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("%d-end", p))}).FirstErr()
		pcancel()
		if err != nil {
			t.Fatalf("produce to %s-%d: %v", topic, p, err)
		}
	}
	rc, err := kgo.NewClient(kgo.SeedBrokers(c.seeds...), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got := map[string]int{}
	ends := 0
	for deadline := time.Now().Add(60 * time.Second); ends < parts && time.Now().Before(deadline); {
		pc, pcancel := context.WithTimeout(ctx, 2*time.Second)
		rc.PollFetches(pc).EachRecord(func(r *kgo.Record) {
			got[string(r.Value)]++
			if strings.HasSuffix(string(r.Value), "-end") {
				ends++
			}
		})
		pcancel()
	}
	if ends < parts {
		t.Fatalf("read_committed %s reached the end of %d of %d partitions: %v", topic, ends, parts, got)
	}
	for p := range parts {
		for i := range perPartition {
			v := fmt.Sprintf("%d-%d", p, i)
			if want := map[bool]int{true: 1, false: 0}[commit]; got[v] != want {
				t.Errorf("read_committed %s: %q read %d times, want %d", topic, v, got[v], want)
			}
		}
	}
	c.procs[coord-1].start(t, c.bin, c.logs[coord-1])
	c.waitInEveryISR(t, next, "__transaction_state", coord, nil)
}

// waitInEveryISR waits until node id is in the ISR of every partition of
// topic, as node from's Metadata shows, calling each (when set) on every
// look.
func (c *testCluster) waitInEveryISR(t *testing.T, from int32, topic string, id int32, each func()) {
	t.Helper()
	waitFor(t, 90*time.Second, fmt.Sprintf("node %d back in every %s ISR", id, topic), func() bool {
		if each != nil {
			each()
		}
		tp := c.metadataTopic(int(from), topic)
		if tp == nil {
			return false
		}
		for _, p := range tp.Partitions {
			if !slices.Contains(p.ISR, id) {
				return false
			}
		}
		return true
	})
}

package matrix

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cascade-kafka/cascade/matrix/cluster"
	"github.com/cascade-kafka/cascade/matrix/driver"
)

// txnMoveTimeout bounds each transaction step of the node-stop cell.
const txnMoveTimeout = 30 * time.Second

// nodeStopScenario is scenario 11's failover cell. One node is stopped
// (SIGTERM) and started again while it is, at once, the leader of the
// partition a client produces to, the coordinator of that client's
// consumer group and the coordinator of its transactional producer: the
// group id and the transactional id are chosen so that their
// __consumer_offsets and __transaction_state partitions (RF=3) are led by
// the partition's leader. One stop thus moves all three, which keeps the
// cluster run inside CI's budget (a JVM restart is most of a cell's time).
//
//   - Leader move: an idempotent acks=all producer of the client sends
//     batch after batch throughout, and a reader of the peer client reads
//     throughout: every acknowledged record is in the log once, at the
//     offset the producer was told, each key's records in the order sent,
//     and the reader reads each once.
//   - Coordinator move: a member read and committed 8 records before the
//     stop; the next member joins through the new coordinator, which must
//     have kept offset 8, and reads 8..19.
//   - Transaction coordinator move: a transaction was open (records
//     written) when the node stopped; it then commits or aborts whole,
//     as a read_committed reader sees, and the next one commits.
//
// Every role is a new instance of its client (a new process for the
// out-of-process drivers), so no connection of an earlier cell to a node
// that was stopped is reused, and a client that hangs stops only this
// cell.
var nodeStopScenario = Scenario{
	ID: "11.node-stop",
	Title: "the node leading a producer's partition and coordinating its group and transaction is stopped and started again: " +
		"every record once at its offset, the group resumes from its commit, the open transaction ends whole",
	Pair: func(ctx context.Context, e *Env, prod, cons driver.Driver) (string, error) {
		c, err := faultCluster(ctx, e)
		if err != nil {
			return "", err
		}
		var ds [3]driver.Driver // producer and group member; reader; transactional producer
		for i, client := range []string{prod.Client(), cons.Client(), prod.Client()} {
			if ds[i], err = e.OpenAnother(ctx, client); err != nil {
				return "", err
			}
			defer ds[i].Close()
		}
		p, r, t := ds[0], ds[1], ds[2]
		topic := e.Topic("node-stop-" + p.Client() + "-" + r.Client())
		gtopic, ttopic := topic+"-group", topic+"-txn"
		for _, tp := range []string{topic, gtopic, ttopic} {
			if err := createTopic(ctx, e, p, tp, 1, nil); err != nil {
				return "", err
			}
		}
		victim, err := cluster.Leader(ctx, c, topic, 0)
		if err != nil {
			return "", err
		}
		group, err := keyLedBy(ctx, c, topic+"-g", cluster.GroupCoordinator, victim)
		if err != nil {
			return "", err
		}
		txnID, err := keyLedBy(ctx, c, topic+"-t", cluster.TransactionCoordinator, victim)
		if err != nil {
			return "", err
		}

		// Before the stop: a member reads and commits 8 records, and a
		// transaction is left open with records written.
		grecs := make([]driver.Record, 20)
		for i := range grecs {
			grecs[i] = driver.Record{Partition: 0, Value: []byte(fmt.Sprintf("%s-%d", gtopic, i))}
		}
		if _, err := produceOK(ctx, p, driver.Produce{Topic: gtopic, Records: grecs, Acks: -1}); err != nil {
			return "", err
		}
		first, err := p.GroupConsume(ctx, driver.GroupConsume{Group: group, Topic: gtopic, Count: 8, TimeoutMs: 20000, Commit: true})
		if err == nil {
			err = expectOffsets(first.Records, 0, 8)
		}
		if err != nil {
			return "", fmt.Errorf("first member: %w", err)
		}
		txn := &txnMove{d: t, topic: ttopic, id: txnID}
		if err := txn.begin(ctx); err != nil {
			return "", err
		}
		defer t.ProducerClose(context.WithoutCancel(ctx), txn.name())

		loop := startProduceLoop(ctx, p, topic)
		// The reader's fetches stay out of the history: across a leader
		// change Kafka's new leader may answer with a high watermark below
		// one the old leader gave (it learns the true one from its
		// followers' next fetches), which the history's model of one
		// partition does not allow; the cell checks its reads itself.
		reader := startReader(WithoutHistory(ctx), r, topic)
		restart := func() error { return nil }
		fail := func(err error) (string, error) {
			loop.finish()
			return "", errors.Join(err, restart())
		}
		if err := loop.waitAcked(ctx, 2, time.Time{}, "the first batches"); err != nil {
			return fail(err)
		}
		stopped := time.Now()
		if restart, err = stopNode(ctx, c, victim); err != nil {
			restart = func() error { return nil }
			return fail(err)
		}
		leader, err := cluster.WaitLeader(ctx, c, topic, 0, victim)
		if err != nil {
			return fail(fmt.Errorf("after stopping node %d: %w", victim, err))
		}
		movedAfter := time.Since(stopped)
		gcoord, err := cluster.WaitCoordinator(ctx, c, group, cluster.GroupCoordinator, victim)
		if err != nil {
			return fail(err)
		}
		tcoord, err := cluster.WaitCoordinator(ctx, c, txnID, cluster.TransactionCoordinator, victim)
		if err != nil {
			return fail(err)
		}
		if err := loop.waitAcked(ctx, 2, time.Now(), "batches led by the new leader"); err != nil {
			return fail(err)
		}

		// While the node is down: the transaction ends through the new
		// coordinator, and the next member joins through the new group
		// coordinator.
		txnErr := txn.end(ctx)
		if txnErr != nil && !errors.Is(txnErr, errTxnStuck) {
			return fail(fmt.Errorf("transaction coordinator node %d: %w", tcoord, txnErr))
		}
		// The new coordinator kept the commit (asked by the harness: a
		// client's admin may keep the stopped node as the coordinator it
		// knows until that node answers again, as franz-go's kadm does).
		var committed int64
		err = cluster.Poll(ctx, cluster.PollInterval, func() (err error) {
			committed, err = cluster.CommittedOffset(ctx, c, gcoord, group, gtopic, 0)
			return err
		})
		if err == nil && committed != 8 {
			err = fmt.Errorf("committed offset %d, want 8", committed)
		}
		if err != nil {
			return fail(fmt.Errorf("group coordinator node %d: %w", gcoord, err))
		}
		second, err := p.GroupConsume(ctx, driver.GroupConsume{Group: group, Topic: gtopic, Count: 12, TimeoutMs: 30000, Commit: true})
		if err == nil {
			err = expectOffsets(second.Records, 8, 12)
		}
		if err != nil {
			return fail(fmt.Errorf("second member, group coordinator node %d: %w", gcoord, err))
		}

		if err := restart(); err != nil {
			return fail(err)
		}
		if err := loop.waitAcked(ctx, 1, time.Now(), "a batch after the restart"); err != nil {
			return fail(err)
		}
		batches, err := loop.finish()
		if err != nil {
			return "", fmt.Errorf("producer: %w", err)
		}
		// The log's end, failed records that were written included.
		var end int64
		if err := cluster.Poll(ctx, cluster.PollInterval, func() (err error) {
			end, err = cluster.LogEnd(ctx, c, topic, 0)
			return err
		}); err != nil {
			return "", fmt.Errorf("log end: %w", err)
		}
		read, readRetries, err := reader.finish(end)
		if err != nil {
			return "", err
		}
		if err := checkLeaderMove(batches, read); err != nil {
			return "", err
		}
		if txnErr != nil {
			return "", fmt.Errorf("%w: %v (stopped node %d; the leader move and the group's coordinator move passed: %d batches read once each at their offsets, the next member resumed at offset 8)",
				ErrClientFault, txnErr, victim, len(batches))
		}
		outcome, err := txn.check(ctx)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("stopped node %d; partition led by node %d after %v, group coordinator node %d, transaction coordinator node %d; "+
			"%d batches of %d sent, every acknowledged record read by %s once at its offset, key order kept (%s); "+
			"the next member resumed at the committed offset 8; the open transaction %s, the next one committed; node %d back in every ISR",
			victim, leader, movedAfter.Round(100*time.Millisecond), gcoord, tcoord, len(batches), moveBatch, r.Client(), moveNotes(batches, readRetries), outcome, victim), nil
	},
	Peers:   ringPeer,
	Timeout: faultTimeout,
	Solo:    true,
	Cluster: true,
}

// moveNotes says what the clients passed on of the move: records the
// producer was told failed, and reads repeated after an error.
func moveNotes(batches []sentBatch, readRetries int) string {
	failed := 0
	for _, b := range batches {
		for _, dl := range b.dls {
			if dl.Error != nil {
				failed++
			}
		}
	}
	return fmt.Sprintf("%d records reported failed by the move, %d reads again after a leader-change error", failed, readRetries)
}

// keyLedBy returns a key, prefix plus a number, whose coordinator (of the
// given type) is node id: Kafka places a group or transactional id on the
// __consumer_offsets or __transaction_state partition
// cluster.CoordinatorPartition names, and that partition's leader
// coordinates it.
func keyLedBy(ctx context.Context, c cluster.Cluster, prefix string, typ int8, id int) (string, error) {
	internal := "__consumer_offsets"
	if typ == cluster.TransactionCoordinator {
		internal = "__transaction_state"
	}
	// The first FindCoordinator creates the internal topic.
	if _, err := cluster.WaitCoordinator(ctx, c, prefix, typ, -1); err != nil {
		return "", err
	}
	md, err := cluster.Metadata(ctx, c, []string{internal}, 0)
	if err != nil {
		return "", err
	}
	leaders := map[int32]int{}
	for _, t := range md.Topics {
		for _, p := range t.Partitions {
			leaders[p.Partition] = int(p.Leader)
		}
	}
	if len(leaders) == 0 {
		return "", fmt.Errorf("%s has no partitions in Metadata", internal)
	}
	for i := 0; i < 10000; i++ {
		key := fmt.Sprintf("%s%d", prefix, i)
		if leaders[cluster.CoordinatorPartition(key, int32(len(leaders)))] != id {
			continue
		}
		got, err := cluster.WaitCoordinator(ctx, c, key, typ, -1)
		if err != nil {
			return "", err
		}
		if got != id {
			return "", fmt.Errorf("%s: coordinator %d, but its %s partition is led by %d", key, got, internal, id)
		}
		return key, nil
	}
	return "", fmt.Errorf("no key %s* is coordinated by node %d", prefix, id)
}

// errTxnStuck is kafka-python's known defect in the node-stop cell: after
// its transaction coordinator's node stopped (and with it, possibly, the
// leader of the transaction's partition), its transactional producer
// (kafka-python 3.0.12, whose commit_transaction takes no timeout) does
// not return from the open transaction's last records and commit within
// txnMoveTimeout, on Apache Kafka as on Cascade; the driver is then stuck
// in that command. Java, librdkafka, franz-go and sarama commit or abort
// within seconds.
var errTxnStuck = errors.New("kafka-python's transactional producer does not end the open transaction after its coordinator's node stopped")

// txnMove is the node-stop cell's transactional producer.
type txnMove struct {
	d                   driver.Driver
	topic, id           string
	before, after, next []driver.Record
	endErr              error // How the interrupted transaction ended.
}

func (x *txnMove) name() string { return "node-stop" }

func (x *txnMove) batch(tag string) []driver.Record {
	out := make([]driver.Record, 5)
	for i := range out {
		out[i] = driver.Record{Partition: 0, Value: []byte(fmt.Sprintf("%s-%s-%d", x.topic, tag, i))}
	}
	return out
}

// begin opens the producer and leaves a transaction open with records
// written.
func (x *txnMove) begin(ctx context.Context) error {
	x.before, x.after, x.next = x.batch("before"), x.batch("after"), x.batch("next")
	if err := x.d.ProducerOpen(ctx, driver.ProducerOpen{Producer: x.name(), TransactionalID: x.id}); err != nil {
		return err
	}
	if _, err := x.d.ProducerSend(ctx, driver.ProducerSend{Producer: x.name(), Topic: x.topic, Records: x.before, End: driver.EndOpen}); err != nil {
		return fmt.Errorf("the transaction's first records: %w", err)
	}
	return nil
}

// end writes more records to the open transaction and commits it, or
// sees it fail (aborted); then the next transaction must commit. A failed
// commit may leave the producer in an error state that only a new
// producer of the id leaves (InitProducerId fences the old one and
// aborts its transaction).
func (x *txnMove) end(ctx context.Context) error {
	// Producer commands never record history: the cell checks what a
	// read_committed reader sees itself.
	ctx = WithoutHistory(ctx)
	step := func(f func(context.Context) error) error {
		sctx, cancel := context.WithTimeout(ctx, txnMoveTimeout)
		defer cancel()
		return f(sctx)
	}
	x.endErr = step(func(ctx context.Context) error {
		_, err := x.d.ProducerSend(ctx, driver.ProducerSend{Producer: x.name(), Topic: x.topic, Records: x.after, End: driver.EndCommit})
		return err
	})
	if x.endErr != nil && x.d.Client() == "python-kafka-python" && errors.Is(x.endErr, context.DeadlineExceeded) {
		return fmt.Errorf("%w: after %v: %v", errTxnStuck, txnMoveTimeout, x.endErr)
	}
	if x.endErr != nil {
		if err := step(func(ctx context.Context) error { return x.d.ProducerClose(ctx, x.name()) }); err != nil {
			return fmt.Errorf("close after the failed commit (%v): %w", x.endErr, err)
		}
		if err := step(func(ctx context.Context) error {
			return x.d.ProducerOpen(ctx, driver.ProducerOpen{Producer: x.name(), TransactionalID: x.id})
		}); err != nil {
			return fmt.Errorf("reopen after the failed commit (%v): %w", x.endErr, err)
		}
	}
	if err := step(func(ctx context.Context) error {
		_, err := x.d.ProducerSend(ctx, driver.ProducerSend{Producer: x.name(), Topic: x.topic, Records: x.next, End: driver.EndCommit})
		return err
	}); err != nil {
		return fmt.Errorf("the next transaction: %w", err)
	}
	return nil
}

// check reads the transaction topic read_committed: the interrupted
// transaction's records all or none, as its end said, then the next's.
func (x *txnMove) check(ctx context.Context) (string, error) {
	want, outcome := x.next, fmt.Sprintf("aborted (%s)", driver.Code(x.endErr))
	if x.endErr == nil {
		want, outcome = append(append(append([]driver.Record{}, x.before...), x.after...), x.next...), "committed"
	}
	n := len(x.before) + len(x.after) + len(x.next)
	res, err := x.d.Consume(WithoutHistory(ctx), driver.Consume{Topic: x.topic, Partition: 0, From: 0, Count: n, TimeoutMs: 5000, Isolation: "read_committed"})
	if err == nil && res.Error != nil {
		err = res.Error
	}
	if err != nil {
		return "", fmt.Errorf("read_committed read: %w", err)
	}
	if len(res.Records) != len(want) {
		return "", fmt.Errorf("read_committed reader sees %d records, want %d: the interrupted transaction %s, and the next one committed", len(res.Records), len(want), outcome)
	}
	for i, rec := range res.Records {
		if string(rec.Value) != string(want[i].Value) {
			return "", fmt.Errorf("read_committed record %d is %q, want %q (the interrupted transaction %s)", i, rec.Value, want[i].Value, outcome)
		}
	}
	return outcome, nil
}

// moveBatch is how many records each produce command of the node-stop
// cell carries; moveKeys how many keys they cycle through.
const (
	moveBatch = 5
	moveKeys  = 3
)

// sentBatch is one produce command of the node-stop cell.
type sentBatch struct {
	recs  []driver.Record
	dls   []driver.Delivery
	start time.Time
}

// acked reports whether every record of the batch was acknowledged.
func (b sentBatch) acked() bool {
	for _, dl := range b.dls {
		if dl.Error != nil {
			return false
		}
	}
	return true
}

// produceLoop sends batch after batch to partition 0 of a topic, each one
// idempotent acks=all command waiting for its acknowledgements, until
// finish.
type produceLoop struct {
	mu      sync.Mutex
	batches []sentBatch
	stop    chan struct{}
	done    chan error
	once    sync.Once
	err     error
}

func startProduceLoop(ctx context.Context, d driver.Driver, topic string) *produceLoop {
	l := &produceLoop{stop: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				l.done <- nil
				return
			default:
			}
			b := sentBatch{start: time.Now()}
			for j := 0; j < moveBatch; j++ {
				n := i*moveBatch + j
				b.recs = append(b.recs, driver.Record{Partition: 0, Key: []byte(fmt.Sprintf("k%d", n%moveKeys)), Value: []byte(fmt.Sprintf("%s-%d", topic, n))})
			}
			res, err := d.Produce(ctx, driver.Produce{Topic: topic, Records: b.recs, Acks: -1, Idempotent: true})
			if err == nil && len(res.Deliveries) != len(b.recs) {
				err = fmt.Errorf("%d deliveries for %d records", len(res.Deliveries), len(b.recs))
			}
			for j := 0; err == nil && j < len(res.Deliveries); j++ {
				// A client whose retries end before the move does (sarama
				// retries three times, 100 ms apart) reports the move's
				// error for the batch; the next batch goes on.
				if e := res.Deliveries[j].Error; e != nil && !duringMove(e) {
					err = fmt.Errorf("record %d: %w", j, e)
				}
			}
			if err != nil {
				l.done <- fmt.Errorf("batch %d: %w", i, err)
				return
			}
			b.dls = res.Deliveries
			l.mu.Lock()
			l.batches = append(l.batches, b)
			l.mu.Unlock()
			if !sleepCtx(ctx, 50*time.Millisecond) {
				l.done <- ctx.Err()
				return
			}
		}
	}()
	return l
}

// waitAcked waits until n batches started at or after after were
// acknowledged.
func (l *produceLoop) waitAcked(ctx context.Context, n int, after time.Time, what string) error {
	for {
		l.mu.Lock()
		got := 0
		for _, b := range l.batches {
			if !b.start.Before(after) && b.acked() {
				got++
			}
		}
		l.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case err := <-l.done:
			if err == nil {
				err = errors.New("stopped")
			}
			l.done <- err
			return fmt.Errorf("producer, waiting for %s: %w", what, err)
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// finish stops the loop and returns the acknowledged batches.
func (l *produceLoop) finish() ([]sentBatch, error) {
	l.once.Do(func() {
		close(l.stop)
		l.err = <-l.done
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.batches, l.err
}

// reader reads partition 0 of a topic from offset 0, command after
// command, until it has read what the producer wrote.
type reader struct {
	end     chan int64
	done    chan error
	read    []driver.Record
	retries int
}

func startReader(ctx context.Context, d driver.Driver, topic string) *reader {
	r := &reader{end: make(chan int64, 1), done: make(chan error, 1)}
	go func() {
		next, want := int64(0), int64(-1)
		for want < 0 || next < want {
			select {
			case w := <-r.end:
				want = w
			default:
			}
			res, err := d.Consume(ctx, driver.Consume{Topic: topic, Partition: 0, From: next, Count: 100, TimeoutMs: 1000})
			if err == nil && res.Error != nil {
				err = res.Error
			}
			if err != nil && duringMove(err) && ctx.Err() == nil {
				// Some clients pass a leader change on to the application
				// (sarama's OFFSET_NOT_AVAILABLE from a new leader whose
				// high watermark is not yet known): read on from there.
				r.retries++
				continue
			}
			if err != nil {
				r.done <- fmt.Errorf("%s reading from %d: %w", d.Client(), next, err)
				return
			}
			for _, rec := range res.Records {
				if rec.Offset != next {
					r.done <- fmt.Errorf("%s read offset %d after %d", d.Client(), rec.Offset, next-1)
					return
				}
				r.read = append(r.read, rec)
				next++
			}
			if ctx.Err() != nil {
				r.done <- ctx.Err()
				return
			}
		}
		r.done <- nil
	}()
	return r
}

// finish tells the reader where the log ends, waits for it and returns
// what it read and how often it read again after an error.
func (r *reader) finish(end int64) ([]driver.Record, int, error) {
	r.end <- end
	err := <-r.done
	return r.read, r.retries, err
}

package handler_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

// The tests in this file drive Cascade's transaction coordinator through
// franz-go's transactional producer, as an application would.

func txnCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func createTopic(t *testing.T, b *brokertest.Broker, topic string, partitions int32) {
	t.Helper()
	resp, err := b.Admin(t).CreateTopics(txnCtx(t), partitions, 1, nil, topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp[topic].Err; err != nil {
		t.Fatal(err)
	}
}

func txnProducer(t *testing.T, b *brokertest.Broker, id string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return b.Client(t, append([]kgo.Opt{kgo.TransactionalID(id), kgo.DefaultProduceTopic("t"),
		kgo.RequestRetries(50), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond })}, opts...)...)
}

func produceTxn(t *testing.T, cl *kgo.Client, commit bool, values ...string) {
	t.Helper()
	ctx := txnCtx(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end transaction (commit=%v): %v", commit, err)
	}
}

// consumeFor reads topic from the start at the isolation level for d and
// returns the values seen.
func consumeFor(t *testing.T, b *brokertest.Broker, topic string, committed bool, d time.Duration) []string {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := b.Client(t, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	defer cl.Close()
	var got []string
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("fetch: %v", err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

func equal(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func TestTxnCommitAbortIsolation(t *testing.T) {
	b := brokertest.Start(t)
	createTopic(t, b, "t", 1)
	p := txnProducer(t, b, "txn-a")
	produceTxn(t, p, false, "a1", "a2")
	produceTxn(t, p, true, "c1", "c2")
	produceTxn(t, p, false, "a3")
	produceTxn(t, p, true, "c3")

	if got := consumeFor(t, b, "t", true, 1500*time.Millisecond); !equal(got, []string{"c1", "c2", "c3"}) {
		t.Errorf("read_committed saw %v, want [c1 c2 c3]", got)
	}
	if got := consumeFor(t, b, "t", false, 1500*time.Millisecond); !equal(got, []string{"a1", "a2", "c1", "c2", "a3", "c3"}) {
		t.Errorf("read_uncommitted saw %v", got)
	}

	adm := b.Admin(t)
	ds, err := adm.DescribeTransactions(txnCtx(t), "txn-a")
	if err != nil {
		t.Fatal(err)
	}
	d, err := ds.On("txn-a", nil)
	if err != nil || d.Err != nil {
		t.Fatalf("describe: %v %v", err, d.Err)
	}
	if d.State != "CompleteCommit" || len(d.Topics) != 0 {
		t.Errorf("describe = %+v, want CompleteCommit without partitions", d)
	}
	ls, err := adm.ListTransactions(txnCtx(t), nil, []string{"CompleteCommit"})
	if err != nil {
		t.Fatal(err)
	}
	if ids := ls.TransactionalIDs(); !equal(ids, []string{"txn-a"}) {
		t.Errorf("list = %v", ids)
	}
}

// TestTxnOpenHoldsReadCommitted checks that a read_committed consumer stops
// at the first offset of an open transaction, even when later records are
// committed by others, and continues once it commits.
func TestTxnOpenHoldsReadCommitted(t *testing.T) {
	b := brokertest.Start(t)
	createTopic(t, b, "t", 1)
	p := txnProducer(t, b, "txn-open")
	ctx := txnCtx(t)
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, kgo.StringRecord("o1")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	plain := b.Client(t, kgo.DefaultProduceTopic("t"))
	if err := plain.ProduceSync(ctx, kgo.StringRecord("x1")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if got := consumeFor(t, b, "t", true, time.Second); len(got) != 0 {
		t.Errorf("read_committed saw %v past an open transaction", got)
	}
	if got := consumeFor(t, b, "t", false, time.Second); !equal(got, []string{"o1", "x1"}) {
		t.Errorf("read_uncommitted saw %v", got)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := consumeFor(t, b, "t", true, time.Second); !equal(got, []string{"o1", "x1"}) {
		t.Errorf("read_committed after commit saw %v", got)
	}
}

// TestTxnFencing checks that a second producer with the same transactional
// id fences the first, whose open transaction is aborted.
func TestTxnFencing(t *testing.T) {
	b := brokertest.Start(t)
	createTopic(t, b, "t", 1)
	ctx := txnCtx(t)
	zombie := txnProducer(t, b, "txn-f")
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := zombie.ProduceSync(ctx, kgo.StringRecord("zombie")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fresh := txnProducer(t, b, "txn-f")
	produceTxn(t, fresh, true, "fresh")

	err := zombie.EndTransaction(ctx, kgo.TryCommit)
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Errorf("zombie commit: %v, want a fencing error", err)
	}
	if got := consumeFor(t, b, "t", true, time.Second); !equal(got, []string{"fresh"}) {
		t.Errorf("read_committed saw %v, want [fresh]", got)
	}
}

// TestTxnTimeoutAbort checks that a transaction outliving its timeout is
// aborted by the coordinator and its producer fenced.
func TestTxnTimeoutAbort(t *testing.T) {
	b := brokertest.Start(t, map[string]string{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"})
	createTopic(t, b, "t", 1)
	ctx := txnCtx(t)
	p := txnProducer(t, b, "txn-slow", kgo.TransactionTimeout(time.Second))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, kgo.StringRecord("late")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	plain := b.Client(t, kgo.DefaultProduceTopic("t"))
	if err := plain.ProduceSync(ctx, kgo.StringRecord("after")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if got := consumeFor(t, b, "t", true, time.Second); !equal(got, []string{"after"}) {
		t.Errorf("read_committed saw %v, want [after]", got)
	}
	err := p.EndTransaction(ctx, kgo.TryCommit)
	if err == nil {
		t.Errorf("commit of a timed-out transaction succeeded")
	}
	d := describe(t, b, "txn-slow")
	if d.State != "CompleteAbort" || d.ProducerEpoch != 1 {
		t.Errorf("after timeout: %+v, want CompleteAbort at epoch 1", d)
	}
}

func describe(t *testing.T, b *brokertest.Broker, id string) kadm.DescribedTransaction {
	t.Helper()
	ds, err := b.Admin(t).DescribeTransactions(txnCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ds.On(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Err != nil {
		t.Fatalf("describe %s: %v", id, d.Err)
	}
	return d
}

// TestTxnRestart checks that transaction state survives a restart: a
// completed transaction stays complete, and one left open is aborted once
// its timeout passes, releasing read_committed consumers.
func TestTxnRestart(t *testing.T) {
	b := brokertest.Start(t, map[string]string{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"})
	createTopic(t, b, "t", 1)
	ctx := txnCtx(t)
	done := txnProducer(t, b, "txn-done")
	produceTxn(t, done, true, "committed")
	open := txnProducer(t, b, "txn-open", kgo.TransactionTimeout(2*time.Second))
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := open.ProduceSync(ctx, kgo.StringRecord("open")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	open.Close()
	b.Restart(t)

	if d := describe(t, b, "txn-done"); d.State != "CompleteCommit" {
		t.Errorf("txn-done after restart: %+v", d)
	}
	if d := describe(t, b, "txn-open"); d.State != "Ongoing" || len(d.Topics) != 1 {
		t.Errorf("txn-open after restart: %+v", d)
	}
	time.Sleep(2500 * time.Millisecond)
	if d := describe(t, b, "txn-open"); d.State != "CompleteAbort" {
		t.Errorf("txn-open after its timeout: %+v", d)
	}
	if got := consumeFor(t, b, "t", true, time.Second); !equal(got, []string{"committed"}) {
		t.Errorf("read_committed after restart saw %v", got)
	}
	// The fenced id can start again.
	again := txnProducer(t, b, "txn-open")
	produceTxn(t, again, true, "again")
	if got := consumeFor(t, b, "t", true, time.Second); !equal(got, []string{"committed", "again"}) {
		t.Errorf("read_committed saw %v", got)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

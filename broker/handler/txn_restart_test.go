package handler_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/broker/txn"
)

// plantTxnState appends a transaction's state record to __transaction_state
// as the coordinator would, without acting on it: the broker "crashed"
// right after logging the decision.
func plantTxnState(t *testing.T, b *brokertest.Broker, id string, v txn.Value) {
	t.Helper()
	raw, err := txn.EncodeValue(v)
	if err != nil {
		t.Fatal(err)
	}
	cl := b.Client(t, kgo.ClientID("__admin_client"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	rec := &kgo.Record{Topic: "__transaction_state", Partition: txn.PartitionFor(id, 50), Key: txn.EncodeKey(id), Value: raw}
	if err := cl.ProduceSync(txnCtx(t), rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func abortedString(as []kmsg.FetchResponseTopicPartitionAbortedTransaction) string {
	out := ""
	for _, a := range as {
		out += fmt.Sprintf("{pid %d first %d}", a.ProducerID, a.FirstOffset)
	}
	return out
}

// TestTxnRestartInEachState restarts the broker with a transaction in each
// state Kafka persists (TransactionState: Empty, Ongoing, PrepareCommit,
// PrepareAbort, CompleteCommit, CompleteAbort) and checks, after the
// restart, the coordinator's state of the transaction, the partition's
// last stable offset and aborted-transaction list (as a read_committed
// Fetch returns them), and what a read_committed consumer sees. Prepared
// states are planted in __transaction_state with no markers written, as a
// crash between logging the decision and writing the markers leaves them;
// the loaded coordinator completes them (Kafka's
// TransactionStateManager.loadTransactionsForTxnTopicPartition).
func TestTxnRestartInEachState(t *testing.T) {
	for _, c := range []struct {
		state string
		// before puts transaction "tx" of producer pid into the state
		// after x1, x2 were produced in it at offsets 0 and 1 (except
		// Empty, which starts without them).
		before func(t *testing.T, b *brokertest.Broker, r rawTxn, pid int64)
		// lsoAtRestart is the LSO right after the restart (-1: either
		// before or after the markers the loaded coordinator writes);
		// after is the state the transaction ends in.
		lsoAtRestart int64
		after        string
		lso          int64
		aborted      bool
		committed    []string
	}{
		{state: "Ongoing", lsoAtRestart: 0, after: "CompleteAbort", lso: 3, aborted: true},
		{state: "PrepareCommit", lsoAtRestart: -1, after: "CompleteCommit", lso: 3, committed: []string{"x1", "x2"},
			before: func(t *testing.T, b *brokertest.Broker, r rawTxn, pid int64) {
				plantPrepared(t, b, pid, txn.PrepareCommit)
			}},
		{state: "PrepareAbort", lsoAtRestart: -1, after: "CompleteAbort", lso: 3, aborted: true,
			before: func(t *testing.T, b *brokertest.Broker, r rawTxn, pid int64) {
				plantPrepared(t, b, pid, txn.PrepareAbort)
			}},
		{state: "CompleteCommit", lsoAtRestart: 3, after: "CompleteCommit", lso: 3, committed: []string{"x1", "x2"},
			before: func(t *testing.T, b *brokertest.Broker, r rawTxn, pid int64) {
				endAndWait(t, b, r, pid, true)
			}},
		{state: "CompleteAbort", lsoAtRestart: 3, after: "CompleteAbort", lso: 3, aborted: true,
			before: func(t *testing.T, b *brokertest.Broker, r rawTxn, pid int64) {
				endAndWait(t, b, r, pid, false)
			}},
		{state: "Empty", lsoAtRestart: 3, after: "Empty", lso: 3, committed: []string{"x1", "x2"},
			before: func(t *testing.T, b *brokertest.Broker, r rawTxn, pid int64) {
				// Committed, then initialised again: InitProducerId on a
				// completed transaction bumps the epoch and goes Empty.
				endAndWait(t, b, r, pid, true)
				if ip := r.init("tx", 4, 2000); ip.ErrorCode != 0 || ip.ProducerID != pid || ip.ProducerEpoch != 1 {
					t.Fatalf("init again: %v pid %d epoch %d", kerr.ErrorForCode(ip.ErrorCode), ip.ProducerID, ip.ProducerEpoch)
				}
				waitFor(t, func() bool { return describe(t, b, "tx").State == "Empty" })
			}},
	} {
		t.Run(c.state, func(t *testing.T) {
			b := brokertest.Start(t, map[string]string{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"})
			createTopic(t, b, "t", 1)
			r := newRawTxn(t, b)
			ip := r.init("tx", 4, 2000) // A 2 s timeout aborts the Ongoing case soon after the restart.
			if ip.ErrorCode != 0 {
				t.Fatalf("init: %v", kerr.ErrorForCode(ip.ErrorCode))
			}
			pid := ip.ProducerID
			if codes := r.add(3, "tx", pid, 0, "t", 0); codes[0] != 0 {
				t.Fatalf("add: %v", codes)
			}
			if code := r.produce("tx", pid, 0, 0, "t", 0, "x1", "x2"); code != 0 {
				t.Fatalf("produce: %v", kerr.ErrorForCode(code))
			}
			if c.before != nil {
				c.before(t, b, r, pid)
			}
			b.Restart(t)
			r = newRawTxn(t, b)
			if lso, aborted := r.fetch("t"); c.lsoAtRestart >= 0 && lso != c.lsoAtRestart {
				t.Errorf("right after the restart: LSO %d (aborted %s), want %d", lso, abortedString(aborted), c.lsoAtRestart)
			}
			if c.state == "Ongoing" {
				if d := describe(t, b, "tx"); d.State != "Ongoing" {
					t.Errorf("state right after the restart: %s, want Ongoing", d.State)
				}
			}
			waitFor(t, func() bool { return describe(t, b, "tx").State == c.after })
			waitFor(t, func() bool { lso, _ := r.fetch("t"); return lso == c.lso })
			_, aborted := r.fetch("t")
			switch {
			case c.aborted && (len(aborted) != 1 || aborted[0].ProducerID != pid || aborted[0].FirstOffset != 0):
				t.Errorf("aborted transactions %s, want {pid %d first 0}", abortedString(aborted), pid)
			case !c.aborted && len(aborted) != 0:
				t.Errorf("aborted transactions %s, want none", abortedString(aborted))
			}
			if got := consumeFor(t, b, "t", true, 500*time.Millisecond); !equal(got, c.committed) && len(got)+len(c.committed) > 0 {
				t.Errorf("read_committed after the restart: %v, want %v", got, c.committed)
			}
			// The transactional id goes on: a new transaction commits.
			again := txnProducer(t, b, "tx")
			produceTxn(t, again, true, "y")
			if got := consumeFor(t, b, "t", true, 500*time.Millisecond); !equal(got, append(append([]string{}, c.committed...), "y")) {
				t.Errorf("read_committed after a new transaction: %v", got)
			}
		})
	}
}

// plantPrepared logs transaction "tx" of pid (epoch 0, partition t-0) in
// state s, as the coordinator does before writing markers.
func plantPrepared(t *testing.T, b *brokertest.Broker, pid int64, s txn.State) {
	t.Helper()
	now := time.Now().UnixMilli()
	plantTxnState(t, b, "tx", txn.Value{ProducerID: pid, ProducerEpoch: 0, TimeoutMs: 2000, State: s,
		Partitions: []txn.TopicPartition{{Topic: "t", Partition: 0}}, PreviousProducerID: -1, NextProducerID: -1,
		NextProducerEpoch: -1, LastUpdateMs: now, StartMs: now})
}

// endAndWait commits or aborts transaction "tx" and waits for its markers.
func endAndWait(t *testing.T, b *brokertest.Broker, r rawTxn, pid int64, commit bool) {
	t.Helper()
	if code := r.end(3, "tx", pid, 0, commit); code != 0 {
		t.Fatalf("end (commit=%v): %v", commit, kerr.ErrorForCode(code))
	}
	want := "CompleteAbort"
	if commit {
		want = "CompleteCommit"
	}
	waitFor(t, func() bool { return describe(t, b, "tx").State == want })
}

package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	lin "github.com/cascade-kafka/cascade/linearizability"
)

// txnRecords is how many records one transaction writes, round robin over
// the partitions from a rotating start.
const txnRecords = 2

// txnTimeout is the transaction.timeout.ms of even-numbered
// transactional producers. It is longer than a transaction of theirs can
// last (two produces bounded by the delivery timeout and an EndTxn bounded
// by 20 s, even across a crash and restart), so their transactions end by
// the client's EndTxn, or by the coordinator's abort when a new client
// with the same transactional.id replaces one that left its transaction
// open (InitProducerId bumps the epoch and aborts it, KIP-360).
const txnTimeout = time.Minute

// txnShortTimeout is the transaction.timeout.ms of odd-numbered
// transactional producers, and txnStall how long one of their
// transactions in txnStallOneIn waits before its EndTxn: past the timeout,
// so the coordinator aborts it on its own
// (TransactionCoordinator.abortTimedOutTransactions, run every
// transaction.abort.timed.out.transaction.cleanup.interval.ms, which the
// suite sets to 500 ms) and the client's EndTxn then fails. Faults that
// slow a transaction past the timeout have the same effect.
const (
	txnShortTimeout = 1500 * time.Millisecond
	txnStall        = 2500 * time.Millisecond
	txnStallOneIn   = 6
	// txnAbandonOneIn is how often an even-numbered producer leaves a
	// transaction open and is replaced.
	txnAbandonOneIn = 10
)

// The transactional producer numbered i is recorded as client
// txnClientPrefix+i and runs with transactional.id
// transactionalIDPrefix+i.
// txnAbortIntervalKey is how often every target looks for timed-out
// transactions to abort: often enough that the workload's short-timeout
// producer sees its stalled transactions aborted by the coordinator.
const txnAbortIntervalKey, txnAbortInterval = "transaction.abort.timed.out.transaction.cleanup.interval.ms", "500"

const (
	txnClientPrefix       = "txn-producer-"
	transactionalIDPrefix = "faults-txn-"
)

// transactionalIDOf returns the transactional.id the history's client
// produced with, or false for a client that is not a transactional
// producer of the workload.
func transactionalIDOf(client string) (string, bool) {
	n, ok := strings.CutPrefix(client, txnClientPrefix)
	if !ok || n == "" {
		return "", false
	}
	if _, err := strconv.Atoi(n); err != nil {
		return "", false
	}
	return transactionalIDPrefix + n, true
}

// txnEnd is how a transaction of the workload ends.
type txnEnd int

const (
	endCommit txnEnd = iota
	endAbort
	// endAbandon leaves the transaction open and replaces the client.
	endAbandon
	// endStall waits txnStall, then commits.
	endStall
)

// produceTxn runs transactions of txnRecords unique values "t<i>-<n>" with
// a franz-go transactional producer (transactional.id "faults-txn-<i>"),
// aborting one in ten and committing most others, and records each produce
// with the transaction's name and each EndTxn as end_txn. Even-numbered
// producers leave one transaction in txnAbandonOneIn open instead (no
// end_txn) and replace their client; odd-numbered ones run with
// txnShortTimeout and stall one in txnStallOneIn past it. Any error that
// leaves the transaction's fate unknown, or the client in a state only
// an abort could clear, replaces the client: the new one's InitProducerId
// bumps the epoch, which fences the old one and makes the coordinator
// abort whatever it left open (KIP-360), so one client's transactions stay
// sequential as the history format asks.
func (w *Workload) produceTxn(ctx context.Context, i int) error {
	name := txnClientPrefix + strconv.Itoa(i)
	rng := rand.New(rand.NewPCG(w.Seed, uint64(i)+2000))
	timeout := txnTimeout
	if i%2 == 1 {
		timeout = txnShortTimeout
	}
	newClient := func() (*kgo.Client, error) {
		return kgo.NewClient(w.clientOpts(
			kgo.ClientID(name),
			kgo.TransactionalID(transactionalIDPrefix+strconv.Itoa(i)),
			kgo.TransactionTimeout(timeout),
			kgo.DefaultProduceTopic(w.Topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RecordDeliveryTimeout(4*time.Second),
			kgo.ProducerLinger(0),
		)...)
	}
	cl, err := newClient()
	if err != nil {
		return err
	}
	defer func() { cl.Close() }()
	for n := 0; ctx.Err() == nil; n++ {
		txn := fmt.Sprintf("%s-tx-%d", name, n)
		end := endCommit
		switch r := rng.IntN(60); {
		case r < 6:
			end = endAbort
		case i%2 == 0 && r < 6+60/txnAbandonOneIn:
			end = endAbandon
		case i%2 == 1 && r < 6+60/txnStallOneIn:
			end = endStall
		}
		replace, err := w.oneTxn(ctx, cl, name, txn, i, n, end)
		if err != nil {
			return err
		}
		if replace {
			w.logf("%s: replacing the transactional client after %s", name, txn)
			cl.Close()
			if cl, err = newClient(); err != nil {
				return err
			}
		}
	}
	return nil
}

// oneTxn runs one transaction and records it. It reports whether the
// client must be replaced; its error is the recorder's.
func (w *Workload) oneTxn(ctx context.Context, cl *kgo.Client, name, txn string, i, n int, end txnEnd) (replace bool, err error) {
	// Nothing may be cancelled mid-transaction: a cancelled EndTxn leaves
	// the client unusable (kgo.Client.EndTransaction). The run's end is
	// honoured between transactions.
	octx := context.WithoutCancel(ctx)
	if err := cl.BeginTransaction(); err != nil {
		w.logf("%s: begin %s: %v", name, txn, err)
		return true, nil
	}
	allOK := true
	for k := 0; k < txnRecords; k++ {
		p := int32((n + k) % int(w.Partitions))
		v := fmt.Sprintf("t%d-%d-%d", i, n, k)
		op := lin.Op{Client: name, Op: lin.OpProduce, Topic: w.Topic, Partition: p, Value: v, Txn: txn, Outcome: lin.OutcomeOK}
		call := w.Rec.Begin()
		r, perr := cl.ProduceSync(octx, &kgo.Record{Partition: p, Value: []byte(v)}).First()
		if perr != nil {
			// Within a transaction a failed record is never a certain
			// failure: it may sit in the log, to be aborted.
			op.Outcome, op.Error = lin.OutcomeUnknown, opError(perr)
			allOK = false
		} else {
			op.Offset = lin.Int64(r.Offset)
		}
		if err := w.Rec.End(call, op); err != nil {
			return false, err
		}
		w.count(perr == nil)
	}
	if end == endAbandon {
		// The replacement's InitProducerId aborts what is left open.
		w.logf("%s: leaving %s open", name, txn)
		return true, nil
	}
	if end == endStall {
		w.logf("%s: stalling %s for %v", name, txn, txnStall)
		time.Sleep(txnStall)
	}
	commit := end != endAbort && allOK
	if !allOK {
		if err := cl.AbortBufferedRecords(octx); err != nil {
			w.logf("%s: abort buffered records of %s: %v", name, txn, err)
		}
	}
	op := lin.Op{Client: name, Op: lin.OpEndTxn, Txn: txn, Commit: lin.Bool(commit), Outcome: lin.OutcomeOK}
	ectx, cancel := context.WithTimeout(octx, 20*time.Second)
	defer cancel()
	call := w.Rec.Begin()
	eerr := cl.EndTransaction(ectx, kgo.TransactionEndTry(commit))
	if eerr != nil {
		op.Outcome, op.Error = lin.OutcomeUnknown, opError(eerr)
	}
	if err := w.Rec.End(call, op); err != nil {
		return false, err
	}
	return eerr != nil || !allOK, nil
}

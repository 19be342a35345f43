package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	lin "github.com/cascade-kafka/cascade/linearizability"
)

// txnRecords is how many records one transaction writes, round robin over
// the partitions from a rotating start.
const txnRecords = 2

// txnTimeout is the producer's transaction.timeout.ms. It is longer than a
// transaction of this workload can last (two produces bounded by the
// delivery timeout and an EndTxn bounded by 20 s, even across a crash and
// restart), so transactions end by the client's EndTxn, not by the
// coordinator's timeout abort. The checker accepts either
// (linearizability/README.md); timeout aborts are tested in broker/handler.
const txnTimeout = time.Minute

// produceTxn runs transactions of txnRecords unique values "t<i>-<n>" with
// a franz-go transactional producer (transactional.id "faults-txn-<i>"),
// committing nine in ten and aborting the rest, and records each produce
// with the transaction's name and each EndTxn as end_txn. Any error that
// leaves the transaction's fate unknown, or the client in a state only
// an abort could clear, replaces the client: the new one's InitProducerId
// bumps the epoch, which fences the old one and makes the coordinator
// abort whatever it left open (KIP-360), so one client's transactions stay
// sequential as the history format asks.
func (w *Workload) produceTxn(ctx context.Context, i int) error {
	name := fmt.Sprintf("txn-producer-%d", i)
	rng := rand.New(rand.NewPCG(w.Seed, uint64(i)+2000))
	newClient := func() (*kgo.Client, error) {
		return kgo.NewClient(w.clientOpts(
			kgo.ClientID(name),
			kgo.TransactionalID(fmt.Sprintf("faults-txn-%d", i)),
			kgo.TransactionTimeout(txnTimeout),
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
		replace, err := w.oneTxn(ctx, cl, name, txn, i, n, rng.IntN(10) != 0)
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
func (w *Workload) oneTxn(ctx context.Context, cl *kgo.Client, name, txn string, i, n int, commit bool) (replace bool, err error) {
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
	commit = commit && allOK
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

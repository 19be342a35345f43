package matrix

import (
	"context"
	"fmt"
	"time"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// txnRecords returns n records for one transaction, values tagged so they
// are unique.
func txnRecords(tag string, n int) []driver.Record {
	recs := make([]driver.Record, n)
	for i := range recs {
		recs[i] = driver.Record{Partition: 0, Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("%s-%d", tag, i))}
	}
	return recs
}

// transactionsScenario is scenario 8's commit, abort and isolation levels:
// a committed, an aborted and a committed transaction from one
// transactional.id; read_committed returns only the committed records, in
// order; read_uncommitted returns all of them. The control records
// (transaction markers) take offsets but are never returned (KIP-98).
var transactionsScenario = Scenario{
	ID:    "8.transactions",
	Title: "commit, abort, read_committed versus read_uncommitted",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		topic := e.Topic("txn-" + d.Client())
		if err := createTopic(ctx, e, d, topic, 1, nil); err != nil {
			return "", err
		}
		id := topic + "-tx"
		c1, ab, c2 := txnRecords(topic+"-c1", 5), txnRecords(topic+"-ab", 5), txnRecords(topic+"-c2", 5)
		for _, step := range []struct {
			recs  []driver.Record
			abort bool
		}{{c1, false}, {ab, true}, {c2, false}} {
			if _, err := produceOK(ctx, d, driver.Produce{Topic: topic, Acks: -1, Idempotent: true,
				TransactionalID: id, TxnAbort: step.abort, Records: step.recs}); err != nil {
				return "", fmt.Errorf("transaction (abort=%v): %w", step.abort, err)
			}
		}
		committed := append(append([]driver.Record{}, c1...), c2...)
		got, err := d.Consume(ctx, driver.Consume{Topic: topic, Partition: 0, From: 0, Count: len(committed) + 1,
			TimeoutMs: 2000, Isolation: "read_committed"})
		if err != nil {
			return "", fmt.Errorf("read_committed: %w", err)
		}
		if got.Error != nil {
			return "", fmt.Errorf("read_committed: %w", got.Error)
		}
		if len(got.Records) != len(committed) {
			return "", fmt.Errorf("read_committed returned %d records, want the %d committed ones", len(got.Records), len(committed))
		}
		for i, r := range got.Records {
			if string(r.Value) != string(committed[i].Value) {
				return "", fmt.Errorf("read_committed record %d (offset %d) = %q, want %q", i, r.Offset, r.Value, committed[i].Value)
			}
		}
		all := append(append(append([]driver.Record{}, c1...), ab...), c2...)
		unc, err := consumeN(ctx, d, topic, 0, 0, len(all))
		if err != nil {
			return "", fmt.Errorf("read_uncommitted: %w", err)
		}
		for i, r := range unc {
			if string(r.Value) != string(all[i].Value) {
				return "", fmt.Errorf("read_uncommitted record %d (offset %d) = %q, want %q", i, r.Offset, r.Value, all[i].Value)
			}
		}
		// Markers: c1 at 0-4, commit at 5, aborted at 6-10, abort at 11,
		// c2 at 12-16, commit at 17.
		if unc[5].Offset != 6 || unc[10].Offset != 12 {
			return "", fmt.Errorf("aborted records at offsets %d.., second commit at %d..; want 6 and 12 (one marker per transaction)", unc[5].Offset, unc[10].Offset)
		}
		return "read_committed: 10 committed records; read_uncommitted: 15; markers at 5, 11, 17", nil
	},
	Timeout: 60 * time.Second,
}

// transformScenario is scenario 8's consume-transform-produce: a transform
// copies 8 of 20 input records to an output topic in transactions of up
// to 4 that also carry the consumed offsets, then processes up to 4 more
// in a transaction it aborts; a second transform with the same group and
// transactional.id resumes from the committed offsets and copies the
// other 12. The output at read_committed is every input record exactly
// once, partition by partition in input order; read_uncommitted also shows
// the aborted copies; the group's committed offsets are the inputs' ends.
// The history does not model transactional offsets, so the cell is left
// out of it.
var transformScenario = Scenario{
	ID:    "8.consume-transform-produce",
	Title: "exactly-once consume-transform-produce with offsets sent to the transaction",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		ctx = WithoutHistory(ctx)
		input, err := groupTopic(ctx, e, d, "eos-in")
		if err != nil {
			return "", err
		}
		output := input + "-out"
		if err := createTopic(ctx, e, d, output, 2, nil); err != nil {
			return "", err
		}
		req := driver.Transform{Group: input + "-g", Input: input, Output: output, TransactionalID: input + "-tx",
			Count: 8, Batch: 4, TimeoutMs: 20000, AbortLast: true}
		r1, err := d.Transform(ctx, req)
		if err != nil {
			return "", fmt.Errorf("first transform: %w", err)
		}
		if len(r1.Records) != 8 || len(r1.Aborted) == 0 {
			return "", fmt.Errorf("first transform committed %d records and aborted %d, want 8 and some", len(r1.Records), len(r1.Aborted))
		}
		// Transactional offsets become visible once the commit markers
		// are written, after EndTxn returned: poll for them.
		if err := pollCommitted(ctx, d, req.Group, input, r1.Records); err != nil {
			return "", err
		}
		req.Count, req.AbortLast = groupRecords-8, false
		r2, err := d.Transform(ctx, req)
		if err != nil {
			return "", fmt.Errorf("second transform: %w", err)
		}
		if len(r2.Records) != groupRecords-8 {
			return "", fmt.Errorf("second transform committed %d records, want %d", len(r2.Records), groupRecords-8)
		}
		if err := exactlyOnce(r1.Records, r2.Records); err != nil {
			return "", fmt.Errorf("input: %w", err)
		}
		if err := pollCommitted(ctx, d, req.Group, input, append(r1.Records, r2.Records...)); err != nil {
			return "", err
		}
		aborted := map[int32]int{}
		for _, r := range r1.Aborted {
			aborted[r.Partition]++
		}
		for p := int32(0); p < 2; p++ {
			var want []string
			for i := int(p); i < groupRecords; i += 2 {
				want = append(want, fmt.Sprintf("%s-%d", input, i))
			}
			got, err := d.Consume(ctx, driver.Consume{Topic: output, Partition: p, From: 0, Count: len(want), TimeoutMs: 10000, Isolation: "read_committed"})
			if err != nil || got.Error != nil {
				return "", fmt.Errorf("read_committed output partition %d: %v %v", p, err, got.Error)
			}
			if vs := values(got.Records); fmt.Sprint(vs) != fmt.Sprint(want) {
				return "", fmt.Errorf("read_committed output partition %d = %v, want %v", p, vs, want)
			}
			all, err := consumeN(ctx, d, output, p, 0, len(want)+aborted[p])
			if err != nil {
				return "", fmt.Errorf("read_uncommitted output partition %d: %w", p, err)
			}
			if len(all) != len(want)+aborted[p] {
				return "", fmt.Errorf("read_uncommitted output partition %d: %d records, want %d", p, len(all), len(want)+aborted[p])
			}
		}
		return fmt.Sprintf("%d+%d input records copied once in %d+%d committed transactions; %d aborted copies invisible at read_committed",
			len(r1.Records), len(r2.Records), r1.Transactions, r2.Transactions, len(r1.Aborted)), nil
	},
	Timeout: 60 * time.Second,
}

func values(rs []driver.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Value)
	}
	return out
}

// pollCommitted waits up to 10 s for the group's committed offsets to be
// those after read.
func pollCommitted(ctx context.Context, d driver.Driver, group, topic string, read []driver.Record) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := expectCommitted(ctx, d, group, topic, read)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// fencingScenario is scenario 8's zombie fencing: producer A of a
// transactional.id commits one transaction and leaves a second open;
// producer B initialises the same id, which bumps the epoch, fences A and
// aborts A's open transaction. A's next send or commit fails with a
// fencing error; B commits. read_committed sees A's first record and B's;
// read_uncommitted also A's aborted one. Left out of the history, which
// cannot express a transaction ended by another producer.
var fencingScenario = Scenario{
	ID:    "8.zombie-fencing",
	Title: "a second producer with the same transactional.id fences the first and aborts its open transaction",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (_ string, retErr error) {
		ctx = WithoutHistory(ctx)
		topic := e.Topic("fence-" + d.Client())
		if err := createTopic(ctx, e, d, topic, 1, nil); err != nil {
			return "", err
		}
		id := topic + "-tx"
		rec := func(v string) []driver.Record { return []driver.Record{{Partition: 0, Value: []byte(topic + "-" + v)}} }
		send := func(p, v, end string) error {
			_, err := d.ProducerSend(ctx, driver.ProducerSend{Producer: p, Topic: topic, Records: rec(v), End: end})
			return err
		}
		a, b := id+"-a", id+"-b"
		if err := d.ProducerOpen(ctx, driver.ProducerOpen{Producer: a, TransactionalID: id}); err != nil {
			return "", fmt.Errorf("open producer A: %w", err)
		}
		aOpen := true
		defer func() {
			if aOpen {
				_ = d.ProducerClose(ctx, a) // A is fenced; closing it may report that again.
			}
		}()
		if err := send(a, "a1", driver.EndCommit); err != nil {
			return "", fmt.Errorf("producer A's first transaction: %w", err)
		}
		if err := send(a, "zombie", driver.EndOpen); err != nil {
			return "", fmt.Errorf("producer A's open transaction: %w", err)
		}
		if err := d.ProducerOpen(ctx, driver.ProducerOpen{Producer: b, TransactionalID: id}); err != nil {
			return "", fmt.Errorf("open producer B with the same id: %w", err)
		}
		defer func() {
			if err := d.ProducerClose(ctx, b); err != nil && retErr == nil {
				retErr = fmt.Errorf("close producer B: %w", err)
			}
		}()
		zerr := send(a, "late", driver.EndCommit)
		if err := expectCode("the fenced producer's commit", zerr, "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"); err != nil {
			return "", err
		}
		aOpen = false
		closeNote := ""
		if err := d.ProducerClose(ctx, a); err != nil {
			closeNote = "; closing it reported " + err.Error() // Libraries differ; not a failure.
		}
		if err := send(b, "b1", driver.EndCommit); err != nil {
			return "", fmt.Errorf("producer B's transaction: %w", err)
		}
		want := values(append(rec("a1"), rec("b1")...))
		got, err := d.Consume(ctx, driver.Consume{Topic: topic, Partition: 0, From: 0, Count: 2, TimeoutMs: 10000, Isolation: "read_committed"})
		if err != nil || got.Error != nil {
			return "", fmt.Errorf("read_committed: %v %v", err, got.Error)
		}
		if vs := values(got.Records); fmt.Sprint(vs) != fmt.Sprint(want) {
			return "", fmt.Errorf("read_committed = %v, want %v", vs, want)
		}
		all, err := consumeN(ctx, d, topic, 0, 0, 3)
		if err != nil {
			return "", fmt.Errorf("read_uncommitted: %w", err)
		}
		wantAll := values(append(append(rec("a1"), rec("zombie")...), rec("b1")...))
		if vs := values(all); fmt.Sprint(vs) != fmt.Sprint(wantAll) {
			return "", fmt.Errorf("read_uncommitted = %v, want %v", vs, wantAll)
		}
		return "the zombie got " + driver.Code(zerr) + closeNote + "; its open transaction was aborted; read_committed: A's first and B's record", nil
	},
	Timeout: 60 * time.Second,
}

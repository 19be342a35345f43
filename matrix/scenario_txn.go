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
		if err := createTopic(ctx, d, topic, 1, nil); err != nil {
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

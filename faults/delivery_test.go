package faults

import (
	"strings"
	"testing"

	lin "github.com/cascade-kafka/cascade/linearizability"
)

func TestValidateDelivery(t *testing.T) {
	off := func(n int64) *int64 { return &n }
	yes, no := true, false
	produce := func(v, txn string, outcome string) lin.Op {
		return lin.Op{Client: "p", Op: lin.OpProduce, Value: v, Txn: txn, Outcome: outcome, Offset: off(0)}
	}
	drain := func(p int32, recs ...lin.Record) lin.Op {
		return lin.Op{Client: "drain", Op: lin.OpFetch, Partition: p, Outcome: lin.OutcomeOK, Records: recs}
	}
	h := []lin.Op{
		produce("a", "", lin.OutcomeOK),
		produce("b", "", lin.OutcomeOK),      // never read: missing
		produce("c", "", lin.OutcomeUnknown), // not acknowledged: not required
		produce("d", "tx1", lin.OutcomeOK),   // committed: required
		produce("e", "tx2", lin.OutcomeOK),   // aborted: not required
		{Op: lin.OpEndTxn, Txn: "tx1", Outcome: lin.OutcomeOK, Commit: &yes},
		{Op: lin.OpEndTxn, Txn: "tx2", Outcome: lin.OutcomeOK, Commit: &no},
		drain(0, lin.Record{Offset: 0, Value: "a"}, lin.Record{Offset: 1, Value: "d"}),
		drain(0, lin.Record{Offset: 1, Value: "d"}), // read again at the same place: not a duplicate
		drain(1, lin.Record{Offset: 5, Value: "a"}), // a second copy: a duplicate
		{Client: "consumer-0", Op: lin.OpFetch, Outcome: lin.OutcomeOK, Records: []lin.Record{{Offset: 9, Value: "b"}}},
	}
	d := ValidateDelivery(h)
	if d.Valid() || d.Acked != 3 || d.Consumed != 2 ||
		strings.Join(d.Missing, ",") != "b" || strings.Join(d.Duplicated, ",") != "a×2" {
		t.Fatalf("got %+v (%s)", d, d)
	}
	if d := ValidateDelivery(h[:1]); d.Valid() {
		t.Errorf("an acknowledged record nobody drained passes: %s", d)
	}
	if d := ValidateDelivery(append(h[:1:1], drain(0, lin.Record{Offset: 0, Value: "a"}))); !d.Valid() {
		t.Errorf("a clean run fails: %s", d)
	}
}

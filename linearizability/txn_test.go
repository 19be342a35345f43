package linearizability

import (
	"testing"
	"time"
)

// checkPlanted checks h and returns its report.
func checkPlanted(t *testing.T, h []Op) *Report {
	t.Helper()
	rep, err := Check(h, Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func mustBeValid(t *testing.T, name string, h []Op) {
	t.Helper()
	if rep := checkPlanted(t, h); !rep.Valid() {
		t.Fatalf("%s judged invalid:\n%s", name, rep.Summary())
	}
}

// dupMarkerHistory is a transaction T committed at offset 0 whose marker
// was written twice (offsets 1 and 2), then a plain write at 3.
func dupMarkerHistory() []Op {
	return []Op{
		{Client: "a", Op: OpProduce, Topic: "t", Value: "v0", Txn: "a-tx-0", CallNs: 0, ReturnNs: 10, Outcome: OutcomeOK, Offset: Int64(0)},
		{Client: "a", Op: OpEndTxn, Txn: "a-tx-0", Commit: Bool(true), CallNs: 20, ReturnNs: 30, Outcome: OutcomeOK},
		{Client: "b", Op: OpProduce, Topic: "t", Value: "x", CallNs: 40, ReturnNs: 50, Outcome: OutcomeOK, Offset: Int64(3)},
		{Client: "c", Op: OpFetch, Topic: "t", From: Int64(0), Isolation: ReadCommitted, CallNs: 60, ReturnNs: 70, Outcome: OutcomeOK,
			Records: []Record{{0, "v0"}, {3, "x"}}, HighWatermark: Int64(4)},
	}
}

func TestDuplicateMarkerAfterEndTxn(t *testing.T) {
	// As Kafka's ProducerAppendInfo allows (KAFKA-19999): a broker that
	// crashed after EndTxn writes the marker again on recovery.
	mustBeValid(t, "commit marker written twice", dupMarkerHistory())

	// Three markers are one too many.
	h := dupMarkerHistory()
	h[2].Offset, h[3].Records[1].Offset, h[3].HighWatermark = Int64(4), 4, Int64(5)
	mustReport(t, h, KindNotLinearizable)

	// Without any end_txn the transaction has at most one marker (a
	// coordinator's abort), and its record is not committed.
	h = dupMarkerHistory()
	h = append(h[:1], h[2:]...)
	h[2].Isolation = ReadUncommitted
	mustReport(t, h, KindNotLinearizable)
	h[2].Isolation = ReadCommitted
	mustReport(t, h, KindOpenTxnRead)

	// The second marker, too, comes after end_txn was sent.
	h = dupMarkerHistory()
	h[1].CallNs, h[1].ReturnNs = 55, 56
	mustReport(t, h, KindNotLinearizable)
}

// earlyMarkerHistory is a transaction T at offset 0 whose marker took
// offset 1 before a plain write acknowledged at 2 returned, all before T's
// end_txn was sent.
func earlyMarkerHistory(end *Op) []Op {
	h := []Op{
		{Client: "a", Op: OpProduce, Topic: "t", Value: "v0", Txn: "a-tx-0", CallNs: 0, ReturnNs: 10, Outcome: OutcomeOK, Offset: Int64(0)},
		{Client: "b", Op: OpProduce, Topic: "t", Value: "x", CallNs: 12, ReturnNs: 15, Outcome: OutcomeOK, Offset: Int64(2)},
		{Client: "c", Op: OpFetch, Topic: "t", From: Int64(0), CallNs: 60, ReturnNs: 70, Outcome: OutcomeOK,
			Records: []Record{{0, "v0"}, {2, "x"}}, HighWatermark: Int64(3)},
	}
	if end != nil {
		h = append(h, *end)
	}
	return h
}

func TestCoordinatorAbortBeforeEndTxn(t *testing.T) {
	// As Kafka's TransactionCoordinator aborting on timeout or when a new
	// producer fences the old one (KIP-360): the abort marker precedes the
	// client's EndTxn, or there is none.
	endTxn := func(commit bool, outcome string) *Op {
		return &Op{Client: "a", Op: OpEndTxn, Txn: "a-tx-0", Commit: Bool(commit), CallNs: 20, ReturnNs: 30, Outcome: outcome}
	}
	for name, end := range map[string]*Op{
		"no end_txn":             nil,
		"acknowledged abort":     endTxn(false, OutcomeOK),
		"abort of unknown fate":  endTxn(false, OutcomeUnknown),
		"commit of unknown fate": endTxn(true, OutcomeUnknown),
		"failed commit":          endTxn(true, OutcomeFail),
	} {
		mustBeValid(t, name, earlyMarkerHistory(end))
	}

	// An acknowledged commit's marker is a commit, written after end_txn
	// was sent.
	mustReport(t, earlyMarkerHistory(endTxn(true, OutcomeOK)), KindNotLinearizable)

	// A coordinator's abort hides the record from read_committed readers.
	h := earlyMarkerHistory(endTxn(false, OutcomeOK))
	h[2].Isolation = ReadCommitted
	mustReport(t, h, KindAbortedRead)

	// No marker precedes the transaction's first produce.
	h = earlyMarkerHistory(nil)
	h[0].CallNs, h[0].ReturnNs = 16, 18
	h[0].Offset, h[1].Offset = Int64(2), Int64(1)
	h[2].Records = []Record{{1, "x"}, {2, "v0"}}
	mustReport(t, h, KindNotLinearizable)
}

func TestDuplicateMarkerRegression(t *testing.T) {
	// An excerpt of a fault-suite history against Cascade: one
	// partition around a kill -9 just after EndTxn, whose recovery wrote
	// a transaction's marker a second time.
	h, err := ReadFile("testdata/duplicate-marker-cascade.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	mustBeValid(t, "recorded duplicate marker", h)
}

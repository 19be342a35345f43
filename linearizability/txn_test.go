package linearizability

import (
	"path/filepath"
	"strings"
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

	// Each recovery of a coordinator that finds the transaction in
	// PrepareCommit writes its markers again: two crashes, three copies.
	h := dupMarkerHistory()
	h[2].Offset, h[3].Records[1].Offset, h[3].HighWatermark = Int64(4), 4, Int64(5)
	mustBeValid(t, "commit marker written three times", h)

	// Without any end_txn the markers are a coordinator's abort, written
	// again on recovery too, and the record is not committed.
	h = dupMarkerHistory()
	h = append(h[:1], h[2:]...)
	h[2].Isolation = ReadUncommitted
	mustBeValid(t, "coordinator's abort written twice", h)
	h[2].Isolation = ReadCommitted
	mustReport(t, h, KindOpenTxnRead)

	// An acknowledged commit's markers, copies included, come after
	// end_txn was sent: here both existed (x acknowledged past them)
	// before it was.
	h = dupMarkerHistory()
	h[1].CallNs, h[1].ReturnNs = 55, 56
	h[3].Isolation = ReadUncommitted
	mustReport(t, h, KindStrayMarker)
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
	mustReport(t, earlyMarkerHistory(endTxn(true, OutcomeOK)), KindStrayMarker)

	// A coordinator's abort hides the record from read_committed readers.
	h := earlyMarkerHistory(endTxn(false, OutcomeOK))
	h[2].Isolation = ReadCommitted
	mustReport(t, h, KindAbortedRead)

	// No marker precedes the transaction's first produce.
	h = earlyMarkerHistory(nil)
	h[0].CallNs, h[0].ReturnNs = 16, 18
	h[0].Offset, h[1].Offset = Int64(2), Int64(1)
	h[2].Records = []Record{{1, "x"}, {2, "v0"}}
	mustReport(t, h, KindStrayMarker)
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

// TestTxnTestdata checks the planted histories of testdata/txn: each file
// is named <expected kind>--<what it shows>.jsonl, "valid" for a history
// Apache Kafka may produce, and carries its story in txnStories.
func TestTxnTestdata(t *testing.T) {
	files, err := filepath.Glob("testdata/txn/*.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(txnStories) {
		t.Fatalf("%d files in testdata/txn, %d stories", len(files), len(txnStories))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		t.Run(name, func(t *testing.T) {
			if txnStories[name] == "" {
				t.Fatalf("no story for %s", name)
			}
			h, err := ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			want, _, ok := strings.Cut(name, "--")
			if !ok {
				t.Fatalf("file name %s without <kind>--", name)
			}
			if want == "valid" {
				mustBeValid(t, name, h)
				return
			}
			mustReport(t, h, Kind(want))
		})
	}
}

// txnStories says what each planted history of testdata/txn shows.
var txnStories = map[string]string{
	"valid--coordinator-abort-written-twice": "a-tx-0 has no end_txn: its client was replaced and the new " +
		"producer's InitProducerId made the coordinator abort it (KIP-360); the abort marker sits at 1 and, " +
		"rewritten on the coordinator's recovery, at 2; a-tx-1 commits.",
	"valid--timeout-abort-before-end-txn": "a-tx-0 timed out; the coordinator's abort marker (1) precedes a " +
		"plain write acknowledged at 2, all before the client's EndTxn, which failed (recorded unknown); " +
		"read_committed hides v0.",
	"lost_write--committed-record-hidden": "an acknowledged commit's record, which read_uncommitted returns, " +
		"passed over by read_committed.",
	"lost_write--aborted-record-skipped-read-uncommitted": "read_uncommitted passed over an aborted " +
		"transaction's record, which it must return.",
	"open_txn_read--coordinator-abort-visible": "a transaction without end_txn (aborted by the coordinator " +
		"when the client's next one began) read as committed.",
	"mixed_outcome--duplicate-marker-flips-outcome": "a commit of unknown fate read as committed, then, " +
		"after a second marker, as aborted: the duplicate changed the outcome.",
	"mixed_outcome--committed-here-aborted-there": "one transaction read as committed on t-0 and as " +
		"aborted on t-1.",
	"stray_marker--marker-without-transaction": "a control record in a partition no transaction wrote to.",
	"stray_marker--commit-marker-before-end-txn": "the only marker existed (x acknowledged past it) before " +
		"the only transaction's acknowledged commit was sent.",
	"stray_marker--marker-inside-next-transaction": "a marker at 3 between a-tx-1's records at 2 and 4: " +
		"not a-tx-1's (its records precede its markers), not a-tx-0's (its markers precede its client's " +
		"next transaction).",
}

func TestAbsurdOffsetsAreBounded(t *testing.T) {
	// A fetch claiming to have passed over 2^62 offsets must neither
	// allocate them nor be taken as valid.
	const far = int64(1) << 62
	h := []Op{
		{Client: "a", Op: OpProduce, Topic: "t", Value: "v0", Txn: "a-tx-0", CallNs: 0, ReturnNs: 10, Outcome: OutcomeOK, Offset: Int64(0)},
		{Client: "c", Op: OpFetch, Topic: "t", From: Int64(0), Next: Int64(far), Records: []Record{{0, "v0"}},
			HighWatermark: Int64(far), CallNs: 20, ReturnNs: 30, Outcome: OutcomeOK},
		{Client: "c", Op: OpFetch, Topic: "t", From: Int64(far - 1), Records: []Record{{far - 1, "v0"}}, CallNs: 40, ReturnNs: 50, Outcome: OutcomeOK},
	}
	start := time.Now()
	rep := checkPlanted(t, h)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("check took %v", d)
	}
	if rep.Valid() {
		t.Fatal("absurd offsets judged valid")
	}
	t.Log(rep.Anomalies[0])
}

// committedSighting finds, in a generated history, a read_committed fetch
// with next that returned a record of a transaction whose commit was
// acknowledged.
func committedSighting(t *testing.T, h []Op) (fetch int, value string) {
	t.Helper()
	ix, err := index(h)
	if err != nil {
		t.Fatal(err)
	}
	for i := range h {
		f := &h[i]
		if f.Op != OpFetch || f.Isolation != ReadCommitted || f.Next == nil {
			continue
		}
		for _, r := range f.Records {
			p := &h[ix.produced[r.Value]]
			if p.Txn != "" && ix.mustBeVisible(p) {
				return i, r.Value
			}
		}
	}
	t.Fatal("no read_committed sighting of a committed transaction")
	return 0, ""
}

func TestGeneratedCommittedRecordHidden(t *testing.T) {
	// Generated histories carry repeated markers, coordinator aborts
	// and next; a committed record one read_committed fetch passes over
	// is lost, and the transaction reads both ways.
	for seed := uint64(1); seed <= 3; seed++ {
		h := genValid(t, smallTxn(seed))
		f, v := committedSighting(t, h)
		removeRecord(&h[f], v)
		rep := mustReport(t, h, KindLostWrite)
		if rep.Count(KindMixedOutcome) == 0 {
			t.Fatalf("seed %d: mixed outcome not reported:\n%s", seed, rep.Summary())
		}
	}
}

func TestCoordinatorAbortRegression(t *testing.T) {
	// An excerpt of a fault-suite history against Apache Kafka 4.4 (one
	// partition, its first five seconds): transactions the coordinator
	// aborted on its own, after the client was replaced (no end_txn) or
	// on timeout (the client's commit failed with INVALID_TXN_STATE),
	// which read_committed passed over.
	h, err := ReadFile("testdata/coordinator-abort-kafka.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	mustBeValid(t, "recorded coordinator aborts", h)
	ix, err := index(h)
	if err != nil {
		t.Fatal(err)
	}
	views := map[string]*txnView{}
	rp := &reporter{r: &Report{Dropped: map[Kind]int{}}, max: 100, per: map[Kind]int{}}
	for _, tp := range ix.tps {
		checkSkips(h, ix, tp, ix.perTP[tp], ix.layouts[tp], views, rp)
	}
	noEnd, failedCommit := 0, 0
	for name, v := range views {
		tx := ix.txns[name]
		switch {
		case v.hidden == nil:
		case tx.endCall < 0:
			noEnd++
		case tx.maybeCommitted && tx.commitOp < 0:
			failedCommit++
		}
	}
	if noEnd == 0 || failedCommit == 0 {
		t.Fatalf("excerpt lacks coordinator aborts read as aborted: %d without end_txn, %d after a failed commit", noEnd, failedCommit)
	}
}

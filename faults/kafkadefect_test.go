package faults

import (
	"strings"
	"testing"
	"time"

	lin "github.com/cascade-kafka/cascade/linearizability"
)

// defectClock puts the history's zero at 03:20:58.000 UTC, as the
// recorder of the planted run started then.
var defectClock = ClockAnchor{Wall: time.Date(2026, 11, 30, 3, 20, 58, 0, time.UTC), Ns: 0}

const sec = int64(time.Second)

// defectLog is an excerpt of a Kafka 4.4.0 server log around the skipped
// markers of a run (kafka-faults-3044654131), shifted to the planted
// history's times.
const defectLog = `[2026-11-30 03:21:01,797] INFO [Transaction State Manager 1]: Loading transaction metadata from __transaction_state-0 at epoch 2 (kafka.coordinator.transaction.TransactionStateManager)
[2026-11-30 03:21:01,837] INFO [Transaction State Manager 1]: Completed loading transaction metadata from __transaction_state-0 for coordinator epoch 2 (kafka.coordinator.transaction.TransactionStateManager)
[2026-11-30 03:21:03,279] INFO [Transaction Marker Channel Manager 1]: Couldn't find leader endpoint for partitions Set(faults-2, faults-1) while trying to send transaction markers for faults-txn-1, these partitions are likely deleted already and hence can be skipped (kafka.coordinator.transaction.TransactionMarkerChannelManager)
[2026-11-30 03:21:03,837] INFO [Transaction State Manager 1]: Loading transaction metadata from __transaction_state-0 at epoch 4 (kafka.coordinator.transaction.TransactionStateManager)
`

// abortedReadHistory plants what the run recorded: txn-producer-1's
// transaction tx-0 writes to faults-1, times out on faults-2 across a
// crash and is aborted; its next transaction commits on faults-1, and a
// read_committed fetch then returns tx-0's record, whose abort marker the
// coordinator skipped.
func abortedReadHistory() []lin.Op {
	tx0, tx1 := "txn-producer-1-tx-0", "txn-producer-1-tx-1"
	return []lin.Op{
		{Client: "txn-producer-1", Op: lin.OpProduce, Topic: "faults", Partition: 1, Value: "t1-0-0", Txn: tx0,
			CallNs: 1 * sec, ReturnNs: 1*sec + 100*ms, Outcome: lin.OutcomeOK, Offset: lin.Int64(0)},
		{Client: "txn-producer-1", Op: lin.OpProduce, Topic: "faults", Partition: 2, Value: "t1-0-1", Txn: tx0,
			CallNs: 1*sec + 200*ms, ReturnNs: 5 * sec, Outcome: lin.OutcomeUnknown},
		{Client: "txn-producer-1", Op: lin.OpEndTxn, Txn: tx0, Commit: lin.Bool(false),
			CallNs: 5*sec + 100*ms, ReturnNs: 5*sec + 200*ms, Outcome: lin.OutcomeOK},
		{Client: "txn-producer-1", Op: lin.OpProduce, Topic: "faults", Partition: 1, Value: "t1-1-0", Txn: tx1,
			CallNs: 5*sec + 300*ms, ReturnNs: 5*sec + 400*ms, Outcome: lin.OutcomeOK, Offset: lin.Int64(1)},
		{Client: "txn-producer-1", Op: lin.OpEndTxn, Txn: tx1, Commit: lin.Bool(true),
			CallNs: 5*sec + 500*ms, ReturnNs: 5*sec + 600*ms, Outcome: lin.OutcomeOK},
		{Client: "consumer-1", Op: lin.OpFetch, Topic: "faults", Partition: 1, From: lin.Int64(0),
			Isolation: lin.ReadCommitted, Records: []lin.Record{{Offset: 0, Value: "t1-0-0"}, {Offset: 1, Value: "t1-1-0"}},
			Next: lin.Int64(3), CallNs: 6 * sec, ReturnNs: 6*sec + 100*ms, Outcome: lin.OutcomeOK},
	}
}

func checkPlanted(t *testing.T, h []lin.Op, want lin.Kind) *lin.Report {
	t.Helper()
	rep, err := lin.Check(h, lin.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Anomalies) != 1 || rep.Anomalies[0].Kind != want {
		t.Fatalf("planted history: want one %s, got:\n%s", want, rep.Summary())
	}
	return rep
}

func parseDefectLog(t *testing.T, log string) []SkippedMarkers {
	t.Helper()
	lines, err := ParseSkippedMarkers([]byte(log), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

func TestSkippedMarkersExplainAbortedRead(t *testing.T) {
	h := abortedReadHistory()
	rep := checkPlanted(t, h, lin.KindAbortedRead)
	known, rest := ExplainSkippedMarkers(h, rep, parseDefectLog(t, defectLog), defectClock)
	if len(rest) != 0 || len(known) != 1 {
		t.Fatalf("want the aborted_read explained, got known %v rest %v", known, rest)
	}
	d := known[0]
	if d.Txn != "txn-producer-1-tx-0" || d.TransactionalID != "faults-txn-1" || d.Partition != "faults-1" ||
		!strings.Contains(d.Log.Line, "Set(faults-2, faults-1)") {
		t.Fatalf("wrong match: %+v", d)
	}
	md := FindingsMarkdown("Apache Kafka 4.4.0", known)
	for _, want := range []string{"APACHE KAFKA DEFECT REPRODUCED 1 time", "aborted_read faults-1", "txn-producer-1-tx-0", "Set(faults-2, faults-1)"} {
		if !strings.Contains(md, want) {
			t.Errorf("findings.md lacks %q:\n%s", want, md)
		}
	}
}

// TestSkippedMarkersUnexplained keeps the same anomaly failing whenever
// the log does not show Kafka skipping that transaction's markers there
// and then.
func TestSkippedMarkersUnexplained(t *testing.T) {
	line := "Set(faults-2, faults-1) while trying to send transaction markers for faults-txn-1,"
	for _, tc := range []struct{ name, log string }{
		{"no such line", strings.Replace(defectLog, "likely deleted already", "deleted", 1)},
		{"other transactional id", strings.Replace(defectLog, "for faults-txn-1,", "for faults-txn-0,", 1)},
		{"other partition", strings.Replace(defectLog, line, "Set(faults-2) while trying to send transaction markers for faults-txn-1,", 1)},
		{"a partition the transaction never addressed", strings.Replace(defectLog, line, "Set(faults-0, faults-1) while trying to send transaction markers for faults-txn-1,", 1)},
		{"before the transaction wrote there", strings.Replace(defectLog, "03:21:03,279", "03:20:58,500", 1)},
		{"after the next transaction wrote", strings.Replace(defectLog, "03:21:03,279", "03:21:03,600", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := abortedReadHistory()
			rep := checkPlanted(t, h, lin.KindAbortedRead)
			known, rest := ExplainSkippedMarkers(h, rep, parseDefectLog(t, tc.log), defectClock)
			if len(known) != 0 || len(rest) != 1 {
				t.Fatalf("want the aborted_read unexplained, got known %v rest %v", known, rest)
			}
		})
	}
}

// TestSkippedMarkersExplainMixedOutcome plants the other shape (run
// kafka-faults-3565424285): the commit's outcome is unknown, the
// coordinator aborts on timeout without markers, and a later commit
// exposes one partition while a later abort hides the other.
func TestSkippedMarkersExplainMixedOutcome(t *testing.T) {
	tx0, tx1 := "txn-producer-1-tx-0", "txn-producer-1-tx-1"
	h := []lin.Op{
		{Client: "txn-producer-1", Op: lin.OpProduce, Topic: "faults", Partition: 2, Value: "t1-0-0", Txn: tx0,
			CallNs: 1 * sec, ReturnNs: 1*sec + 100*ms, Outcome: lin.OutcomeOK, Offset: lin.Int64(0)},
		{Client: "txn-producer-1", Op: lin.OpProduce, Topic: "faults", Partition: 1, Value: "t1-0-1", Txn: tx0,
			CallNs: 1*sec + 200*ms, ReturnNs: 1*sec + 300*ms, Outcome: lin.OutcomeOK, Offset: lin.Int64(0)},
		{Client: "txn-producer-1", Op: lin.OpEndTxn, Txn: tx0, Commit: lin.Bool(true),
			CallNs: 1*sec + 400*ms, ReturnNs: 4 * sec, Outcome: lin.OutcomeUnknown},
		{Client: "txn-producer-1", Op: lin.OpProduce, Topic: "faults", Partition: 1, Value: "t1-1-0", Txn: tx1,
			CallNs: 5*sec + 300*ms, ReturnNs: 5*sec + 400*ms, Outcome: lin.OutcomeOK, Offset: lin.Int64(1)},
		{Client: "txn-producer-1", Op: lin.OpEndTxn, Txn: tx1, Commit: lin.Bool(true),
			CallNs: 5*sec + 500*ms, ReturnNs: 5*sec + 600*ms, Outcome: lin.OutcomeOK},
		{Client: "consumer-1", Op: lin.OpFetch, Topic: "faults", Partition: 1, From: lin.Int64(0),
			Isolation: lin.ReadCommitted, Records: []lin.Record{{Offset: 0, Value: "t1-0-1"}, {Offset: 1, Value: "t1-1-0"}},
			Next: lin.Int64(3), CallNs: 6 * sec, ReturnNs: 6*sec + 100*ms, Outcome: lin.OutcomeOK},
		{Client: "consumer-1", Op: lin.OpFetch, Topic: "faults", Partition: 2, From: lin.Int64(0),
			Isolation: lin.ReadCommitted, Next: lin.Int64(2), CallNs: 6 * sec, ReturnNs: 6*sec + 100*ms, Outcome: lin.OutcomeOK},
	}
	rep := checkPlanted(t, h, lin.KindMixedOutcome)
	known, rest := ExplainSkippedMarkers(h, rep, parseDefectLog(t, defectLog), defectClock)
	if len(rest) != 0 || len(known) != 1 || known[0].Partition != "faults-1" {
		t.Fatalf("want the mixed_outcome explained on faults-1, got known %v rest %v", known, rest)
	}
	// An acknowledged commit whose markers the coordinator skipped: the
	// same defect, the commit's records taking the next marker.
	h[2].Outcome, h[2].ReturnNs = lin.OutcomeOK, 1*sec+500
	rep, err := lin.Check(h, lin.Options{SkipLinearizability: true})
	if err != nil {
		t.Fatal(err)
	}
	known, rest = ExplainSkippedMarkers(h, rep, parseDefectLog(t, defectLog), defectClock)
	if len(rest) != 0 || len(known) == 0 {
		t.Fatalf("want every anomaly of the committed variant explained, got known %v rest %v", known, rest)
	}
	for _, d := range known {
		if d.Partition != "faults-2" && d.Partition != "faults-1" {
			t.Fatalf("explained on %s, which the line does not name", d.Partition)
		}
	}
	if rep.Valid() {
		t.Fatal("the committed variant must still be invalid")
	}
}

// TestSkippedMarkersOneLineOneTransaction lets a line explain anomalies of
// one transaction only.
func TestSkippedMarkersOneLineOneTransaction(t *testing.T) {
	h := abortedReadHistory()
	rep := checkPlanted(t, h, lin.KindAbortedRead)
	other := rep.Anomalies[0]
	other.Txn = "txn-producer-1-tx-1"
	rep.Anomalies = append(rep.Anomalies, other)
	known, rest := ExplainSkippedMarkers(h, rep, parseDefectLog(t, defectLog), defectClock)
	if len(known) != 1 || len(rest) != 1 {
		t.Fatalf("want one explained and one not, got known %v rest %v", known, rest)
	}
}

func TestParseSkippedMarkers(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"[2026-11-30 03:21:03,279] INFO [Transaction Marker Channel Manager 1]: Couldn't find leader endpoint for partitions Set(faults-2) while trying to send transaction markers for a, b, these partitions are likely deleted already and hence can be skipped (kafka.coordinator.transaction.TransactionMarkerChannelManager)",
			[]string{"faults-2"}},
		{"[2026-11-30 03:21:03,279] INFO [Transaction Marker Channel Manager 1]: Couldn't find leader endpoint for partitions HashSet(t-0, t-1, t-2, t-3, t-4) while trying to send transaction markers for a, b, these partitions are likely deleted already and hence can be skipped (kafka.coordinator.transaction.TransactionMarkerChannelManager)",
			[]string{"t-0", "t-1", "t-2", "t-3", "t-4"}},
		{"[2026-11-30 03:21:03,279] INFO Couldn't find leader endpoint for partitions [t-0, t-1] while trying to send transaction markers for a, b, these partitions are likely deleted already and hence can be skipped",
			[]string{"t-0", "t-1"}},
	} {
		got, err := ParseSkippedMarkers([]byte("noise\n"+tc.line+"\r\nmore noise\n"), time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].TransactionalID != "a, b" || strings.Join(got[0].Partitions, "|") != strings.Join(tc.want, "|") ||
			!got[0].At.Equal(time.Date(2026, 11, 30, 3, 21, 3, 279e6, time.UTC)) {
			t.Errorf("%s: got %+v", tc.line, got)
		}
	}
	for _, bad := range []string{
		"Couldn't find leader endpoint, these partitions are likely deleted already and hence can be skipped",
		"[2026-11-30 03:21:03,279] INFO Couldn't find leader endpoint for partitions faults-1 while trying to send transaction markers for x, these partitions are likely deleted already and hence can be skipped",
		"[2026-11-30 03:21:03,279] INFO Couldn't find leader endpoint for partitions Set() while trying to send transaction markers for x, these partitions are likely deleted already and hence can be skipped",
	} {
		if _, err := ParseSkippedMarkers([]byte(bad), time.UTC); err == nil {
			t.Errorf("no error for %q", bad)
		}
	}
}

func TestTransactionalIDOf(t *testing.T) {
	for client, want := range map[string]string{"txn-producer-1": "faults-txn-1", "txn-producer-12": "faults-txn-12",
		"txn-producer-": "", "producer-1": "", "txn-producer-x": ""} {
		got, ok := transactionalIDOf(client)
		if got != want || ok != (want != "") {
			t.Errorf("%s: got %q %v, want %q", client, got, ok, want)
		}
	}
}

package faults

import (
	"bytes"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"time"

	lin "github.com/cascade-kafka/cascade/linearizability"
)

// Apache Kafka 4.4's TransactionMarkerChannelManager
// (addTxnMarkersToBrokerQueue) looks up the leader of every partition of a
// transaction it completes; for partitions without a leader it logs
//
//	Couldn't find leader endpoint for partitions Set(faults-2, faults-1) while trying to send transaction markers for faults-txn-1, these partitions are likely deleted already and hence can be skipped
//
// at INFO, removes them from the transaction and completes it
// (PrepareAbort → CompleteAbort in __transaction_state) without writing
// their markers. After a kill -9 the restarted coordinator aborts a
// timed-out transaction (TransactionCoordinator.abortTimedOutTransactions)
// before the controller has given the data partitions a leader again, so
// the partitions were not deleted, only leaderless: the transaction's
// records there stay open until the producer's next marker, and when that
// is a commit they read as committed (aborted_read, or mixed_outcome when
// another partition got the abort). A commit the restarted coordinator
// completes the same way leaves an acknowledged commit's records open, and
// when the next marker is an abort they are lost (lost_write, or
// mixed_outcome). The line names the partitions and the
// transactional.id, not the producer id, epoch or transaction, so the
// suite matches it to a transaction by transactional.id, partitions and
// time (ExplainSkippedMarkers).

// skippedMarkers is the phrase that marks the line.
const skippedMarkers = "likely deleted already and hence can be skipped"

// skippedMarkersLine parses the line in the layout of matrix/apachekafka's
// log4j configuration ("[yyyy-MM-dd HH:mm:ss,SSS] LEVEL message").
var skippedMarkersLine = regexp.MustCompile(`^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] INFO .*Couldn't find leader endpoint for partitions (.*) while trying to send transaction markers for (.*), these partitions are ` + skippedMarkers)

// SkippedMarkers is one skipped-marker line of Apache Kafka's server log.
type SkippedMarkers struct {
	// Line is the log line as written.
	Line string
	// At is the line's timestamp, truncated to the millisecond by log4j.
	At time.Time
	// TransactionalID is the transaction's transactional.id.
	TransactionalID string
	// Partitions are the partitions left without markers, named
	// "topic-partition".
	Partitions []string
}

// ParseSkippedMarkers returns the skipped-marker lines of a Kafka server
// log whose timestamps are in loc (the broker's JVM time zone). A line with
// the phrase that does not parse is an error, so a changed log format
// cannot silently turn the allowance off or on.
func ParseSkippedMarkers(log []byte, loc *time.Location) ([]SkippedMarkers, error) {
	var out []SkippedMarkers
	for n, l := range bytes.Split(log, []byte("\n")) {
		if !bytes.Contains(l, []byte(skippedMarkers)) {
			continue
		}
		line := strings.TrimRight(string(l), "\r")
		m := skippedMarkersLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("broker log line %d has %q in an unknown layout: %s", n+1, skippedMarkers, line)
		}
		at, err := time.ParseInLocation("2006-01-02 15:04:05,000", m[1], loc)
		if err != nil {
			return nil, fmt.Errorf("broker log line %d: %w", n+1, err)
		}
		parts, err := parsePartitionSet(m[2])
		if err != nil {
			return nil, fmt.Errorf("broker log line %d: %w", n+1, err)
		}
		out = append(out, SkippedMarkers{Line: line, At: at, TransactionalID: m[3], Partitions: parts})
	}
	return out, nil
}

// parsePartitionSet parses a Scala set of TopicPartitions as Kafka prints
// it ("Set(t-0, t-1)", "HashSet(...)" past four elements) or a Java one
// ("[t-0, t-1]").
func parsePartitionSet(s string) ([]string, error) {
	var body string
	switch {
	case strings.HasSuffix(s, ")") && strings.Contains(s, "("):
		body = s[strings.IndexByte(s, '(')+1 : len(s)-1]
	case strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]"):
		body = s[1 : len(s)-1]
	default:
		return nil, fmt.Errorf("partition set %q in an unknown layout", s)
	}
	var out []string
	for _, p := range strings.Split(body, ", ") {
		if p == "" {
			return nil, fmt.Errorf("empty partition in %q", s)
		}
		out = append(out, p)
	}
	return out, nil
}

// ClockAnchor ties the history's clock (nanoseconds since the recorder
// started) to the wall clock the broker's log is stamped with: Ns was read
// from the recorder right after Wall from time.Now.
type ClockAnchor struct {
	Wall time.Time
	Ns   int64
}

// historyNs converts a wall-clock time to the history's clock.
func (c ClockAnchor) historyNs(t time.Time) int64 { return c.Ns + int64(t.Sub(c.Wall)) }

// skewSlack widens each transaction's window: log4j truncates timestamps
// to the millisecond, and the wall clock may be slewed (at most 500 ppm
// under NTP) while the history's monotonic clock is not, which over a
// run of a few minutes stays well under this.
const skewSlack = 100 * time.Millisecond

// KnownDefect is an anomaly of an Apache Kafka run that Kafka's skipped
// markers explain.
type KnownDefect struct {
	Anomaly lin.Anomaly
	// Txn is the anomaly's transaction and TransactionalID its
	// transactional.id.
	Txn, TransactionalID string
	// Partition is where its records read as committed.
	Partition string
	// From and To bound, on the history's clock, when the coordinator
	// could have been completing Txn.
	From, To int64
	// Log is the matching line.
	Log SkippedMarkers
}

// String renders the defect for the run log and findings.md.
func (d KnownDefect) String() string {
	return fmt.Sprintf("%s\n  transaction %s (transactional.id %s) was never acknowledged as committed; the coordinator completed it without markers on %s between %.3f s and %.3f s of the history:\n  %s",
		d.Anomaly, d.Txn, d.TransactionalID, d.Partition, float64(d.From)/1e9, float64(d.To)/1e9, d.Log.Line)
}

// txnFacts is what the history knows of one transaction.
type txnFacts struct {
	client string
	// firstCall is its first produce's call on each partition it
	// addressed, of any outcome: a produce that failed may still have
	// added the partition to the transaction.
	firstCall map[string]int64
	start     int64
	// firstAck is the return of its first acknowledged produce.
	firstAck  int64
	committed bool
}

// ExplainSkippedMarkers splits the anomalies of an Apache Kafka run's
// report into those Kafka's skipped markers explain and the rest. An
// anomaly is explained when, and only when, it is an aborted_read or
// mixed_outcome of a transaction T of the workload's transactional
// producers with no acknowledged commit, and a skipped-marker line
//
//   - names T's transactional.id,
//   - names the partition where T's records read as committed, and only
//     partitions T addressed,
//   - is stamped (within skewSlack) between T's first produce on that
//     partition and the return of the first acknowledged produce of a
//     later transaction of T's transactional.id, which Kafka lets write
//     only after T is complete (CONCURRENT_TRANSACTIONS),
//
// and that line explains no other transaction. Anomalies dropped past
// lin.Options.MaxPerKind cannot be matched and are for the caller to fail.
func ExplainSkippedMarkers(h []lin.Op, rep *lin.Report, lines []SkippedMarkers, clock ClockAnchor) (known []KnownDefect, rest []lin.Anomaly) {
	txns := map[string]*txnFacts{}
	byClient := map[string][]string{}
	for _, o := range h {
		if o.Txn == "" {
			continue
		}
		t := txns[o.Txn]
		if t == nil {
			t = &txnFacts{client: o.Client, firstCall: map[string]int64{}, start: math.MaxInt64, firstAck: math.MaxInt64}
			txns[o.Txn] = t
			byClient[o.Client] = append(byClient[o.Client], o.Txn)
		}
		switch o.Op {
		case lin.OpProduce:
			tp := o.TP().String()
			if c, ok := t.firstCall[tp]; !ok || o.CallNs < c {
				t.firstCall[tp] = o.CallNs
			}
			t.start = min(t.start, o.CallNs)
			if o.Outcome == lin.OutcomeOK {
				t.firstAck = min(t.firstAck, o.ReturnNs)
			}
		case lin.OpEndTxn:
			t.committed = t.committed || (o.Commit != nil && *o.Commit && o.Outcome == lin.OutcomeOK)
		}
	}
	// until[T] is the return of the first acknowledged produce of a
	// transaction its client began after T.
	until := map[string]int64{}
	for _, names := range byClient {
		sort.Slice(names, func(a, b int) bool { return txns[names[a]].start < txns[names[b]].start })
		next := int64(math.MaxInt64)
		for i := len(names) - 1; i >= 0; i-- {
			until[names[i]] = next
			next = min(next, txns[names[i]].firstAck)
		}
	}
	used := map[int]string{} // line index -> the transaction it explains
	slack := int64(skewSlack)
	for _, a := range rep.Anomalies {
		d, ok := explainOne(a, txns, until, lines, used, clock, slack)
		if !ok {
			rest = append(rest, a)
			continue
		}
		known = append(known, d)
	}
	return known, rest
}

// explainOne matches one anomaly against the skipped-marker lines.
func explainOne(a lin.Anomaly, txns map[string]*txnFacts, until map[string]int64, lines []SkippedMarkers,
	used map[int]string, clock ClockAnchor, slack int64) (KnownDefect, bool) {
	t := txns[a.Txn]
	if t == nil {
		return KnownDefect{}, false
	}
	switch {
	case a.Kind == lin.KindAbortedRead && !t.committed:
		// An abort without markers: its records read as committed.
	case a.Kind == lin.KindMixedOutcome:
		// Markers skipped on some partitions of an abort or a commit.
	case a.Kind == lin.KindLostWrite && t.committed:
		// A commit without markers: the records stay open until the
		// producer's next marker, and an abort then takes them.
	default:
		return KnownDefect{}, false
	}
	id, ok := transactionalIDOf(t.client)
	if !ok {
		return KnownDefect{}, false
	}
	from, ok := t.firstCall[a.Key]
	if !ok {
		return KnownDefect{}, false
	}
	to := until[a.Txn]
	for i, l := range lines {
		if l.TransactionalID != id || (used[i] != "" && used[i] != a.Txn) {
			continue
		}
		named, others := false, false
		for _, p := range l.Partitions {
			named = named || p == a.Key
			_, addressed := t.firstCall[p]
			others = others || !addressed
		}
		if !named || others {
			continue
		}
		at := clock.historyNs(l.At)
		if at < from-slack || (to != math.MaxInt64 && at > to+slack) {
			continue
		}
		used[i] = a.Txn
		return KnownDefect{Anomaly: a, Txn: a.Txn, TransactionalID: id, Partition: a.Key, From: from, To: to, Log: l}, true
	}
	return KnownDefect{}, false
}

// FindingsMarkdown renders the known defects a run reproduced, for the
// run directory's findings.md.
func FindingsMarkdown(target string, known []KnownDefect) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Findings: %s\n\n", target)
	if len(known) == 0 {
		b.WriteString("No known defect reproduced.\n")
		return b.String()
	}
	fmt.Fprintf(&b, "APACHE KAFKA DEFECT REPRODUCED %d time(s): the transaction coordinator completed a transaction without writing "+
		"markers to partitions that had no leader yet after a restart (TransactionMarkerChannelManager: %q), so its records "+
		"there took the producer's next marker: an aborted transaction's read as committed, or an acknowledged commit's were "+
		"aborted. These anomalies are Kafka's, matched to its log below; they are not a pass of the checks they broke.\n\n",
		len(known), skippedMarkers)
	for _, d := range known {
		fmt.Fprintf(&b, "- `%s`\n  - transaction %s (transactional.id %s), partition %s, window %.3f s to ",
			d.Anomaly, d.Txn, d.TransactionalID, d.Partition, float64(d.From)/1e9)
		if d.To == math.MaxInt64 {
			b.WriteString("the end of the run\n")
		} else {
			fmt.Fprintf(&b, "%.3f s\n", float64(d.To)/1e9)
		}
		fmt.Fprintf(&b, "  - broker log: `%s`\n", d.Log.Line)
	}
	return b.String()
}

package linearizability

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Kind names one class of anomaly.
type Kind string

// Anomaly kinds reported by Check. Every kind except KindUnseen makes a
// history invalid.
const (
	// KindLostWrite is an acknowledged produce whose value no fetch
	// returned although a later offset of its partition was read, or which
	// a fetch spanning its offset skipped.
	KindLostWrite Kind = "lost_write"
	// KindDuplicate is one value observed at two offsets.
	KindDuplicate Kind = "duplicate"
	// KindInconsistentOffset is one offset observed with two values (two
	// reads disagree, or two produces were acknowledged at one offset).
	KindInconsistentOffset Kind = "inconsistent_offset"
	// KindWrongRead is a fetch that returned, at some offset, a value other
	// than the one acknowledged there, a value no produce wrote, or the
	// value of a produce that certainly failed.
	KindWrongRead Kind = "wrong_read"
	// KindNonMonotonicFetch is a fetch whose offsets do not strictly
	// increase, or start below the offset it asked for.
	KindNonMonotonicFetch Kind = "nonmonotonic_fetch"
	// KindCommitBackwards is a committed offset read lower than one read
	// earlier, with no commit of the lower offset that could explain it.
	KindCommitBackwards Kind = "commit_backwards"
	// KindAbortedRead is a read_committed fetch that returned a record of
	// an aborted transaction.
	KindAbortedRead Kind = "aborted_read"
	// KindOpenTxnRead is a read_committed fetch that returned a record of a
	// transaction not yet committed when the fetch returned.
	KindOpenTxnRead Kind = "open_txn_read"
	// KindDoubleOwner is one partition assigned to two members of a group
	// in one generation.
	KindDoubleOwner Kind = "double_owner"
	// KindNotLinearizable is a partition (or group-partition) whose
	// operations have no linearization consistent with real-time order.
	KindNotLinearizable Kind = "not_linearizable"
	// KindLinearizabilityUnknown is a partition whose porcupine check did
	// not finish within the timeout. It is never read as valid.
	KindLinearizabilityUnknown Kind = "linearizability_unknown"
	// KindStaleCommitRead is, under Options.StaleReads, a committed
	// offset read lower than one read earlier that a later read shows
	// again (or passes): a coordinator answering from a high watermark
	// that trails, not a commit lost. Information, not an error.
	KindStaleCommitRead Kind = "stale_commit_read"
	// KindUnseen is an acknowledged write that no fetch returned and no
	// later offset was read either. It is information, not an error: the
	// run may simply not have drained the partition.
	KindUnseen Kind = "unseen"
)

// Anomaly is one finding of Check.
type Anomaly struct {
	Kind Kind
	// Key names where: "topic-partition", or "group/topic-partition" for
	// committed offsets.
	Key    string
	Detail string
	// Ops are indices into the checked history (line number minus one).
	Ops []int
	// Txn names the transaction an aborted_read or mixed_outcome is
	// about, so a harness can match it with what the broker logged.
	Txn string
}

// String renders the anomaly on one line with 1-based history line numbers.
func (a Anomaly) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %s", a.Kind, a.Key, a.Detail)
	if len(a.Ops) > 0 {
		b.WriteString(" (lines")
		for _, i := range a.Ops {
			fmt.Fprintf(&b, " %d", i+1)
		}
		b.WriteString(")")
	}
	return b.String()
}

// Options tune Check.
type Options struct {
	// Timeout bounds the whole porcupine check; zero means one minute.
	// Partitions not decided in time are reported as
	// KindLinearizabilityUnknown.
	Timeout time.Duration
	// SkipLinearizability runs only the direct checks.
	SkipLinearizability bool
	// MaxPerKind caps how many anomalies of one kind are kept (the rest are
	// counted in Report.Dropped); zero means 100.
	MaxPerKind int
	// StaleReads lets a fetch's high watermark and a latest offset trail
	// what the log has committed, as on a cluster: a follower serves a
	// consumer's fetch from its own high watermark (KIP-392), and a new
	// leader's high watermark catches up only once its followers fetch
	// again. What a read returns must still be in the log where it says.
	// A committed offset read may likewise return one of the offset's
	// latest values before its current one (a new group coordinator
	// answers from its partition's high watermark), and going back is an
	// anomaly only when no later read shows the higher offset again.
	StaleReads bool
}

// Report is the result of Check.
type Report struct {
	// Ops is the number of operations checked.
	Ops int
	// Anomalies lists the findings that make the history invalid.
	Anomalies []Anomaly
	// Info lists findings that do not (unseen writes).
	Info []Anomaly
	// Dropped counts anomalies beyond Options.MaxPerKind, per kind.
	Dropped map[Kind]int
	// Linearizability is porcupine's verdict per key ("ok", "illegal",
	// "unknown"); empty when skipped.
	Linearizability map[string]string
	// Failing is the first key porcupine found illegal, for visualization.
	Failing string
}

// Valid reports whether the history has no anomaly. A porcupine check that
// timed out is an anomaly, so a timed-out history is never valid.
func (r *Report) Valid() bool { return len(r.Anomalies) == 0 }

// Count returns how many anomalies of kind k were found, dropped ones
// included.
func (r *Report) Count(k Kind) int {
	n := r.Dropped[k]
	for _, a := range r.Anomalies {
		if a.Kind == k {
			n++
		}
	}
	for _, a := range r.Info {
		if a.Kind == k {
			n++
		}
	}
	return n
}

// Summary renders the report for a terminal: one line per anomaly, then
// counts.
func (r *Report) Summary() string {
	var b strings.Builder
	for _, a := range r.Anomalies {
		b.WriteString(a.String())
		b.WriteByte('\n')
	}
	for k, n := range r.Dropped {
		fmt.Fprintf(&b, "... and %d more %s\n", n, k)
	}
	unseen := r.Count(KindUnseen)
	verdict := "valid"
	if !r.Valid() {
		verdict = fmt.Sprintf("INVALID: %d anomalies", len(r.Anomalies))
	}
	if n := r.Count(KindStaleCommitRead); n > 0 {
		fmt.Fprintf(&b, "%d ops, %d unseen writes, %d stale committed-offset reads, %s\n", r.Ops, unseen, n, verdict)
		return b.String()
	}
	fmt.Fprintf(&b, "%d ops, %d unseen writes, %s\n", r.Ops, unseen, verdict)
	return b.String()
}

type reporter struct {
	r   *Report
	max int
	per map[Kind]int
}

func (rp *reporter) add(a Anomaly) {
	if rp.per[a.Kind] >= rp.max {
		rp.r.Dropped[a.Kind]++
		return
	}
	rp.per[a.Kind]++
	if a.Kind == KindUnseen || a.Kind == KindStaleCommitRead {
		rp.r.Info = append(rp.r.Info, a)
		return
	}
	rp.r.Anomalies = append(rp.r.Anomalies, a)
}

// Check runs the direct checks and, unless skipped, the porcupine check on
// history. It returns an error only for a history that breaks the format in
// a way Read cannot see (a value produced by two operations).
func Check(history []Op, opt Options) (*Report, error) {
	if opt.Timeout <= 0 {
		opt.Timeout = time.Minute
	}
	if opt.MaxPerKind <= 0 {
		opt.MaxPerKind = 100
	}
	rep := &Report{Ops: len(history), Dropped: map[Kind]int{}}
	rp := &reporter{r: rep, max: opt.MaxPerKind, per: map[Kind]int{}}
	ix, err := index(history)
	if err != nil {
		return nil, err
	}
	checkDirect(history, ix, opt, rp)
	if !opt.SkipLinearizability {
		checkLinearizable(history, ix, opt, rp)
	}
	sort.SliceStable(rep.Anomalies, func(i, j int) bool {
		if rep.Anomalies[i].Kind != rep.Anomalies[j].Kind {
			return rep.Anomalies[i].Kind < rep.Anomalies[j].Kind
		}
		return rep.Anomalies[i].Key < rep.Anomalies[j].Key
	})
	return rep, nil
}

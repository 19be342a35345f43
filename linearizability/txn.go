package linearizability

import (
	"fmt"
	"math"
	"sort"
)

// Transaction markers are control records: they take offsets, but no fetch
// returns them, so a history never names them. The checker does not guess
// where they are; it reads them off the fetches. Every offset a fetch
// passed over ([from, next), or [from, last returned] without next) that
// holds no known data record is a gap: a marker, or under read_committed
// possibly an aborted record. A gap a read_uncommitted fetch passed over is
// certainly a marker, since read_uncommitted returns every data record.
//
// As Apache Kafka does, a marker may be written more than once: the
// coordinator writes the markers of a transaction in PrepareCommit or
// PrepareAbort again each time it loads that state after a crash
// (TransactionStateManager.loadTransactionsForTxnTopicPartition, then
// TransactionMarkerChannelManager), and ProducerStateManager accepts a
// marker for a producer with no ongoing transaction as a no-op
// (KAFKA-19999). So a marker is checked only for having a transaction that
// could have written it there and then (markerCandidate); how many copies
// there are is free. The first marker decides a transaction's outcome on a
// partition and later copies change nothing: that is checked on what
// read_committed fetches return (checkVisibility).

// KindStrayMarker and KindMixedOutcome extend the kinds of check.go.
const (
	// KindStrayMarker is a control record (an offset a read_uncommitted
	// fetch passed over without a data record) that no transaction of the
	// history could have written there and then, or an offset
	// read_committed passed over without a data record in a partition no
	// transaction had addressed by then.
	KindStrayMarker Kind = "stray_marker"
	// KindMixedOutcome is a transaction whose records read_committed
	// fetches showed as committed in one place and as aborted in another:
	// on two partitions, or on one partition before and after a duplicate
	// marker.
	KindMixedOutcome Kind = "mixed_outcome"
)

// dataRec is a data record a history places at an offset: acknowledged
// there or read there.
type dataRec struct {
	offset int64
	value  string
	// op is the produce that wrote the value, or -1 for a value no
	// produce wrote (reported as a wrong read).
	op int
}

// gap is an offset a fetch passed over that holds no known data record.
type gap struct {
	offset int64
	// marker is set when a read_uncommitted fetch passed over it.
	marker bool
}

// layout is what the history shows of one partition's log.
type layout struct {
	// data lists the known data records, sorted by offset, one per offset
	// (the acknowledged value first, else the first read).
	data []dataRec
	// gaps lists the offsets passed over without data, sorted.
	gaps []gap
	// holes lists offsets below extent that nothing shows, sorted
	// (markers, or records of produces nobody read); porcupine fills them.
	holes []int64
	// complete is set when every offset below extent is data, a gap or a
	// hole: the enumeration stayed inside its budget.
	complete bool
	// hasTxn is set when a transactional produce addressed the partition.
	hasTxn bool
	// proofs lists, per operation, how far it proves the log reached
	// (an offset below extent existed when it returned), sorted by extent.
	proofs []proof
	// suffixMin[i] is the earliest return among proofs[i:].
	suffixMin []int64
	// callBelow[i] is the latest call among the produces of data[:i+1].
	callBelow []int64
}

type proof struct {
	extent int64
	ret    int64
}

// span returns the offsets [lo, hi) fetch o passed over: from its from to
// its next, or to one past the last record it returned.
func span(o *Op) (lo, hi int64) {
	lo, hi = *o.From, *o.From
	if n := len(o.Records); n > 0 && o.Records[n-1].Offset+1 > hi {
		hi = o.Records[n-1].Offset + 1
	}
	if o.Next != nil && *o.Next > hi {
		hi = *o.Next
	}
	return lo, hi
}

type interval struct{ lo, hi int64 }

// merge sorts and merges intervals.
func merge(iv []interval) []interval {
	sort.Slice(iv, func(a, b int) bool { return iv[a].lo < iv[b].lo })
	var out []interval
	for _, x := range iv {
		if x.hi <= x.lo {
			continue
		}
		if n := len(out); n > 0 && x.lo <= out[n-1].hi {
			out[n-1].hi = max(out[n-1].hi, x.hi)
			continue
		}
		out = append(out, x)
	}
	return out
}

// buildLayout reads one partition's log off its operations.
func buildLayout(h []Op, ix *histIndex, ops []int) *layout {
	l := &layout{}
	at := map[int64]int{} // offset -> index in l.data
	put := func(off int64, v string) {
		if _, ok := at[off]; ok {
			return
		}
		op := -1
		if pi, ok := ix.produced[v]; ok {
			op = pi
		}
		at[off] = len(l.data)
		l.data = append(l.data, dataRec{off, v, op})
	}
	var all, ru []interval
	for _, i := range ops {
		o := &h[i]
		if o.Op == OpProduce && o.Txn != "" {
			l.hasTxn = true
		}
		if o.Outcome != OutcomeOK {
			continue
		}
		switch o.Op {
		case OpProduce:
			put(*o.Offset, o.Value)
			l.proofs = append(l.proofs, proof{*o.Offset + 1, o.ReturnNs})
		case OpFetch:
			lo, hi := span(o)
			all = append(all, interval{lo, hi})
			if o.Isolation != ReadCommitted {
				ru = append(ru, interval{lo, hi})
			}
			e := hi
			if o.HighWatermark != nil && *o.HighWatermark > e {
				e = *o.HighWatermark
			}
			l.proofs = append(l.proofs, proof{e, o.ReturnNs})
		case OpListOffsets:
			if o.Kind == KindLatest {
				l.proofs = append(l.proofs, proof{*o.Offset, o.ReturnNs})
			}
		}
	}
	// Reads after acknowledgements, so an acknowledged value wins.
	for _, i := range ops {
		o := &h[i]
		if o.Op == OpFetch && o.Outcome == OutcomeOK {
			for _, r := range o.Records {
				put(r.Offset, r.Value)
			}
		}
	}
	sort.Slice(l.data, func(a, b int) bool { return l.data[a].offset < l.data[b].offset })
	// Bound what is enumerated by what the history could hold: a valid
	// log has a few markers per transactional produce, so past a budget
	// of that size the rest of a claimed span (a corrupt history's) is
	// left unknown rather than allocated.
	budget := 4*len(ops) + 1024
	all, ru = merge(all), merge(ru)
	k := 0
	for _, iv := range all {
		for off := iv.lo; off < iv.hi && budget > 0; off++ {
			if _, ok := at[off]; ok {
				continue
			}
			for k < len(ru) && ru[k].hi <= off {
				k++
			}
			l.gaps = append(l.gaps, gap{off, k < len(ru) && ru[k].lo <= off})
			budget--
		}
	}
	sort.Slice(l.proofs, func(a, b int) bool { return l.proofs[a].extent < l.proofs[b].extent })
	l.suffixMin = make([]int64, len(l.proofs))
	for i := len(l.proofs) - 1; i >= 0; i-- {
		l.suffixMin[i] = l.proofs[i].ret
		if i+1 < len(l.proofs) && l.suffixMin[i+1] < l.suffixMin[i] {
			l.suffixMin[i] = l.suffixMin[i+1]
		}
	}
	l.callBelow = make([]int64, len(l.data))
	last := int64(math.MinInt64)
	for i, d := range l.data {
		if d.op >= 0 && h[d.op].CallNs > last {
			last = h[d.op].CallNs
		}
		l.callBelow[i] = last
	}
	// Offsets below what the log is known to have reached that no fetch
	// passed over and no operation names: markers, or records of produces
	// nobody read. Porcupine fills each at its offset, so a produce of
	// unknown outcome that nobody read need not be searched for.
	extent := int64(0)
	if n := len(l.proofs); n > 0 {
		extent = l.proofs[n-1].extent
	}
	d, g := 0, 0
	off := int64(0)
	for ; off < extent && budget > 0; off++ {
		for d < len(l.data) && l.data[d].offset < off {
			d++
		}
		for g < len(l.gaps) && l.gaps[g].offset < off {
			g++
		}
		if (d < len(l.data) && l.data[d].offset == off) || (g < len(l.gaps) && l.gaps[g].offset == off) {
			continue
		}
		l.holes = append(l.holes, off)
		budget--
	}
	l.complete = off >= extent && budget > 0
	return l
}

// existedBy returns the earliest return of an operation that proves offset
// off existed, or math.MaxInt64 when none does.
func (l *layout) existedBy(off int64) int64 {
	i := sort.Search(len(l.proofs), func(i int) bool { return l.proofs[i].extent > off })
	if i == len(l.proofs) {
		return math.MaxInt64
	}
	return l.suffixMin[i]
}

// appendedAfter returns the latest call of a produce whose record sits
// below off: the entry at off was appended after it.
func (l *layout) appendedAfter(off int64) int64 {
	i := sort.Search(len(l.data), func(i int) bool { return l.data[i].offset >= off })
	if i == 0 {
		return math.MinInt64
	}
	return l.callBelow[i-1]
}

// txnHere is what one transaction did on one partition.
type txnHere struct {
	name string
	// firstCall is its first produce's call here, of any outcome: a
	// produce that failed may still have added the partition to the
	// transaction, which then gets a marker.
	firstCall int64
	// minOff and maxOff bound its known records here (maxOff -1: none).
	minOff, maxOff int64
}

// checkMarkers reports gaps no transaction can explain.
func checkMarkers(h []Op, ix *histIndex, tp TP, ops []int, l *layout, rp *reporter) {
	if len(l.gaps) == 0 {
		return
	}
	key := tp.String()
	here := map[string]*txnHere{}
	var names []string
	for _, i := range ops {
		o := &h[i]
		if o.Op != OpProduce || o.Txn == "" {
			continue
		}
		t, ok := here[o.Txn]
		if !ok {
			t = &txnHere{name: o.Txn, firstCall: o.CallNs, minOff: math.MaxInt64, maxOff: -1}
			here[o.Txn] = t
			names = append(names, o.Txn)
		}
		t.firstCall = min(t.firstCall, o.CallNs)
	}
	for _, d := range l.data {
		if d.op < 0 {
			continue
		}
		if t := here[h[d.op].Txn]; h[d.op].Txn != "" && t != nil {
			t.minOff, t.maxOff = min(t.minOff, d.offset), max(t.maxOff, d.offset)
		}
	}
	// A transaction's markers on this partition precede the records here
	// of its client's later transactions, which the coordinator lets
	// write only once the markers are in (CONCURRENT_TRANSACTIONS).
	laterMin := map[string]int64{}
	byClient := map[string][]*txnHere{}
	for _, n := range names {
		c := ix.txns[n].client
		byClient[c] = append(byClient[c], here[n])
	}
	for _, ts := range byClient {
		sort.Slice(ts, func(a, b int) bool { return ix.txns[ts[a].name].firstCall < ix.txns[ts[b].name].firstCall })
		bound := int64(math.MaxInt64)
		for i := len(ts) - 1; i >= 0; i-- {
			laterMin[ts[i].name] = bound
			bound = min(bound, ts[i].minOff)
		}
	}
	for _, g := range l.gaps {
		by, after := l.existedBy(g.offset), l.appendedAfter(g.offset)
		ok := false
		for _, n := range names {
			t := here[n]
			if g.marker {
				ok = markerCandidate(ix.txns[n], t, laterMin[n], g.offset, by, after)
			} else {
				// Under read_committed a gap may also be an aborted
				// record of a produce nobody read: any transaction
				// that addressed the partition in time explains it.
				ok = t.firstCall < by
			}
			if ok {
				break
			}
		}
		if !ok {
			what := "a control record"
			if !g.marker {
				what = "skipped by read_committed without a data record"
			}
			rp.add(Anomaly{Kind: KindStrayMarker, Key: key,
				Detail: fmt.Sprintf("offset %d is %s that no transaction could have written there", g.offset, what)})
		}
	}
}

// markerCandidate reports whether a transaction (ts across the history, t
// on this partition) could have written a marker at off, which existed by
// the time by and was appended after a produce called at after: its
// records here all precede the marker, its client's later transactions'
// records here (laterMin on) follow it, and the marker falls between the
// transaction's start and its client's next acknowledged transactional
// produce (markersBy).
// Only an acknowledged commit's marker waits for end_txn: any other
// transaction may have been aborted by the coordinator on its own, on
// timeout (TransactionCoordinator.abortTimedOutTransactions) or when a new
// producer with the same transactional.id bumped the epoch (KIP-360).
func markerCandidate(ts *txnState, t *txnHere, laterMin, off, by, after int64) bool {
	if t.maxOff >= off || laterMin <= off {
		return false
	}
	lower := t.firstCall
	if ts.commitOp >= 0 && ts.endCall >= 0 {
		lower = ts.endCall
	}
	if lower >= by {
		return false
	}
	return ts.markersBy < 0 || after < ts.markersBy
}

// sighting is one read_committed fetch's view of one transactional record.
type sighting struct {
	fetch  int
	tp     TP
	offset int64
	value  string
}

// txnView gathers what read_committed fetches showed of one transaction.
type txnView struct {
	shown, hidden *sighting
}

// checkSkips checks every fetch against the records known in its span:
// read_uncommitted returns every data record, read_committed every record
// outside transactions; a transactional record read_committed passed over
// reads as aborted there (noted in views).
func checkSkips(h []Op, ix *histIndex, tp TP, ops []int, l *layout, views map[string]*txnView, rp *reporter) {
	key := tp.String()
	lostAt := map[int64]bool{}
	for _, i := range ops {
		f := &h[i]
		if f.Op != OpFetch || f.Outcome != OutcomeOK {
			continue
		}
		lo, hi := span(f)
		rc := f.Isolation == ReadCommitted
		k := sort.Search(len(l.data), func(x int) bool { return l.data[x].offset >= lo })
		r := 0
		for ; k < len(l.data) && l.data[k].offset < hi; k++ {
			d := l.data[k]
			for r < len(f.Records) && f.Records[r].Offset < d.offset {
				r++
			}
			returned := r < len(f.Records) && f.Records[r].Offset == d.offset
			var p *Op
			if d.op >= 0 {
				p = &h[d.op]
			}
			if p != nil && p.Txn != "" && rc {
				s := &sighting{i, tp, d.offset, d.value}
				v := views[p.Txn]
				if v == nil {
					v = &txnView{}
					views[p.Txn] = v
				}
				if returned && v.shown == nil {
					v.shown = s
				}
				if !returned && v.hidden == nil {
					v.hidden = s
				}
				if !returned && ix.mustBeVisible(p) && !lostAt[d.offset] {
					lostAt[d.offset] = true
					rp.add(Anomaly{Kind: KindLostWrite, Key: key, Txn: p.Txn, Ops: []int{d.op, i},
						Detail: fmt.Sprintf("read_committed fetch passed over offsets %d..%d without %q of committed transaction %s at %d", lo, hi-1, d.value, p.Txn, d.offset)})
				}
				continue
			}
			if returned || lostAt[d.offset] {
				continue
			}
			lostAt[d.offset] = true
			if p != nil && p.Outcome == OutcomeOK && *p.Offset == d.offset {
				rp.add(Anomaly{Kind: KindLostWrite, Key: key, Ops: []int{d.op, i},
					Detail: fmt.Sprintf("fetch passed over offsets %d..%d but skipped %q acknowledged at %d", lo, hi-1, d.value, d.offset)})
				continue
			}
			rp.add(Anomaly{Kind: KindInconsistentOffset, Key: key, Ops: []int{i},
				Detail: fmt.Sprintf("offset %d was read as %q elsewhere but passed over by a fetch of offsets %d..%d", d.offset, d.value, lo, hi-1)})
		}
	}
}

// checkVisibility reports transactions read_committed fetches saw both
// committed and aborted. Kafka decides a transaction once, for every
// partition (TransactionCoordinator writes PrepareCommit or PrepareAbort
// before any marker), and a marker repeated after a crash finds no ongoing
// transaction and changes nothing (ProducerStateManager, KAFKA-19999).
func checkVisibility(h []Op, views map[string]*txnView, rp *reporter) {
	names := make([]string, 0, len(views))
	for n, v := range views {
		if v.shown != nil && v.hidden != nil {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		s, x := views[n].shown, views[n].hidden
		rp.add(Anomaly{Kind: KindMixedOutcome, Key: s.tp.String(), Ops: []int{s.fetch, x.fetch}, Txn: n,
			Detail: fmt.Sprintf("transaction %s read as committed (%q at %s offset %d) and as aborted (%q passed over at %s offset %d)",
				n, s.value, s.tp, s.offset, x.value, x.tp, x.offset)})
	}
}

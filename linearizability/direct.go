package linearizability

import (
	"fmt"
	"sort"
)

// txnState is what the history says about how one transaction ended.
type txnState struct {
	// commitOp is the index of an acknowledged committing end_txn, or -1.
	commitOp int
	// maybeCommitted is set by a committing end_txn of unknown outcome.
	maybeCommitted bool
	// aborted is set by an aborting end_txn that did not certainly fail:
	// an abort that may not have been applied still ends the transaction
	// by timeout, never by commit.
	aborted bool
	// endCall is the earliest call of an end_txn that did not certainly
	// fail, or -1.
	endCall int64
	// endOK is set by an acknowledged end_txn, commit or abort.
	endOK bool
	// client wrote the transaction; firstCall is its first produce's
	// call and okReturn its first acknowledged produce's return (-1 none).
	client    string
	firstCall int64
	okReturn  int64
	// markersBy bounds when the transaction's markers are written: the
	// first acknowledged produce of a later transaction of the same
	// client, which Kafka's coordinator refuses (CONCURRENT_TRANSACTIONS)
	// until the markers are complete; -1 when there is none.
	markersBy int64
}

// GroupKey names one group-partition, the unit of the committed-offset
// register.
type GroupKey struct {
	Group string
	TP
}

// String returns "group/topic-partition".
func (g GroupKey) String() string { return g.Group + "/" + g.TP.String() }

// histIndex groups a history's operation indices for the checkers.
type histIndex struct {
	tps      []TP
	perTP    map[TP][]int
	groups   []GroupKey
	perGroup map[GroupKey][]int
	// produced maps each produced value to its produce op.
	produced map[string]int
	txns     map[string]*txnState
	// layouts holds what each partition's fetches show of its log.
	layouts map[TP]*layout
}

func index(h []Op) (*histIndex, error) {
	ix := &histIndex{
		perTP:    map[TP][]int{},
		perGroup: map[GroupKey][]int{},
		produced: map[string]int{},
		txns:     map[string]*txnState{},
	}
	for i := range h {
		o := &h[i]
		switch o.Op {
		case OpProduce, OpFetch, OpListOffsets:
			tp := o.TP()
			if _, ok := ix.perTP[tp]; !ok {
				ix.tps = append(ix.tps, tp)
			}
			ix.perTP[tp] = append(ix.perTP[tp], i)
			if o.Op == OpProduce {
				if j, dup := ix.produced[o.Value]; dup {
					return nil, fmt.Errorf("%w: value %q produced by lines %d and %d; values must be unique", ErrMalformed, o.Value, j+1, i+1)
				}
				ix.produced[o.Value] = i
				if o.Txn != "" {
					t := ix.txn(o.Txn)
					if t.client == "" || o.CallNs < t.firstCall {
						t.client, t.firstCall = o.Client, o.CallNs
					}
					if o.Outcome == OutcomeOK && (t.okReturn < 0 || o.ReturnNs < t.okReturn) {
						t.okReturn = o.ReturnNs
					}
				}
			}
		case OpCommit, OpFetchCommitted:
			g := GroupKey{o.Group, o.TP()}
			if _, ok := ix.perGroup[g]; !ok {
				ix.groups = append(ix.groups, g)
			}
			ix.perGroup[g] = append(ix.perGroup[g], i)
		case OpEndTxn:
			t := ix.txn(o.Txn)
			if o.Outcome != OutcomeFail && (t.endCall < 0 || o.CallNs < t.endCall) {
				t.endCall = o.CallNs
			}
			t.endOK = t.endOK || o.Outcome == OutcomeOK
			switch {
			case o.Outcome == OutcomeFail:
			case !*o.Commit:
				t.aborted = true
			case o.Outcome == OutcomeOK:
				if t.commitOp < 0 {
					t.commitOp = i
				}
			default:
				t.maybeCommitted = true
			}
		}
	}
	ix.boundMarkers()
	sort.Slice(ix.tps, func(i, j int) bool {
		if ix.tps[i].Topic != ix.tps[j].Topic {
			return ix.tps[i].Topic < ix.tps[j].Topic
		}
		return ix.tps[i].Partition < ix.tps[j].Partition
	})
	sort.Slice(ix.groups, func(i, j int) bool { return ix.groups[i].String() < ix.groups[j].String() })
	ix.layouts = make(map[TP]*layout, len(ix.tps))
	for _, tp := range ix.tps {
		ix.layouts[tp] = buildLayout(h, ix, ix.perTP[tp])
	}
	return ix, nil
}

// boundMarkers sets each transaction's markersBy from the later
// transactions of its client.
func (ix *histIndex) boundMarkers() {
	byClient := map[string][]*txnState{}
	for _, t := range ix.txns {
		if t.client != "" {
			byClient[t.client] = append(byClient[t.client], t)
		}
	}
	for _, ts := range byClient {
		sort.Slice(ts, func(i, j int) bool { return ts[i].firstCall < ts[j].firstCall })
		bound := int64(-1)
		for i := len(ts) - 1; i >= 0; i-- {
			ts[i].markersBy = bound
			if r := ts[i].okReturn; r >= 0 && (bound < 0 || r < bound) {
				bound = r
			}
		}
	}
}

func (ix *histIndex) txn(name string) *txnState {
	t, ok := ix.txns[name]
	if !ok {
		t = &txnState{commitOp: -1, endCall: -1, okReturn: -1, markersBy: -1}
		ix.txns[name] = t
	}
	return t
}

// mustBeVisible reports whether an acknowledged produce must eventually be
// readable: it is outside a transaction, or its transaction was committed.
func (ix *histIndex) mustBeVisible(o *Op) bool {
	if o.Txn == "" {
		return true
	}
	t := ix.txns[o.Txn]
	return t != nil && t.commitOp >= 0 && !t.aborted
}

type binding struct {
	value string
	op    int
}

// checkDirect runs every single-pass check, one topic-partition at a time.
func checkDirect(h []Op, ix *histIndex, opt Options, rp *reporter) {
	views := map[string]*txnView{}
	for _, tp := range ix.tps {
		checkPartition(h, ix, tp, ix.perTP[tp], rp)
		checkSkips(h, ix, tp, ix.perTP[tp], ix.layouts[tp], views, rp)
		checkMarkers(h, ix, tp, ix.perTP[tp], ix.layouts[tp], rp)
	}
	checkVisibility(h, views, rp)
	for _, g := range ix.groups {
		checkCommits(h, g, ix.perGroup[g], opt.StaleReads, rp)
	}
	checkOwners(h, rp)
}

func checkPartition(h []Op, ix *histIndex, tp TP, ops []int, rp *reporter) {
	key := tp.String()
	acked := map[int64]binding{}      // offset -> acknowledged value
	readAt := map[int64]binding{}     // offset -> first value read there
	offsetsOf := map[string][]int64{} // value -> distinct offsets observed
	firstOp := map[string]int{}       // value -> first op observing it
	read := map[string]bool{}         // values returned by some fetch
	maxRead := int64(-1)
	reportedOffset := map[int64]bool{}
	observe := func(v string, off int64, op int) {
		for _, o := range offsetsOf[v] {
			if o == off {
				return
			}
		}
		if len(offsetsOf[v]) == 0 {
			firstOp[v] = op
		}
		offsetsOf[v] = append(offsetsOf[v], off)
	}

	for _, i := range ops {
		o := &h[i]
		if o.Op != OpProduce || o.Outcome != OutcomeOK {
			continue
		}
		off := *o.Offset
		if b, ok := acked[off]; ok && b.value != o.Value {
			rp.add(Anomaly{Kind: KindInconsistentOffset, Key: key, Ops: []int{b.op, i},
				Detail: fmt.Sprintf("offset %d acknowledged for %q and %q", off, b.value, o.Value)})
			reportedOffset[off] = true
		} else if !ok {
			acked[off] = binding{o.Value, i}
		}
		observe(o.Value, off, i)
	}

	for _, i := range ops {
		o := &h[i]
		if o.Op != OpFetch || o.Outcome != OutcomeOK {
			continue
		}
		prev := *o.From - 1
		for _, r := range o.Records {
			if r.Offset <= prev {
				rp.add(Anomaly{Kind: KindNonMonotonicFetch, Key: key, Ops: []int{i},
					Detail: fmt.Sprintf("fetch from %d returned offset %d after %d", *o.From, r.Offset, prev)})
				break
			}
			prev = r.Offset
		}
		for _, r := range o.Records {
			read[r.Value] = true
			if r.Offset > maxRead {
				maxRead = r.Offset
			}
			observe(r.Value, r.Offset, i)
			if b, ok := readAt[r.Offset]; !ok {
				readAt[r.Offset] = binding{r.Value, i}
			} else if b.value != r.Value && !reportedOffset[r.Offset] {
				reportedOffset[r.Offset] = true
				rp.add(Anomaly{Kind: KindInconsistentOffset, Key: key, Ops: []int{b.op, i},
					Detail: fmt.Sprintf("offset %d read as %q and as %q", r.Offset, b.value, r.Value)})
			}
			checkReadRecord(h, ix, tp, i, r, acked, rp)
		}
	}

	// Duplicates, in a stable order.
	var dupValues []string
	for v, offs := range offsetsOf {
		if len(offs) > 1 {
			dupValues = append(dupValues, v)
		}
	}
	sort.Strings(dupValues)
	for _, v := range dupValues {
		offs := append([]int64(nil), offsetsOf[v]...)
		sort.Slice(offs, func(a, b int) bool { return offs[a] < offs[b] })
		rp.add(Anomaly{Kind: KindDuplicate, Key: key, Ops: []int{firstOp[v]},
			Detail: fmt.Sprintf("value %q at offsets %v", v, offs)})
	}

	checkLost(h, ix, key, ops, read, maxRead, rp)
}

// checkReadRecord checks one record a fetch returned against what was
// written: the value exists in this partition, its produce did not fail,
// it sits where it was acknowledged, and under read_committed its
// transaction had committed.
func checkReadRecord(h []Op, ix *histIndex, tp TP, fetch int, r Record, acked map[int64]binding, rp *reporter) {
	key := tp.String()
	f := &h[fetch]
	pi, ok := ix.produced[r.Value]
	if !ok {
		rp.add(Anomaly{Kind: KindWrongRead, Key: key, Ops: []int{fetch},
			Detail: fmt.Sprintf("offset %d returned %q, which no produce wrote", r.Offset, r.Value)})
		return
	}
	p := &h[pi]
	if p.TP() != tp {
		rp.add(Anomaly{Kind: KindWrongRead, Key: key, Ops: []int{fetch, pi},
			Detail: fmt.Sprintf("offset %d returned %q, which was written to %s", r.Offset, r.Value, p.TP())})
		return
	}
	if p.Outcome == OutcomeFail {
		rp.add(Anomaly{Kind: KindWrongRead, Key: key, Ops: []int{fetch, pi},
			Detail: fmt.Sprintf("offset %d returned %q, whose produce certainly failed", r.Offset, r.Value)})
	}
	if b, ok := acked[r.Offset]; ok && b.value != r.Value {
		rp.add(Anomaly{Kind: KindWrongRead, Key: key, Ops: []int{fetch, b.op},
			Detail: fmt.Sprintf("offset %d returned %q but %q was acknowledged there", r.Offset, r.Value, b.value)})
	}
	if p.Txn == "" || f.Isolation != ReadCommitted {
		return
	}
	t := ix.txns[p.Txn]
	switch {
	case t != nil && t.aborted:
		rp.add(Anomaly{Kind: KindAbortedRead, Key: key, Ops: []int{fetch, pi}, Txn: p.Txn,
			Detail: fmt.Sprintf("read_committed fetch returned %q of aborted transaction %s", r.Value, p.Txn)})
	case t == nil || (t.commitOp < 0 && !t.maybeCommitted):
		rp.add(Anomaly{Kind: KindOpenTxnRead, Key: key, Ops: []int{fetch, pi},
			Detail: fmt.Sprintf("read_committed fetch returned %q of transaction %s, which never committed", r.Value, p.Txn)})
	case t.commitOp >= 0 && f.ReturnNs < h[t.commitOp].CallNs:
		rp.add(Anomaly{Kind: KindOpenTxnRead, Key: key, Ops: []int{fetch, pi, t.commitOp},
			Detail: fmt.Sprintf("read_committed fetch returned %q of transaction %s before its commit was sent", r.Value, p.Txn)})
	}
}

// checkLost reports acknowledged, visible writes missing from reads. As in
// Jepsen's Kafka checker, a write is lost when a later offset was read but
// the write never was. A write a fetch passed over is checkSkips' finding.
func checkLost(h []Op, ix *histIndex, key string, ops []int, read map[string]bool, maxRead int64, rp *reporter) {
	for _, i := range ops {
		o := &h[i]
		if o.Op != OpProduce || o.Outcome != OutcomeOK || !ix.mustBeVisible(o) {
			continue
		}
		off := *o.Offset
		switch {
		case !read[o.Value] && off < maxRead:
			rp.add(Anomaly{Kind: KindLostWrite, Key: key, Ops: []int{i},
				Detail: fmt.Sprintf("%q acknowledged at offset %d never read, though offset %d was", o.Value, off, maxRead)})
		case !read[o.Value]:
			rp.add(Anomaly{Kind: KindUnseen, Key: key, Ops: []int{i},
				Detail: fmt.Sprintf("%q acknowledged at offset %d never read", o.Value, off)})
		}
	}
}

// checkCommits reports committed offsets that go backwards: a
// fetch_committed that returned a lower offset than one that completed
// before it began, when no commit of the lower offset could have been
// linearized between them.
func checkCommits(h []Op, g GroupKey, ops []int, stale bool, rp *reporter) {
	commitsOf := map[int64][]int{}
	var reads []int
	for _, i := range ops {
		o := &h[i]
		switch {
		case o.Op == OpCommit && o.Outcome != OutcomeFail:
			commitsOf[*o.Offset] = append(commitsOf[*o.Offset], i)
		case o.Op == OpFetchCommitted && o.Outcome == OutcomeOK:
			reads = append(reads, i)
		}
	}
	byReturn := append([]int(nil), reads...)
	sort.Slice(byReturn, func(a, b int) bool { return h[byReturn[a]].ReturnNs < h[byReturn[b]].ReturnNs })
	byCall := append([]int(nil), reads...)
	sort.Slice(byCall, func(a, b int) bool { return h[byCall[a]].CallNs < h[byCall[b]].CallNs })
	best := -1 // the highest read among those returned so far
	k := 0
	for _, bi := range byCall {
		b := &h[bi]
		for k < len(byReturn) && h[byReturn[k]].ReturnNs < b.CallNs {
			if best < 0 || *h[byReturn[k]].Offset > *h[best].Offset {
				best = byReturn[k]
			}
			k++
		}
		if best < 0 || *b.Offset >= *h[best].Offset {
			continue
		}
		a := &h[best]
		explained := false
		for _, ci := range commitsOf[*b.Offset] {
			c := &h[ci]
			if c.CallNs <= b.ReturnNs && (c.Outcome == OutcomeUnknown || c.ReturnNs >= a.CallNs) {
				explained = true
				break
			}
		}
		if !explained && stale {
			// A later read at or past the higher offset shows the
			// commit was not lost.
			for _, ci := range byCall {
				if c := &h[ci]; c.CallNs > b.ReturnNs && *c.Offset >= *a.Offset {
					explained = true
					rp.add(Anomaly{Kind: KindStaleCommitRead, Key: g.String(), Ops: []int{best, bi, ci},
						Detail: fmt.Sprintf("committed offset read as %d after %d was read, and as %d again later", *b.Offset, *a.Offset, *c.Offset)})
					break
				}
			}
		}
		if !explained {
			rp.add(Anomaly{Kind: KindCommitBackwards, Key: g.String(), Ops: []int{best, bi},
				Detail: fmt.Sprintf("committed offset read as %d after %d was read, with no commit of %d in between", *b.Offset, *a.Offset, *b.Offset)})
		}
	}
}

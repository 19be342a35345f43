package linearizability

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// The porcupine model. A topic-partition is a log whose compact state is
// the next offset and a running hash of the values appended in order (of
// the values whose offset is known: acknowledged or read); a group-partition
// is a register holding the committed offset (-1 for none).
//
// Offsets are dense: an acknowledged produce must land exactly at the next
// offset, and a fetch's high watermark or list_offsets latest must equal it.
// Transaction markers take offsets the history does not name; the direct
// checks read them off the fetches (txn.go's layout), and each offset a
// fetch passed over without a data record becomes a fill step at that
// fixed offset, placed between the last produce called below it and the
// first operation that proves it existed. In a partition with
// transactions, offsets below the known end that nothing shows are filled
// the same way (a marker or a record nobody read: either takes the
// offset). Fixed offsets keep the state deterministic, where a marker step
// of free offset and time per transaction would make the search grow with
// every transaction left undecided. Which transaction wrote a marker, and
// when it may have, is the direct check's (checkMarkers).

const (
	stepProduce = iota
	stepFill
	stepFetch
	stepLatest
	stepEarliest
	stepCommit
	stepFetchCommitted
)

// step is the porcupine input of one operation; the output is unused
// because every observed value is carried here.
type step struct {
	kind  int
	value string
	// offset is the acknowledged offset of a produce (-1 when unknown), the
	// high watermark of a fetch, the answer of list_offsets, or the offset
	// of a commit or fetch_committed.
	offset int64
	// maybe marks an operation of unknown outcome that may not have
	// happened.
	maybe bool
	// full marks a fetch that returned the whole log [0, offset), whose
	// values hash to fullHash.
	full     bool
	fullHash uint64
	// stale lets a fetch's high watermark or a latest offset trail the
	// log (Options.StaleReads).
	stale bool
}

type logState struct {
	next int64
	hash uint64
}

func mix(h uint64, v string) uint64 {
	f := fnv.New64a()
	var b [8]byte
	for i := range b {
		b[i] = byte(h >> (8 * i))
	}
	f.Write(b[:])
	f.Write([]byte(v))
	return f.Sum64()
}

func stepLog(s logState, in *step) []interface{} {
	switch in.kind {
	case stepProduce:
		off := in.offset
		if off < 0 {
			// An unknown produce nobody read may have taken the next
			// offset. No fetch returned its value, so it adds nothing to
			// the hash of readable values; leaving it out keeps the state
			// set linear rather than one state per subset of such
			// produces.
			return []interface{}{s, logState{s.next + 1, s.hash}}
		}
		if off != s.next {
			return nil
		}
		return []interface{}{logState{off + 1, mix(s.hash, in.value)}}
	case stepFill:
		if in.offset != s.next {
			return nil
		}
		return []interface{}{logState{s.next + 1, s.hash}}
	case stepFetch, stepLatest:
		if in.stale && in.offset < s.next {
			return []interface{}{s}
		}
		if in.offset != s.next || (in.full && in.fullHash != s.hash) {
			return nil
		}
		return []interface{}{s}
	case stepEarliest:
		if in.offset < 0 || in.offset > s.next {
			return nil
		}
		return []interface{}{s}
	}
	return nil
}

// staleDepth is how many of a committed offset's latest values a read
// may return under Options.StaleReads: the current one or one of the
// values it had before.
const staleDepth = 32

// staleRegister is a committed offset under Options.StaleReads: its value
// now first, then the values it had before, latest first; -1 is none.
type staleRegister [staleDepth]int64

func stepStaleRegister(s staleRegister, in *step) []interface{} {
	switch in.kind {
	case stepCommit:
		next := staleRegister{in.offset}
		copy(next[1:], s[:staleDepth-1])
		if in.maybe {
			return []interface{}{s, next}
		}
		return []interface{}{next}
	case stepFetchCommitted:
		for _, v := range s {
			if v == in.offset {
				return []interface{}{s}
			}
		}
	}
	return nil
}

func stepRegister(s int64, in *step) []interface{} {
	switch in.kind {
	case stepCommit:
		if in.maybe {
			return []interface{}{s, in.offset}
		}
		return []interface{}{in.offset}
	case stepFetchCommitted:
		if s != in.offset {
			return nil
		}
		return []interface{}{s}
	}
	return nil
}

var model = porcupine.NondeterministicModel{
	Init: func() []interface{} { return []interface{}{nil} },
	Step: func(state, input, _ interface{}) []interface{} {
		in := input.(*step)
		switch s := state.(type) {
		case nil:
			if (in.kind == stepCommit || in.kind == stepFetchCommitted) && in.stale {
				var none staleRegister
				for i := range none {
					none[i] = -1
				}
				return stepStaleRegister(none, in)
			}
			if in.kind == stepCommit || in.kind == stepFetchCommitted {
				return stepRegister(-1, in)
			}
			return stepLog(logState{}, in)
		case logState:
			return stepLog(s, in)
		case int64:
			return stepRegister(s, in)
		case staleRegister:
			return stepStaleRegister(s, in)
		}
		return nil
	},
	Equal: func(a, b interface{}) bool { return a == b },
	Hash: func(state interface{}) uint64 {
		switch s := state.(type) {
		case logState:
			return uint64(s.next)*0x9e3779b97f4a7c15 ^ s.hash
		case int64:
			return uint64(s)
		case staleRegister:
			var h uint64
			for _, v := range s {
				h = h*0x9e3779b97f4a7c15 ^ uint64(v)
			}
			return h
		}
		return 0
	},
	DescribeOperation: func(input, _ interface{}) string {
		in := input.(*step)
		maybe := ""
		if in.maybe {
			maybe = "?"
		}
		switch in.kind {
		case stepFill:
			return fmt.Sprintf("marker or unread record at %d", in.offset)
		case stepProduce:
			if in.offset < 0 {
				return fmt.Sprintf("produce%s(%s)", maybe, in.value)
			}
			return fmt.Sprintf("produce%s(%s) -> %d", maybe, in.value, in.offset)
		case stepFetch:
			return fmt.Sprintf("fetch -> hw %d", in.offset)
		case stepLatest:
			return fmt.Sprintf("list_offsets latest -> %d", in.offset)
		case stepEarliest:
			return fmt.Sprintf("list_offsets earliest -> %d", in.offset)
		case stepCommit:
			return fmt.Sprintf("commit%s(%d)", maybe, in.offset)
		case stepFetchCommitted:
			return fmt.Sprintf("fetch_committed -> %d", in.offset)
		}
		return "?"
	},
	DescribeState: func(state interface{}) string {
		switch s := state.(type) {
		case logState:
			return fmt.Sprintf("next=%d hash=%016x", s.next, s.hash)
		case int64:
			return fmt.Sprintf("committed=%d", s)
		case staleRegister:
			return fmt.Sprintf("committed=%d (before: %v)", s[0], s[1:])
		}
		return "empty"
	},
}

// Model returns the porcupine model Check uses, for callers that drive
// porcupine themselves (visualization of a stored partition).
func Model() porcupine.Model { return model.ToModel() }

// partitionHistory converts the operations of one topic-partition (with its
// layout l) or group-partition (l nil) into porcupine operations.
// Operations of unknown outcome return at end (after every other
// operation).
func partitionHistory(h []Op, l *layout, ops []int, end int64, stale bool) []porcupine.Operation {
	clients := map[string]int{}
	clientID := func(c string) int {
		id, ok := clients[c]
		if !ok {
			id = len(clients)
			clients[c] = id
		}
		return id
	}
	readOffset := map[string]int64{}
	readCommitted := map[int64]bool{}
	unread := 0 // produces of unknown outcome whose value no fetch returned
	for _, i := range ops {
		o := &h[i]
		if o.Op == OpFetch && o.Outcome == OutcomeOK {
			for _, r := range o.Records {
				if _, ok := readOffset[r.Value]; !ok {
					readOffset[r.Value] = r.Offset
				}
			}
		}
		if o.Op == OpFetchCommitted && o.Outcome == OutcomeOK {
			readCommitted[*o.Offset] = true
		}
	}
	for _, i := range ops {
		if o := &h[i]; o.Op == OpProduce && o.Outcome == OutcomeUnknown {
			if _, ok := readOffset[o.Value]; !ok {
				unread++
			}
		}
	}
	// Filling the offsets nothing names (holes) stands for the unread
	// produces of unknown outcome: on a partition without transactions
	// only those can have taken them, so there must be enough of them.
	// When there are not, the produces are searched for instead, and a
	// read past what could have been written fails.
	fillHoles := l != nil && l.complete && (l.hasTxn || len(l.holes) <= unread)
	var out []porcupine.Operation
	for _, i := range ops {
		o := &h[i]
		if o.Outcome == OutcomeFail {
			continue
		}
		in := &step{offset: -1, stale: stale}
		ret := o.ReturnNs
		switch o.Op {
		case OpProduce:
			in.kind, in.value = stepProduce, o.Value
			if o.Outcome == OutcomeOK {
				in.offset = *o.Offset
			} else {
				ret = end
				in.maybe = true
				// A value some fetch returned certainly happened, at the
				// offset it was read at. One nobody read changed nothing
				// an operation observed but the offsets it may have taken,
				// and the layout fills every offset below what the log is
				// known to have reached: searching for it adds only one
				// branch per such produce.
				off, ok := readOffset[o.Value]
				if !ok && fillHoles {
					continue
				}
				if ok {
					in.offset = off
				}
			}
		case OpFetch:
			if o.Outcome != OutcomeOK || o.HighWatermark == nil {
				continue
			}
			in.kind, in.offset = stepFetch, *o.HighWatermark
			if l != nil && !l.hasTxn && *o.From == 0 && int64(len(o.Records)) == in.offset {
				in.full = true
				var hs uint64
				for k, r := range o.Records {
					if r.Offset != int64(k) {
						in.full = false
						break
					}
					hs = mix(hs, r.Value)
				}
				in.fullHash = hs
			}
		case OpListOffsets:
			if o.Outcome != OutcomeOK {
				continue
			}
			in.kind, in.offset = stepLatest, *o.Offset
			if o.Kind == KindEarliest {
				in.kind = stepEarliest
			}
		case OpCommit:
			in.kind, in.offset = stepCommit, *o.Offset
			if o.Outcome == OutcomeUnknown {
				// A commit of unknown outcome may take effect after
				// every other operation, where nothing reads it: unless
				// some read returned its offset, leaving it out changes
				// no verdict and spares the search a branch.
				if !readCommitted[in.offset] {
					continue
				}
				in.maybe, ret = true, end
			}
		case OpFetchCommitted:
			if o.Outcome != OutcomeOK {
				continue
			}
			in.kind, in.offset = stepFetchCommitted, *o.Offset
		default:
			continue
		}
		out = append(out, porcupine.Operation{ClientId: clientID(o.Client), Input: in, Call: o.CallNs, Return: ret})
	}
	if l == nil {
		return out
	}
	fill := func(off int64) {
		// The entry at off was appended after every produce below it
		// was called, and before the first operation proving it existed
		// returned.
		call, ret := l.appendedAfter(off), min(l.existedBy(off), end)
		call = min(max(call, 0), ret)
		out = append(out, porcupine.Operation{ClientId: clientID("log"), Input: &step{kind: stepFill, offset: off}, Call: call, Return: ret})
	}
	for _, g := range l.gaps {
		fill(g.offset)
	}
	if fillHoles || l.hasTxn {
		for _, off := range l.holes {
			fill(off)
		}
	}
	return out
}

type linJob struct {
	key string
	ops []porcupine.Operation
}

// checkLinearizable runs porcupine on every topic-partition and
// group-partition in parallel, bounded by timeout overall.
func checkLinearizable(h []Op, ix *histIndex, opt Options, rp *reporter) {
	timeout := opt.Timeout
	var end int64
	for i := range h {
		if h[i].ReturnNs >= end {
			end = h[i].ReturnNs + 1
		}
	}
	var jobs []linJob
	for _, tp := range ix.tps {
		jobs = append(jobs, linJob{tp.String(), partitionHistory(h, ix.layouts[tp], ix.perTP[tp], end, opt.StaleReads)})
	}
	for _, g := range ix.groups {
		jobs = append(jobs, linJob{g.String(), partitionHistory(h, nil, ix.perGroup[g], end, opt.StaleReads)})
	}
	results := make([]porcupine.CheckResult, len(jobs))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	m := model.ToModel()
	for i := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			dl, _ := ctx.Deadline()
			left := time.Until(dl)
			if left <= 0 {
				results[i] = porcupine.Unknown
				return
			}
			results[i] = porcupine.CheckOperationsTimeout(m, jobs[i].ops, left)
		}()
	}
	wg.Wait()
	rp.r.Linearizability = map[string]string{}
	for i, j := range jobs {
		rp.r.Linearizability[j.key] = string(results[i])
		switch results[i] {
		case porcupine.Illegal:
			if rp.r.Failing == "" {
				rp.r.Failing = j.key
			}
			rp.add(Anomaly{Kind: KindNotLinearizable, Key: j.key,
				Detail: fmt.Sprintf("%d operations have no linearization consistent with real-time order", len(j.ops))})
		case porcupine.Unknown:
			rp.add(Anomaly{Kind: KindLinearizabilityUnknown, Key: j.key,
				Detail: fmt.Sprintf("porcupine did not decide %d operations within %v", len(j.ops), timeout)})
		}
	}
}

// Visualize runs porcupine verbosely on the operations of key (a
// "topic-partition" or "group/topic-partition", as in Report.Failing) and
// writes its HTML visualization to w.
func Visualize(h []Op, key string, opt Options, w io.Writer) error {
	ix, err := index(h)
	if err != nil {
		return err
	}
	var end int64
	for i := range h {
		if h[i].ReturnNs >= end {
			end = h[i].ReturnNs + 1
		}
	}
	var ops []int
	var l *layout
	for _, tp := range ix.tps {
		if tp.String() == key {
			ops, l = ix.perTP[tp], ix.layouts[tp]
		}
	}
	for _, g := range ix.groups {
		if g.String() == key {
			ops = ix.perGroup[g]
		}
	}
	if ops == nil {
		keys := make([]string, 0, len(ix.tps)+len(ix.groups))
		for _, tp := range ix.tps {
			keys = append(keys, tp.String())
		}
		for _, g := range ix.groups {
			keys = append(keys, g.String())
		}
		sort.Strings(keys)
		return fmt.Errorf("no partition %q in history (have %v)", key, keys)
	}
	m := model.ToModel()
	_, info := porcupine.CheckOperationsVerbose(m, partitionHistory(h, l, ops, end, opt.StaleReads), opt.Timeout)
	return porcupine.Visualize(m, info, w)
}

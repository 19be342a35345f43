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
// Transaction markers take offsets the history does not show, so each
// transaction that wrote (or tried to write) to a partition contributes one
// marker step there, which may happen at any time after its end_txn was
// sent, or not at all within the history: as in Kafka's
// TransactionCoordinator, markers are written after EndTxn is answered.
// Unless the transaction's end_txn is an acknowledged commit, the marker may
// also be an abort the coordinator wrote on its own any time after the
// transaction's first produce there: on timeout
// (TransactionCoordinator.abortTimedOutTransactions) or when a new producer
// with the same transactional.id fences it (KIP-360). A marker is certain
// once the client's next transaction has an acknowledged produce, which the
// coordinator allows only after the markers are written.
//
// A transaction with an end_txn whose markers are not known complete may
// have its marker step write the marker twice (two offsets): a broker
// killed just after EndTxn may write it again on recovery, which Kafka's
// ProducerAppendInfo accepts (a marker for an epoch whose transaction
// already ended, KAFKA-19999). Both copies are placed at the one step. A
// certain marker (the client's next transaction was acknowledged) is
// written once: the coordinator completes the transaction, and lets the
// next one write, only after its markers, duplicates included, are in.
// Allowing a second copy there too makes porcupine's search blow up on
// long histories.

const (
	stepProduce = iota
	stepMarker
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
	// again lets a marker step write its marker twice (two offsets).
	again bool
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
	case stepMarker:
		next := []interface{}{logState{s.next + 1, s.hash}}
		if in.again {
			next = append(next, logState{s.next + 2, s.hash})
		}
		if in.maybe {
			next = append(next, s)
		}
		return next
	case stepFetch, stepLatest:
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
			if in.kind == stepCommit || in.kind == stepFetchCommitted {
				return stepRegister(-1, in)
			}
			return stepLog(logState{}, in)
		case logState:
			return stepLog(s, in)
		case int64:
			return stepRegister(s, in)
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
		case stepMarker:
			return "txn marker?"
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
		}
		return "empty"
	},
}

// Model returns the porcupine model Check uses, for callers that drive
// porcupine themselves (visualization of a stored partition).
func Model() porcupine.Model { return model.ToModel() }

// partitionHistory converts the operations of one topic-partition or
// group-partition into porcupine operations. Operations of unknown outcome
// return at end (after every other operation).
func partitionHistory(h []Op, ix *histIndex, ops []int, end int64) []porcupine.Operation {
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
	// firstHere is, per transaction writing here, its first produce's call
	// in this partition, in first-seen order in txns.
	firstHere := map[string]int64{}
	var txns []string
	okHere := map[string]bool{}
	for _, i := range ops {
		o := &h[i]
		if o.Op == OpProduce && o.Txn != "" {
			okHere[o.Txn] = okHere[o.Txn] || o.Outcome == OutcomeOK
			at, seen := firstHere[o.Txn]
			if !seen {
				txns = append(txns, o.Txn)
			}
			if !seen || o.CallNs < at {
				firstHere[o.Txn] = o.CallNs
			}
		}
		if o.Op == OpFetch && o.Outcome == OutcomeOK {
			for _, r := range o.Records {
				if _, ok := readOffset[r.Value]; !ok {
					readOffset[r.Value] = r.Offset
				}
			}
		}
	}
	var out []porcupine.Operation
	for _, i := range ops {
		o := &h[i]
		if o.Outcome == OutcomeFail {
			continue
		}
		in := &step{offset: -1}
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
				// offset it was read at.
				if off, ok := readOffset[o.Value]; ok {
					in.offset = off
				}
			}
		case OpFetch:
			if o.Outcome != OutcomeOK || o.HighWatermark == nil {
				continue
			}
			in.kind, in.offset = stepFetch, *o.HighWatermark
			if len(txns) == 0 && *o.From == 0 && int64(len(o.Records)) == in.offset {
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
	for _, name := range txns {
		// A marker is certain, and due by markersBy, when the transaction
		// ended with an acknowledged end_txn, wrote here, and its client
		// later began another transaction.
		t, in, ret := ix.txns[name], &step{kind: stepMarker, value: name, offset: -1, maybe: true}, end
		if t.endOK && okHere[name] && t.markersBy >= 0 {
			in.maybe, ret = false, t.markersBy
		}
		// Only an acknowledged commit rules out a coordinator's abort
		// before end_txn was sent.
		call := firstHere[name]
		if t.commitOp >= 0 && t.endCall >= 0 {
			call = t.endCall
		}
		// A duplicate follows an end_txn; see the model's comment for
		// why certain markers are written once.
		in.again = t.endCall >= 0 && in.maybe
		out = append(out, porcupine.Operation{ClientId: clientID("txn-coordinator"), Input: in, Call: call, Return: ret})
	}
	return out
}

type linJob struct {
	key string
	ops []porcupine.Operation
}

// checkLinearizable runs porcupine on every topic-partition and
// group-partition in parallel, bounded by timeout overall.
func checkLinearizable(h []Op, ix *histIndex, timeout time.Duration, rp *reporter) {
	var end int64
	for i := range h {
		if h[i].ReturnNs >= end {
			end = h[i].ReturnNs + 1
		}
	}
	var jobs []linJob
	for _, tp := range ix.tps {
		jobs = append(jobs, linJob{tp.String(), partitionHistory(h, ix, ix.perTP[tp], end)})
	}
	for _, g := range ix.groups {
		jobs = append(jobs, linJob{g.String(), partitionHistory(h, ix, ix.perGroup[g], end)})
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
func Visualize(h []Op, key string, timeout time.Duration, w io.Writer) error {
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
	for _, tp := range ix.tps {
		if tp.String() == key {
			ops = ix.perTP[tp]
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
	_, info := porcupine.CheckOperationsVerbose(m, partitionHistory(h, ix, ops, end), timeout)
	return porcupine.Visualize(m, info, w)
}

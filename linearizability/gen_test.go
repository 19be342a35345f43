package linearizability

import (
	"fmt"
	"math/rand/v2"
	"sort"
)

// genConfig shapes a generated history.
type genConfig struct {
	seed       uint64
	ops        int
	partitions int
	clients    int
	// txnClients of the clients write transactionally.
	txnClients int
	// unknownRate is the probability that a produce or commit has an
	// unknown outcome (half of them applied); failRate that it fails.
	unknownRate, failRate float64
}

// genEntry is one slot of the simulated log.
type genEntry struct {
	value   string
	txn     string
	control bool
}

type genPartition struct {
	log     []genEntry
	open    map[string]int64 // open transaction -> first offset here
	aborted map[string]bool
}

func (p *genPartition) lso() int64 {
	lso := int64(len(p.log))
	for _, first := range p.open {
		if first < lso {
			lso = first
		}
	}
	return lso
}

type genShell struct {
	op     Op
	linNs  int64
	client int
	// applied decides whether an unknown-outcome operation took effect.
	applied bool
	// txnParts lists the partitions an end_txn marks.
	txnParts []int32
	full     bool
	// markers is how many copies of its marker an end_txn writes per
	// partition (a coordinator recovering in PrepareCommit or
	// PrepareAbort writes them again, KAFKA-19999).
	markers int
	// hidden leaves the operation out of the history: an end_txn that
	// is the coordinator's own abort (the client was replaced).
	hidden bool
	// abortInstead applies an end_txn as an abort: the coordinator
	// aborted on timeout and the client's commit failed.
	abortInstead bool
}

// generate simulates a single-node Kafka log with concurrent clients and
// returns a history that is valid by construction: every operation's output
// is computed at a linearization point between its call and return, in the
// order of those points.
func generate(c genConfig) []Op {
	rng := rand.New(rand.NewPCG(c.seed, c.seed^0x5eed))
	// trng draws the transactional variations, so that rng's stream, and
	// the histories tests plant anomalies in, stay as they were.
	trng := rand.New(rand.NewPCG(c.seed, 0x7e4))
	var shells []*genShell
	valueN := 0
	for cl := 0; cl < c.clients; cl++ {
		name := fmt.Sprintf("c%d", cl)
		txnClient := cl < c.txnClients
		isolation := ReadUncommitted
		if cl%2 == 1 {
			isolation = ReadCommitted
		}
		t := int64(rng.IntN(100))
		n := c.ops / c.clients
		txnN := 0
		for k := 0; k < n; {
			add := func(o Op) *genShell {
				call := t
				lin := call + 1 + int64(rng.IntN(100))
				ret := lin + 1 + int64(rng.IntN(100))
				t = ret + int64(rng.IntN(50))
				o.Client, o.CallNs, o.ReturnNs, o.Outcome = name, call, ret, OutcomeOK
				s := &genShell{op: o, linNs: lin, client: cl}
				shells = append(shells, s)
				k++
				return s
			}
			p := int32(rng.IntN(c.partitions))
			if txnClient {
				txnN++
				txn := fmt.Sprintf("%s-tx%d", name, txnN)
				parts := map[int32]bool{}
				for j := 0; j < 1+rng.IntN(3); j++ {
					p := int32(rng.IntN(c.partitions))
					parts[p] = true
					valueN++
					add(Op{Op: OpProduce, Topic: "t", Partition: p, Value: fmt.Sprintf("v%d", valueN), Txn: txn})
				}
				e := add(Op{Op: OpEndTxn, Txn: txn, Commit: Bool(rng.IntN(4) != 0)})
				e.markers = 1 + trng.IntN(3)/2
				switch trng.IntN(8) {
				case 0:
					e.hidden, *e.op.Commit = true, false
				case 1:
					e.abortInstead, *e.op.Commit, e.op.Outcome = true, true, OutcomeUnknown
				}
				for p := range parts {
					e.txnParts = append(e.txnParts, p)
				}
				sort.Slice(e.txnParts, func(a, b int) bool { return e.txnParts[a] < e.txnParts[b] })
				continue
			}
			switch r := rng.IntN(20); {
			case r < 9:
				valueN++
				s := add(Op{Op: OpProduce, Topic: "t", Partition: p, Value: fmt.Sprintf("v%d", valueN)})
				switch x := rng.Float64(); {
				case x < c.unknownRate:
					s.op.Outcome, s.applied = OutcomeUnknown, rng.IntN(2) == 0
				case x < c.unknownRate+c.failRate:
					s.op.Outcome = OutcomeFail
				}
			case r < 15:
				s := add(Op{Op: OpFetch, Topic: "t", Partition: p, Isolation: isolation})
				s.full = c.txnClients == 0 && rng.IntN(50) == 0
			case r < 16:
				kind := KindLatest
				if rng.IntN(4) == 0 {
					kind = KindEarliest
				}
				add(Op{Op: OpListOffsets, Topic: "t", Partition: p, Kind: kind})
			case r < 18:
				s := add(Op{Op: OpCommit, Group: "g", Topic: "t", Partition: p})
				if rng.Float64() < c.unknownRate {
					s.op.Outcome, s.applied = OutcomeUnknown, rng.IntN(2) == 0
				}
			default:
				add(Op{Op: OpFetchCommitted, Group: "g", Topic: "t", Partition: p})
			}
		}
	}
	sort.SliceStable(shells, func(i, j int) bool { return shells[i].linNs < shells[j].linNs })

	parts := make([]*genPartition, c.partitions)
	for i := range parts {
		parts[i] = &genPartition{open: map[string]int64{}, aborted: map[string]bool{}}
	}
	pos := make([]map[int32]int64, c.clients)
	for i := range pos {
		pos[i] = map[int32]int64{}
	}
	committed := map[int32]int64{}
	for _, s := range shells {
		o := &s.op
		part := parts[o.Partition]
		switch o.Op {
		case OpProduce:
			if o.Outcome == OutcomeFail || (o.Outcome == OutcomeUnknown && !s.applied) {
				continue
			}
			off := int64(len(part.log))
			part.log = append(part.log, genEntry{value: o.Value, txn: o.Txn})
			if o.Txn != "" {
				if _, ok := part.open[o.Txn]; !ok {
					part.open[o.Txn] = off
				}
			}
			if o.Outcome == OutcomeOK {
				o.Offset = Int64(off)
			}
		case OpEndTxn:
			for _, p := range s.txnParts {
				part := parts[p]
				delete(part.open, o.Txn)
				if !*o.Commit || s.abortInstead {
					part.aborted[o.Txn] = true
				}
				for range s.markers {
					part.log = append(part.log, genEntry{txn: o.Txn, control: true})
				}
			}
		case OpFetch:
			from := pos[s.client][o.Partition]
			limit := 1 + rng.IntN(30)
			if s.full {
				from, limit = 0, len(part.log)+1
			}
			o.From = Int64(from)
			end := int64(len(part.log))
			if o.Isolation == ReadCommitted {
				end = part.lso()
			}
			next := from
			for off := from; off < end && len(o.Records) < limit; off++ {
				e := part.log[off]
				next = off + 1
				if e.control || (o.Isolation == ReadCommitted && part.aborted[e.txn]) {
					continue
				}
				o.Records = append(o.Records, Record{Offset: off, Value: e.value})
			}
			if !s.full {
				pos[s.client][o.Partition] = next
			}
			if s.client%3 != 0 {
				// Some clients record where they continue, as the
				// fault suite's do.
				o.Next = Int64(next)
			}
			o.HighWatermark = Int64(int64(len(part.log)))
		case OpListOffsets:
			if o.Kind == KindEarliest {
				o.Offset = Int64(0)
			} else {
				o.Offset = Int64(int64(len(part.log)))
			}
		case OpCommit:
			o.Offset = Int64(pos[s.client][o.Partition])
			if o.Outcome == OutcomeOK || s.applied {
				committed[o.Partition] = *o.Offset
			}
		case OpFetchCommitted:
			off, ok := committed[o.Partition]
			if !ok {
				off = -1
			}
			o.Offset = Int64(off)
		}
	}
	sort.SliceStable(shells, func(i, j int) bool { return shells[i].op.CallNs < shells[j].op.CallNs })
	h := make([]Op, 0, len(shells))
	for _, s := range shells {
		if !s.hidden {
			h = append(h, s.op)
		}
	}
	return h
}

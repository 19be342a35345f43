package faults

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	lin "github.com/cascade-kafka/cascade/linearizability"
)

// Recovery is how long each client kind took, after every fault was
// healed, to get its first acknowledged produce and its first successful
// fetch.
type Recovery struct {
	// At is when the last active fault was healed (history clock).
	At int64
	// Faults names the faults healed since the previous quiet moment.
	Faults string
	// Produce and Fetch map a client kind to the delay from At to its
	// first success (a produce acknowledged, a fetch answered without
	// error) returning at or after At; a kind with none is absent.
	Produce, Fetch map[string]time.Duration
	// Disturbed lists the kinds whose first success came after the next
	// fault was applied, so their figure includes that fault.
	Disturbed map[string]bool
}

// Gap is a client's longest stretch without a successful operation.
type Gap struct {
	Client   string
	From, To int64
}

// Len is the gap's length.
func (g Gap) Len() time.Duration { return time.Duration(g.To - g.From) }

// PauseStat is what the clients saw of one pause (SIGSTOP to SIGCONT).
type PauseStat struct {
	From, To int64
	// Spanning counts operations called before the pause that returned
	// after it: answers held up by the frozen broker.
	Spanning int
	// Unsuccessful counts operations that returned unknown or failed
	// (timeouts, cut connections) between the pause and a second after
	// it ended.
	Unsuccessful int
	// OKInside counts successes returned while the broker was stopped
	// (from 100 ms after the SIGSTOP): answers the proxy held back
	// (delayed-answer faults) or a client had buffered.
	OKInside int
}

// Stuck is a client that made no progress for longer than the bound after
// the final heal.
type Stuck struct {
	Client string
	// LastOK is its last success before the final heal; FirstOK its first
	// after it (-1: none).
	LastOK, FirstOK int64
}

// LivenessReport holds the liveness figures of one run (HARNESS "History
// checks" 6): recovery after each heal, longest stretches without
// progress, consumer lag at the end, and stuck clients.
type LivenessReport struct {
	Recoveries []Recovery
	Gaps       []Gap
	// Lag maps each consumer (the drain included) to the acknowledged
	// writes, outside transactions or of acknowledged commits, at or past
	// its final position, summed over partitions: for the drain, writes
	// acknowledged but not read by the end.
	Lag map[string]int
	// FinalHeal is when the schedule healed its last faults, and Bound the
	// longest a client may then go without a success.
	FinalHeal int64
	Bound     time.Duration
	// Pauses describe what clients saw of each SIGSTOP.
	Pauses []PauseStat
	// Recovered maps each client to the delay from FinalHeal to its first
	// success (absent: none).
	Recovered map[string]time.Duration
	Stuck     []Stuck
}

// clientKind is a client's name without its trailing number
// ("txn-producer-1" is a "txn-producer").
func clientKind(c string) string {
	if i := strings.LastIndexByte(c, '-'); i > 0 {
		return c[:i]
	}
	return c
}

// liveClient reports whether a client's operations measure liveness: the
// drain runs after the faults, and assignments record ownership.
func liveClient(o *lin.Op) bool { return o.Client != "drain" && o.Op != lin.OpAssignment }

// Liveness measures a run's history h against the schedule's events.
// finalHeal is when the last faults were healed; a client that had
// succeeded before it and has no success within bound after it is stuck.
func Liveness(h []lin.Op, events []FaultEvent, finalHeal int64, bound time.Duration) *LivenessReport {
	rep := &LivenessReport{FinalHeal: finalHeal, Bound: bound, Lag: map[string]int{}, Recovered: map[string]time.Duration{}}
	// Successful returns per kind and op, and per client, sorted.
	type kindOp struct{ kind, op string }
	okAt := map[kindOp][]int64{}
	perClient := map[string][]int64{}
	span := map[string][2]int64{} // client -> first call, last return
	for i := range h {
		o := &h[i]
		if !liveClient(o) {
			continue
		}
		s, ok := span[o.Client]
		if !ok {
			s = [2]int64{o.CallNs, o.ReturnNs}
		}
		s[0], s[1] = min(s[0], o.CallNs), max(s[1], o.ReturnNs)
		span[o.Client] = s
		if o.Outcome != lin.OutcomeOK {
			continue
		}
		k := kindOp{clientKind(o.Client), o.Op}
		okAt[k] = append(okAt[k], o.ReturnNs)
		perClient[o.Client] = append(perClient[o.Client], o.ReturnNs)
	}
	for _, v := range okAt {
		slices.Sort(v)
	}
	for _, v := range perClient {
		slices.Sort(v)
	}
	firstAfter := func(ts []int64, at int64) (int64, bool) {
		j := sort.Search(len(ts), func(j int) bool { return ts[j] >= at })
		if j == len(ts) {
			return 0, false
		}
		return ts[j], true
	}

	// Recovery points: moments the set of active faults becomes empty.
	active := map[string]bool{}
	var healed []string
	for i, e := range events {
		if !e.Heal {
			active[e.Fault] = true
			continue
		}
		delete(active, e.Fault)
		healed = append(healed, e.Fault)
		if len(active) > 0 || (i+1 < len(events) && events[i+1].Heal && events[i+1].At == e.At) {
			continue
		}
		next := int64(-1)
		for _, f := range events[i+1:] {
			if !f.Heal {
				next = f.At
				break
			}
		}
		r := Recovery{At: e.At, Faults: strings.Join(healed, "+"), Produce: map[string]time.Duration{},
			Fetch: map[string]time.Duration{}, Disturbed: map[string]bool{}}
		healed = nil
		for k, ts := range okAt {
			var into map[string]time.Duration
			switch k.op {
			case lin.OpProduce:
				into = r.Produce
			case lin.OpFetch:
				into = r.Fetch
			default:
				continue
			}
			if t, ok := firstAfter(ts, e.At); ok {
				into[k.kind] = time.Duration(t - e.At)
				if next >= 0 && t > next {
					r.Disturbed[k.kind] = true
				}
			}
		}
		rep.Recoveries = append(rep.Recoveries, r)
	}

	clients := make([]string, 0, len(span))
	for c := range span {
		clients = append(clients, c)
	}
	sort.Strings(clients)
	for _, c := range clients {
		ts := perClient[c]
		g := Gap{Client: c, From: span[c][0], To: span[c][1]}
		if len(ts) > 0 {
			g.To = ts[0]
			for j := 1; j < len(ts); j++ {
				if ts[j]-ts[j-1] > g.To-g.From {
					g.From, g.To = ts[j-1], ts[j]
				}
			}
			if end := span[c][1]; end-ts[len(ts)-1] > g.To-g.From {
				g.From, g.To = ts[len(ts)-1], end
			}
		}
		rep.Gaps = append(rep.Gaps, g)
		// Stuck: a client that had succeeded before the final heal and
		// has no success within the bound after it.
		if j := sort.Search(len(ts), func(j int) bool { return ts[j] >= finalHeal }); j > 0 {
			first := int64(-1)
			if j < len(ts) {
				first = ts[j]
				rep.Recovered[c] = time.Duration(first - finalHeal)
			}
			if first < 0 || time.Duration(first-finalHeal) > bound {
				rep.Stuck = append(rep.Stuck, Stuck{Client: c, LastOK: ts[j-1], FirstOK: first})
			}
		}
	}
	rep.Lag = consumerLag(h)
	rep.Pauses = pauseStats(h, events)
	return rep
}

// pauseStats measures the clients around each pause of events.
func pauseStats(h []lin.Op, events []FaultEvent) []PauseStat {
	var out []PauseStat
	from := int64(-1)
	for _, e := range events {
		switch {
		case e.Fault != "pause":
		case !e.Heal:
			from = e.At
		case from >= 0:
			out = append(out, PauseStat{From: from, To: e.At})
			from = -1
		}
	}
	for i := range h {
		o := &h[i]
		if !liveClient(o) {
			continue
		}
		for j := range out {
			p := &out[j]
			if o.CallNs < p.From && o.ReturnNs > p.To {
				p.Spanning++
			}
			if o.Outcome != lin.OutcomeOK && o.ReturnNs >= p.From && o.ReturnNs <= p.To+int64(time.Second) {
				p.Unsuccessful++
			}
			if o.Outcome == lin.OutcomeOK && o.ReturnNs > p.From+int64(100*time.Millisecond) && o.ReturnNs < p.To {
				p.OKInside++
			}
		}
	}
	return out
}

// consumerLag counts, per consumer, the acknowledged writes that must be
// readable (outside transactions, or of an acknowledged commit) at or past
// the consumer's final position in each partition.
func consumerLag(h []lin.Op) map[string]int {
	committed := committedTxns(h)
	acked := map[lin.TP][]int64{}
	pos := map[string]map[lin.TP]int64{}
	for i := range h {
		o := &h[i]
		if o.Outcome != lin.OutcomeOK {
			continue
		}
		switch o.Op {
		case lin.OpProduce:
			if o.Txn == "" || committed[o.Txn] {
				acked[o.TP()] = append(acked[o.TP()], *o.Offset)
			}
		case lin.OpFetch:
			next := *o.From
			if n := len(o.Records); n > 0 {
				next = o.Records[n-1].Offset + 1
			}
			if o.Next != nil {
				next = max(next, *o.Next)
			}
			if pos[o.Client] == nil {
				pos[o.Client] = map[lin.TP]int64{}
			}
			pos[o.Client][o.TP()] = max(pos[o.Client][o.TP()], next)
		}
	}
	lag := map[string]int{}
	for c, ps := range pos {
		n := 0
		for tp, offs := range acked {
			p := ps[tp] // zero for a partition the consumer never read
			for _, off := range offs {
				if off >= p {
					n++
				}
			}
		}
		lag[c] = n
	}
	return lag
}

// Markdown renders the report as the liveness.md artifact: the recovery
// table (milliseconds from heal to first success, per client kind; a "*"
// marks a figure that includes the next fault), the longest stretches
// without progress, the lag, and the recovery after the final heal.
func (r *LivenessReport) Markdown(target string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Liveness: %s\n\n", target)
	kinds := map[string]bool{}
	for _, rc := range r.Recoveries {
		for k := range rc.Produce {
			kinds["produce "+k] = true
		}
		for k := range rc.Fetch {
			kinds["fetch "+k] = true
		}
	}
	cols := make([]string, 0, len(kinds))
	for k := range kinds {
		cols = append(cols, k)
	}
	sort.Strings(cols)
	b.WriteString("## Recovery after each heal (ms to first success)\n\n| healed at (s) | faults |")
	for _, c := range cols {
		fmt.Fprintf(&b, " %s |", c)
	}
	b.WriteString("\n| --- | --- |")
	for range cols {
		b.WriteString(" ---: |")
	}
	b.WriteString("\n")
	worst := map[string]time.Duration{}
	for _, rc := range r.Recoveries {
		fmt.Fprintf(&b, "| %.1f | %s |", float64(rc.At)/1e9, rc.Faults)
		for _, c := range cols {
			op, kind, _ := strings.Cut(c, " ")
			m := rc.Produce
			if op == "fetch" {
				m = rc.Fetch
			}
			d, ok := m[kind]
			switch {
			case !ok:
				b.WriteString(" - |")
			case rc.Disturbed[kind]:
				fmt.Fprintf(&b, " %d* |", d.Milliseconds())
			default:
				fmt.Fprintf(&b, " %d |", d.Milliseconds())
				worst[c] = max(worst[c], d)
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("| worst (undisturbed) | |")
	for _, c := range cols {
		fmt.Fprintf(&b, " %d |", worst[c].Milliseconds())
	}
	b.WriteString("\n\n## Longest stretch without a successful operation\n\n| client | ms | from (s) | to (s) |\n| --- | ---: | ---: | ---: |\n")
	for _, g := range r.Gaps {
		fmt.Fprintf(&b, "| %s | %d | %.1f | %.1f |\n", g.Client, g.Len().Milliseconds(), float64(g.From)/1e9, float64(g.To)/1e9)
	}
	b.WriteString("\n## Pauses (SIGSTOP to SIGCONT)\n\n| from (s) | ms | ops held across it | unknown or failed by 1 s after | ok answers inside |\n| ---: | ---: | ---: | ---: | ---: |\n")
	for _, p := range r.Pauses {
		fmt.Fprintf(&b, "| %.1f | %d | %d | %d | %d |\n", float64(p.From)/1e9, (p.To-p.From)/int64(time.Millisecond), p.Spanning, p.Unsuccessful, p.OKInside)
	}
	b.WriteString("\n## Consumer lag at the end (acknowledged writes not read)\n\n| consumer | records |\n| --- | ---: |\n")
	lc := make([]string, 0, len(r.Lag))
	for c := range r.Lag {
		lc = append(lc, c)
	}
	sort.Strings(lc)
	for _, c := range lc {
		fmt.Fprintf(&b, "| %s | %d |\n", c, r.Lag[c])
	}
	fmt.Fprintf(&b, "\n## After the final heal (%.1f s; bound %v)\n\n| client | ms to first success |\n| --- | ---: |\n", float64(r.FinalHeal)/1e9, r.Bound)
	rc := make([]string, 0, len(r.Recovered))
	for c := range r.Recovered {
		rc = append(rc, c)
	}
	sort.Strings(rc)
	for _, c := range rc {
		fmt.Fprintf(&b, "| %s | %d |\n", c, r.Recovered[c].Milliseconds())
	}
	for _, s := range r.Stuck {
		fmt.Fprintf(&b, "\nSTUCK: %s\n", s)
	}
	return b.String()
}

// String describes a stuck client for the test log.
func (s Stuck) String() string {
	if s.FirstOK < 0 {
		return fmt.Sprintf("%s made no successful operation after the final heal (last success at %.1f s)", s.Client, float64(s.LastOK)/1e9)
	}
	return fmt.Sprintf("%s made no successful operation from %.1f s until %.1f s", s.Client, float64(s.LastOK)/1e9, float64(s.FirstOK)/1e9)
}

// committedTxns names the transactions of h whose commit was acknowledged:
// their produces must be readable, as those outside transactions.
func committedTxns(h []lin.Op) map[string]bool {
	committed := map[string]bool{}
	for i := range h {
		o := &h[i]
		if o.Op == lin.OpEndTxn && o.Outcome == lin.OutcomeOK && o.Commit != nil && *o.Commit {
			committed[o.Txn] = true
		}
	}
	return committed
}

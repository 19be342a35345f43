package replica

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/cascade-kafka/cascade/broker/internal/scriptargs"
)

// TestScripts runs the data-driven scripts of testdata/. Each command feeds
// one input to a broker's State (b=ID) at the harness clock and prints what
// it asks of the I/O shell and the state it leaves. Regenerate the
// expectations with -rewrite after a deliberate change, then review the
// diff.
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &harness{now: time.UnixMilli(1_000_000), states: map[int32]*State{}, caches: map[int32][]EpochEntry{}}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return h.run(t, d)
		})
	})
}

type harness struct {
	now     time.Time
	states  map[int32]*State
	caches  map[int32][]EpochEntry
	brokers map[int32]BrokerStatus
}

type args map[string]string

func parse(d *datadriven.TestData) args {
	a := args{}
	for _, arg := range d.CmdArgs {
		a[arg.Key] = strings.Join(arg.Vals, ",")
	}
	return a
}

func (a args) int(t *testing.T, k string, def int64) int64 { return scriptargs.Int(t, a, k, def) }

func (a args) ints(t *testing.T, k string) []int32 { return scriptargs.Ints(t, a, k) }

// pairs parses "a@b,c@d".
func (a args) pairs(t *testing.T, k string) [][2]int64 {
	var out [][2]int64
	for _, f := range strings.Split(a[k], ",") {
		if f == "" {
			continue
		}
		l, r, ok := strings.Cut(f, "@")
		x, err1 := strconv.ParseInt(l, 10, 64)
		y, err2 := strconv.ParseInt(r, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			t.Fatalf("%s=%s: want a@b pairs", k, a[k])
		}
		out = append(out, [2]int64{x, y})
	}
	return out
}

func (a args) cache(t *testing.T, k string) []EpochEntry {
	var out []EpochEntry
	for _, p := range a.pairs(t, k) {
		out = append(out, EpochEntry{Epoch: int32(p[0]), StartOffset: p[1]})
	}
	return out
}

var errByName = map[string]error{}

func init() {
	for _, e := range []error{ErrNotLeaderOrFollower, ErrFencedLeaderEpoch, ErrUnknownLeaderEpoch,
		ErrOffsetOutOfRange, ErrInvalidUpdateVersion, ErrIneligibleReplica, ErrOperationNotAttempted,
		ErrUnknownTopicOrPartition, ErrInvalidRequest, ErrNewLeaderElected} {
		errByName[e.Error()] = e
	}
}

func (h *harness) state(t *testing.T, a args) (int32, *State) {
	b := int32(a.int(t, "b", 1))
	s, ok := h.states[b]
	if !ok {
		t.Fatalf("broker %d has no state (use new)", b)
	}
	return b, s
}

func (a args) partition(t *testing.T) PartitionState {
	return PartitionState{Leader: int32(a.int(t, "leader", int64(NoLeader))), LeaderEpoch: int32(a.int(t, "epoch", 0)),
		PartitionEpoch: int32(a.int(t, "pe", 0)), Replicas: a.ints(t, "replicas"), ISR: a.ints(t, "isr"),
		LeaderRecovery: a.recovery(t)}
}

// recovery parses lrs=recovering|recovered (recovered when absent).
func (a args) recovery(t *testing.T) LeaderRecoveryState {
	switch a["lrs"] {
	case "", "recovered":
		return Recovered
	case "recovering":
		return Recovering
	}
	t.Fatalf("lrs=%s: want recovering or recovered", a["lrs"])
	return Recovered
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	a := parse(d)
	var out strings.Builder
	switch d.Cmd {
	case "new":
		b := int32(a.int(t, "b", 1))
		s := New(Config{BrokerID: b, MinInSyncReplicas: int(a.int(t, "min-isr", 1)),
			ReplicaLagTimeMax: time.Duration(a.int(t, "lag", 30000)) * time.Millisecond})
		s.Restore(a.int(t, "start", 0), a.int(t, "leo", 0), a.int(t, "hw", 0))
		s.SetBrokers(h.brokers)
		h.states[b] = s
		h.caches[b] = a.cache(t, "cache")
	case "brokers":
		h.brokers = map[int32]BrokerStatus{}
		for _, p := range a.pairs(t, "epochs") {
			h.brokers[int32(p[0])] = BrokerStatus{Epoch: p[1]}
		}
		for _, id := range a.ints(t, "fenced") {
			b := h.brokers[id]
			b.Fenced = true
			h.brokers[id] = b
		}
		for _, id := range a.ints(t, "shutdown") {
			b := h.brokers[id]
			b.ShuttingDown = true
			h.brokers[id] = b
		}
		for _, s := range h.states {
			s.SetBrokers(h.brokers)
		}
		return "ok\n"
	case "advance":
		h.now = h.now.Add(time.Duration(a.int(t, "ms", 0)) * time.Millisecond)
		return fmt.Sprintf("now=%d\n", h.now.UnixMilli())
	case "become-leader":
		b, s := h.state(t, a)
		ps := a.partition(t)
		ps.Leader = b
		eff, applied := s.BecomeLeader(ps, h.now, s.LogEndOffset())
		fmt.Fprintf(&out, "applied=%t\n", applied)
		h.effects(&out, b, eff)
	case "become-follower":
		b, s := h.state(t, a)
		pos, applied := s.BecomeFollower(a.partition(t), h.caches[b], s.LogEndOffset())
		fmt.Fprintf(&out, "applied=%t fetch leader=%d epoch=%d offset=%d last-fetched-epoch=%d\n",
			applied, pos.Leader, pos.LeaderEpoch, pos.FetchOffset, pos.LastFetchedEpoch)
	case "metadata":
		b, s := h.state(t, a)
		h.effects(&out, b, s.MetadataChange(a.partition(t), h.caches[b], h.now, s.LogEndOffset()))
	case "append":
		b, s := h.state(t, a)
		h.effects(&out, b, s.LocalAppend(a.int(t, "leo", 0), h.now))
	case "min-isr":
		_, s := h.state(t, a)
		s.SetMinInSyncReplicas(int(a.int(t, "n", 1)))
		return "ok\n"
	case "check-append":
		_, s := h.state(t, a)
		fmt.Fprintf(&out, "err=%v\n", s.CheckAppend(int16(a.int(t, "acks", -1))))
		return out.String()
	case "check-acks":
		_, s := h.state(t, a)
		done, err := s.CheckAcks(a.int(t, "offset", 0))
		fmt.Fprintf(&out, "done=%t err=%v\n", done, err)
		return out.String()
	case "fetch":
		b, s := h.state(t, a)
		req := FetchRequest{ReplicaID: int32(a.int(t, "from", 0)), BrokerEpoch: a.int(t, "bepoch", -1),
			CurrentLeaderEpoch: int32(a.int(t, "cur", int64(s.LeaderEpoch()))), FetchOffset: a.int(t, "offset", 0),
			LogStartOffset: a.int(t, "start", 0), LastFetchedEpoch: int32(a.int(t, "last", int64(UndefinedEpoch)))}
		res := s.FollowerFetch(req, h.caches[b], h.now)
		fmt.Fprintf(&out, "err=%v hw=%d start=%d leo=%d", res.Err, res.HighWatermark, res.LogStartOffset, res.LogEndOffset)
		if res.Diverging != nil {
			fmt.Fprintf(&out, " diverging=%d@%d", res.Diverging.Epoch, res.Diverging.EndOffset)
		}
		out.WriteString("\n")
		h.effects(&out, b, res.Effects)
	case "tick":
		b, s := h.state(t, a)
		h.effects(&out, b, s.Tick(h.now))
	case "alter-result":
		b, s := h.state(t, a)
		res := AlterResult{Seq: uint64(a.int(t, "seq", 0)), LeaderEpoch: int32(a.int(t, "epoch", 0)),
			PartitionEpoch: int32(a.int(t, "pe", 0)), ISR: a.ints(t, "isr"), LeaderRecovery: a.recovery(t)}
		if name, ok := a["err"]; ok {
			res.Err = errByName[name]
			if res.Err == nil {
				res.Err = fmt.Errorf("%s", name) // an unknown error: retried
			}
		}
		h.effects(&out, b, s.AlterPartitionResult(res, h.now))
	case "leader-hw":
		b, s := h.state(t, a)
		h.effects(&out, b, s.LeaderHighWatermark(a.int(t, "hw", 0)))
	case "truncate":
		b, s := h.state(t, a)
		if a.int(t, "full", 0) == 1 {
			s.TruncatedFully(a.int(t, "offset", 0))
		} else {
			s.Truncated(a.int(t, "offset", 0))
		}
		h.printState(&out, b)
	case "cache":
		b := int32(a.int(t, "b", 1))
		h.caches[b] = a.cache(t, "entries")
		return "ok\n"
	case "diverging":
		div, err := DivergingEpoch(a.cache(t, "cache"), a.int(t, "start", 0), a.int(t, "leo", 0),
			int32(a.int(t, "epoch", 0)), a.int(t, "offset", 0))
		if div != nil {
			return fmt.Sprintf("diverging=%d@%d err=%v\n", div.Epoch, div.EndOffset, err)
		}
		return fmt.Sprintf("diverging=none err=%v\n", err)
	case "truncation":
		div := a.pairs(t, "div")
		if len(div) != 1 {
			t.Fatalf("div=epoch@offset")
		}
		tr := TruncationFor(a.cache(t, "cache"), a.int(t, "leo", 0), a.int(t, "hw", 0),
			EpochEndOffset{Epoch: int32(div[0][0]), EndOffset: div[0][1]})
		return fmt.Sprintf("truncate-to=%d full=%t complete=%t\n", tr.Offset, tr.Full, tr.Complete)
	case "out-of-range":
		tr := OutOfRangeTruncation(a.int(t, "leo", 0), a.int(t, "leader-start", 0), a.int(t, "leader-end", 0))
		return fmt.Sprintf("truncate-to=%d full=%t complete=%t\n", tr.Offset, tr.Full, tr.Complete)
	case "state":
		b, _ := h.state(t, a)
		h.printState(&out, b)
	default:
		t.Fatalf("unknown command %q", d.Cmd)
	}
	return out.String()
}

func (h *harness) effects(out *strings.Builder, b int32, eff Effects) {
	if eff.EpochStart != nil {
		fmt.Fprintf(out, "epoch-start %d@%d\n", eff.EpochStart.Epoch, eff.EpochStart.StartOffset)
		h.caches[b] = append(h.caches[b], *eff.EpochStart)
	}
	if eff.HighWatermarkMoved {
		fmt.Fprintf(out, "hw-moved %d\n", h.states[b].HighWatermark())
	}
	if eff.Recovered {
		out.WriteString("recovered\n")
	}
	if ap := eff.AlterPartition; ap != nil {
		var isr []string
		for _, m := range ap.NewISR {
			isr = append(isr, fmt.Sprintf("%d@%d", m.BrokerID, m.BrokerEpoch))
		}
		fmt.Fprintf(out, "alter-partition seq=%d leader=%d epoch=%d pe=%d isr=%s lrs=%s\n",
			ap.Seq, ap.LeaderID, ap.LeaderEpoch, ap.PartitionEpoch, strings.Join(isr, ","), ap.LeaderRecovery)
	}
	h.printState(out, b)
}

func (h *harness) printState(out *strings.Builder, b int32) {
	s := h.states[b]
	fmt.Fprintf(out, "b%d %s leader=%d epoch=%d pe=%d isr=%v maximal=%v hw=%d leo=%d start=%d",
		b, s.Role(), s.Leader(), s.LeaderEpoch(), s.PartitionEpoch(), s.ISR(), s.MaximalISR(),
		s.HighWatermark(), s.LogEndOffset(), s.LogStartOffset())
	if p, ok := s.Pending(); ok {
		fmt.Fprintf(out, " pending=%d", p.Seq)
	}
	if s.LeaderRecovery() == Recovering {
		out.WriteString(" recovering")
	}
	out.WriteString("\n")
	var ids []int32
	for id := range s.followers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		f := s.followers[id]
		fmt.Fprintf(out, "  f%d leo=%d caught-up=%s fetched=%s bepoch=%d\n", id, f.LogEndOffset,
			h.ms(f.LastCaughtUpTimeMs), h.ms(f.LastFetchTimeMs), f.BrokerEpoch)
	}
}

// ms prints a time relative to the harness start (1,000,000 ms), or never.
func (h *harness) ms(t int64) string {
	if t == 0 {
		return "never"
	}
	return strconv.FormatInt(t-1_000_000, 10)
}

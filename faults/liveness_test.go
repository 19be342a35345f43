package faults

import (
	"context"
	"strings"
	"testing"
	"time"

	lin "github.com/cascade-kafka/cascade/linearizability"
)

const ms = int64(time.Millisecond)

func okProduce(client string, call, ret, off int64) lin.Op {
	return lin.Op{Client: client, Op: lin.OpProduce, Topic: "t", Value: client + "-" + time.Duration(ret).String(),
		CallNs: call, ReturnNs: ret, Outcome: lin.OutcomeOK, Offset: lin.Int64(off)}
}

func okFetch(client string, call, ret, from, next int64) lin.Op {
	return lin.Op{Client: client, Op: lin.OpFetch, Topic: "t", From: lin.Int64(from), Next: lin.Int64(next),
		CallNs: call, ReturnNs: ret, Outcome: lin.OutcomeOK}
}

func TestLiveness(t *testing.T) {
	h := []lin.Op{
		okProduce("producer-0", 0, 10*ms, 0),
		okProduce("producer-0", 10*ms, 20*ms, 1),
		// A fault from 100 to 300 ms: the produce spanning it is unknown,
		// and the first success after the heal returns at 450 ms.
		{Client: "producer-0", Op: lin.OpProduce, Topic: "t", Value: "lost", CallNs: 20 * ms, ReturnNs: 400 * ms, Outcome: lin.OutcomeUnknown},
		okProduce("producer-0", 400*ms, 450*ms, 2),
		okFetch("consumer-0", 0, 30*ms, 0, 2),
		okFetch("consumer-0", 30*ms, 320*ms, 2, 2),
		// consumer-1 stops succeeding after the final heal (1000 ms).
		okFetch("consumer-1", 0, 40*ms, 0, 1),
		{Client: "consumer-1", Op: lin.OpFetch, Topic: "t", From: lin.Int64(1), CallNs: 40 * ms, ReturnNs: 3000 * ms, Outcome: lin.OutcomeFail},
		okProduce("producer-0", 1000*ms, 1100*ms, 3),
		okFetch("consumer-0", 1000*ms, 1200*ms, 2, 4),
		okFetch("drain", 5000*ms, 5001*ms, 0, 4),
		{Client: "member-0", Op: lin.OpAssignment, Group: "g", Member: "m", Generation: lin.Int32(1), Topic: "t",
			CallNs: 0, ReturnNs: 5000 * ms, Outcome: lin.OutcomeOK},
	}
	events := []FaultEvent{
		{At: 100 * ms, Fault: "stall"}, {At: 150 * ms, Fault: "pause"},
		{At: 300 * ms, Heal: true, Fault: "stall"}, {At: 300 * ms, Heal: true, Fault: "pause"},
		{At: 500 * ms, Fault: "kill-9"}, {At: 900 * ms, Heal: true, Fault: "kill-9"},
	}
	lv := Liveness(h, events, 1000*ms, 1500*time.Millisecond)
	if len(lv.Recoveries) != 2 {
		t.Fatalf("recoveries %+v, want 2 (one per quiet moment)", lv.Recoveries)
	}
	r := lv.Recoveries[0]
	if r.Faults != "stall+pause" || r.Produce["producer"] != 150*time.Millisecond || r.Fetch["consumer"] != 20*time.Millisecond {
		t.Fatalf("first recovery %+v", r)
	}
	if r := lv.Recoveries[1]; r.Produce["producer"] != 200*time.Millisecond || r.Disturbed["producer"] {
		t.Fatalf("second recovery %+v", r)
	}
	var gap Gap
	for _, g := range lv.Gaps {
		if g.Client == "producer-0" {
			gap = g
		}
		if g.Client == "drain" || g.Client == "member-0" {
			t.Errorf("gap of %s measured", g.Client)
		}
	}
	if gap.From != 450*ms || gap.To != 1100*ms {
		t.Fatalf("producer-0 longest gap %+v, want 450-1100 ms", gap)
	}
	if len(lv.Stuck) != 1 || lv.Stuck[0].Client != "consumer-1" || lv.Stuck[0].FirstOK != -1 {
		t.Fatalf("stuck %+v, want consumer-1", lv.Stuck)
	}
	if lv.Recovered["consumer-0"] != 200*time.Millisecond {
		t.Fatalf("recovered %v", lv.Recovered)
	}
	// Offsets 0..3 acknowledged: consumer-1 ended at 1 (3 unread), the
	// drain and consumer-0 at 4.
	if lv.Lag["consumer-1"] != 3 || lv.Lag["consumer-0"] != 0 || lv.Lag["drain"] != 0 {
		t.Fatalf("lag %v", lv.Lag)
	}
	// The pause from 150 to 300 ms held three operations (the unknown
	// produce, consumer-0's fetch and consumer-1's failed fetch); one
	// ended unknown within a second of it.
	if len(lv.Pauses) != 1 || lv.Pauses[0] != (PauseStat{From: 150 * ms, To: 300 * ms, Spanning: 3, Unsuccessful: 1}) {
		t.Fatalf("pauses %+v", lv.Pauses)
	}
	md := lv.Markdown("test")
	for _, want := range []string{"| 0.3 | stall+pause |", "STUCK: consumer-1", "| consumer-1 | 3 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

// fakePauser records pauses and resumes.
type fakePauser struct{ paused, resumed []time.Time }

func (f *fakePauser) Pause() (func() error, error) {
	f.paused = append(f.paused, time.Now())
	return func() error { f.resumed = append(f.resumed, time.Now()); return nil }, nil
}

func TestPauseFaultHoldsItsSeededDuration(t *testing.T) {
	p := &fakePauser{}
	f := PauseFault(p, 7)
	if !f.HealedOnApply {
		t.Fatal("a pause is over when Apply returns; the schedule must log it healed then")
	}
	ctx := t.Context()
	if err := f.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	note := f.Note()
	d, err := time.ParseDuration(strings.TrimPrefix(note, "SIGSTOP for "))
	if err != nil || d < minPause || d > maxPause {
		t.Fatalf("note %q: want a duration within [%v, %v]", note, minPause, maxPause)
	}
	if len(p.paused) != 1 || len(p.resumed) != 1 {
		t.Fatalf("paused %d and resumed %d times, want once each", len(p.paused), len(p.resumed))
	}
	if held := p.resumed[0].Sub(p.paused[0]); held < d-time.Millisecond || held > d+time.Second {
		t.Fatalf("resumed after %v; drawn %v", held, d)
	}
	// The same seed draws the same first duration; a run that ends
	// during the pause resumes at once.
	q := &fakePauser{}
	g := PauseFault(q, 7)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := g.Apply(cctx); err != nil || g.Note() != note || len(q.resumed) != 1 {
		t.Fatalf("seed 7 drew %q then %q (err %v, %d resumes)", note, g.Note(), err, len(q.resumed))
	}
	if held := q.resumed[0].Sub(q.paused[0]); held > 100*time.Millisecond {
		t.Fatalf("a cancelled run held the pause %v", held)
	}
}

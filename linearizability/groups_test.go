package linearizability

import (
	"strings"
	"testing"
	"time"
)

// assign is an acknowledged assignment op for the planted group histories.
func assign(member string, gen int32, call, ret int64, parts ...int32) Op {
	return Op{Client: "client-" + member, Op: OpAssignment, Group: "g", Member: member, Generation: Int32(gen),
		Topic: "t", Partitions: parts, CallNs: call, ReturnNs: ret, Outcome: OutcomeOK}
}

func TestDoubleOwnerCaught(t *testing.T) {
	h := []Op{
		assign("m1", 3, 10, 100, 0, 1),
		assign("m2", 3, 12, 100, 1, 2),
	}
	rep := mustReport(t, h, KindDoubleOwner)
	if n := rep.Count(KindDoubleOwner); n != 1 {
		t.Fatalf("got %d double_owner anomalies, want 1 (partition 1 only):\n%s", n, rep.Summary())
	}
	a := rep.Anomalies[0]
	if a.Key != "g/t-1" || len(a.Ops) != 2 || !strings.Contains(a.Detail, "generation 3") {
		t.Fatalf("anomaly %v: want key g/t-1, both ops, generation 3", a)
	}
}

func TestDoubleOwnerAcceptsRebalances(t *testing.T) {
	h := []Op{
		// Generation 1: m1 owns everything.
		assign("m1", 1, 0, 50, 0, 1, 2),
		// Generation 2: m2 joins; m1 is slow to notice and still holds
		// partition 1 (its generation-1 assignment ends at 80) while m2
		// has it in generation 2. Overlap across generations is allowed.
		assign("m1", 2, 60, 200, 0),
		assign("m2", 2, 70, 200, 1, 2),
		// The same member recording one generation's assignment twice is
		// still one owner.
		assign("m2", 2, 70, 200, 1),
		// Another group may own the same partitions in the same generation.
		{Client: "other", Op: OpAssignment, Group: "g2", Member: "x", Generation: Int32(2), Topic: "t",
			Partitions: []int32{1}, CallNs: 75, ReturnNs: 90, Outcome: OutcomeOK},
		// An assignment that was never received does not count.
		{Client: "client-m3", Op: OpAssignment, Group: "g", Member: "m3", Generation: Int32(2), Topic: "t",
			Partitions: []int32{0}, CallNs: 75, ReturnNs: 90, Outcome: OutcomeFail},
		// A member with nothing assigned.
		assign("m3", 2, 75, 200),
	}
	h[0].ReturnNs = 80
	rep, err := Check(h, Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Valid() {
		t.Fatalf("valid rebalance history reported invalid:\n%s", rep.Summary())
	}
}

func TestAssignmentFormat(t *testing.T) {
	good := `{"client":"c","op":"assignment","group":"g","member":"m-1","generation":4,"topic":"t","partitions":[0,2],"call_ns":1,"return_ns":9,"outcome":"ok"}`
	h, err := Read(strings.NewReader(good + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if o := h[0]; o.Member != "m-1" || *o.Generation != 4 || len(o.Partitions) != 2 || o.Partitions[1] != 2 {
		t.Fatalf("parsed %+v", o)
	}
	for _, bad := range []string{
		`{"client":"c","op":"assignment","member":"m","generation":1,"topic":"t","call_ns":1,"return_ns":2,"outcome":"ok"}`,
		`{"client":"c","op":"assignment","group":"g","generation":1,"topic":"t","call_ns":1,"return_ns":2,"outcome":"ok"}`,
		`{"client":"c","op":"assignment","group":"g","member":"m","topic":"t","call_ns":1,"return_ns":2,"outcome":"ok"}`,
		`{"client":"c","op":"assignment","group":"g","member":"m","generation":1,"topic":"t","partitions":[-1],"call_ns":1,"return_ns":2,"outcome":"ok"}`,
	} {
		if _, err := Read(strings.NewReader(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func TestRecorderProgress(t *testing.T) {
	var buf strings.Builder
	r := NewRecorder(&buf)
	ok := func(client, op string) Op {
		o := Op{Client: client, Op: op, Topic: "t", Value: client + op, Outcome: OutcomeOK, Offset: Int64(0), From: Int64(0)}
		if op == OpAssignment {
			o = assign("m", 1, 0, 0)
			o.Client = client
		}
		return o
	}
	if err := r.End(r.Begin(), ok("a", OpProduce)); err != nil {
		t.Fatal(err)
	}
	failed := ok("b", OpFetch)
	failed.Outcome = OutcomeFail
	for _, o := range []Op{failed, ok("c", OpAssignment)} {
		if err := r.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	p := r.Progress()
	if len(p) != 1 || p["a"] <= 0 {
		t.Fatalf("progress %v: want only a (failures and assignments are not progress)", p)
	}
}

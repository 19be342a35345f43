package faults

import (
	"strings"
	"testing"
	"time"

	lin "github.com/cascade-kafka/cascade/linearizability"
)

func TestClusterFigures(t *testing.T) {
	s := time.Second.Nanoseconds()
	samples := []Sample{
		{At: 1 * s, Controller: 1, Leaders: []int{2, 3}, ISRs: [][]int{{1, 2, 3}, {1, 2, 3}}},
		{At: 3 * s, Controller: 1, Leaders: []int{-1, 3}, ISRs: [][]int{{1, 3}, {1, 3}}},
		{At: 5 * s, Controller: 1, Leaders: []int{1, 3}, ISRs: [][]int{{1, 3}, {1, 3}}},
		{At: 9 * s, Controller: 1, Leaders: []int{1, 3}, ISRs: [][]int{{1, 2, 3}, {1, 3}}},
		{At: 10 * s, Controller: 1, Leaders: []int{1, 3}, ISRs: [][]int{{1, 2, 3}, {1, 2, 3}}},
	}
	events := []FaultEvent{{At: 2 * s, Fault: "hard-shutdown:leader"}, {At: 8 * s, Heal: true, Fault: "hard-shutdown:leader"}}
	ok := func(p int32, call, ret int64) lin.Op {
		return lin.Op{Op: lin.OpProduce, Topic: "t", Partition: p, Outcome: lin.OutcomeOK, CallNs: call, ReturnNs: ret}
	}
	h := []lin.Op{ok(0, 1*s, 2*s+s/2), ok(0, 4*s, 6*s), ok(1, 3*s, 4*s)}
	fs := ClusterFigures(events, samples, h, "t", 0, 3)
	if len(fs) != 1 {
		t.Fatalf("figures %+v", fs)
	}
	f := fs[0]
	want := FaultFigure{Fault: "hard-shutdown:leader", Applied: 2 * s, Healed: 8 * s, NewLeader: 3 * time.Second,
		NewControl: -1, FirstAck: 4 * time.Second, ISRBack: 2 * time.Second, ProduceStall: 2 * time.Second}
	if f != want {
		t.Errorf("figures\n got %+v\nwant %+v", f, want)
	}
	// A fault applied at 9.5 s ends the first one's window: its ISR was
	// full again only at 10 s.
	later := append(events, FaultEvent{At: 9*s + s/2, Fault: "pause:follower"})
	if f := ClusterFigures(later, samples, h, "t", 0, 3)[0]; f.ISRBack != -1 || f.NewLeader != 3*time.Second {
		t.Errorf("figures with a later fault at 9.5 s: %+v", f)
	}
	md := ClusterMarkdown([]ClusterResult{{Target: "A", Seeds: []uint64{7}, Passed: true, Figures: fs},
		{Target: "B", Seeds: []uint64{7}, Passed: false, Figures: fs}})
	for _, s := range []string{"| hard-shutdown:leader | pass | 3.0 / 3.0 | - | 4.0 / 4.0 | 2.0 / 2.0 | FAIL (run) |", "B: seed 7, FAILED."} {
		if !strings.Contains(md, s) {
			t.Errorf("table lacks %q:\n%s", s, md)
		}
	}
}

func TestCoverModesAndRoles(t *testing.T) {
	var all []Fault
	for _, m := range processModes {
		for _, r := range Roles {
			all = append(all, Fault{Name: m + ":" + string(r)})
		}
	}
	all = append(all, Fault{Name: "hard-bounce:all"}, Fault{Name: "isolate:leader"})
	for seed := uint64(0); seed < 7; seed++ {
		got := CoverModesAndRoles(all, seed)
		modes, roles := map[string]bool{}, map[string]bool{}
		for _, f := range got {
			m, r, _ := strings.Cut(f.Name, ":")
			modes[m], roles[r] = true, true
		}
		if len(got) != len(processModes)+2 || len(modes) != len(processModes)+1 || !roles["all"] {
			t.Fatalf("seed %d kept %v", seed, got)
		}
		for _, r := range Roles {
			if !roles[string(r)] {
				t.Errorf("seed %d: role %s never applied: %v", seed, r, got)
			}
		}
	}
}

func TestMergeClusterResults(t *testing.T) {
	f := func(d time.Duration) []FaultFigure {
		return []FaultFigure{{Fault: "pause:leader", NewLeader: d, NewControl: -1, FirstAck: -1, ISRBack: -1}}
	}
	got := MergeClusterResults([]ClusterResult{
		{Target: "K", Seeds: []uint64{1}, Passed: true, Figures: f(time.Second)},
		{Target: "C", Seeds: []uint64{1}, Passed: true, Figures: f(2 * time.Second)},
		{Target: "K", Seeds: []uint64{2}, Passed: false, Figures: f(3 * time.Second), Notes: []string{"seed 2: stuck client: producer-0"}},
	})
	if len(got) != 2 || got[0].Target != "K" || got[1].Target != "C" {
		t.Fatalf("merged %+v", got)
	}
	if k := got[0]; k.Passed || len(k.Seeds) != 2 || len(k.Figures) != 2 {
		t.Errorf("K merged as %+v", k)
	}
	md := ClusterMarkdown(got)
	for _, s := range []string{"| pause:leader | FAIL (run) | 3.0 / 3.0 |", "K: seeds 1, 2, FAILED.\n- seed 2: stuck client: producer-0", "C: seed 1, passed."} {
		if !strings.Contains(md, s) {
			t.Errorf("table lacks %q:\n%s", s, md)
		}
	}
	if page := ClusterHTML(got); !strings.Contains(page, "<li>seed 2: stuck client: producer-0</li>") {
		t.Errorf("the page lacks the run's note:\n%s", page)
	}
}

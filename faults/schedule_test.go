package faults

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/faults/proxy"
)

func TestProxyFaultsApplyAndHeal(t *testing.T) {
	g := proxy.NewGroup(proxy.Options{Seed: 1})
	defer g.Close()
	p, err := g.Add("b", "127.0.0.1:0", "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, f := range ProxyFaults(p) {
		if err := f.Apply(ctx); err != nil {
			t.Errorf("applying %s: %v", f.Name, err)
		}
		if err := f.Heal(ctx); err != nil {
			t.Errorf("healing %s: %v", f.Name, err)
		}
		if ts := p.Toxics(); len(ts) != 0 {
			t.Errorf("after healing %s, toxics left: %v", f.Name, ts)
		}
	}
}

func TestScheduleReplaysSeed(t *testing.T) {
	runOnce := func(seed uint64) ([]string, string) {
		var log strings.Builder
		var applied, healed []string
		mk := func(name string) Fault {
			return Fault{Name: name,
				Apply: func(context.Context) error { applied = append(applied, name); return nil },
				Heal:  func(context.Context) error { healed = append(healed, name); return nil }}
		}
		s := &Schedule{Faults: []Fault{mk("a"), mk("b"), mk("c")}, Seed: seed, Period: time.Millisecond, Log: &log}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		names, err := s.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(applied) != len(healed) {
			t.Errorf("applied %v but healed %v", applied, healed)
		}
		return names, log.String()
	}
	a, logA := runOnce(7)
	b, _ := runOnce(7)
	n := min(len(a), len(b))
	if n < 5 || strings.Join(a[:n], " ") != strings.Join(b[:n], " ") {
		t.Errorf("seed 7 applied %v, then %v", a, b)
	}
	if !strings.Contains(logA, "fault: ") {
		t.Errorf("schedule log lacks fault lines:\n%s", logA)
	}
}

func TestCrashFaultOutlivesTheRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var seen error
	f := CrashFault(crashFunc(func(c context.Context) error { seen = c.Err(); return nil }))
	if err := f.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	if seen != nil {
		t.Errorf("the restart was cut short by the run's end: %v", seen)
	}
}

// crashFunc is a Target whose Crash is the function itself.
type crashFunc func(context.Context) error

func (crashFunc) Addr() string                      { return "" }
func (f crashFunc) Crash(ctx context.Context) error { return f(ctx) }

func TestSchedulePicksDistinctFaultsByWeight(t *testing.T) {
	s := &Schedule{Faults: []Fault{{Name: "heavy", Weight: 3}, {Name: "a"}, {Name: "b"}}}
	rng := rand.New(rand.NewPCG(1, 2))
	counts := map[string]int{}
	sizes := map[int]int{}
	for i := 0; i < 30000; i++ {
		set := s.pick(rng, 2)
		sizes[len(set)]++
		seen := map[string]bool{}
		for _, f := range set {
			if seen[f.Name] {
				t.Fatalf("%s drawn twice in one set", f.Name)
			}
			seen[f.Name] = true
			counts[f.Name]++
		}
	}
	for n := 0; n <= 2; n++ {
		if sizes[n] < 9000 || sizes[n] > 11000 {
			t.Errorf("sets of %d faults: %d of 30000, want about a third", n, sizes[n])
		}
	}
	if sizes[3] != 0 {
		t.Errorf("%d sets above the maximum", sizes[3])
	}
	if r := float64(counts["heavy"]) / float64(counts["a"]); r < 1.8 || r > 3.2 {
		t.Errorf("weight 3 drawn %.2f times as often as weight 1 (%v)", r, counts)
	}
}

func TestScheduleEventsAndHealedOnApply(t *testing.T) {
	var clock int64
	healCalls := 0
	s := &Schedule{
		Faults: []Fault{
			{Name: "crash", Apply: func(context.Context) error { clock += 5; return nil },
				Heal: func(context.Context) error { healCalls++; return nil }, HealedOnApply: true},
			{Name: "toxic", Apply: func(context.Context) error { return nil }, Heal: func(context.Context) error { return nil }},
		},
		Seed: 3, Period: time.Millisecond, MaxConcurrent: 2,
		Clock: func() int64 { clock++; return clock },
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if healCalls != 0 {
		t.Errorf("Heal of a fault healed on apply called %d times", healCalls)
	}
	ev := s.Events()
	active := map[string]bool{}
	crashes := 0
	for i, e := range ev {
		if i > 0 && e.At < ev[i-1].At {
			t.Fatalf("events out of order: %v", ev)
		}
		if !e.Heal {
			active[e.Fault] = true
			if e.Fault == "crash" {
				crashes++
			}
			continue
		}
		if !active[e.Fault] {
			t.Fatalf("event %d heals %s, not applied: %v", i, e.Fault, ev)
		}
		delete(active, e.Fault)
		if e.Fault == "crash" && (i == 0 || ev[i-1].Fault != "crash" || ev[i-1].Heal) {
			t.Fatalf("crash not healed right after it was applied: %v", ev)
		}
	}
	if len(active) != 0 || crashes == 0 {
		t.Fatalf("left active %v after the run; %d crashes", active, crashes)
	}
}

func TestScheduleCoversEveryFaultFirst(t *testing.T) {
	var applied []string
	mk := func(name string) Fault {
		return Fault{Name: name,
			Apply: func(context.Context) error { applied = append(applied, name); return nil },
			Heal:  func(context.Context) error { return nil }}
	}
	faults := []Fault{mk("a"), mk("b"), mk("c"), mk("d"), mk("e")}
	s := &Schedule{Faults: faults, Seed: 3, Period: time.Millisecond, Cover: true, Rounds: 8, MaxConcurrent: 2}
	names, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 8 {
		t.Fatalf("ran %d sets, want the 8 rounds asked: %v", len(names), names)
	}
	first := append([]string(nil), names[:len(faults)]...)
	slices.Sort(first)
	if !slices.Equal(first, []string{"a", "b", "c", "d", "e"}) {
		t.Errorf("the first %d sets %v are not every fault alone once", len(faults), names[:len(faults)])
	}
	if len(applied) < len(faults) {
		t.Errorf("applied only %v", applied)
	}
}

package faults

import (
	"fmt"
	"strings"
	"testing"
)

// recordingTB is a test that keeps its failures instead of failing.
type recordingTB struct {
	testing.TB
	errs []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestTrialKeepsFailuresFromTheTest(t *testing.T) {
	ran := false
	a := Trial(t, func(a *Attempt) {
		a.Errorf("first %d", 1)
		a.Fatalf("second")
		ran = true // not reached: Fatalf ends the trial
	})
	if ran {
		t.Fatal("the trial went on after Fatalf")
	}
	if !a.Failed() || t.Failed() {
		t.Fatalf("attempt failed %v, test failed %v; want true, false", a.Failed(), t.Failed())
	}
	if got := strings.Join(a.Reasons(), "|"); got != "first 1|second" {
		t.Fatalf("reasons %q", got)
	}
}

func TestTrialThatPasses(t *testing.T) {
	a := Trial(t, func(a *Attempt) { a.Logf("fine") })
	if a.Failed() || len(a.Reasons()) != 0 {
		t.Fatalf("a passing trial failed: %v", a.Reasons())
	}
}

func TestForwardFailsTheTest(t *testing.T) {
	rec := &recordingTB{TB: t}
	a := Forward(rec)
	a.Errorf("lost %d writes", 3)
	if !a.Failed() || len(rec.errs) != 1 || rec.errs[0] != "lost 3 writes" {
		t.Fatalf("failed %v, forwarded %q", a.Failed(), rec.errs)
	}
	if got := a.Reasons(); len(got) != 1 || got[0] != "lost 3 writes" {
		t.Fatalf("reasons %q", got)
	}
}

func TestRunNotes(t *testing.T) {
	long := strings.Repeat("x", 300)
	reasons := []string{"stuck client: producer-0\nmore detail", long, "c", "d", "e", "f", "g"}
	n := RunNotes(7, "first run failed: ", reasons)
	if len(n) != 6 || n[0] != "seed 7: first run failed: stuck client: producer-0" || n[5] != "seed 7: first run failed: 2 more" {
		t.Fatalf("notes %q", n)
	}
	if !strings.HasSuffix(n[1], "…") || len(n[1]) > 300 {
		t.Fatalf("a long reason is not cut: %q", n[1])
	}
}

package faults

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Attempt is a test's view for one run of a suite that keeps why the run
// failed, so a report can say it beside the verdict. A forwarding attempt
// passes every failure on to the test as it happens; a trial attempt
// keeps them to itself and leaves the test unfailed, so that the caller
// can decide what a failure means (the oracle's run repeated once, say).
type Attempt struct {
	testing.TB
	trial bool

	mu      sync.Mutex
	reasons []string
	failed  bool
}

// Forward returns an attempt that fails t with every failure it records.
func Forward(t testing.TB) *Attempt { return &Attempt{TB: t} }

// Trial runs fn with an attempt that records failures without failing t,
// on a goroutine of its own so that a Fatal ends fn alone, and returns
// the attempt once fn has returned or stopped.
func Trial(t testing.TB, fn func(a *Attempt)) *Attempt {
	a := &Attempt{TB: t, trial: true}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(a)
	}()
	<-done
	return a
}

func (a *Attempt) record(msg string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failed = true
	if msg = strings.TrimSpace(msg); msg != "" {
		a.reasons = append(a.reasons, msg)
	}
}

// Reasons are the failure messages recorded so far, in order.
func (a *Attempt) Reasons() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.reasons...)
}

// Failed reports whether this attempt recorded a failure (a forwarding
// attempt also reports the test's own).
func (a *Attempt) Failed() bool {
	a.mu.Lock()
	f := a.failed
	a.mu.Unlock()
	return f || (!a.trial && a.TB.Failed())
}

func (a *Attempt) Error(args ...any) { a.Errorf("%s", fmt.Sprintln(args...)) }

func (a *Attempt) Errorf(format string, args ...any) {
	a.TB.Helper()
	a.fail(false, fmt.Sprintf(format, args...))
}

func (a *Attempt) Fail() {
	a.record("")
	if !a.trial {
		a.TB.Fail()
	}
}

func (a *Attempt) FailNow() {
	a.record("")
	a.stop()
}

func (a *Attempt) Fatal(args ...any) { a.Fatalf("%s", fmt.Sprintln(args...)) }

func (a *Attempt) Fatalf(format string, args ...any) {
	a.TB.Helper()
	a.fail(true, fmt.Sprintf(format, args...))
}

// fail records msg, passes it on to a forwarding attempt's test, and for
// a fatal failure ends the attempt.
func (a *Attempt) fail(fatal bool, msg string) {
	a.TB.Helper()
	a.record(msg)
	switch {
	case a.trial && fatal:
		a.TB.Logf("fatal failure (trial run): %s", msg)
		runtime.Goexit()
	case a.trial:
		a.TB.Logf("failure (trial run): %s", msg)
	case fatal:
		a.TB.Fatalf("%s", msg)
	default:
		a.TB.Errorf("%s", msg)
	}
}

func (a *Attempt) Skip(args ...any) { a.Skipf("%s", fmt.Sprintln(args...)) }

func (a *Attempt) Skipf(format string, args ...any) {
	if !a.trial {
		a.TB.Skipf(format, args...)
	}
	// A trial cannot skip its test from its own goroutine: a skip inside
	// a trial is a run that did not happen.
	a.record("skipped: " + fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (a *Attempt) SkipNow() { a.Skipf("skipped") }

// stop ends the attempt: a trial's goroutine, or the test.
func (a *Attempt) stop() {
	if a.trial {
		runtime.Goexit()
	}
	a.TB.FailNow()
}

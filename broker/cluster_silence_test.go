package broker

import (
	"testing"
	"time"
)

// TestSilence checks when the active controller probes a broker: only
// after it has been silent for longer than quiet since the term began or
// since it was last heard, and never twice at once.
func TestSilence(t *testing.T) {
	s := newSilence()
	t0 := time.Unix(1000, 0)
	quiet := 2 * time.Second
	s.reset(t0)
	if s.startProbe(1, t0.Add(quiet), quiet) {
		t.Fatal("probed a broker silent for exactly quiet since the term began")
	}
	if !s.startProbe(1, t0.Add(quiet+time.Millisecond), quiet) {
		t.Fatal("a broker never heard from in the term not probed")
	}
	if s.startProbe(1, t0.Add(10*time.Second), quiet) {
		t.Fatal("a second probe of a broker started while one runs")
	}
	s.done(1)
	s.heard(1, t0.Add(10*time.Second))
	if s.startProbe(1, t0.Add(11*time.Second), quiet) {
		t.Fatal("a broker heard a second ago probed")
	}
	if !s.startProbe(1, t0.Add(13*time.Second), quiet) {
		t.Fatal("a broker silent since its last heartbeat not probed")
	}
	s.done(1)
	s.reset(t0.Add(20 * time.Second))
	if s.startProbe(1, t0.Add(21*time.Second), quiet) {
		t.Fatal("a new term probed a broker before quiet passed")
	}
}

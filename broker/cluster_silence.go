package broker

import (
	"sync"
	"time"
)

// silence tracks, for the active controller, when each broker last
// registered or heartbeated in this controller's term. A broker whose
// process died before it ever reached this controller (killed right after
// an election, say) has no heartbeat connection here whose end would start
// probeGone; the controller probes every broker that has been silent for
// more than a heartbeat interval instead, so a dead process is still fenced
// at once and only an unreachable one waits out its session.
type silence struct {
	mu      sync.Mutex
	since   time.Time // the term's activation
	last    map[int32]time.Time
	probing map[int32]bool
}

func newSilence() silence {
	return silence{last: map[int32]time.Time{}, probing: map[int32]bool{}}
}

// reset starts a term at now: no broker has been heard from yet.
func (s *silence) reset(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.since = now
	clear(s.last)
}

// heard records a registration or heartbeat of broker id.
func (s *silence) heard(id int32, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last[id] = now
}

// startProbe reports whether broker id has been silent for longer than
// quiet at now and no probe of it is running; if so the caller probes it
// and calls done.
func (s *silence) startProbe(id int32, now time.Time, quiet time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	last, ok := s.last[id]
	if !ok {
		last = s.since
	}
	if s.probing[id] || now.Sub(last) <= quiet {
		return false
	}
	s.probing[id] = true
	return true
}

func (s *silence) done(id int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.probing, id)
}

// probeSilent starts probeGone for every unfenced broker this controller
// has not heard from for a heartbeat interval and a tick.
func (a *activeController) probeSilent() {
	quiet := a.n.bc.Cluster.HeartbeatInterval + 2*controllerTick
	now := time.Now()
	for _, b := range a.n.ctl.Image().Brokers() {
		if b.Fenced || b.ID == a.n.self || !a.silence.startProbe(b.ID, now, quiet) {
			continue
		}
		a.n.wg.Go(func() {
			defer a.silence.done(b.ID)
			a.probeGone(b.ID, b.Epoch)
		})
	}
}

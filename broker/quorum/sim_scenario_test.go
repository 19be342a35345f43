package quorum

import (
	"fmt"
	"testing"
	"testing/cryptotest"
	"time"
)

// TestSimulation runs seeded clusters of 3 and 5 nodes through message
// loss, delay and reordering, partitions (minority, majority, isolated
// leader), crashes and restarts from the durable directory, and a long
// outage that a node recovers from by snapshot; safety is checked after
// every Ready, liveness after the faults heal. A failing seed prints the
// flags that replay it alone.
func TestSimulation(t *testing.T) {
	seeds := *flagSeeds
	if testing.Short() {
		seeds = 10
	}
	start := time.Now()
	var snaps, restores int
	for _, n := range []int{3, 5} {
		for i := range seeds {
			seed := int64(n*100000 + i)
			if *flagSeed >= 0 && seed != *flagSeed {
				continue
			}
			s := runScenario(t, seed, n)
			if s.err != nil {
				t.Fatalf("seed %d (%d nodes): %v\nreplay: go test ./broker/quorum/ -run 'TestSimulation$' -quorum.seed=%d", seed, n, s.err, seed)
			}
			snaps += s.snapsSent
			for _, nd := range s.nodes {
				restores += nd.app.restores
			}
		}
	}
	t.Logf("%d seeds x {3,5} nodes in %v; %d snapshots sent, %d application restores", seeds, time.Since(start).Round(time.Millisecond), snaps, restores)
	if *flagSeed < 0 && snaps == 0 {
		t.Fatal("no run caught a follower up by snapshot")
	}
}

// runScenario runs one seed: faults chosen from the seed in ten phases,
// then everything healed and checked for convergence.
func runScenario(t *testing.T, seed int64, n int) (s *sim) {
	defer func() {
		// raft panics on broken invariants; report it with the seed.
		if r := recover(); r != nil {
			first := "none"
			if s != nil && s.err != nil {
				first = s.err.Error()
			}
			t.Fatalf("seed %d (%d nodes): panic: %v (first failure: %s)\nreplay: go test ./broker/quorum/ -run 'TestSimulation$' -quorum.seed=%d", seed, n, r, first, seed)
		}
	}()
	// etcd raft draws its randomised election timeouts from crypto/rand;
	// seeding that too makes the whole run a function of the seed.
	cryptotest.SetGlobalRandom(t, uint64(seed))
	s = newSim(t, seed, n, t.TempDir())
	minority := (n - 1) / 2
	s.run(40, 0.05) // elect a leader, commit a little
	for phase := 0; phase < 10 && s.err == nil; phase++ {
		s.loss = []float64{0, 0.05, 0.2}[s.rng.IntN(3)]
		s.maxDelay = 1 + s.rng.IntN(8)
		ids := append([]uint64(nil), s.ids...)
		s.rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		switch s.rng.IntN(7) {
		case 0: // a minority cut off from the majority
			s.partition(ids[:minority], ids[minority:])
		case 1: // split three ways: no group has a quorum, so nothing proposed now may commit
			a, b := ids[:minority], ids[minority:minority+(n-minority)/2]
			c := ids[len(a)+len(b):]
			s.partition(a, b)
			s.partition(a, c)
			s.partition(b, c)
			// Entries proposed before may still commit (a majority may
			// hold them already); entries proposed during the split may not.
			proposedBefore := s.proposed
			s.run(30, 0.2)
			for _, e := range s.committed {
				var v int
				if _, err := fmt.Sscanf(string(e.Data), "v%d", &v); err != nil || v > proposedBefore {
					s.fail("entry %d %q committed with no quorum anywhere (%v | %v | %v)", e.Index, e.Data, a, b, c)
				}
			}
		case 2: // leader isolated
			if l, ok := s.leader(); ok {
				s.partition([]uint64{l}, without(s.ids, l))
			}
		case 3: // crash up to a minority
			for _, id := range ids[:1+s.rng.IntN(minority)] {
				s.crash(id)
			}
		case 4: // crash the leader
			if l, ok := s.leader(); ok {
				s.crash(l)
			}
		case 5: // a node away long enough to need a snapshot
			s.crash(ids[0])
			s.heal()
			s.loss = 0
			s.run(30, 0)
			for range 60 {
				s.propose()
				s.run(1, 0)
			}
		case 6: // restart everything that is down, heal
			for _, id := range s.ids {
				s.restart(id)
			}
			s.heal()
		}
		s.run(20+s.rng.IntN(40), 0.1)
		// Bring back some of what is down so faults do not pile up.
		if s.rng.IntN(2) == 0 {
			for _, id := range s.ids {
				s.restart(id)
			}
			s.heal()
		}
		s.checkPrefixes()
	}
	if s.err != nil {
		return s
	}
	// Heal: within a bound, a leader exists, a new proposal commits, and
	// every node has applied exactly the committed log.
	for _, id := range s.ids {
		s.restart(id)
	}
	s.heal()
	s.loss, s.maxDelay = 0, 1
	const bound = 200 // ticks: twenty election timeouts
	if !s.until(bound, func() bool { _, ok := s.leader(); return ok }) {
		s.fail("no leader %d ticks after heal", bound)
		return s
	}
	before := len(s.committed)
	if !s.until(bound, func() bool {
		if len(s.committed) == before {
			s.propose()
		}
		return len(s.committed) > before && s.converged()
	}) {
		s.fail("cluster did not commit and converge %d ticks after heal (committed %d): %s", bound, len(s.committed), s.describe())
	}
	s.checkPrefixes()
	return s
}

// until steps until cond holds, for at most ticks ticks.
func (s *sim) until(ticks int, cond func() bool) bool {
	for range ticks * simStepsPerTick {
		if s.err != nil {
			return false
		}
		if cond() {
			return true
		}
		s.step()
	}
	return cond()
}

func without(ids []uint64, x uint64) []uint64 {
	var out []uint64
	for _, id := range ids {
		if id != x {
			out = append(out, id)
		}
	}
	return out
}

func TestSimulationReplays(t *testing.T) {
	// The same seed gives the same run: a failing seed replays exactly.
	a, b := runScenario(t, 42, 3), runScenario(t, 42, 3)
	if a.err != nil || b.err != nil {
		t.Fatalf("seed 42: %v / %v", a.err, b.err)
	}
	if fmt.Sprint(a.committedLog()) != fmt.Sprint(b.committedLog()) || a.now != b.now || a.snapsSent != b.snapsSent {
		t.Fatalf("seed 42 ran differently twice: %d vs %d steps, %d vs %d entries", a.now, b.now, len(a.committed), len(b.committed))
	}
}

// describe prints each node's raft and application state.
func (s *sim) describe() string {
	var out string
	for _, id := range s.ids {
		n := s.nodes[id]
		if n == nil {
			out += fmt.Sprintf("\n  %d: down", id)
			continue
		}
		st := n.core.Status()
		first, _ := n.core.st.FirstIndex()
		last, _ := n.core.st.LastIndex()
		out += fmt.Sprintf("\n  %d: %v term %d lead %d commit %d applied %d log [%d,%d] app %d entries (last %d)",
			id, st.RaftState, st.GetTerm(), st.Lead, st.GetCommit(), st.Applied, first, last, len(n.app.entries), n.app.applied)
	}
	return out
}

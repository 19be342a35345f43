package quorum

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

var (
	flagSeed  = flag.Int64("quorum.seed", -1, "run only this simulation seed")
	flagSeeds = flag.Int("quorum.seeds", 100, "simulation seeds per cluster size")
)

// memApp is the application of the simulated cluster: the list of
// entries it applied, which is also its snapshot.
type memApp struct {
	entries  []Entry
	applied  uint64 // highest index applied, for order checks
	restores int
}

func (a *memApp) Restore(s Snapshot) error {
	ents, err := decodeAppState(s.Data)
	if err != nil {
		return err
	}
	a.entries, a.applied = ents, s.Index
	a.restores++
	return nil
}

func (a *memApp) Apply(es []Entry) error {
	for _, e := range es {
		if e.Index <= a.applied {
			return fmt.Errorf("entry %d applied after %d", e.Index, a.applied)
		}
		a.applied = e.Index
		a.entries = append(a.entries, Entry{Index: e.Index, Term: e.Term, Data: bytes.Clone(e.Data)})
	}
	return nil
}

func (a *memApp) Snapshot() ([]byte, error) {
	var b []byte
	for _, e := range a.entries {
		b = binary.BigEndian.AppendUint64(b, e.Index)
		b = binary.BigEndian.AppendUint64(b, e.Term)
		b = binary.BigEndian.AppendUint32(b, uint32(len(e.Data)))
		b = append(b, e.Data...)
	}
	return b, nil
}

func decodeAppState(b []byte) ([]Entry, error) {
	var ents []Entry
	for len(b) > 0 {
		if len(b) < 20 {
			return nil, errors.New("short snapshot")
		}
		n := int(binary.BigEndian.Uint32(b[16:20]))
		if len(b) < 20+n {
			return nil, errors.New("short snapshot entry")
		}
		ents = append(ents, Entry{Index: binary.BigEndian.Uint64(b), Term: binary.BigEndian.Uint64(b[8:]), Data: bytes.Clone(b[20 : 20+n])})
		b = b[20+n:]
	}
	return ents, nil
}

type simNode struct {
	id   uint64
	cfg  Config
	core *Core
	app  *memApp
}

type flight struct {
	m  *pb.Message
	at int
}

// sim is a cluster of Cores on a simulated network: no goroutines, no
// sockets, every choice from one seeded source.
type sim struct {
	tb        testing.TB
	rng       *rand.Rand
	ids       []uint64
	nodes     map[uint64]*simNode
	down      map[uint64]*simNode // crashed: config kept, core gone
	net       []flight
	now       int
	loss      float64
	maxDelay  int
	cut       map[[2]uint64]bool
	leaders   map[uint64]uint64 // term -> leader
	committed map[uint64]Entry  // index -> the entry committed there
	proposed  int
	snapsSent int
	synced    map[uint64]int64 // node -> log bytes fsynced
	err       error
	// onReady, when set, sees every batch after Ready made it durable and
	// before its messages leave or its entries are applied.
	onReady func(n *simNode, b Batch)
	// events, when trace is set, records leader changes, restores and
	// applied entries, for the scripted tests.
	trace  bool
	events []string
	// snapEntries and retain configure snapshots (SnapshotEntries and
	// RetainEntries) of the nodes.
	snapEntries, retain uint64
	// syncHook, when set, replaces fsync for nodes started afterwards.
	syncHook func(n *simNode, f *os.File) error
}

// simStepsPerTick is how many message-delivery rounds a tick spans, so
// that a round trip fits in well under a heartbeat.
const simStepsPerTick = 4

func newSim(tb testing.TB, seed int64, n int, dir string) *sim {
	return newSimWith(tb, seed, n, dir, nil)
}

// newSimWith is newSim with setup run before the nodes start.
func newSimWith(tb testing.TB, seed int64, n int, dir string, setup func(*sim)) *sim {
	s := &sim{
		tb: tb, rng: rand.New(rand.NewPCG(uint64(seed), 0x5eed)),
		nodes: map[uint64]*simNode{}, down: map[uint64]*simNode{},
		cut: map[[2]uint64]bool{}, synced: map[uint64]int64{}, leaders: map[uint64]uint64{}, committed: map[uint64]Entry{},
		maxDelay: 1, snapEntries: 20, retain: 3,
	}
	voters := map[uint64]string{}
	for i := 1; i <= n; i++ {
		s.ids = append(s.ids, uint64(i))
		voters[uint64(i)] = fmt.Sprintf("node-%d", i)
	}
	if setup != nil {
		setup(s)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, id := range s.ids {
		cfg := Config{
			NodeID: id, Voters: voters, Dir: filepath.Join(dir, fmt.Sprint(id)), ClusterID: "sim",
			Timing:          Timing{TickInterval: time.Millisecond, ElectionTick: 10, HeartbeatTick: 1},
			SnapshotEntries: s.snapEntries, RetainEntries: s.retain, Logger: logger,
		}
		s.start(&simNode{id: id, cfg: cfg})
	}
	return s
}

func (s *sim) fail(format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf("step %d: "+format, append([]any{s.now}, args...)...)
	}
}

func (s *sim) start(n *simNode) {
	cfg, err := n.cfg.withDefaults()
	if err != nil {
		s.fail("config: %v", err)
		return
	}
	st, err := OpenStorage(cfg.Dir, cfg.voterIDs())
	if err != nil {
		s.fail("open storage %d: %v", n.id, err)
		return
	}
	// A crash is a power loss: the log keeps only what was fsynced. The
	// hook records how much that is instead of syncing, which keeps
	// hundreds of seeds fast; the files renamed into place (snapshot,
	// rewritten log) are complete once renamed.
	if info, err := os.Stat(filepath.Join(cfg.Dir, logFile)); err == nil {
		s.synced[n.id] = info.Size()
	}
	st.sync = func(f *os.File) error {
		if base := filepath.Base(f.Name()); base == logFile || base == logFile+tmpSuffix {
			info, err := f.Stat()
			if err != nil {
				return err
			}
			s.synced[n.id] = info.Size()
		}
		return nil
	}
	if s.syncHook != nil {
		st.sync = func(f *os.File) error { return s.syncHook(n, f) }
	}
	n.app = &memApp{}
	if n.core, err = newCore(cfg, n.app, st); err != nil {
		s.fail("start %d: %v", n.id, err)
		return
	}
	s.nodes[n.id] = n
	delete(s.down, n.id)
}

func (s *sim) crash(id uint64) {
	n := s.nodes[id]
	if n == nil {
		return
	}
	n.core.Close()
	n.core = nil
	delete(s.nodes, id)
	s.down[id] = n
	if s.syncHook == nil {
		// Lose what was written but not fsynced.
		if err := os.Truncate(filepath.Join(n.cfg.Dir, logFile), s.synced[id]); err != nil {
			s.fail("power loss on %d: %v", id, err)
		}
	}
}

func (s *sim) restart(id uint64) {
	if n := s.down[id]; n != nil {
		s.start(n)
	}
}

// partition cuts every link between the two groups.
func (s *sim) partition(a, b []uint64) {
	for _, x := range a {
		for _, y := range b {
			s.cut[[2]uint64{x, y}] = true
			s.cut[[2]uint64{y, x}] = true
		}
	}
}

func (s *sim) heal() { s.cut = map[[2]uint64]bool{} }

func (s *sim) leader() (uint64, bool) {
	for _, id := range s.ids {
		if n := s.nodes[id]; n != nil && n.core.Status().RaftState == raft.StateLeader {
			return id, true
		}
	}
	return 0, false
}

// step runs one delivery round, ticking every simStepsPerTick rounds.
func (s *sim) step() {
	s.now++
	if s.now%simStepsPerTick == 0 {
		for _, id := range s.ids {
			if n := s.nodes[id]; n != nil {
				n.core.Tick()
			}
		}
	}
	var due, later []flight
	for _, f := range s.net {
		if f.at <= s.now {
			due = append(due, f)
		} else {
			later = append(later, f)
		}
	}
	s.net = later
	s.rng.Shuffle(len(due), func(i, j int) { due[i], due[j] = due[j], due[i] })
	for _, f := range due {
		s.deliver(f.m)
	}
	for _, id := range s.ids {
		if n := s.nodes[id]; n != nil {
			s.process(n)
		}
	}
}

func (s *sim) deliver(m *pb.Message) {
	from, to := m.GetFrom(), m.GetTo()
	ok := s.nodes[to] != nil && !s.cut[[2]uint64{from, to}]
	if m.GetType() == pb.MsgSnap {
		if sender := s.nodes[from]; sender != nil {
			sender.core.ReportSnapshot(to, ok)
		}
	}
	if !ok {
		if sender := s.nodes[from]; sender != nil {
			sender.core.ReportUnreachable(to)
		}
		return
	}
	if err := s.nodes[to].core.Step(m); err != nil {
		s.fail("node %d step %v: %v", to, m.GetType(), err)
	}
}

// process runs the node's Ready steps, checking safety after each.
func (s *sim) process(n *simNode) {
	for range 100 {
		b, ok, err := n.core.Ready()
		if err != nil {
			s.fail("node %d ready: %v", n.id, err)
			return
		}
		if !ok {
			return
		}
		if s.onReady != nil {
			s.onReady(n, b)
		}
		for _, m := range b.Messages {
			if m.GetType() == pb.MsgSnap {
				s.snapsSent++
			}
			if s.rng.Float64() < s.loss {
				// A transport knows what it dropped; raft waits for
				// word on a snapshot.
				if m.GetType() == pb.MsgSnap {
					n.core.ReportSnapshot(m.GetTo(), false)
				}
				continue
			}
			s.net = append(s.net, flight{m: m, at: s.now + 1 + s.rng.IntN(s.maxDelay)})
		}
		if err := n.core.Advance(b); err != nil {
			s.fail("node %d advance: %v", n.id, err)
			return
		}
		if s.trace {
			s.traceBatch(n, b)
		}
		if b.Restore != nil {
			for _, e := range n.app.entries {
				s.checkCommitted(n.id, e)
			}
		}
		for _, e := range b.Committed {
			s.checkCommitted(n.id, e)
		}
		st := n.core.Status()
		if st.RaftState == raft.StateLeader {
			if prev, ok := s.leaders[st.GetTerm()]; ok && prev != n.id {
				s.fail("two leaders in term %d: %d and %d", st.GetTerm(), prev, n.id)
			}
			s.leaders[st.GetTerm()] = n.id
		}
	}
	s.fail("node %d: Ready did not settle", n.id)
}

// checkCommitted holds every node to one committed log (log matching and
// state machine safety).
func (s *sim) checkCommitted(id uint64, e Entry) {
	if g, ok := s.committed[e.Index]; ok {
		if g.Term != e.Term || !bytes.Equal(g.Data, e.Data) {
			s.fail("node %d committed %d@%d %q, elsewhere %d@%d %q", id, e.Index, e.Term, e.Data, g.Index, g.Term, g.Data)
		}
		return
	}
	s.committed[e.Index] = Entry{Index: e.Index, Term: e.Term, Data: bytes.Clone(e.Data)}
}

// propose offers a fresh value to the leader, if there is one.
func (s *sim) propose() (uint64, bool) {
	id, ok := s.leader()
	if !ok {
		return 0, false
	}
	s.proposed++
	if _, err := s.nodes[id].core.Propose([]byte(fmt.Sprintf("v%d", s.proposed))); err != nil {
		if !errors.Is(err, ErrNotLeader) {
			s.fail("propose on %d: %v", id, err)
		}
		return 0, false
	}
	return id, true
}

// run steps the cluster for ticks ticks, proposing with probability p per
// step.
func (s *sim) run(ticks int, p float64) {
	for range ticks * simStepsPerTick {
		if s.err != nil {
			return
		}
		if s.rng.Float64() < p {
			s.propose()
		}
		s.step()
	}
}

// converged reports whether every node runs and has applied exactly the
// committed log.
func (s *sim) converged() bool {
	if len(s.down) > 0 {
		return false
	}
	want := s.committedLog()
	for _, n := range s.nodes {
		if !slices.EqualFunc(n.app.entries, want, func(a, b Entry) bool {
			return a.Index == b.Index && a.Term == b.Term && bytes.Equal(a.Data, b.Data)
		}) {
			return false
		}
	}
	return true
}

func (s *sim) committedLog() []Entry {
	var ents []Entry
	for _, e := range s.committed {
		ents = append(ents, e)
	}
	slices.SortFunc(ents, func(a, b Entry) int { return int(a.Index) - int(b.Index) })
	return ents
}

// checkNoGaps holds each node's application to a prefix of the committed
// log: nothing committed is skipped or lost, across restarts included.
func (s *sim) checkPrefixes() {
	all := s.committedLog()
	for _, id := range s.ids {
		n := s.nodes[id]
		if n == nil {
			continue
		}
		if len(n.app.entries) > len(all) {
			s.fail("node %d applied %d entries, %d committed", id, len(n.app.entries), len(all))
			return
		}
		for i, e := range n.app.entries {
			if all[i].Index != e.Index {
				s.fail("node %d applied index %d where the committed log has %d: an entry was skipped", id, e.Index, all[i].Index)
				return
			}
		}
	}
}

func (s *sim) traceBatch(n *simNode, b Batch) {
	if b.LeaderChanged {
		s.events = append(s.events, fmt.Sprintf("%d: term %d leader %d", n.id, b.Term, b.Leader))
	}
	if b.Restore != nil {
		s.events = append(s.events, fmt.Sprintf("%d: restore snapshot %d@%d (%d entries)", n.id, b.Restore.Index, b.Restore.Term, len(n.app.entries)))
	}
	for _, e := range b.Committed {
		s.events = append(s.events, fmt.Sprintf("%d: apply %d@%d %s", n.id, e.Index, e.Term, e.Data))
	}
	for _, p := range b.Placed {
		s.events = append(s.events, fmt.Sprintf("%d: placed %d at %d@%d", n.id, p.ID, p.Index, p.Term))
	}
	for _, id := range b.Dropped {
		s.events = append(s.events, fmt.Sprintf("%d: dropped %d", n.id, id))
	}
}

package replica

import (
	"flag"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"
)

// TestRandomCluster drives three replicas of one partition and a simulated
// controller with seeded random operations (produce, follower fetches,
// ticks, delayed AlterPartition requests and answers, delayed metadata,
// broker fencing and restart, leader elections from the ISR) and checks
// after every step the invariants of Kafka's replication protocol as the
// kafka-tlaplus description states them: no committed record is lost or
// changed when leaders change; a leader's high watermark never decreases
// within its epoch and only moves with the ISR at min.insync.replicas; the
// ISR always holds the leader; a replica's high watermark is within its
// log; the leader epochs a broker learns never go backwards. A failing seed
// replays exactly: go test -run TestRandomCluster/seed=N (with
// -replica.seeds at least N).
func TestRandomCluster(t *testing.T) {
	for seed := int64(1); seed <= *randomSeeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			newSim(seed).run(t, 800)
		})
	}
}

// randomSeeds is how many seeds TestRandomCluster runs; the default keeps
// the package test under a second, a deeper search is -replica.seeds=5000.
var randomSeeds = flag.Int64("replica.seeds", 500, "seeds for TestRandomCluster")

type record struct {
	epoch int32
	id    int
}

type simBroker struct {
	id       int32
	alive    bool
	s        *State
	log      []record
	cache    []EpochEntry
	maxEpoch int32           // the largest leader epoch this broker learned
	leaderHW map[int32]int64 // per leader epoch, the largest HW it had as leader
}

type simAlter struct {
	from int32
	req  AlterPartition
}

type simAnswer struct {
	to  int32
	res AlterResult
}

// simProduce is an acks=all produce waiting at its leader, as Kafka's
// DelayedProduce.
type simProduce struct {
	leader int32
	epoch  int32
	offset int64
	rec    record
}

type sim struct {
	rng     *rand.Rand
	now     time.Time
	cfg     Config
	brokers map[int32]*simBroker
	epochs  map[int32]int64 // registered broker epochs
	// The controller's partition registration.
	ctrl      PartitionState
	alters    []simAlter
	answers   []simAnswer
	committed map[int64]record // offset -> the record committed there
	waiting   []simProduce     // acks=all produces not yet answered
	acked     int
	nextID    int
	trace     []string
}

func newSim(seed int64) *sim {
	rng := rand.New(rand.NewSource(seed))
	s := &sim{rng: rng, now: time.UnixMilli(1_000_000), brokers: map[int32]*simBroker{},
		epochs: map[int32]int64{}, committed: map[int64]record{}}
	s.cfg = Config{MinInSyncReplicas: 1 + rng.Intn(2), ReplicaLagTimeMax: 10 * time.Second}
	for id := int32(1); id <= 3; id++ {
		s.epochs[id] = int64(id) * 100
		s.brokers[id] = &simBroker{id: id, alive: true, s: s.newState(id), leaderHW: map[int32]int64{}}
	}
	s.ctrl = PartitionState{Leader: 1, LeaderEpoch: 0, PartitionEpoch: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}
	return s
}

func (s *sim) newState(id int32) *State {
	cfg := s.cfg
	cfg.BrokerID = id
	return New(cfg)
}

func (s *sim) view() map[int32]BrokerStatus {
	v := map[int32]BrokerStatus{}
	for id, b := range s.brokers {
		v[id] = BrokerStatus{Epoch: s.epochs[id], Fenced: !b.alive}
	}
	return v
}

func (s *sim) logf(format string, a ...any) {
	s.trace = append(s.trace, fmt.Sprintf(format, a...))
}

func (s *sim) run(t *testing.T, steps int) {
	for _, b := range s.brokers {
		s.deliverMetadata(b)
	}
	for step := 0; step < steps; step++ {
		for _, b := range s.brokers {
			b.s.SetBrokers(s.view())
		}
		s.step()
		err := s.check()
		if err == nil {
			err = s.answerProduces()
		}
		if err != nil {
			n := len(s.trace)
			t.Fatalf("step %d: %v\nlast operations:\n%v", step, err, s.trace[max(0, n-30):])
		}
	}
}

func (s *sim) pick() *simBroker {
	return s.brokers[int32(1+s.rng.Intn(3))]
}

func (s *sim) step() {
	switch op := s.rng.Intn(20); {
	case op < 4:
		s.produce(s.pick())
	case op < 10:
		s.fetch(s.pick())
	case op < 12:
		s.now = s.now.Add(time.Duration(s.rng.Intn(6000)) * time.Millisecond)
		for _, b := range s.brokers {
			if b.alive {
				s.effects(b, b.s.Tick(s.now))
			}
		}
	case op < 14:
		s.deliverAlter()
	case op < 16:
		s.deliverAnswer()
	case op < 18:
		if b := s.pick(); b.alive {
			s.deliverMetadata(b)
		}
	case op < 19:
		s.fenceOrRestart(s.pick())
	default:
		s.electOther()
	}
}

func (s *sim) produce(b *simBroker) {
	if !b.alive || b.s.Role() != RoleLeader {
		return
	}
	acks := int16(-1)
	if s.rng.Intn(2) == 0 {
		acks = 1
	}
	if err := b.s.CheckAppend(acks); err != nil {
		s.logf("b%d produce refused %v", b.id, err)
		return
	}
	s.nextID++
	b.log = append(b.log, record{epoch: b.s.LeaderEpoch(), id: s.nextID})
	s.logf("b%d produce id=%d at %d epoch %d", b.id, s.nextID, len(b.log)-1, b.s.LeaderEpoch())
	if acks == -1 {
		s.waiting = append(s.waiting, simProduce{leader: b.id, epoch: b.s.LeaderEpoch(),
			offset: int64(len(b.log) - 1), rec: b.log[len(b.log)-1]})
	}
	s.effects(b, b.s.LocalAppend(int64(len(b.log)), s.now))
}

// answerProduces completes the waiting acks=all produces whose leader's
// high watermark passed them (an acknowledged record must be committed);
// a produce whose broker no longer leads its epoch is answered
// NOT_LEADER_OR_FOLLOWER.
func (s *sim) answerProduces() error {
	var still []simProduce
	for _, p := range s.waiting {
		b := s.brokers[p.leader]
		if !b.alive || b.s.Role() != RoleLeader || b.s.LeaderEpoch() != p.epoch {
			continue
		}
		done, err := b.s.CheckAcks(p.offset + 1)
		switch {
		case !done:
			still = append(still, p)
		case err == nil:
			s.acked++
			if c, ok := s.committed[p.offset]; !ok || c != p.rec {
				return fmt.Errorf("b%d acknowledged %+v at %d, not committed (committed there: %+v)", b.id, p.rec, p.offset, c)
			}
		}
	}
	s.waiting = still
	return nil
}

func (s *sim) fetch(f *simBroker) {
	if !f.alive || f.s.Role() != RoleFollower || f.s.Leader() == NoLeader {
		return
	}
	l := s.brokers[f.s.Leader()]
	if !l.alive {
		return
	}
	last := UndefinedEpoch
	if len(f.cache) > 0 {
		last = f.cache[len(f.cache)-1].Epoch
	}
	req := FetchRequest{ReplicaID: f.id, BrokerEpoch: s.epochs[f.id], CurrentLeaderEpoch: f.s.LeaderEpoch(),
		FetchOffset: int64(len(f.log)), LogStartOffset: 0, LastFetchedEpoch: last}
	res := l.s.FollowerFetch(req, l.cache, s.now)
	s.effects(l, res.Effects)
	switch {
	case res.Err != nil:
		s.logf("b%d fetch from b%d at %d: %v", f.id, l.id, req.FetchOffset, res.Err)
	case res.Diverging != nil:
		tr := TruncationFor(f.cache, int64(len(f.log)), f.s.HighWatermark(), *res.Diverging)
		s.logf("b%d fetch from b%d at %d epoch %d: diverging %v, truncate to %d", f.id, l.id, req.FetchOffset, last, *res.Diverging, tr.Offset)
		f.truncate(tr.Offset)
	default:
		end := min(int64(len(l.log)), req.FetchOffset+int64(1+s.rng.Intn(3)))
		for o := req.FetchOffset; o < end; o++ {
			r := l.log[o]
			f.log = append(f.log, r)
			if len(f.cache) == 0 || f.cache[len(f.cache)-1].Epoch < r.epoch {
				f.cache = append(f.cache, EpochEntry{Epoch: r.epoch, StartOffset: o})
			}
		}
		f.s.LocalAppend(int64(len(f.log)), s.now)
		f.s.LeaderHighWatermark(res.HighWatermark)
		s.logf("b%d fetch from b%d at %d: got to %d, hw %d", f.id, l.id, req.FetchOffset, end, f.s.HighWatermark())
	}
}

func (b *simBroker) truncate(offset int64) {
	b.log = b.log[:offset]
	b.cache = slices.DeleteFunc(b.cache, func(e EpochEntry) bool { return e.StartOffset >= offset })
	b.s.Truncated(offset)
}

func (s *sim) effects(b *simBroker, eff Effects) {
	if eff.EpochStart != nil {
		if len(b.cache) == 0 || b.cache[len(b.cache)-1].Epoch < eff.EpochStart.Epoch {
			b.cache = append(b.cache, *eff.EpochStart)
		}
	}
	if eff.AlterPartition != nil {
		s.alters = append(s.alters, simAlter{from: b.id, req: *eff.AlterPartition})
	}
	if b.s.Role() == RoleLeader {
		s.commit(b)
	}
}

// commit records what a leader's high watermark covers as committed.
func (s *sim) commit(b *simBroker) {
	hw := b.s.HighWatermark()
	for o := int64(0); o < hw; o++ {
		if _, ok := s.committed[o]; !ok {
			s.committed[o] = b.log[o]
		}
	}
}

// takeRandom removes and returns a random element of q: messages in
// flight are delivered in any order.
func takeRandom[T any](rng *rand.Rand, q *[]T) (T, bool) {
	var zero T
	if len(*q) == 0 {
		return zero, false
	}
	i := rng.Intn(len(*q))
	v := (*q)[i]
	*q = slices.Delete(*q, i, i+1)
	return v, true
}

// deliverAlter is the controller handling one AlterPartition, as Kafka's
// ReplicationControlManager.alterPartition.
func (s *sim) deliverAlter() {
	a, ok := takeRandom(s.rng, &s.alters)
	if !ok {
		return
	}
	ans := AlterResult{Seq: a.req.Seq}
	var isr []int32
	for _, m := range a.req.NewISR {
		isr = append(isr, m.BrokerID)
	}
	switch {
	case a.req.LeaderEpoch < s.ctrl.LeaderEpoch:
		ans.Err = ErrFencedLeaderEpoch
	case a.from != s.ctrl.Leader || !slices.Contains(isr, a.from):
		ans.Err = ErrInvalidRequest
	case a.req.PartitionEpoch < s.ctrl.PartitionEpoch:
		ans.Err = ErrInvalidUpdateVersion
	default:
		for _, m := range a.req.NewISR {
			if !s.brokers[m.BrokerID].alive || (m.BrokerEpoch != -1 && m.BrokerEpoch != s.epochs[m.BrokerID]) {
				ans.Err = ErrIneligibleReplica
			}
		}
	}
	if ans.Err == nil {
		s.ctrl.ISR = sortedUnion(isr)
		s.ctrl.PartitionEpoch++
		ans.LeaderEpoch, ans.PartitionEpoch, ans.ISR = s.ctrl.LeaderEpoch, s.ctrl.PartitionEpoch, s.ctrl.ISR
	}
	s.logf("controller alter from b%d seq=%d isr=%v pe=%d: %v -> %+v", a.from, a.req.Seq, isr, a.req.PartitionEpoch, ans.Err, s.ctrl)
	s.answers = append(s.answers, simAnswer{to: a.from, res: ans})
}

func (s *sim) deliverAnswer() {
	a, ok := takeRandom(s.rng, &s.answers)
	if !ok {
		return
	}
	if b := s.brokers[a.to]; b.alive {
		s.logf("b%d alter answer seq=%d %v", b.id, a.res.Seq, a.res.Err)
		s.effects(b, b.s.AlterPartitionResult(a.res, s.now))
	}
}

func (s *sim) deliverMetadata(b *simBroker) {
	ps := s.ctrl
	ps.Replicas, ps.ISR = slices.Clone(ps.Replicas), slices.Clone(ps.ISR)
	s.logf("b%d metadata %+v", b.id, ps)
	s.effects(b, b.s.MetadataChange(ps, b.cache, s.now, int64(len(b.log))))
}

// fenceOrRestart fences a live broker (the controller takes it out of the
// ISR and elects another leader from the ISR, as Kafka's
// handleBrokerFenced) or restarts a fenced one with its log and a new
// broker epoch.
func (s *sim) fenceOrRestart(b *simBroker) {
	if b.alive {
		alive := 0
		for _, o := range s.brokers {
			if o.alive {
				alive++
			}
		}
		if alive < 2 {
			return
		}
		b.alive = false
		s.logf("b%d fenced", b.id)
		if len(s.ctrl.ISR) > 1 {
			s.ctrl.ISR = slices.DeleteFunc(slices.Clone(s.ctrl.ISR), func(id int32) bool { return id == b.id })
		}
		if s.ctrl.Leader == b.id {
			s.elect(b.id)
		}
		s.ctrl.PartitionEpoch++
		return
	}
	hw := b.s.HighWatermark()
	b.alive = true
	s.epochs[b.id]++
	b.s = s.newState(b.id)
	b.s.Restore(0, int64(len(b.log)), hw)
	s.logf("b%d restarted with epoch %d", b.id, s.epochs[b.id])
	if s.ctrl.Leader == NoLeader && slices.Contains(s.ctrl.ISR, b.id) {
		s.ctrl.Leader = b.id
		s.ctrl.LeaderEpoch++
		s.ctrl.PartitionEpoch++
	}
	s.deliverMetadata(b)
}

// elect moves leadership to a live ISR member other than not, or to no
// leader; the leader epoch moves either way.
func (s *sim) elect(not int32) {
	var candidates []int32
	for _, id := range s.ctrl.ISR {
		if id != not && s.brokers[id].alive {
			candidates = append(candidates, id)
		}
	}
	s.ctrl.Leader = NoLeader
	if len(candidates) > 0 {
		s.ctrl.Leader = candidates[s.rng.Intn(len(candidates))]
	}
	s.ctrl.LeaderEpoch++
	s.logf("controller elects %d in epoch %d", s.ctrl.Leader, s.ctrl.LeaderEpoch)
}

// electOther is a leader election to another ISR member (an
// ElectLeaders or a preferred-leader move).
func (s *sim) electOther() {
	if s.ctrl.Leader == NoLeader {
		return
	}
	for _, id := range s.ctrl.ISR {
		if id != s.ctrl.Leader && s.brokers[id].alive {
			s.elect(s.ctrl.Leader)
			s.ctrl.PartitionEpoch++
			return
		}
	}
}

func (s *sim) check() error {
	if s.ctrl.Leader != NoLeader && !slices.Contains(s.ctrl.ISR, s.ctrl.Leader) {
		return fmt.Errorf("controller ISR %v without leader %d", s.ctrl.ISR, s.ctrl.Leader)
	}
	for _, b := range s.brokers {
		st := b.s
		if st.HighWatermark() > st.LogEndOffset() || st.HighWatermark() != min(st.HighWatermark(), int64(len(b.log))) {
			return fmt.Errorf("b%d high watermark %d beyond its log end %d", b.id, st.HighWatermark(), len(b.log))
		}
		if e := st.LeaderEpoch(); e >= 0 {
			if e < b.maxEpoch {
				return fmt.Errorf("b%d leader epoch went back from %d to %d", b.id, b.maxEpoch, e)
			}
			if e > s.ctrl.LeaderEpoch {
				return fmt.Errorf("b%d leader epoch %d ahead of the controller's %d", b.id, e, s.ctrl.LeaderEpoch)
			}
			b.maxEpoch = e
		}
		if st.Role() != RoleLeader {
			continue
		}
		if !slices.Contains(st.ISR(), b.id) || !slices.Contains(st.MaximalISR(), b.id) {
			return fmt.Errorf("b%d leads with ISR %v maximal %v without itself", b.id, st.ISR(), st.MaximalISR())
		}
		prev, seen := b.leaderHW[st.LeaderEpoch()]
		if seen && st.HighWatermark() < prev {
			return fmt.Errorf("b%d leader high watermark went back from %d to %d in epoch %d", b.id, prev, st.HighWatermark(), st.LeaderEpoch())
		}
		if seen && st.HighWatermark() > prev && len(st.ISR()) < min(s.cfg.MinInSyncReplicas, 3) {
			return fmt.Errorf("b%d high watermark moved to %d with ISR %v under min.insync.replicas %d", b.id, st.HighWatermark(), st.ISR(), s.cfg.MinInSyncReplicas)
		}
		b.leaderHW[st.LeaderEpoch()] = st.HighWatermark()
		s.commit(b)
		// Leader completeness: a leader of the controller's epoch holds
		// every committed record.
		if st.LeaderEpoch() == s.ctrl.LeaderEpoch && s.ctrl.Leader == b.id {
			for o, r := range s.committed {
				if o >= int64(len(b.log)) || b.log[o] != r {
					return fmt.Errorf("b%d leads epoch %d but lost committed record %+v at offset %d (log end %d)", b.id, st.LeaderEpoch(), r, o, len(b.log))
				}
			}
		}
	}
	for _, b := range s.brokers {
		for o := int64(0); o < b.s.HighWatermark(); o++ {
			if r, ok := s.committed[o]; ok && b.log[o] != r {
				return fmt.Errorf("b%d holds %+v below its high watermark at %d where %+v was committed", b.id, b.log[o], o, r)
			}
		}
	}
	return nil
}

package txn

import (
	"errors"
	"fmt"
	"math/rand"
	"testing"
)

// TestSimulation drives the coordinator with seeded random inputs (requests
// from current and stale producers, failed appends, held writes, clock
// jumps, marker completions, restarts) and checks after every step that
// memory agrees with what a restart would load from the log, and that
// markers and epochs follow Kafka's rules. A failing seed replays exactly.
func TestSimulation(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 30
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		if err := simulate(seed, 400); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

type simProducer struct {
	id    string
	pid   int64
	epoch int16
}

type sim struct {
	rng     *rand.Rand
	c       *Coordinator
	now     int64
	nextPID int64
	log     [][2][]byte
	held    []Write
	// markersOut are transactions whose markers were handed out.
	markersOut map[string]Markers
	producers  map[string]*simProducer
	// lastEpoch is the highest epoch logged per (id, pid).
	lastEpoch map[string]int16
	// tv is the finalized transaction.version: odd seeds run 2, where
	// most requests come from transactions v2 clients.
	tv int16
}

func (s *sim) newCoordinator() {
	s.c = New(Config{MaxTimeoutMs: 10000, IDExpirationMs: 1 << 40, CoordinatorEpoch: 1, TransactionVersion: s.tv,
		NewProducerID: func() (int64, error) { s.nextPID++; return s.nextPID, nil }})
}

var ids = []string{"a", "b", "c"}
var parts = []TopicPartition{{"x", 0}, {"x", 1}, {"y", 0}}

func simulate(seed int64, steps int) error {
	s := &sim{rng: rand.New(rand.NewSource(seed)), nextPID: 100, markersOut: map[string]Markers{},
		producers: map[string]*simProducer{}, lastEpoch: map[string]int16{}}
	if seed%2 == 1 {
		s.tv = 2
	}
	s.newCoordinator()
	s.c.Loaded()
	for step := 0; step < steps; step++ {
		if err := s.step(); err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
		if err := s.check(); err != nil {
			return fmt.Errorf("after step %d: %w", step, err)
		}
	}
	return nil
}

func (s *sim) producer(id string) *simProducer {
	p := s.producers[id]
	if p == nil {
		p = &simProducer{id: id, pid: -1, epoch: -1}
		s.producers[id] = p
	}
	return p
}

func (s *sim) step() error {
	id := ids[s.rng.Intn(len(ids))]
	p := s.producer(id)
	// Now and then act as a stale producer with an older epoch.
	epoch := p.epoch
	if s.rng.Intn(8) == 0 && epoch > 0 {
		epoch--
	}
	clientTV := int16(0)
	if s.tv >= 2 && s.rng.Intn(4) != 0 {
		clientTV = 2
	}
	var out Output
	switch op := s.rng.Intn(12); {
	case op < 2:
		req := InitRequest{TransactionalID: id, TimeoutMs: int32(1000 + s.rng.Intn(5000)), ProducerID: -1, ProducerEpoch: -1}
		if s.rng.Intn(3) == 0 && p.pid >= 0 {
			req.ProducerID, req.ProducerEpoch = p.pid, epoch
		}
		out = s.c.InitProducerID(req, s.now)
		return s.handle(out, func(r *Reply) {
			if r.Err == nil {
				p.pid, p.epoch = r.ProducerID, r.ProducerEpoch
			}
		})
	case op < 5:
		n := 1 + s.rng.Intn(2)
		var tps []TopicPartition
		for i := 0; i < n; i++ {
			tps = append(tps, parts[s.rng.Intn(len(parts))])
		}
		out = s.c.AddPartitions(AddPartitionsRequest{TransactionalID: id, ProducerID: p.pid, ProducerEpoch: epoch, Partitions: tps,
			TransactionVersion: clientTV}, s.now)
	case op < 7:
		out = s.c.EndTxn(EndTxnRequest{TransactionalID: id, ProducerID: p.pid, ProducerEpoch: epoch, Commit: s.rng.Intn(2) == 0,
			TransactionVersion: clientTV}, s.now)
		var rerr error
		if err := s.handle(out, func(r *Reply) {
			switch {
			case r.Err != nil:
			case clientTV < 2 && r.ProducerID != -1:
				rerr = fmt.Errorf("EndTxn v4 answered producer %d epoch %d", r.ProducerID, r.ProducerEpoch)
			case clientTV >= 2 && (r.ProducerID < 0 || r.ProducerEpoch < 0):
				rerr = fmt.Errorf("EndTxn v5 answered producer %d epoch %d", r.ProducerID, r.ProducerEpoch)
			case clientTV >= 2:
				// Transactions v2: the epoch to use next.
				if r.ProducerID == p.pid && r.ProducerEpoch < p.epoch {
					rerr = fmt.Errorf("EndTxn v5 moved epoch back from %d to %d", p.epoch, r.ProducerEpoch)
				}
				p.pid, p.epoch = r.ProducerID, r.ProducerEpoch
			}
		}); err != nil {
			return err
		}
		return rerr

	case op < 8:
		s.now += int64(s.rng.Intn(4000))
		out = s.c.Tick(s.now)
	case op < 9:
		for mid := range s.markersOut {
			delete(s.markersOut, mid)
			out = s.c.MarkersWritten(mid, s.now)
			if out.Reply != nil && out.Reply.Err != nil {
				return fmt.Errorf("MarkersWritten(%s): %v", mid, out.Reply.Err)
			}
			break
		}
	case op < 10:
		if len(s.held) > 0 {
			i := s.rng.Intn(len(s.held))
			w := s.held[i]
			s.held = append(s.held[:i], s.held[i+1:]...)
			return s.appended(w, s.rng.Intn(3) == 0)
		}
	case op < 11:
		_, err := s.c.Verify(VerifyRequest{TransactionalID: id, ProducerID: p.pid, ProducerEpoch: epoch, Partitions: parts[:1]})
		if err != nil && errors.Is(err, ErrUnknown) {
			return err
		}
	default:
		if len(s.held) == 0 && s.rng.Intn(4) == 0 {
			return s.restart()
		}
	}
	return s.handle(out, nil)
}

// handle carries out an Output: writes are appended (or held, or failed).
func (s *sim) handle(out Output, onReply func(*Reply)) error {
	if out.Reply != nil {
		if errors.Is(out.Reply.Err, ErrUnknown) {
			return out.Reply.Err
		}
		if onReply != nil {
			// Only the first reply answers the request, as in the
			// runtime; later writes of the same Output answer nobody.
			onReply(out.Reply)
			onReply = nil
		}
	}
	if err := s.takeMarkers(out.Markers); err != nil {
		return err
	}
	for _, w := range out.Writes {
		if s.rng.Intn(6) == 0 {
			s.held = append(s.held, w)
			continue
		}
		if err := s.appendedWith(w, s.rng.Intn(10) == 0, onReply); err != nil {
			return err
		}
	}
	return nil
}

func (s *sim) appended(w Write, fail bool) error { return s.appendedWith(w, fail, nil) }

func (s *sim) appendedWith(w Write, fail bool, onReply func(*Reply)) error {
	var err error
	if fail {
		err = errors.New("disk full")
	} else {
		if w.Value != nil {
			v, derr := DecodeValue(w.Value)
			if derr != nil {
				return derr
			}
			k := fmt.Sprintf("%s/%d", w.TransactionalID, v.ProducerID)
			if last, ok := s.lastEpoch[k]; ok && v.ProducerEpoch < last {
				return fmt.Errorf("%s logged epoch %d after %d", k, v.ProducerEpoch, last)
			}
			s.lastEpoch[k] = v.ProducerEpoch
		}
		s.log = append(s.log, [2][]byte{w.Key, w.Value})
	}
	out := s.c.Appended(w.Op, err)
	if out.Reply != nil && !fail && out.Reply.Err != nil && !errors.Is(out.Reply.Err, ErrConcurrentTransactions) {
		return fmt.Errorf("successful append of %s answered %v", w.TransactionalID, out.Reply.Err)
	}
	return s.handle(out, onReply)
}

// takeMarkers checks that markers are handed out only for a transaction
// whose last logged state is the matching Prepare state, with its logged
// partitions and epoch.
func (s *sim) takeMarkers(ms []Markers) error {
	for _, mk := range ms {
		v, ok := s.logged(mk.TransactionalID)
		want := PrepareAbort
		if mk.Commit {
			want = PrepareCommit
		}
		if !ok || v.State != want || v.ProducerID != mk.ProducerID || v.ProducerEpoch != mk.ProducerEpoch ||
			fmt.Sprint(v.Partitions) != fmt.Sprint(mk.Partitions) {
			return fmt.Errorf("markers %+v but the log holds %+v", mk, v)
		}
		if _, dup := s.markersOut[mk.TransactionalID]; dup {
			return fmt.Errorf("markers for %s handed out twice", mk.TransactionalID)
		}
		s.markersOut[mk.TransactionalID] = mk
	}
	return nil
}

// logged returns the last value logged for id.
func (s *sim) logged(id string) (Value, bool) {
	for i := len(s.log) - 1; i >= 0; i-- {
		k, _ := DecodeKey(s.log[i][0])
		if k != id {
			continue
		}
		if s.log[i][1] == nil {
			return Value{}, false
		}
		v, err := DecodeValue(s.log[i][1])
		return v, err == nil
	}
	return Value{}, false
}

func (s *sim) restart() error {
	s.newCoordinator()
	s.markersOut = map[string]Markers{}
	for _, kv := range s.log {
		if err := s.c.Replay(kv[0], kv[1]); err != nil {
			return err
		}
	}
	return s.handle(s.c.Loaded(), nil)
}

// check compares memory with the log for every id without a pending write.
func (s *sim) check() error {
	for _, id := range ids {
		m := s.c.txns[id]
		v, logged := s.logged(id)
		if m == nil {
			if logged {
				return fmt.Errorf("%s is logged (%s) but unknown in memory", id, v.State)
			}
			continue
		}
		if m.hasPending {
			continue
		}
		if !logged {
			// Created by InitProducerId whose write failed or is held.
			if m.state != Empty || m.epoch != noEpoch {
				return fmt.Errorf("%s in memory as %s epoch %d but never logged", id, m.state, m.epoch)
			}
			continue
		}
		if m.state != v.State || m.producerID != v.ProducerID || fmt.Sprint(m.partitions) != fmt.Sprint(v.Partitions) {
			return fmt.Errorf("%s memory %s pid %d %v, log %s pid %d %v", id, m.state, m.producerID, m.partitions,
				v.State, v.ProducerID, v.Partitions)
		}
		if m.epoch != v.ProducerEpoch && !(m.failedFence && m.epoch == v.ProducerEpoch+1) {
			return fmt.Errorf("%s memory epoch %d, log %d", id, m.epoch, v.ProducerEpoch)
		}
		if (m.state == PrepareCommit || m.state == PrepareAbort) != (m.awaitingMarkers || m.retryComplete) {
			return fmt.Errorf("%s in %s, awaiting markers %v", id, m.state, m.awaitingMarkers)
		}
	}
	return nil
}

package faults

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	lin "github.com/cascade-kafka/cascade/linearizability"
	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// Sample is what a cluster showed its clients at one moment: the active
// controller and every watched partition's leader and ISR, as the live
// node that knows the latest leader epoch says.
type Sample struct {
	At int64
	// Controller is -1 when no node named a live one.
	Controller int
	// Leaders and ISRs are by partition; a leader of -1 is none.
	Leaders []int
	ISRs    [][]int
}

// Monitor samples a cluster target every interval with a history's
// clock, so the cluster figures can line up with faults and operations.
type Monitor struct {
	T          *ClusterTarget
	Topic      string
	Partitions int32
	Clock      func() int64
	Interval   time.Duration

	mu      sync.Mutex
	samples []Sample
}

// Start samples until ctx is done or the returned stop is called.
func (m *Monitor) Start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(m.Interval)
		defer t.Stop()
		for {
			m.sample(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

func (m *Monitor) sample(ctx context.Context) {
	s := Sample{At: m.Clock(), Controller: -1}
	for range m.Partitions {
		s.Leaders = append(s.Leaders, -1)
		s.ISRs = append(s.ISRs, nil)
	}
	qctx, cancel := context.WithTimeout(ctx, askTimeout)
	if id, _, err := cluster.QuorumLeader(qctx, m.T.C); err == nil {
		s.Controller = id
	}
	cancel()
	// Every live node is asked, and each partition takes the view of the
	// latest leader epoch: a node cut off from its peers still answers
	// clients with the leadership it last knew. A moment at which no
	// node answers is recorded as one without leaders.
	views, _ := latestViews(ctx, m.T, m.Topic, -1)
	for p, mp := range views {
		if p < 0 || p >= m.Partitions {
			continue
		}
		if mp.Leader >= 0 && m.T.C.Live(int(mp.Leader)) {
			s.Leaders[p] = int(mp.Leader)
		}
		s.ISRs[p] = isrOf(mp)
	}
	m.mu.Lock()
	m.samples = append(m.samples, s)
	m.mu.Unlock()
}

// latestViews asks every live node but skip for topic's partitions and
// keeps, per partition, the answer of the latest leader epoch without an
// error; the error says why no node answered, when none did.
func latestViews(ctx context.Context, t *ClusterTarget, topic string, skip int) (map[int32]kmsg.MetadataResponseTopicPartition, error) {
	out := map[int32]kmsg.MetadataResponseTopicPartition{}
	var errs []error
	for _, id := range cluster.LiveBrokers(t.C) {
		if id == skip {
			continue
		}
		actx, cancel := context.WithTimeout(ctx, askTimeout)
		resp, err := t.C.Request(actx, id, cluster.MetadataRequest([]string{topic}))
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", id, err))
			continue
		}
		for _, mt := range resp.(*kmsg.MetadataResponse).Topics {
			for _, mp := range mt.Partitions {
				if cur, ok := out[mp.Partition]; mp.ErrorCode != 0 || ok && mp.LeaderEpoch <= cur.LeaderEpoch {
					continue
				}
				out[mp.Partition] = mp
			}
		}
	}
	if len(out) == 0 {
		return out, fmt.Errorf("no node showed %s: %w", topic, errors.Join(errs...))
	}
	return out, nil
}

// isrOf returns a partition's ISR, sorted.
func isrOf(mp kmsg.MetadataResponseTopicPartition) []int {
	var isr []int
	for _, r := range mp.ISR {
		isr = append(isr, int(r))
	}
	slices.Sort(isr)
	return isr
}

// Samples returns what was sampled, in order.
func (m *Monitor) Samples() []Sample {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.samples)
}

// FaultFigure is what one applied fault cost the clients of a cluster,
// each figure -1 when it does not apply (the leader never moved) or did
// not happen before the next fault was applied.
type FaultFigure struct {
	Fault        string
	Applied      int64
	Healed       int64
	NewLeader    time.Duration // applied to a different live leader of the watched partition
	NewControl   time.Duration // applied to a different active controller
	FirstAck     time.Duration // applied to the first produce to the watched partition called and acknowledged after it
	ISRBack      time.Duration // healed to every watched partition's ISR holding every node
	ProduceStall time.Duration // applied to the first acknowledged produce to any partition, called after it
}

// ClusterFigures measures every applied fault of events against the
// monitor's samples and the history h: partition p of topic is watched.
func ClusterFigures(events []FaultEvent, samples []Sample, h []lin.Op, topic string, p int32, nodes int) []FaultFigure {
	var out []FaultFigure
	for i, e := range events {
		if e.Heal {
			continue
		}
		f := FaultFigure{Fault: e.Fault, Applied: e.At, Healed: -1,
			NewLeader: -1, NewControl: -1, FirstAck: -1, ISRBack: -1, ProduceStall: -1}
		// Each figure counts only what happened before the next fault
		// was applied, so that it is this fault's.
		until := int64(math.MaxInt64)
		for _, e2 := range events[i+1:] {
			if e2.Heal && e2.Fault == e.Fault && f.Healed < 0 {
				f.Healed = e2.At
			}
			if !e2.Heal {
				until = e2.At
				break
			}
		}
		before := -1
		for j, s := range samples {
			if s.At > e.At {
				break
			}
			before = j
		}
		if before >= 0 {
			b := samples[before]
			for _, s := range samples[before+1:] {
				if s.At >= until {
					break
				}
				if f.NewLeader < 0 && int(p) < len(s.Leaders) && s.Leaders[p] >= 0 && s.Leaders[p] != b.Leaders[p] {
					f.NewLeader = time.Duration(s.At - e.At)
				}
				if f.NewControl < 0 && s.Controller >= 0 && s.Controller != b.Controller {
					f.NewControl = time.Duration(s.At - e.At)
				}
			}
		}
		if f.Healed >= 0 {
			for _, s := range samples {
				if s.At >= until {
					break
				}
				if s.At >= f.Healed && fullISRs(s, nodes) {
					f.ISRBack = time.Duration(s.At - f.Healed)
					break
				}
			}
		}
		for _, o := range h {
			if o.Op != lin.OpProduce || o.Outcome != lin.OutcomeOK || o.CallNs < e.At || o.ReturnNs >= until || o.Topic != topic {
				continue
			}
			d := time.Duration(o.ReturnNs - e.At)
			if o.Partition == p && (f.FirstAck < 0 || d < f.FirstAck) {
				f.FirstAck = d
			}
			if f.ProduceStall < 0 || d < f.ProduceStall {
				f.ProduceStall = d
			}
		}
		out = append(out, f)
	}
	return out
}

// fullISRs reports whether every partition of s has all nodes in its ISR.
func fullISRs(s Sample, nodes int) bool {
	for _, isr := range s.ISRs {
		if len(isr) != nodes {
			return false
		}
	}
	return len(s.ISRs) > 0
}

package controller

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/broker/metadata"
)

// TestRandomOperations drives the controller with seeded random operations
// from five brokers (registrations, heartbeats with every flag, ticks,
// BrokerGone, topic changes, AlterPartition, elections, reassignments and
// their cancellation, producer ids, controller restarts) and checks the cluster's invariants after every
// step. A failure names its seed and step, which replay exactly.
func TestRandomOperations(t *testing.T) {
	seeds, steps := 30, 400
	if testing.Short() {
		seeds = 5
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runRandom(t, seed, steps) })
	}
}

type randomRun struct {
	t          *testing.T
	h          *harness
	r          *rand.Rand
	pids       []ProducerIDBlock
	lastEpochs map[int32]int64
}

func runRandom(t *testing.T, seed int64, steps int) {
	h := newHarness(t)
	rr := &randomRun{t: t, h: h, r: rand.New(rand.NewSource(seed)), lastEpochs: map[int32]int64{}}
	h.cfg.LeaderImbalanceCheckInterval = 3 * time.Second
	h.cfg.UncleanLeaderElectionInterval = 2 * time.Second
	h.restart(t)
	for step := range steps {
		prev := h.img
		op, recs, err := rr.step()
		var kerr *metadata.Error
		if err != nil && !errors.As(err, &kerr) {
			t.Fatalf("seed %d step %d %s: %v", seed, step, op, err)
		}
		next, aerr := metadata.Apply(prev, recs)
		if aerr != nil {
			t.Fatalf("seed %d step %d %s: records do not apply: %v", seed, step, op, aerr)
		}
		h.img = next
		if msg := checkInvariants(h.c, prev, next); msg != "" {
			t.Fatalf("seed %d step %d %s: %s\nrecords: %+v", seed, step, op, msg, recs)
		}
		for _, rec := range recs {
			if rb, ok := rec.(metadata.RegisterBrokerRecord); ok {
				if rb.BrokerEpoch < rr.lastEpochs[rb.BrokerID] {
					t.Fatalf("seed %d step %d: broker %d epoch went back from %d to %d", seed, step, rb.BrokerID, rr.lastEpochs[rb.BrokerID], rb.BrokerEpoch)
				}
				rr.lastEpochs[rb.BrokerID] = rb.BrokerEpoch
			}
		}
	}
	for i, a := range rr.pids {
		for _, b := range rr.pids[i+1:] {
			if a.First < b.First+int64(b.Size) && b.First < a.First+int64(a.Size) {
				t.Fatalf("seed %d: producer id blocks %+v and %+v overlap", seed, a, b)
			}
		}
	}
}

var randomTopics = []string{"a", "b", "c"}

// step runs one random operation.
func (rr *randomRun) step() (string, []metadata.Record, error) {
	h, r := rr.h, rr.r
	id := int32(1 + r.Intn(5))
	next := h.img.Offset + 1
	switch n := r.Intn(100); {
	case n < 10:
		req := RegisterBrokerRequest{BrokerID: id, ClusterID: testClusterID, IncarnationID: incarnation(int64(id), int64(1+r.Intn(2))),
			Rack:     string(rune('a' + r.Intn(3))),
			Features: []metadata.BrokerFeature{{Name: "metadata.version", MinSupportedVersion: 1, MaxSupportedVersion: metadata.MetadataVersion}}}
		recs, _, err := h.c.RegisterBroker(h.img, h.now, next, req)
		return fmt.Sprintf("register %d", id), recs, err
	case n < 45:
		req := HeartbeatRequest{BrokerID: id, BrokerEpoch: h.epoch(id), CurrentMetadataOffset: h.img.Offset - int64(r.Intn(2)),
			WantFence: r.Intn(30) == 0, WantShutDown: r.Intn(30) == 0}
		recs, _, err := h.c.BrokerHeartbeat(h.img, h.now, next, req)
		return fmt.Sprintf("heartbeat %+v", req), recs, err
	case n < 60:
		h.now = h.now.Add(time.Duration(r.Intn(4000)) * time.Millisecond)
		recs, _, err := h.c.Tick(h.img, h.now)
		return "tick", recs, err
	case n < 63:
		recs, err := h.c.BrokerGone(h.img, id, -1)
		return fmt.Sprintf("gone %d", id), recs, err
	case n < 70:
		name := randomTopics[r.Intn(len(randomTopics))]
		req := metadata.CreateTopic{Name: name, NumPartitions: int32(1 + r.Intn(3)), ReplicationFactor: int16(1 + r.Intn(3))}
		if r.Intn(2) == 0 {
			v := "true"
			req.Configs = map[string]*string{"unclean.leader.election.enable": &v}
		}
		recs, _, err := h.c.CreateTopics(h.img, []metadata.CreateTopic{req}, false)
		return "create " + name, recs, err
	case n < 72:
		name := randomTopics[r.Intn(len(randomTopics))]
		recs, _, err := h.c.DeleteTopics(h.img, []metadata.DeleteTopic{{Name: name}})
		return "delete " + name, recs, err
	case n < 75:
		name := randomTopics[r.Intn(len(randomTopics))]
		recs, _, err := h.c.CreatePartitions(h.img, []metadata.CreatePartitions{{Name: name, Count: int32(1 + r.Intn(5))}}, false)
		return "create-partitions " + name, recs, err
	case n < 85:
		return rr.alterPartition()
	case n < 90:
		return rr.reassign()
	case n < 94:
		typ := int8(r.Intn(2))
		recs, _, err := h.c.ElectLeaders(h.img, typ, nil)
		return fmt.Sprintf("elect %d", typ), recs, err
	case n < 97:
		recs, blk, err := h.c.AllocateProducerIDs(h.img, id, h.epoch(id))
		if err == nil {
			rr.pids = append(rr.pids, blk)
		}
		return fmt.Sprintf("alloc-pids %d", id), recs, err
	case n < 98:
		recs, err := h.c.UnregisterBroker(h.img, id)
		return fmt.Sprintf("unregister %d", id), recs, err
	default:
		h.restart(rr.t)
		return "restart", nil, nil
	}
}

// alterPartition sends a leader's AlterPartition for a random partition
// with a random ISR holding the leader, mostly at the current epochs.
func (rr *randomRun) alterPartition() (string, []metadata.Record, error) {
	h, r := rr.h, rr.r
	topics := h.img.Topics()
	if len(topics) == 0 {
		return "alter-partition (no topics)", nil, nil
	}
	tp := topics[r.Intn(len(topics))]
	index := int32(r.Intn(len(tp.Partitions)))
	p := tp.Partitions[index]
	leader := p.Leader
	if leader < 0 {
		leader = p.Replicas[0]
	}
	isr := []BrokerState{{BrokerID: leader, BrokerEpoch: h.epoch(leader)}}
	for _, rep := range p.Replicas {
		if rep != leader && r.Intn(2) == 0 {
			isr = append(isr, BrokerState{BrokerID: rep, BrokerEpoch: h.epoch(rep)})
		}
	}
	pd := AlterPartitionData{Partition: index, LeaderEpoch: p.LeaderEpoch - int32(r.Intn(2)), PartitionEpoch: p.PartitionEpoch,
		NewISR: isr, LeaderRecoveryState: metadata.LeaderRecovered}
	if p.LeaderRecoveryState == metadata.LeaderRecovering && r.Intn(2) == 0 {
		pd.LeaderRecoveryState, pd.NewISR = metadata.LeaderRecovering, isr[:1]
	}
	recs, _, err := h.c.AlterPartition(h.img, AlterPartitionRequest{BrokerID: leader, BrokerEpoch: h.epoch(leader),
		Topics: []AlterPartitionTopic{{TopicID: tp.ID, Partitions: []AlterPartitionData{pd}}}})
	return fmt.Sprintf("alter-partition %s/%d %+v", tp.Name, index, pd), recs, err
}

// reassign reassigns a random partition to one to three random brokers,
// or cancels its reassignment.
func (rr *randomRun) reassign() (string, []metadata.Record, error) {
	h, r := rr.h, rr.r
	name := randomTopics[r.Intn(len(randomTopics))]
	rp := ReassignPartition{Partition: int32(r.Intn(3))}
	if r.Intn(4) != 0 {
		rp.Replicas = []int32{}
		for _, b := range r.Perm(5)[:1+r.Intn(3)] {
			rp.Replicas = append(rp.Replicas, int32(b+1))
		}
	}
	recs, _, err := h.c.AlterPartitionReassignments(h.img, []ReassignTopic{{Topic: name, Partitions: []ReassignPartition{rp}}}, r.Intn(4) != 0)
	return fmt.Sprintf("reassign %s/%d %v", name, rp.Partition, rp.Replicas), recs, err
}

// checkInvariants checks next, and its changes from prev, as the Kafka
// replication protocol requires with eligible leader replicas (KIP-966).
func checkInvariants(c *Controller, prev, next *metadata.Image) string {
	for _, t := range next.Topics() {
		old, existed := prev.TopicByID(t.ID)
		for i, p := range t.Partitions {
			name := fmt.Sprintf("%s/%d", t.Name, i)
			// The ISR empties only when its last member leaves it: the
			// partition is then leaderless, its members eligible leaders.
			if len(p.ISR) == 0 && p.Leader != metadata.NoLeader {
				return fmt.Sprintf("%s: leader %d with an empty ISR", name, p.Leader)
			}
			if len(p.ELR) > 0 && len(p.ISR) >= c.minISR(next, t) {
				return fmt.Sprintf("%s: ELR %v beside an ISR %v at min ISR", name, p.ELR, p.ISR)
			}
			for _, m := range p.ELR {
				if !slices.Contains(p.Replicas, m) || slices.Contains(p.ISR, m) {
					return fmt.Sprintf("%s: ELR %v not within replicas %v outside ISR %v", name, p.ELR, p.Replicas, p.ISR)
				}
				if _, ok := next.Broker(m); !ok {
					return fmt.Sprintf("%s: ELR %v holds unregistered broker %d", name, p.ELR, m)
				}
			}
			// (Kafka records a leaderless partition's last leader as -1,
			// which no election takes.)
			for _, m := range p.LastKnownELR {
				if m >= 0 && !slices.Contains(p.Replicas, m) {
					return fmt.Sprintf("%s: last known leader %v not a replica of %v", name, p.LastKnownELR, p.Replicas)
				}
			}
			// A reassignment in progress is one the ISR cannot complete
			// yet: every change of the partition completes one it can,
			// but an unclean election, which sets the ISR after that
			// check (as Kafka's PartitionChangeBuilder), leaves it to the
			// recovered leader's AlterPartition.
			if p.Reassigning() && p.LeaderRecoveryState != metadata.LeaderRecovering {
				for _, m := range slices.Concat(p.AddingReplicas, p.RemovingReplicas) {
					if !slices.Contains(p.Replicas, m) {
						return fmt.Sprintf("%s: adding %v removing %v not within replicas %v", name, p.AddingReplicas, p.RemovingReplicas, p.Replicas)
					}
				}
				stays := slices.DeleteFunc(slices.Clone(p.Replicas), func(m int32) bool { return slices.Contains(p.RemovingReplicas, m) })
				isr := slices.DeleteFunc(slices.Clone(p.ISR), func(m int32) bool { return slices.Contains(p.RemovingReplicas, m) })
				if len(isr) > 0 && !slices.ContainsFunc(stays, func(m int32) bool { return !slices.Contains(isr, m) }) {
					return fmt.Sprintf("%s: reassignment to %v not completed with ISR %v: %+v", name, stays, p.ISR, p)
				}
			}
			if _, ok := next.Broker(p.Leader); p.Leader != metadata.NoLeader && !ok {
				return fmt.Sprintf("%s: leader %d is not registered", name, p.Leader)
			}
			if len(slices.Compact(slices.Sorted(slices.Values(p.Replicas)))) != len(p.Replicas) {
				return fmt.Sprintf("%s: replicas %v repeat a broker", name, p.Replicas)
			}
			for _, m := range p.ISR {
				if !slices.Contains(p.Replicas, m) {
					return fmt.Sprintf("%s: ISR %v not within replicas %v", name, p.ISR, p.Replicas)
				}
			}
			if p.Leader != metadata.NoLeader {
				if !slices.Contains(p.ISR, p.Leader) {
					return fmt.Sprintf("%s: leader %d not in ISR %v", name, p.Leader, p.ISR)
				}
				// Fencing and shutdown remove a broker from every ISR it
				// does not hold alone, and only active brokers join one.
				for _, m := range p.ISR {
					if !active(next, m) {
						return fmt.Sprintf("%s: leader %d or ISR member %d is fenced or shutting down (ISR %v)", name, p.Leader, m, p.ISR)
					}
				}
			} else if slices.ContainsFunc(p.ISR, func(m int32) bool { return active(next, m) }) {
				return fmt.Sprintf("%s: leaderless with an eligible ISR %v", name, p.ISR)
			} else if len(p.ISR) == 0 && slices.ContainsFunc(p.ELR, func(m int32) bool { return active(next, m) }) {
				return fmt.Sprintf("%s: leaderless with an eligible ELR %v", name, p.ELR)
			}
			if !existed || i >= len(old.Partitions) {
				continue
			}
			q := old.Partitions[i]
			if p.LeaderEpoch < q.LeaderEpoch || p.PartitionEpoch < q.PartitionEpoch {
				return fmt.Sprintf("%s: epochs went back: %+v -> %+v", name, q, p)
			}
			// A replica leaving the assignment is fenced by a leader
			// epoch bump (triggerLeaderEpochBumpForReplicaReassignmentIfNeeded).
			if slices.ContainsFunc(q.Replicas, func(m int32) bool { return !slices.Contains(p.Replicas, m) }) && p.LeaderEpoch <= q.LeaderEpoch {
				return fmt.Sprintf("%s: replicas %v -> %v without a leader epoch bump", name, q.Replicas, p.Replicas)
			}
			if p.Leader != q.Leader && p.LeaderEpoch <= q.LeaderEpoch {
				return fmt.Sprintf("%s: leader changed %d -> %d without a leader epoch bump", name, q.Leader, p.Leader)
			}
			changed := p.Leader != q.Leader || !slices.Equal(p.ISR, q.ISR) || !slices.Equal(p.Replicas, q.Replicas) ||
				p.LeaderRecoveryState != q.LeaderRecoveryState || !slices.Equal(p.ELR, q.ELR) ||
				!slices.Equal(p.AddingReplicas, q.AddingReplicas) || !slices.Equal(p.RemovingReplicas, q.RemovingReplicas)
			if changed && p.PartitionEpoch <= q.PartitionEpoch {
				return fmt.Sprintf("%s: changed without a partition epoch bump: %+v -> %+v", name, q, p)
			}
		}
	}
	return ""
}

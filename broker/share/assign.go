package share

import (
	"maps"
	"slices"
	"sort"
)

// Assignment is a member's partitions by topic id.
type Assignment map[[16]byte][]int32

type tidp struct {
	topic     [16]byte
	partition int32
}

// assignSpec is one member's part of a target assignment computation: its
// subscribed topics (as ids, in a fixed order) and its current target.
type assignSpec struct {
	id      string
	topics  [][16]byte
	current Assignment
}

// simpleAssign is Kafka's SimpleAssignor (KIP-932): share groups let
// several members consume one partition, so every partition is given to
// at least one subscribed member and a member keeps what it had.
//  1. Each member is hashed to one of its subscribed partitions
//     (abs(memberId.hashCode() % n)).
//  2. Partitions that got no member and had none are dealt round-robin to
//     the members subscribed to their topic.
//  3. Each member keeps its current partitions of topics it still
//     subscribes to, plus those of steps 1 and 2.
//
// Kafka iterates Java hash sets where this iterates members by id and
// topics in the order given, so a tie may fall to another member than in
// Kafka; the rules are the same. members must be sorted by id.
func simpleAssign(members []assignSpec, partitions func([16]byte) int32) map[string]Assignment {
	out := map[string]Assignment{}
	targets := map[string][]tidp{}
	subscribers := map[[16]byte][]string{}
	var all []tidp
	seen := map[tidp]bool{}
	for _, m := range members {
		out[m.id] = Assignment{}
		for _, t := range m.topics {
			subscribers[t] = append(subscribers[t], m.id)
			for p := int32(0); p < partitions(t); p++ {
				tp := tidp{t, p}
				targets[m.id] = append(targets[m.id], tp)
				if !seen[tp] {
					seen[tp] = true
					all = append(all, tp)
				}
			}
		}
	}
	current := map[tidp]bool{}
	for _, m := range members {
		for t, ps := range m.current {
			for _, p := range ps {
				current[tidp{t, p}] = true
			}
		}
	}
	chosen := map[tidp][]string{}
	for _, m := range members {
		if n := len(targets[m.id]); n > 0 {
			i := javaHash(m.id) % int32(n)
			if i < 0 {
				i = -i
			}
			tp := targets[m.id][i]
			chosen[tp] = append(chosen[tp], m.id)
		}
	}
	next := map[[16]byte]int{}
	for _, tp := range all {
		if len(chosen[tp]) > 0 || current[tp] {
			continue
		}
		subs := subscribers[tp.topic]
		chosen[tp] = append(chosen[tp], subs[next[tp.topic]%len(subs)])
		next[tp.topic]++
	}
	for _, m := range members {
		subscribed := map[[16]byte]bool{}
		for _, t := range m.topics {
			subscribed[t] = true
		}
		for t, ps := range m.current {
			if subscribed[t] {
				for _, p := range ps {
					if p < partitions(t) {
						out[m.id].add(t, p)
					}
				}
			}
		}
	}
	for tp, ms := range chosen {
		for _, id := range ms {
			out[id].add(tp.topic, tp.partition)
		}
	}
	return out
}

func (a Assignment) add(t [16]byte, p int32) {
	for _, q := range a[t] {
		if q == p {
			return
		}
	}
	a[t] = append(a[t], p)
	sort.Slice(a[t], func(i, j int) bool { return a[t][i] < a[t][j] })
}

func (a Assignment) equal(b Assignment) bool { return maps.EqualFunc(a, b, slices.Equal[[]int32]) }

// list returns the assignment as record entries, ordered by topic id.
func (a Assignment) list() []TopicPartitions {
	out := make([]TopicPartitions, 0, len(a))
	for t, ps := range a {
		if len(ps) > 0 {
			out = append(out, TopicPartitions{TopicID: t, Partitions: append([]int32(nil), ps...)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return string(out[i].TopicID[:]) < string(out[j].TopicID[:]) })
	return out
}

func assignmentOf(tps []TopicPartitions) Assignment {
	a := Assignment{}
	for _, tp := range tps {
		for _, p := range tp.Partitions {
			a.add(tp.TopicID, p)
		}
	}
	return a
}

package share

import (
	"bytes"
	"maps"
	"math"
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

// simpleAssign is Kafka 4.4's SimpleAssignor (KIP-932), which lets
// several members share a partition: its SimpleHomogeneousAssignmentBuilder
// when every member subscribes to the same topics, balancing all their
// partitions together, and its SimpleHeterogeneousAssignmentBuilder
// otherwise, balancing each topic among its subscribers. Balance comes
// before stickiness. Kafka iterates Java hash maps and sets where this
// iterates members by id and partitions in order, so on a tie another
// member or partition may be chosen than in Kafka; the counts are the
// same. members must be sorted by id; partitions gives the assignable
// partitions of a topic, in order.
func simpleAssign(members []assignSpec, partitions func([16]byte) []int32) map[string]Assignment {
	out := map[string]Assignment{}
	for _, m := range members {
		out[m.id] = Assignment{}
	}
	if len(members) == 0 {
		return out
	}
	homogeneous := true
	for _, m := range members[1:] {
		if !slices.Equal(m.topics, members[0].topics) {
			homogeneous = false
		}
	}
	var groups [][]assignSpec // members balanced together
	var targets [][]tidp      // over these partitions
	if homogeneous {
		groups, targets = [][]assignSpec{members}, [][]tidp{topicPartitions(members[0].topics, partitions)}
	} else {
		var topics [][16]byte
		subs := map[[16]byte][]assignSpec{}
		for _, m := range members {
			for _, t := range m.topics {
				if subs[t] == nil {
					topics = append(topics, t)
				}
				subs[t] = append(subs[t], m)
			}
		}
		for _, t := range topics {
			groups, targets = append(groups, subs[t]), append(targets, topicPartitions([][16]byte{t}, partitions))
		}
	}
	for i := range groups {
		for id, tps := range balance(groups[i], targets[i]) {
			for _, tp := range tps {
				out[id].add(tp.topic, tp.partition)
			}
		}
	}
	return out
}

func topicPartitions(topics [][16]byte, partitions func([16]byte) []int32) []tidp {
	var out []tidp
	for _, t := range topics {
		for _, p := range partitions(t) {
			out = append(out, tidp{t, p})
		}
	}
	return out
}

// balance assigns target partitions to members as Kafka's simple
// assignment builders: each partition goes to
// desiredSharing = ceil(members/partitions) members, member i to
// ceil(x*(i+1)) - ceil(x*i) partitions where
// x = desiredSharing*partitions/members; members keep what they have of
// the targets, then give up over-shared partitions (overfilled members
// first), then what they hold past their count, and the partitions short
// of sharers are dealt round-robin to the members short of partitions.
func balance(members []assignSpec, targets []tidp) map[string][]tidp {
	nm, np := len(members), len(targets)
	out := map[string][]tidp{}
	if np == 0 {
		return out
	}
	sharing := (nm + np - 1) / np
	x := float64(sharing*np) / float64(nm)
	desired := make([]int, nm)
	for i := range desired {
		desired[i] = int(math.Ceil(x*float64(i+1))) - int(math.Ceil(x*float64(i)))
	}
	isTarget := map[tidp]bool{}
	for _, tp := range targets {
		isTarget[tp] = true
	}
	byPart := map[tidp][]int{}
	byMember := make([][]tidp, nm)
	for i, m := range members {
		for _, t := range slices.SortedFunc(maps.Keys(m.current), func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) }) {
			for _, p := range m.current[t] {
				if tp := (tidp{t, p}); isTarget[tp] {
					byPart[tp] = append(byPart[tp], i)
					byMember[i] = append(byMember[i], tp)
				}
			}
		}
	}
	overfilled := func(i int) bool { return len(byMember[i]) > desired[i] }
	drop := func(i int, tp tidp) {
		byMember[i] = slices.DeleteFunc(byMember[i], func(q tidp) bool { return q == tp })
		byPart[tp] = slices.DeleteFunc(byPart[tp], func(j int) bool { return j == i })
	}
	for _, tp := range targets {
		for _, firstOverfilled := range []bool{true, false} {
			for _, i := range slices.Clone(byPart[tp]) {
				if len(byPart[tp]) > sharing && overfilled(i) == firstOverfilled {
					drop(i, tp)
				}
			}
		}
	}
	for i := range members {
		for overfilled(i) {
			drop(i, byMember[i][len(byMember[i])-1])
		}
	}
	var unfilled []int
	for i := range members {
		if len(byMember[i]) < desired[i] {
			unfilled = append(unfilled, i)
		}
	}
	next := 0
	for _, tp := range targets {
		for len(byPart[tp]) < sharing && len(unfilled) > 0 {
			// One pass over the unfilled members for this partition:
			// those that hold it already cannot take it again.
			placed := false
			for tries := 0; tries < len(unfilled) && !placed; tries++ {
				k := next % len(unfilled)
				i := unfilled[k]
				if slices.Contains(byPart[tp], i) {
					next++
					continue
				}
				byPart[tp] = append(byPart[tp], i)
				byMember[i] = append(byMember[i], tp)
				placed = true
				if len(byMember[i]) >= desired[i] {
					unfilled = slices.Delete(unfilled, k, k+1)
				} else {
					next++
				}
			}
			if !placed {
				break
			}
		}
	}
	for i, m := range members {
		out[m.id] = byMember[i]
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

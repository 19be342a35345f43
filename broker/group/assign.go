package group

import (
	"sort"
)

// Server-side assignors of KIP-848 (group.consumer.assignors).
const (
	AssignorUniform = "uniform"
	AssignorRange   = "range"
)

// assignment maps topic id to sorted partitions.
type assignment map[[16]byte][]int32

func (a assignment) clone() assignment {
	out := make(assignment, len(a))
	for k, v := range a {
		out[k] = append([]int32(nil), v...)
	}
	return out
}

func (a assignment) count() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func (a assignment) has(id [16]byte, p int32) bool {
	for _, q := range a[id] {
		if q == p {
			return true
		}
	}
	return false
}

func (a assignment) add(id [16]byte, p int32) { a[id] = append(a[id], p) }

func (a assignment) remove(id [16]byte, p int32) {
	ps := a[id]
	for i, q := range ps {
		if q == p {
			a[id] = append(ps[:i:i], ps[i+1:]...)
			break
		}
	}
	if len(a[id]) == 0 {
		delete(a, id)
	}
}

func (a assignment) sortAll() {
	for id, ps := range a {
		if len(ps) == 0 {
			delete(a, id)
			continue
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	}
}

func (a assignment) equal(b assignment) bool {
	if len(a) != len(b) {
		return false
	}
	for id, ps := range a {
		qs, ok := b[id]
		if !ok || len(ps) != len(qs) {
			return false
		}
		for i := range ps {
			if ps[i] != qs[i] {
				return false
			}
		}
	}
	return true
}

// topicPartitions lists a in topic-id order, for records and responses.
func (a assignment) topicPartitions() []TopicPartitions {
	ids := make([][16]byte, 0, len(a))
	for id := range a {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return string(ids[i][:]) < string(ids[j][:]) })
	out := make([]TopicPartitions, 0, len(ids))
	for _, id := range ids {
		out = append(out, TopicPartitions{TopicID: id, Partitions: append([]int32(nil), a[id]...)})
	}
	return out
}

func fromTopicPartitions(tps []TopicPartitions) assignment {
	a := assignment{}
	for _, t := range tps {
		a[t.TopicID] = append(a[t.TopicID], t.Partitions...)
	}
	a.sortAll()
	return a
}

// assignSpec is the input of a server-side assignor.
type assignSpec struct {
	members []string              // sorted member ids
	subs    map[string][]Topic    // member → subscribed topics that exist, sorted by name
	current map[string]assignment // the previous target assignment, for stickiness
	// instances maps the static members (KIP-345) to their
	// group.instance.id.
	instances map[string]string
}

// assignUniform is the KIP-848 "uniform" assignor: every partition of the
// subscribed topics goes to one subscribed member, counts differ by at most
// one among members with the same subscription, and members keep the
// partitions of the previous target assignment while within their quota
// (the behaviour of Kafka's UniformHomogeneousAssignmentBuilder; the
// heterogeneous case uses the same sticky least-loaded rule).
func assignUniform(s assignSpec) map[string]assignment {
	out := make(map[string]assignment, len(s.members))
	load := map[string]int{}
	eligible := map[[16]byte][]string{}
	var all []struct {
		t Topic
		p int32
	}
	seen := map[[16]byte]bool{}
	for _, m := range s.members {
		out[m] = assignment{}
		for _, t := range s.subs[m] {
			eligible[t.ID] = append(eligible[t.ID], m)
			if !seen[t.ID] {
				seen[t.ID] = true
				for p := int32(0); p < t.Partitions; p++ {
					all = append(all, struct {
						t Topic
						p int32
					}{t, p})
				}
			}
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].t.Name != all[j].t.Name {
			return all[i].t.Name < all[j].t.Name
		}
		return all[i].p < all[j].p
	})
	// Quota: the partitions a member could receive, spread over the
	// members that could receive them.
	quota := map[string]int{}
	for _, m := range s.members {
		share := 0.0
		for _, t := range s.subs[m] {
			share += float64(t.Partitions) / float64(len(eligible[t.ID]))
		}
		quota[m] = int(share + 0.999999)
	}
	taken := map[[16]byte]map[int32]bool{}
	isTaken := func(id [16]byte, p int32) bool { return taken[id][p] }
	take := func(m string, id [16]byte, p int32) {
		if taken[id] == nil {
			taken[id] = map[int32]bool{}
		}
		taken[id][p] = true
		out[m].add(id, p)
		load[m]++
	}
	subscribed := func(m string, id [16]byte) bool {
		for _, t := range s.subs[m] {
			if t.ID == id {
				return true
			}
		}
		return false
	}
	// Sticky pass: keep previous partitions up to the quota.
	for _, m := range s.members {
		for _, e := range all {
			if load[m] >= quota[m] {
				break
			}
			if s.current[m].has(e.t.ID, e.p) && subscribed(m, e.t.ID) && !isTaken(e.t.ID, e.p) {
				take(m, e.t.ID, e.p)
			}
		}
	}
	// Spread the rest to the least loaded eligible member.
	for _, e := range all {
		if isTaken(e.t.ID, e.p) {
			continue
		}
		best := ""
		for _, m := range eligible[e.t.ID] {
			if best == "" || load[m] < load[best] {
				best = m
			}
		}
		take(best, e.t.ID, e.p)
	}
	rebalanceUniform(s, out, load)
	for _, a := range out {
		a.sortAll()
	}
	return out
}

// rebalanceUniform moves partitions from the most to the least loaded
// member while their counts differ by two or more, when every member has
// the same subscription: the sticky pass lets each member keep up to the
// rounded-up quota, which can leave a newcomer short, where Kafka's
// UniformHomogeneousAssignmentBuilder gives the rounded-up quota only to
// partitions%members of them. Each move lowers the sum of squared loads, so
// the loop ends.
func rebalanceUniform(s assignSpec, out map[string]assignment, load map[string]int) {
	for _, m := range s.members {
		if !sameTopics(s.subs[m], s.subs[s.members[0]]) {
			return
		}
	}
	subscribed := func(m string, id [16]byte) bool {
		for _, t := range s.subs[m] {
			if t.ID == id {
				return true
			}
		}
		return false
	}
	byLoad := append([]string(nil), s.members...)
	for {
		sort.SliceStable(byLoad, func(i, j int) bool { return load[byLoad[i]] > load[byLoad[j]] })
		moved := false
		for i := 0; i < len(byLoad) && !moved; i++ {
			from := byLoad[i]
			for j := len(byLoad) - 1; j > i && !moved; j-- {
				to := byLoad[j]
				if load[from]-load[to] < 2 {
					continue
				}
				for _, tp := range out[from].topicPartitions() {
					if !subscribed(to, tp.TopicID) || len(tp.Partitions) == 0 {
						continue
					}
					sort.Slice(tp.Partitions, func(a, b int) bool { return tp.Partitions[a] < tp.Partitions[b] })
					p := tp.Partitions[len(tp.Partitions)-1]
					out[from].remove(tp.TopicID, p)
					out[to].add(tp.TopicID, p)
					load[from]--
					load[to]++
					moved = true
					break
				}
			}
		}
		if !moved {
			return
		}
	}
}

// assignRange is the KIP-848 "range" assignor, as Kafka's server-side
// RangeAssignor since KAFKA-16944 (3.9): for each topic, its subscribed
// members receive contiguous ranges in order, the first partitions%members
// members one extra partition; with the same subscriptions and partition
// counts the ranges are co-partitioned. It is not sticky: the target is
// recomputed from the member order, which puts static members first by
// group.instance.id and then the others by member id, so a static member
// that rejoins under a new member id keeps its ranges.
func assignRange(s assignSpec) map[string]assignment {
	out := make(map[string]assignment, len(s.members))
	byTopic := map[string][]string{}
	topics := map[string]Topic{}
	for _, m := range rangeOrder(s) {
		out[m] = assignment{}
		for _, t := range s.subs[m] {
			byTopic[t.Name] = append(byTopic[t.Name], m)
			topics[t.Name] = t
		}
	}
	for _, name := range sortedKeys(byTopic) {
		t, ms := topics[name], byTopic[name]
		n := int32(len(ms))
		per, extra := t.Partitions/n, t.Partitions%n
		p := int32(0)
		for i, m := range ms {
			cnt := per
			if int32(i) < extra {
				cnt++
			}
			for k := int32(0); k < cnt; k++ {
				out[m].add(t.ID, p)
				p++
			}
		}
	}
	for _, a := range out {
		a.sortAll()
	}
	return out
}

// rangeOrder is Kafka's RangeAssignor.sortMemberIds: static members by
// instance id, then dynamic members by member id.
func rangeOrder(s assignSpec) []string {
	out := append([]string(nil), s.members...)
	sort.SliceStable(out, func(i, j int) bool {
		ii, iStatic := s.instances[out[i]]
		ij, jStatic := s.instances[out[j]]
		switch {
		case iStatic && jStatic:
			return ii < ij
		case iStatic != jStatic:
			return iStatic
		default:
			return out[i] < out[j]
		}
	})
	return out
}

func sameTopics(a, b []Topic) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID {
			return false
		}
	}
	return true
}

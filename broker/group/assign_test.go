package group

import (
	"fmt"
	"testing"
)

func spec(topics []Topic, members map[string][]string, current map[string]assignment) assignSpec {
	byName := map[string]Topic{}
	for _, t := range topics {
		byName[t.Name] = t
	}
	s := assignSpec{subs: map[string][]Topic{}, current: current}
	for _, m := range sortedKeys(members) {
		s.members = append(s.members, m)
		for _, n := range members[m] {
			s.subs[m] = append(s.subs[m], byName[n])
		}
	}
	return s
}

// checkComplete fails unless every partition of the subscribed topics is
// assigned exactly once, to a member subscribed to its topic.
func checkComplete(t *testing.T, s assignSpec, out map[string]assignment) {
	t.Helper()
	owner := map[string]string{}
	for m, a := range out {
		for id, ps := range a {
			ok := false
			for _, st := range s.subs[m] {
				ok = ok || st.ID == id
			}
			if !ok {
				t.Errorf("%s got %s, not subscribed", m, topicName(id))
			}
			for _, p := range ps {
				k := fmt.Sprintf("%s/%d", topicName(id), p)
				if owner[k] != "" {
					t.Errorf("%s assigned to %s and %s", k, owner[k], m)
				}
				owner[k] = m
			}
		}
	}
	for _, m := range s.members {
		for _, st := range s.subs[m] {
			for p := int32(0); p < st.Partitions; p++ {
				if owner[fmt.Sprintf("%s/%d", st.Name, p)] == "" {
					t.Errorf("%s/%d unassigned", st.Name, p)
				}
			}
		}
	}
}

func TestAssignUniformBalancedAndSticky(t *testing.T) {
	topics := []Topic{{Name: "a", ID: topicID("a"), Partitions: 7}, {Name: "b", ID: topicID("b"), Partitions: 5}}
	s := spec(topics, map[string][]string{"m1": {"a", "b"}, "m2": {"a", "b"}, "m3": {"a", "b"}}, nil)
	out := assignUniform(s)
	checkComplete(t, s, out)
	for m, a := range out {
		if n := a.count(); n < 4 || n > 4 {
			t.Errorf("%s has %d partitions, want 4", m, n)
		}
	}
	// A fourth member takes partitions only from the others' surplus:
	// everything a member keeps was its own before.
	s2 := spec(topics, map[string][]string{"m1": {"a", "b"}, "m2": {"a", "b"}, "m3": {"a", "b"}, "m4": {"a", "b"}}, out)
	out2 := assignUniform(s2)
	checkComplete(t, s2, out2)
	moved := 0
	for _, m := range []string{"m1", "m2", "m3"} {
		for id, ps := range out2[m] {
			for _, p := range ps {
				if !out[m].has(id, p) {
					moved++
				}
			}
		}
		if n := out2[m].count(); n != 3 {
			t.Errorf("%s has %d partitions after the join, want 3", m, n)
		}
	}
	if moved != 0 || out2["m4"].count() != 3 {
		t.Errorf("moved %d partitions between old members; m4 has %d", moved, out2["m4"].count())
	}
}

func TestAssignUniformHeterogeneous(t *testing.T) {
	topics := []Topic{{Name: "a", ID: topicID("a"), Partitions: 4}, {Name: "b", ID: topicID("b"), Partitions: 2}}
	s := spec(topics, map[string][]string{"m1": {"a"}, "m2": {"a", "b"}}, nil)
	out := assignUniform(s)
	checkComplete(t, s, out)
	if out["m1"].count() < 2 {
		t.Errorf("m1 starved: %v", out)
	}
}

func TestAssignRange(t *testing.T) {
	topics := []Topic{{Name: "a", ID: topicID("a"), Partitions: 5}}
	s := spec(topics, map[string][]string{"m1": {"a"}, "m2": {"a"}}, nil)
	out := assignRange(s)
	checkComplete(t, s, out)
	if got := fmt.Sprint(out["m1"][topicID("a")], out["m2"][topicID("a")]); got != "[0 1 2] [3 4]" {
		t.Errorf("range = %s", got)
	}
}

// TestAssignRangeNotSticky follows Kafka's RangeAssignorTest
// testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics:
// Kafka 4.x's server-side range assignor recomputes the ranges from the
// member order (KAFKA-16944) instead of keeping previous partitions, so a
// member that sorts first takes the first range of every topic even from
// an existing member, and the topics stay co-partitioned.
func TestAssignRangeNotSticky(t *testing.T) {
	topics := []Topic{{Name: "a", ID: topicID("a"), Partitions: 3}, {Name: "b", ID: topicID("b"), Partitions: 3}}
	s := spec(topics, map[string][]string{"mA": {"a", "b"}, "mB": {"a", "b"}}, nil)
	out := assignRange(s)
	s2 := spec(topics, map[string][]string{"mA": {"a", "b"}, "mB": {"a", "b"}, "m0": {"a", "b"}}, out)
	out2 := assignRange(s2)
	checkComplete(t, s2, out2)
	for m, want := range map[string]string{"m0": "[0] [0]", "mA": "[1] [1]", "mB": "[2] [2]"} {
		if got := fmt.Sprint(out2[m][topicID("a")], out2[m][topicID("b")]); got != want {
			t.Errorf("%s = %s, want %s", m, got, want)
		}
	}
}

// TestAssignRangeStaticMembers follows Kafka's RangeAssignorTest
// testMixedStaticMembership: static members come first by instance id, so a
// static member replaced by a new member id keeps its range, and so do the
// others.
func TestAssignRangeStaticMembers(t *testing.T) {
	topics := []Topic{{Name: "a", ID: topicID("a"), Partitions: 5}}
	s := spec(topics, map[string][]string{"memberA": {"a"}, "memberB": {"a"}, "memberC": {"a"}}, nil)
	s.instances = map[string]string{"memberA": "instanceA", "memberC": "instanceC"}
	out := assignRange(s)
	checkComplete(t, s, out)
	// instanceA, instanceC, then the dynamic memberB.
	for m, want := range map[string]string{"memberA": "[0 1]", "memberC": "[2 3]", "memberB": "[4]"} {
		if got := fmt.Sprint(out[m][topicID("a")]); got != want {
			t.Errorf("%s = %s, want %s", m, got, want)
		}
	}
	s2 := spec(topics, map[string][]string{"memberA1": {"a"}, "memberB": {"a"}, "memberC": {"a"}}, out)
	s2.instances = map[string]string{"memberA1": "instanceA", "memberC": "instanceC"}
	out2 := assignRange(s2)
	for old, now := range map[string]string{"memberA": "memberA1", "memberB": "memberB", "memberC": "memberC"} {
		if !out[old].equal(out2[now]) {
			t.Errorf("%s had %v, %s now has %v", old, out[old], now, out2[now])
		}
	}
}

// TestAssignUniformNewcomerGetsShare: with the same subscription, a member
// joining two members that each hold two of four partitions takes one of
// them, as Kafka's UniformHomogeneousAssignmentBuilder gives the rounded-up
// quota only to partitions%members members; the others keep what they can.
func TestAssignUniformNewcomerGetsShare(t *testing.T) {
	topics := []Topic{{Name: "t", ID: topicID("t"), Partitions: 4}}
	prev := map[string]assignment{"a": {topicID("t"): {0, 1}}, "b": {topicID("t"): {2, 3}}}
	s := spec(topics, map[string][]string{"a": {"t"}, "b": {"t"}, "c": {"t"}}, prev)
	out := assignUniform(s)
	checkComplete(t, s, out)
	if n := out["c"].count(); n != 1 {
		t.Fatalf("newcomer has %d partitions: %v", n, out)
	}
	for _, m := range []string{"a", "b"} {
		if n := out[m].count(); n < 1 || n > 2 {
			t.Errorf("%s has %d partitions", m, n)
		}
		for id, ps := range out[m] {
			for _, p := range ps {
				if !prev[m].has(id, p) {
					t.Errorf("%s was given %d, which it did not own", m, p)
				}
			}
		}
	}
}

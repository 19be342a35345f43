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

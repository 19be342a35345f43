package share

import (
	"fmt"
	"testing"
)

// TestSimpleAssign checks the assignor against what Kafka 4.4's
// SimpleAssignor computes for the same groups (run on Kafka's own
// classes): how many partitions each member gets, that every partition is
// shared by ceil(members/partitions) members, what a member keeps, and,
// where Kafka's hash-order tie-breaking does not enter, the exact result.
func TestSimpleAssign(t *testing.T) {
	T, U := [16]byte{15: 1}, [16]byte{15: 2}
	parts := func(id [16]byte) []int32 {
		if id == T {
			return []int32{0, 1, 2, 3, 4}
		}
		return []int32{0, 1, 2}
	}
	cases := []struct {
		name    string
		members []assignSpec
		counts  map[string]int // Kafka's partition count per member
		exact   string         // Kafka's assignment, when order-free
		keeps   map[string]int // partitions a member keeps of its current
	}{
		{name: "three fresh members", members: []assignSpec{{id: "a", topics: [][16]byte{T}}, {id: "b", topics: [][16]byte{T}}, {id: "c", topics: [][16]byte{T}}},
			counts: map[string]int{"a": 2, "b": 2, "c": 1}},
		{name: "a member joins one holding everything", members: []assignSpec{{id: "a", topics: [][16]byte{T}, current: Assignment{T: {0, 1, 2, 3, 4}}}, {id: "b", topics: [][16]byte{T}}},
			counts: map[string]int{"a": 3, "b": 2}, keeps: map[string]int{"a": 3}},
		{name: "different topics", members: []assignSpec{{id: "a", topics: [][16]byte{T}}, {id: "b", topics: [][16]byte{U}}},
			exact: "a=map[t:[0 1 2 3 4]] b=map[u:[0 1 2]]"},
		{name: "more members than partitions share them", members: []assignSpec{{id: "a", topics: [][16]byte{U}}, {id: "b", topics: [][16]byte{U}}, {id: "c", topics: [][16]byte{U}}, {id: "d", topics: [][16]byte{U}}},
			counts: map[string]int{"a": 2, "b": 1, "c": 2, "d": 1}},
	}
	for _, c := range cases {
		got := simpleAssign(c.members, parts)
		n := map[[2]int32]int{}
		for _, m := range c.members {
			a := got[m.id]
			total := 0
			for tid, ps := range a {
				total += len(ps)
				for _, p := range ps {
					n[[2]int32{int32(tid[15]), p}]++
				}
			}
			if want, ok := c.counts[m.id]; ok && total != want {
				t.Errorf("%s: %s has %d partitions, Kafka gives %d", c.name, m.id, total, want)
			}
			if want, ok := c.keeps[m.id]; ok {
				kept := 0
				for tid, ps := range m.current {
					for _, p := range ps {
						for _, q := range a[tid] {
							if p == q {
								kept++
							}
						}
					}
				}
				if kept != want {
					t.Errorf("%s: %s keeps %d partitions, want %d", c.name, m.id, kept, want)
				}
			}
		}
		for k, v := range n {
			if v < 1 {
				t.Errorf("%s: partition %v unassigned", c.name, k)
			}
		}
		if c.exact != "" {
			s := ""
			for _, m := range c.members {
				named := map[string][]int32{}
				for tid, ps := range got[m.id] {
					named[map[[16]byte]string{T: "t", U: "u"}[tid]] = ps
				}
				s += fmt.Sprintf("%s=%v ", m.id, named)
			}
			if s[:len(s)-1] != c.exact {
				t.Errorf("%s: got %s, Kafka gives %s", c.name, s, c.exact)
			}
		}
	}
}

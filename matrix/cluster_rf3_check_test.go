package matrix_test

import (
	"strings"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// rf3TestLoop returns a loop holding one command with the given records
// (partition, value) and deliveries, started at start and ended at end.
func rf3TestLoop(start, end time.Time, recs []driver.Record, dls []driver.Delivery) *rf3Loop {
	return &rf3Loop{client: "c", role: "r", cmds: []*rf3Command{{start: start, end: end, records: recs, deliveries: dls}}}
}

// TestRF3ReadBackFindsEveryAnomaly checks the replicated failover's
// read-back check on made-up runs: a clean one passes, and a lost, a
// duplicated, a moved, a reordered, an unsent and a failed-but-read record
// are each reported.
func TestRF3ReadBackFindsEveryAnomaly(t *testing.T) {
	t0 := time.Now()
	recs := []driver.Record{{Partition: 0, Value: []byte("a")}, {Partition: 0, Value: []byte("b")}, {Partition: 1, Value: []byte("c")}}
	ok := []driver.Delivery{{Partition: 0, Offset: 0}, {Partition: 0, Offset: 1}, {Partition: 1, Offset: 0}}
	clean := func() map[int32]map[string][]rf3Read {
		return map[int32]map[string][]rf3Read{
			0: {"a": {{offset: 0}}, "b": {{offset: 1}}},
			1: {"c": {{offset: 0}}},
		}
	}
	if n, problems := checkReadBack([]*rf3Loop{rf3TestLoop(t0, t0, recs, ok)}, clean()); n != 3 || len(problems) > 0 {
		t.Fatalf("clean run: %d acknowledged, problems %v", n, problems)
	}
	for _, tc := range []struct {
		name  string
		dls   []driver.Delivery
		reads func(map[int32]map[string][]rf3Read)
		want  string
	}{
		{"lost", ok, func(r map[int32]map[string][]rf3Read) { delete(r[0], "b") }, "is missing"},
		{"duplicate", ok, func(r map[int32]map[string][]rf3Read) { r[1]["c"] = append(r[1]["c"], rf3Read{offset: 1}) }, "read 2 times"},
		{"moved", ok, func(r map[int32]map[string][]rf3Read) { r[0]["b"] = []rf3Read{{offset: 2}} }, "read at 0/2"},
		{"reordered", []driver.Delivery{{Partition: 0, Offset: 1}, {Partition: 0, Offset: 0}, {Partition: 1, Offset: 0}},
			func(r map[int32]map[string][]rf3Read) {
				r[0]["a"], r[0]["b"] = []rf3Read{{offset: 1}}, []rf3Read{{offset: 0}}
			}, "not after"},
		{"unsent", ok, func(r map[int32]map[string][]rf3Read) { r[1]["z"] = []rf3Read{{offset: 1}} }, "which no loop sent"},
		{"failed but read", []driver.Delivery{{Partition: 0, Offset: 0}, {Partition: 0, Offset: -1, Error: &driver.Error{Code: "NOT_LEADER_OR_FOLLOWER"}}, {Partition: 1, Offset: 0}},
			func(map[int32]map[string][]rf3Read) {}, "failed with NOT_LEADER_OR_FOLLOWER but was read"},
	} {
		reads := clean()
		tc.reads(reads)
		_, problems := checkReadBack([]*rf3Loop{rf3TestLoop(t0, t0, recs, tc.dls)}, reads)
		if len(problems) == 0 || !strings.Contains(strings.Join(problems, "\n"), tc.want) {
			t.Errorf("%s: problems %v, want one containing %q", tc.name, problems, tc.want)
		}
	}
	// A timed-out record may or may not be there.
	timedOut := []driver.Delivery{{Partition: 0, Offset: 0}, {Partition: 0, Offset: -1, Error: &driver.Error{Code: "CLIENT_TIMEOUT"}}, {Partition: 1, Offset: 0}}
	for _, drop := range []bool{false, true} {
		reads := clean()
		if drop {
			delete(reads[0], "b")
		}
		if _, problems := checkReadBack([]*rf3Loop{rf3TestLoop(t0, t0, recs, timedOut)}, reads); len(problems) > 0 {
			t.Errorf("timed-out record read=%v: problems %v", !drop, problems)
		}
	}
}

// TestRF3Timings checks the figures taken from a loop's commands: the
// first acknowledgement at a new leader epoch, and the longest gap cut at
// the window's end.
func TestRF3Timings(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	cmd := func(startMs, endMs int, v string, ok bool) *rf3Command {
		c := &rf3Command{start: at(startMs), end: at(endMs), records: []driver.Record{{Partition: 0, Value: []byte(v)}}}
		if ok {
			c.deliveries = []driver.Delivery{{Partition: 0, Offset: 0}}
		} else {
			c.deliveries = []driver.Delivery{{Partition: 0, Offset: -1, Error: &driver.Error{Code: "CLIENT_TIMEOUT"}}}
		}
		return c
	}
	l := &rf3Loop{cmds: []*rf3Command{
		cmd(0, 100, "old-1", true), cmd(100, 200, "old-2", true),
		cmd(200, 1010, "old-late", true), // acknowledged by the old leader, returned late
		cmd(1010, 3000, "failed", false),
		cmd(3000, 3200, "new-1", true), cmd(3200, 3300, "new-2", true),
		cmd(3300, 9000, "next-phase", true),
	}}
	reads := map[int32]map[string][]rf3Read{0: {
		"old-1": {{epoch: 0}}, "old-2": {{epoch: 0}}, "old-late": {{epoch: 0}},
		"new-1": {{epoch: 1}}, "new-2": {{epoch: 1}}, "next-phase": {{epoch: 1}},
	}}
	first, ok := firstAckAfter(l, 0, 0, reads)
	if !ok || !first.Equal(at(3200)) {
		t.Errorf("first acknowledgement at a new epoch: %v, want 3.2 s", first.Sub(t0))
	}
	gap, normal := longestAckGap(l, at(1000), at(4000))
	if want := 2190 * time.Millisecond; gap != want {
		t.Errorf("longest gap %v, want %v (1.01 s to 3.2 s)", gap, want)
	}
	if normal != 100*time.Millisecond {
		t.Errorf("ordinary gap %v, want 100ms", normal)
	}
	if gap, _ := longestAckGap(l, at(1000), at(3250)); gap != 2190*time.Millisecond {
		t.Errorf("gap with the window ending at 3.25 s: %v", gap)
	}
	if gap, _ := longestAckGap(l, at(3250), at(5000)); gap != 1700*time.Millisecond {
		t.Errorf("gap cut at the window's end: %v, want 1.7 s", gap)
	}
}

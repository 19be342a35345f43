package linearizability

import (
	"testing"
	"time"
)

// A broker that is down for a while leaves most produces of its clients
// unknown and unread; the check still decides, since only a produce
// somebody read has to be placed by the search.
func TestManyUnknownProducesDecide(t *testing.T) {
	h := generate(genConfig{seed: 11, ops: 4000, partitions: 1, clients: 24, unknownRate: 0.7})
	rep, err := Check(h, Options{Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Valid() {
		t.Fatalf("valid history with many unknown produces:\n%s", rep.Summary())
	}
}

// A follower, or a leader new to its epoch, answers with a high watermark
// behind one an earlier answer showed: invalid for one broker, allowed
// with StaleReads; a read past the log stays invalid either way.
func TestStaleReads(t *testing.T) {
	h := []Op{
		{Client: "p", Op: OpProduce, Topic: "t", Value: "a", CallNs: 0, ReturnNs: 10, Outcome: OutcomeOK, Offset: Int64(0)},
		{Client: "p", Op: OpProduce, Topic: "t", Value: "b", CallNs: 20, ReturnNs: 30, Outcome: OutcomeOK, Offset: Int64(1)},
		{Client: "c", Op: OpFetch, Topic: "t", From: Int64(0), CallNs: 40, ReturnNs: 50, Outcome: OutcomeOK,
			Records: []Record{{0, "a"}, {1, "b"}}, HighWatermark: Int64(2)},
		{Client: "c", Op: OpListOffsets, Kind: KindLatest, Topic: "t", CallNs: 60, ReturnNs: 70, Outcome: OutcomeOK, Offset: Int64(1)},
	}
	for _, stale := range []bool{false, true} {
		rep, err := Check(h, Options{StaleReads: stale})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Valid() != stale {
			t.Errorf("StaleReads %v: valid %v\n%s", stale, rep.Valid(), rep.Summary())
		}
	}
	h[3].Offset = Int64(3)
	if rep, _ := Check(h, Options{StaleReads: true}); rep.Valid() {
		t.Errorf("a latest offset past the log judged valid with StaleReads")
	}
}

// A commit of unknown outcome nobody read is left out of the search;
// one somebody read is still placed.
func TestUnknownCommitReadBack(t *testing.T) {
	h := []Op{
		{Client: "a", Op: OpCommit, Group: "g", Topic: "t", CallNs: 0, ReturnNs: 10, Outcome: OutcomeOK, Offset: Int64(5)},
		{Client: "b", Op: OpCommit, Group: "g", Topic: "t", CallNs: 20, ReturnNs: 30, Outcome: OutcomeUnknown, Offset: Int64(7)},
		{Client: "c", Op: OpFetchCommitted, Group: "g", Topic: "t", CallNs: 40, ReturnNs: 50, Outcome: OutcomeOK, Offset: Int64(7)},
		{Client: "c", Op: OpFetchCommitted, Group: "g", Topic: "t", CallNs: 60, ReturnNs: 70, Outcome: OutcomeOK, Offset: Int64(5)},
	}
	if rep, _ := Check(h, Options{}); rep.Valid() {
		t.Errorf("a read of 5 after the unknown commit of 7 was read judged valid:\n%s", rep.Summary())
	}
	h = h[:3]
	if rep, _ := Check(h, Options{}); !rep.Valid() {
		t.Errorf("the unknown commit read back judged invalid:\n%s", rep.Summary())
	}
}

// Under StaleReads a committed offset read lower than one read before is
// a stale read when a later read shows the higher offset again, and a lost
// commit when none does.
func TestStaleCommitReads(t *testing.T) {
	commit := func(c string, off, call, ret int64) Op {
		return Op{Client: c, Op: OpCommit, Group: "g", Topic: "t", CallNs: call, ReturnNs: ret, Outcome: OutcomeOK, Offset: Int64(off)}
	}
	read := func(off, call, ret int64) Op {
		return Op{Client: "r", Op: OpFetchCommitted, Group: "g", Topic: "t", CallNs: call, ReturnNs: ret, Outcome: OutcomeOK, Offset: Int64(off)}
	}
	h := []Op{commit("a", 5, 0, 10), commit("a", 9, 20, 30), read(9, 40, 50), read(5, 60, 70)}
	for _, stale := range []bool{false, true} {
		rep, _ := Check(h, Options{StaleReads: stale})
		if rep.Valid() || rep.Count(KindCommitBackwards) == 0 {
			t.Errorf("StaleReads %v: a commit never read again judged valid:\n%s", stale, rep.Summary())
		}
	}
	h = append(h, read(9, 80, 90))
	if rep, _ := Check(h, Options{}); rep.Valid() {
		t.Errorf("a read going back judged valid without StaleReads")
	}
	rep, _ := Check(h, Options{StaleReads: true})
	if !rep.Valid() || len(rep.Info) == 0 || rep.Info[0].Kind != KindStaleCommitRead {
		t.Errorf("a stale read shown again later: valid %v, info %v\n%s", rep.Valid(), rep.Info, rep.Summary())
	}
}

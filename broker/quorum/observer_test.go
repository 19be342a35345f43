package quorum

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func fetchAt(t *testing.T, n *Node, next uint64, maxBytes int32, wait time.Duration) ObserverFetchResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := n.ServeObserverFetch(ctx, ObserverFetchRequest{ClusterID: "chan", NodeID: 7, Next: next, MaxBytes: maxBytes, MaxWait: wait})
	if err != nil {
		t.Fatalf("observer fetch at %d: %v", next, err)
	}
	return resp
}

func dataOf(es []Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, string(e.Data))
	}
	return out
}

// TestObserverFetchCommittedOnly checks that a voter serves observers only
// what is committed: a leader cut off from its followers holds an entry it
// cannot commit, and a fetch from it neither returns that entry nor waits
// past its bound; the observer's position is recorded.
func TestObserverFetchCommittedOnly(t *testing.T) {
	cn, _ := newChanCluster(t, 3)
	l := cn.leader(t, 0)
	leader := cn.nodes[l]
	for _, d := range []string{"a", "b"} {
		if _, err := leader.Propose(context.Background(), []byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	resp := fetchAt(t, leader, 1, 1<<20, 0)
	if got := strings.Join(dataOf(resp.Entries), ","); got != "a,b" || resp.Leader != l || resp.Next != resp.Commit+1 {
		t.Fatalf("fetch from 1: entries %s, leader %d (want %d), next %d, commit %d", got, resp.Leader, l, resp.Next, resp.Commit)
	}
	committed := resp.Commit

	cn.mu.Lock()
	cn.cut[l] = true
	cn.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	leader.Propose(ctx, []byte("uncommitted")) // cannot commit: cut off
	cancel()
	last, _ := leader.core.Storage().LastIndex()
	if last <= committed {
		t.Fatalf("the cut-off leader's log ends at %d, want the uncommitted entry after %d", last, committed)
	}
	start := time.Now()
	resp = fetchAt(t, leader, committed+1, 1<<20, 300*time.Millisecond)
	if len(resp.Entries) != 0 || resp.Snapshot != nil || resp.Commit != committed || resp.Next != committed+1 {
		t.Fatalf("fetch past the commit index served %v (commit %d, next %d)", dataOf(resp.Entries), resp.Commit, resp.Next)
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Fatalf("a fetch with nothing committed answered after %v, before its 300 ms wait", waited)
	}
	obs := leader.Observers()
	if len(obs) != 1 || obs[0].ID != 7 || obs[0].LogEndOffset != int64(committed) || obs[0].LastFetch.IsZero() || obs[0].LastCaughtUp.IsZero() {
		t.Fatalf("observers %+v, want node 7 at %d, caught up", obs, committed)
	}
	cn.mu.Lock()
	cn.cut[l] = false
	cn.mu.Unlock()
}

// TestObserverFetchLongPoll checks that a fetch waiting at the log end
// answers as soon as an entry commits, well before its wait.
func TestObserverFetchLongPoll(t *testing.T) {
	cn, _ := newChanCluster(t, 3)
	l := cn.leader(t, 0)
	leader := cn.nodes[l]
	if _, err := leader.Propose(context.Background(), []byte("a")); err != nil {
		t.Fatal(err)
	}
	at := fetchAt(t, leader, 1, 1<<20, 0).Next
	type answer struct {
		resp ObserverFetchResponse
		took time.Duration
	}
	done := make(chan answer, 1)
	start := time.Now()
	go func() {
		resp, _ := leader.ServeObserverFetch(context.Background(), ObserverFetchRequest{NodeID: 7, Next: at, MaxBytes: 1 << 20, MaxWait: 8 * time.Second})
		done <- answer{resp, time.Since(start)}
	}()
	time.Sleep(100 * time.Millisecond)
	if _, err := leader.Propose(context.Background(), []byte("woken")); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-done:
		if got := dataOf(a.resp.Entries); len(got) != 1 || got[0] != "woken" {
			t.Fatalf("long-poll answered %v", got)
		}
		if a.took > 5*time.Second {
			t.Fatalf("long-poll answered after %v: the commit did not wake it", a.took)
		}
		t.Logf("long-poll answered %v after it began (the commit came at ~100 ms)", a.took.Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		t.Fatal("long-poll did not answer")
	}
}

// TestObserverFetchByteBound checks that an answer stops at the byte
// bound, and carries one entry even when that entry alone is larger.
func TestObserverFetchByteBound(t *testing.T) {
	cn, _ := newChanCluster(t, 3)
	l := cn.leader(t, 0)
	leader := cn.nodes[l]
	for i := range 5 {
		if _, err := leader.Propose(context.Background(), bytes.Repeat([]byte{byte('a' + i)}, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	resp := fetchAt(t, leader, 1, 2500, 0)
	if len(resp.Entries) != 2 {
		t.Fatalf("2500-byte bound gave %d entries of 1000 bytes, want 2", len(resp.Entries))
	}
	resp = fetchAt(t, leader, resp.Next, 1, 0)
	if len(resp.Entries) != 1 || resp.Entries[0].Data[0] != 'c' {
		t.Fatalf("1-byte bound gave %d entries, want the third alone", len(resp.Entries))
	}
	resp = fetchAt(t, leader, resp.Next, 1<<20, 0)
	if len(resp.Entries) != 2 || resp.Entries[1].Data[0] != 'e' || resp.Next != resp.Commit+1 {
		t.Fatalf("the rest: %d entries, next %d, commit %d", len(resp.Entries), resp.Next, resp.Commit)
	}
}

// TestObserverFetchSnapshot checks that a fetch below the log start (the
// voters snapshotted and compacted) answers the latest snapshot, and the
// fetch after it continues with entries.
func TestObserverFetchSnapshot(t *testing.T) {
	cn, _ := newChanClusterWith(t, 3, func(c *Config) { c.SnapshotEntries, c.RetainEntries = 5, 1 })
	l := cn.leader(t, 0)
	leader := cn.nodes[l]
	for i := range 12 {
		if _, err := leader.Propose(context.Background(), []byte(fmt.Sprintf("e%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	first, _ := leader.core.Storage().FirstIndex()
	if first <= 1 {
		t.Fatalf("log starts at %d: not compacted", first)
	}
	resp := fetchAt(t, leader, 1, 1<<20, 0)
	s := resp.Snapshot
	if s == nil || s.Index < first-1 || resp.Next != s.Index+1 || len(resp.Entries) != 0 {
		t.Fatalf("fetch below log start %d: snapshot %+v, next %d, %d entries", first, s, resp.Next, len(resp.Entries))
	}
	var app memApp
	if err := app.Restore(*s); err != nil {
		t.Fatal(err)
	}
	for resp.Next <= resp.Commit {
		resp = fetchAt(t, leader, resp.Next, 1<<20, 0)
		if resp.Snapshot != nil {
			t.Fatal("a fetch at the log start answered a snapshot")
		}
		if err := app.Apply(resp.Entries); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(dataOf(app.entries), ","); got != "e0,e1,e2,e3,e4,e5,e6,e7,e8,e9,e10,e11" {
		t.Fatalf("snapshot then entries rebuilt %s", got)
	}
}

// TestObserverFrameRefusals checks that a frame that does not decode, of
// another cluster, or cut short is refused rather than answered.
func TestObserverFrameRefusals(t *testing.T) {
	cn, _ := newChanCluster(t, 1)
	n := cn.nodes[1]
	good := AppendObserverFetch(nil, 1, ObserverFetchRequest{ClusterID: "chan", NodeID: 4, Next: 1, MaxBytes: 100})
	if out, err := n.HandleObserverFrame(context.Background(), good[4:]); err != nil || len(out) < 41 {
		t.Fatalf("a good frame: %v, %d bytes", err, len(out))
	}
	other := AppendObserverFetch(nil, 1, ObserverFetchRequest{ClusterID: "other", NodeID: 4, Next: 1})
	for name, f := range map[string][]byte{
		"another cluster": other[4:],
		"cut short":       good[4 : len(good)-1],
		"trailing bytes":  append(bytes.Clone(good[4:]), 0),
		"negative node":   AppendObserverFetch(nil, 1, ObserverFetchRequest{ClusterID: "chan", NodeID: -2})[4:],
	} {
		if _, err := n.HandleObserverFrame(context.Background(), f); err == nil {
			t.Errorf("%s: answered", name)
		}
	}
}

// TestObserverFollowsOverTCP runs an Observer against three voters over
// TCP: it applies what commits, learns the leader from the answers, moves
// to the new leader after the old one is killed, and a second observer
// started after the voters compacted their logs catches up from a
// snapshot. The voters list both observers.
func TestObserverFollowsOverTCP(t *testing.T) {
	c := newTCPCluster(t, 3)
	first, ok := c.leader(15*time.Second, 0)
	if !ok {
		t.Fatal("no leader within 15 s")
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func(id int32) (*Observer, *syncApp) {
		app := &syncApp{}
		o, err := StartObserver(ObserverConfig{NodeID: id, Voters: c.voters, ClusterID: "tcp-test", MaxWait: 300 * time.Millisecond, Logger: logger}, app)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { o.Close() })
		return o, app
	}
	seen := func(app *syncApp, data string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !app.has(data) {
			if time.Now().After(deadline) {
				t.Fatalf("observer did not apply %q", data)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	o, app := start(10)
	select {
	case <-o.CaughtUp():
	case <-time.After(15 * time.Second):
		t.Fatal("observer not caught up")
	}
	c.propose(first, "a0")
	seen(app, "a0")
	if l, _ := o.Leader(); l != first {
		t.Fatalf("observer names leader %d, want %d", l, first)
	}
	if obs := c.members[first].node.Observers(); len(obs) != 1 || obs[0].ID != 10 {
		t.Fatalf("leader's observers %+v", obs)
	}

	c.kill(c.members[first])
	next, ok := c.leader(15*time.Second, first)
	if !ok {
		t.Fatal("no new leader")
	}
	for i := range 25 { // past SnapshotEntries: the voters compact
		c.propose(next, fmt.Sprintf("b%d", i))
	}
	seen(app, "b24")
	deadline := time.Now().Add(10 * time.Second)
	for l, _ := o.Leader(); l != next; l, _ = o.Leader() {
		if time.Now().After(deadline) {
			t.Fatalf("observer names leader %d, want the new leader %d", l, next)
		}
		time.Sleep(5 * time.Millisecond)
	}

	late, lateApp := start(11)
	seen(lateApp, "b24")
	lateApp.mu.Lock()
	restores := lateApp.app.restores
	lateApp.mu.Unlock()
	if restores == 0 {
		t.Fatal("an observer that started after compaction caught up without a snapshot")
	}
	if !lateApp.has("a0") {
		t.Fatal("the late observer's snapshot lost a0")
	}
	<-late.CaughtUp()
	obs := c.members[next].node.Observers()
	if len(obs) != 2 || obs[0].ID != 10 || obs[1].ID != 11 {
		t.Fatalf("new leader's observers %+v", obs)
	}
	if o.Err() != nil || late.Err() != nil {
		t.Fatalf("observer errors: %v, %v", o.Err(), late.Err())
	}
}

// TestSnapshotBytes checks SnapshotBytes and RetainBytes: a snapshot once
// the data applied since the last reaches the bound, with the log before
// it kept only within RetainBytes.
func TestSnapshotBytes(t *testing.T) {
	cn, _ := newChanClusterWith(t, 1, func(c *Config) { c.SnapshotBytes, c.RetainBytes = 3000, 2500 })
	n := cn.nodes[cn.leader(t, 0)]
	for i := range 7 {
		if _, err := n.Propose(context.Background(), bytes.Repeat([]byte{'x'}, 1000)); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			if snap, _ := n.core.Storage().Snapshot(); snap.GetMetadata().GetIndex() != 0 {
				t.Fatalf("snapshot after 2000 bytes, below the 3000-byte bound")
			}
		}
	}
	snap, _ := n.core.Storage().Snapshot()
	si := snap.GetMetadata().GetIndex()
	first, _ := n.core.Storage().FirstIndex()
	if si == 0 || first <= 1 {
		t.Fatalf("after 7000 bytes: snapshot at %d, log from %d", si, first)
	}
	ents, err := n.core.Storage().Entries(first, si+1, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, e := range ents {
		kept += len(e.GetData())
	}
	if kept > 2500 {
		t.Fatalf("%d bytes of entries kept before the snapshot at %d, above RetainBytes", kept, si)
	}
}

// FuzzObserverFrames checks that the observer fetch and answer decoders
// refuse what they cannot read without panicking, and read back what was
// encoded.
func FuzzObserverFrames(f *testing.F) {
	f.Add(AppendObserverFetch(nil, 3, ObserverFetchRequest{ClusterID: "c", NodeID: 4, Next: 9, MaxBytes: 100, MaxWait: time.Second})[4:])
	f.Add(appendObserverAnswer(nil, 3, ObserverFetchResponse{Leader: 1, Term: 2, Commit: 5, Next: 6,
		Snapshot: &Snapshot{Index: 3, Term: 1, Data: []byte("s")}, Entries: []Entry{{Index: 4, Term: 2, Data: []byte("e")}}})[4:])
	f.Fuzz(func(t *testing.T, b []byte) {
		if corr, req, err := ParseObserverFetch(b); err == nil {
			again := AppendObserverFetch(nil, corr, req)[4:]
			if _, req2, err := ParseObserverFetch(again); err != nil || req2 != req {
				t.Fatalf("request %+v does not read back: %+v %v", req, req2, err)
			}
		}
		if corr, resp, err := parseObserverAnswer(b); err == nil {
			if _, _, err := parseObserverAnswer(appendObserverAnswer(nil, corr, resp)[4:]); err != nil {
				t.Fatalf("answer %+v does not read back: %v", resp, err)
			}
		}
	})
}

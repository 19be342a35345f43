package quorum

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestDescribeAndTransfer runs three nodes over TCP: the leader describes
// the quorum (every voter caught up to the commit index, with fetch times
// from the followers' answers), a follower refuses to describe it naming
// the leader, a voter that stops answering keeps its last fetch time and
// falls behind, and TransferLeadership hands the leadership to the live
// follower, which then describes the quorum itself.
func TestDescribeAndTransfer(t *testing.T) {
	c := newTCPCluster(t, 3)
	leader, ok := c.leader(15*time.Second, 0)
	if !ok {
		t.Fatal("no leader within 15 s")
	}
	for i := range 5 {
		c.propose(leader, fmt.Sprintf("d%d", i))
	}
	c.applied("d4", 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	describe := func(id uint64) Description {
		t.Helper()
		d, err := c.members[id].node.Describe(ctx)
		if err != nil {
			t.Fatalf("Describe on %d: %v", id, err)
		}
		return d
	}
	// Followers' matches reach the commit index with their next answers.
	var d Description
	deadline := time.Now().Add(10 * time.Second)
	for {
		d = describe(leader)
		caught := len(d.Voters) == 3
		for _, v := range d.Voters {
			caught = caught && v.LogEndOffset >= d.HighWatermark && !v.LastFetch.IsZero() && !v.LastCaughtUp.IsZero()
		}
		if caught {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("voters not caught up within 10 s: %+v", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d.Leader != leader || d.Term == 0 || d.HighWatermark < 5 {
		t.Fatalf("description %+v: want leader %d, a term and a commit index of at least 5", d, leader)
	}
	for i, v := range d.Voters {
		if v.ID != uint64(i+1) {
			t.Fatalf("voters not in id order: %+v", d.Voters)
		}
	}

	var follower, other uint64
	for id := range c.members {
		switch {
		case id == leader:
		case follower == 0:
			follower = id
		default:
			other = id
		}
	}
	_, err := c.members[follower].node.Describe(ctx)
	var nle *NotLeaderError
	if !errors.As(err, &nle) || nle.Leader != leader {
		t.Fatalf("Describe on follower %d: %v, want not-leader naming %d", follower, err, leader)
	}

	// A stopped voter keeps its last fetch time and falls behind.
	c.kill(c.members[other])
	stoppedAt := time.Now()
	for i := range 3 {
		c.propose(leader, fmt.Sprintf("e%d", i))
	}
	time.Sleep(300 * time.Millisecond)
	d = describe(leader)
	gone := d.Voters[other-1]
	if gone.LastFetch.After(stoppedAt) || gone.LogEndOffset >= d.Voters[leader-1].LogEndOffset {
		t.Fatalf("stopped voter %d: %+v (stopped at %v, leader at %d)", other, gone, stoppedAt, d.Voters[leader-1].LogEndOffset)
	}
	if live := d.Voters[follower-1]; !live.LastFetch.After(stoppedAt) {
		t.Fatalf("live voter %d not heard from since %v: %+v", follower, stoppedAt, live)
	}

	to, err := c.members[leader].node.TransferLeadership(ctx)
	if err != nil || to != follower {
		t.Fatalf("TransferLeadership from %d: to %d, %v; want %d", leader, to, err, follower)
	}
	if next, ok := c.leader(10*time.Second, leader); !ok || next != follower {
		t.Fatalf("leader after the transfer: %d, want %d", next, follower)
	}
	if to, err := c.members[leader].node.TransferLeadership(ctx); to != 0 || err != nil {
		t.Fatalf("TransferLeadership on a follower: %d, %v", to, err)
	}
	c.propose(follower, "f0")
	if d := describe(follower); d.Leader != follower || d.HighWatermark <= 8 {
		t.Fatalf("description by the new leader: %+v", d)
	}
}

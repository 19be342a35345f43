package quorum

import (
	"context"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// ReplicaState is what the leader knows of one voter, as Kafka's
// LeaderState.ReplicaState reports it in DescribeQuorum.
type ReplicaState struct {
	ID uint64
	// LogEndOffset is the raft index of the last entry the voter is known
	// to hold (raft's Match), or -1 while the leader has heard nothing
	// from it in this term. For the leader it is its own last index.
	LogEndOffset int64
	// LastFetch is when the voter last answered the leader (an append
	// or heartbeat response: raft's followers do not fetch, the leader
	// pushes, and each answer stands for one of Kafka's fetches); zero
	// when unknown. For the leader it is now, as Kafka reports it.
	LastFetch time.Time
	// LastCaughtUp is when the voter last held everything the leader
	// held at the time (Kafka's lastCaughtUpTimestamp rule); zero when
	// unknown. For the leader it is now.
	LastCaughtUp time.Time
}

// Description is the leader's view of the quorum, the content of Kafka's
// DescribeQuorum answer.
type Description struct {
	Leader uint64
	Term   uint64 // Kafka's leader epoch
	// HighWatermark is the commit index: the raft index of the last
	// committed entry.
	HighWatermark int64
	// Voters are every voter, in id order, the leader among them.
	Voters []ReplicaState
}

// followerState is the leader's record of one follower's answers in the
// current term, kept by the run loop (Kafka's LeaderState.ReplicaState).
type followerState struct {
	heard        bool
	lastFetch    time.Time
	lastCaughtUp time.Time
	// leaderEndAtFetch is the leader's last index at the previous answer.
	leaderEndAtFetch uint64
}

// peerTracker follows the followers' answers while this node leads; it
// starts afresh with each term, as Kafka's LeaderState does.
type peerTracker struct {
	term  uint64
	peers map[uint64]*followerState
}

// observe records an answer the leader has just stepped: m is a response
// of follower m.From. As LeaderState.updateFollowerState: the follower is
// caught up now when it holds the leader's whole log; else, if it holds
// what the leader had at its previous answer, it was caught up then.
func (n *Node) observe(m *pb.Message) {
	switch m.GetType() {
	case pb.MsgAppResp:
		if m.GetReject() {
			return
		}
	case pb.MsgHeartbeatResp:
	default:
		return
	}
	st := n.core.rn.BasicStatus()
	if st.RaftState != raft.StateLeader {
		return
	}
	t := &n.peers
	if t.term != st.GetTerm() || t.peers == nil {
		t.term, t.peers = st.GetTerm(), map[uint64]*followerState{}
	}
	var leaderEnd, match uint64
	n.core.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		switch id {
		case n.cfg.NodeID:
			leaderEnd = pr.Match
		case m.GetFrom():
			match = pr.Match
		}
	})
	now := n.cfg.Now()
	f := t.peers[m.GetFrom()]
	if f == nil {
		f = &followerState{}
		t.peers[m.GetFrom()] = f
	}
	if match >= leaderEnd {
		f.lastCaughtUp = latest(f.lastCaughtUp, now)
	} else if f.leaderEndAtFetch > 0 && match >= f.leaderEndAtFetch {
		f.lastCaughtUp = latest(f.lastCaughtUp, f.lastFetch)
	}
	f.leaderEndAtFetch = leaderEnd
	f.lastFetch = latest(f.lastFetch, now)
	f.heard = true
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// describe builds the Description on the run loop.
func (n *Node) describe() (Description, error) {
	st := n.core.rn.Status()
	if st.RaftState != raft.StateLeader {
		return Description{}, &NotLeaderError{Leader: st.Lead, Term: st.GetTerm()}
	}
	now := n.cfg.Now()
	d := Description{Leader: n.cfg.NodeID, Term: st.GetTerm(), HighWatermark: int64(st.GetCommit())}
	ids := n.cfg.voterIDs()
	slices.Sort(ids)
	for _, id := range ids {
		rs := ReplicaState{ID: id, LogEndOffset: -1}
		pr, tracked := st.Progress[id]
		switch {
		case id == n.cfg.NodeID:
			rs.LogEndOffset, rs.LastFetch, rs.LastCaughtUp = int64(pr.Match), now, now
		case n.peers.term == st.GetTerm() && n.peers.peers[id] != nil && tracked:
			f := n.peers.peers[id]
			rs.LogEndOffset, rs.LastFetch, rs.LastCaughtUp = int64(pr.Match), f.lastFetch, f.lastCaughtUp
		}
		d.Voters = append(d.Voters, rs)
	}
	return d, nil
}

// onLoop runs f on the run loop and waits for it; it fails with ctx's
// error or ErrStopped when f cannot run.
func (n *Node) onLoop(ctx context.Context, f func()) error {
	done := make(chan struct{})
	call := func() { f(); close(done) }
	select {
	case n.callc <- call:
	case <-ctx.Done():
		return ctx.Err()
	case <-n.donec:
		return n.stopErr()
	}
	// The loop runs a call it took before it looks at anything else.
	<-done
	return nil
}

// Describe returns the quorum as this node, its leader, sees it: a node
// that is not the leader returns a *NotLeaderError (errors.Is ErrNotLeader),
// as Kafka's KafkaRaftClient answers DescribeQuorum with
// NOT_LEADER_OR_FOLLOWER.
func (n *Node) Describe(ctx context.Context) (Description, error) {
	var d Description
	var derr error
	if err := n.onLoop(ctx, func() { d, derr = n.describe() }); err != nil {
		return Description{}, err
	}
	return d, derr
}

// TransferLeadership hands the leadership of a leader to the voter that is
// most caught up among those recently heard from, and waits (bounded by
// ctx) until this node is no longer the leader. It is what a leader does
// before it stops cleanly, in place of Kafka's resignation with
// EndQuorumEpoch (whose preferred successors are ordered by log end
// offset): the next leader takes over at once rather than after the
// followers' fetch timeout. It returns the chosen voter, or 0 and nil when
// this node is not the leader or no other voter was heard from recently:
// then there is nothing to hand over.
func (n *Node) TransferLeadership(ctx context.Context) (uint64, error) {
	var to uint64
	changed := n.LeaderChanged()
	err := n.onLoop(ctx, func() {
		if n.core.rn.BasicStatus().RaftState != raft.StateLeader {
			return
		}
		var best uint64
		n.core.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
			if id == n.cfg.NodeID || !pr.RecentActive {
				return
			}
			if to == 0 || pr.Match > best || pr.Match == best && id < to {
				to, best = id, pr.Match
			}
		})
		if to != 0 {
			n.core.rn.TransferLeader(to)
		}
	})
	if err != nil || to == 0 {
		return 0, err
	}
	for {
		if l, _ := n.Leader(); l != n.cfg.NodeID {
			return to, nil
		}
		select {
		case <-changed:
			changed = n.LeaderChanged()
		case <-ctx.Done():
			return to, ctx.Err()
		case <-n.donec:
			return to, n.stopErr()
		}
	}
}

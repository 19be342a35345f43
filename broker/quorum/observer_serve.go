package quorum

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// ObserverState is what a voter knows of one observer from its fetches,
// as Kafka's DescribeQuorum lists observers: LogEndOffset is the last index
// the observer held when it last fetched (the index before the one it
// asked for), LastFetch when that was, and LastCaughtUp the last fetch at
// which the observer held everything this voter had applied.
type ObserverState struct {
	ID           int32
	LogEndOffset int64
	LastFetch    time.Time
	LastCaughtUp time.Time
}

// observerSession is how long a voter remembers an observer that stopped
// fetching, as Kafka's LeaderState.OBSERVER_SESSION_TIMEOUT_MS.
const observerSession = 5 * time.Minute

// setApplied records the index the application reached and wakes the
// observer fetches waiting for it. Called from the run loop.
func (n *Node) setApplied(i uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if i <= n.applied {
		return
	}
	n.applied = i
	close(n.appliedc)
	n.appliedc = make(chan struct{})
}

func (n *Node) appliedIndex() (uint64, <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.applied, n.appliedc
}

// Observers returns the observers that fetched from this voter within the
// last five minutes, in id order.
func (n *Node) Observers() []ObserverState {
	n.obsMu.Lock()
	defer n.obsMu.Unlock()
	now := time.Now()
	out := make([]ObserverState, 0, len(n.observers))
	for id, o := range n.observers {
		if now.Sub(o.LastFetch) > observerSession {
			delete(n.observers, id)
			continue
		}
		out = append(out, *o)
	}
	slices.SortFunc(out, func(a, b ObserverState) int { return int(a.ID - b.ID) })
	return out
}

func (n *Node) recordObserver(id int32, next, applied uint64, now time.Time) {
	n.obsMu.Lock()
	defer n.obsMu.Unlock()
	o := n.observers[id]
	if o == nil {
		o = &ObserverState{ID: id}
		n.observers[id] = o
	}
	o.LogEndOffset, o.LastFetch = int64(next)-1, now
	if next > applied {
		o.LastCaughtUp = now
	}
}

// HandleObserverFrame answers one observer fetch frame (as ReadFrame
// returns it, api key ObserverFetchAPIKey) and returns the response frame
// to write. A frame that does not decode or is of another cluster is an
// error: the caller closes the connection.
func (n *Node) HandleObserverFrame(ctx context.Context, frame []byte) ([]byte, error) {
	corr, req, err := ParseObserverFetch(frame)
	if err != nil {
		return nil, err
	}
	if req.ClusterID != n.cfg.ClusterID {
		return nil, fmt.Errorf("%w: cluster id %q, this cluster is %q", ErrObserverFrame, req.ClusterID, n.cfg.ClusterID)
	}
	resp, err := n.ServeObserverFetch(ctx, req)
	if err != nil {
		return nil, err
	}
	return appendObserverAnswer(nil, corr, resp), nil
}

// ServeObserverFetch answers an observer fetch with committed data only:
// the entries this voter has applied from req.Next on, up to req.MaxBytes
// (at least one entry), or the latest snapshot when req.Next is below the
// log start. When nothing at or after req.Next is committed yet it holds
// the request until something is, req.MaxWait passes (at most
// MaxObserverWait) or ctx ends, and then answers what it has. The answer
// names the leader and term this voter knows.
//
// It reads the log through the storage's memory view, whose reads are
// locked against the run loop's writes (as raft's own reads are), and only
// below the applied index, which the run loop publishes after the entries
// are applied: nothing it serves can still change.
func (n *Node) ServeObserverFetch(ctx context.Context, req ObserverFetchRequest) (ObserverFetchResponse, error) {
	next := max(req.Next, 1)
	ms := n.core.Storage().MemoryStorage
	wait := time.NewTimer(min(req.MaxWait, MaxObserverWait))
	defer wait.Stop()
	for {
		applied, moved := n.appliedIndex()
		first, _ := ms.FirstIndex()
		if next < first || next <= applied {
			break
		}
		select {
		case <-moved:
			continue
		case <-wait.C:
		case <-ctx.Done():
			return ObserverFetchResponse{}, ctx.Err()
		case <-n.donec:
			return ObserverFetchResponse{}, n.stopErr()
		}
		break
	}
	applied, _ := n.appliedIndex()
	resp := ObserverFetchResponse{Commit: applied, Next: next}
	resp.Leader, resp.Term = n.Leader()
	n.recordObserver(req.NodeID, next, applied, time.Now())
	for range 3 { // a compaction between the two reads sends a snapshot
		first, _ := ms.FirstIndex()
		if next < first {
			snap, err := ms.Snapshot()
			if err != nil {
				return ObserverFetchResponse{}, fmt.Errorf("quorum: snapshot for an observer: %w", err)
			}
			md := snap.GetMetadata()
			resp.Snapshot = &Snapshot{Index: md.GetIndex(), Term: md.GetTerm(), Data: snap.GetData()}
			resp.Commit, resp.Next = max(applied, md.GetIndex()), md.GetIndex()+1
			return resp, nil
		}
		if next > applied {
			return resp, nil
		}
		ents, err := ms.Entries(next, applied+1, uint64(max(req.MaxBytes, 1)))
		if errors.Is(err, raft.ErrCompacted) {
			continue
		}
		if err != nil {
			return ObserverFetchResponse{}, fmt.Errorf("quorum: entries %d-%d for an observer: %w", next, applied, err)
		}
		resp.Entries = observerEntries(ents)
		if len(ents) > 0 {
			resp.Next = ents[len(ents)-1].GetIndex() + 1
		}
		return resp, nil
	}
	return ObserverFetchResponse{}, fmt.Errorf("quorum: log compacted under index %d three times while serving an observer", next)
}

// observerEntries keeps the entries the application sees: normal entries
// with data (raft's empty entries and configuration changes are skipped).
func observerEntries(ents []*pb.Entry) []Entry {
	var out []Entry
	for _, e := range ents {
		if e.GetType() == pb.EntryNormal && len(e.GetData()) > 0 {
			out = append(out, Entry{Index: e.GetIndex(), Term: e.GetTerm(), Data: e.GetData()})
		}
	}
	return out
}

// Applied returns the index the application has applied and a channel
// closed when it moves past it.
func (n *Node) Applied() (uint64, <-chan struct{}) { return n.appliedIndex() }

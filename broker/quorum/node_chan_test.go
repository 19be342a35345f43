package quorum

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// chanNet connects Nodes in one process through channels, with nodes
// that can be cut off; ticks come from the test, not a clock.
type chanNet struct {
	mu    sync.Mutex
	nodes map[uint64]*Node
	cut   map[uint64]bool
	ticks map[uint64]chan time.Time
}

type chanTransport struct {
	net *chanNet
	id  uint64
	q   chan *pb.Message
}

func (t *chanTransport) Send(msgs []*pb.Message) {
	for _, m := range msgs {
		select {
		case t.q <- m:
		default: // full: dropped, as a real transport would
		}
	}
}

func (t *chanTransport) run(stop <-chan struct{}) {
	for {
		select {
		case m := <-t.q:
			t.net.mu.Lock()
			to, cut := t.net.nodes[m.GetTo()], t.net.cut[t.id] || t.net.cut[m.GetTo()]
			t.net.mu.Unlock()
			if to != nil && !cut {
				to.Step(context.Background(), m)
			}
		case <-stop:
			return
		}
	}
}

func newChanCluster(t *testing.T, n int) (*chanNet, []uint64) {
	return newChanClusterWith(t, n, nil)
}

// newChanClusterWith is newChanCluster with each node's Config changed by
// tweak (nil: none).
func newChanClusterWith(t *testing.T, n int, tweak func(*Config)) (*chanNet, []uint64) {
	cn := &chanNet{nodes: map[uint64]*Node{}, cut: map[uint64]bool{}, ticks: map[uint64]chan time.Time{}}
	voters := map[uint64]string{}
	var ids []uint64
	for i := 1; i <= n; i++ {
		voters[uint64(i)] = fmt.Sprintf("node-%d", i)
		ids = append(ids, uint64(i))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	dir := t.TempDir()
	for _, id := range ids {
		tick := make(chan time.Time, 1)
		cn.ticks[id] = tick
		tr := &chanTransport{net: cn, id: id, q: make(chan *pb.Message, 1024)}
		wg.Go(func() { tr.run(stop) })
		cfg := Config{
			NodeID: id, Voters: voters, Dir: filepath.Join(dir, fmt.Sprint(id)), ClusterID: "chan",
			Timing: Timing{TickInterval: time.Millisecond, ElectionTick: 50, HeartbeatTick: 1},
			Ticker: func(time.Duration) (<-chan time.Time, func()) { return tick, func() {} },
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		}
		if tweak != nil {
			tweak(&cfg)
		}
		node, err := Open(cfg, &syncApp{}, tr)
		if err != nil {
			t.Fatal(err)
		}
		cn.mu.Lock()
		cn.nodes[id] = node
		cn.mu.Unlock()
	}
	// The test's clock: a tick to every node every 2 ms, so an election
	// takes 100-200 ms of silence: a loaded machine's scheduling stalls
	// stay below it.
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			for _, c := range cn.ticks {
				select {
				case c <- time.Time{}:
				default:
				}
			}
		}
	})
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
		for _, n := range cn.nodes {
			n.Close()
		}
	})
	return cn, ids
}

// leader waits for a leader that every node not cut off agrees on.
func (cn *chanNet) leader(t *testing.T, not uint64) uint64 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		cn.mu.Lock()
		var agreed uint64
		ok := true
		for id, n := range cn.nodes {
			if cn.cut[id] {
				continue
			}
			l, _ := n.Leader()
			if l == 0 || l == not || cn.cut[l] || (agreed != 0 && l != agreed) {
				ok = false
			}
			agreed = l
		}
		cn.mu.Unlock()
		if ok {
			return agreed
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("no leader within 20 s")
	return 0
}

// TestNodeProposeOutcomes covers what Node.Propose answers: the index once
// committed, a not-leader error naming the leader, the context's error,
// ErrLeadershipLost when the leader is cut off and steps down, and
// ErrStopped after Close; LeaderChanged fires on the change.
func TestNodeProposeOutcomes(t *testing.T) {
	cn, ids := newChanCluster(t, 3)
	l := cn.leader(t, 0)
	leader := cn.nodes[l]
	idx, err := leader.Propose(context.Background(), []byte("a"))
	if err != nil || idx == 0 {
		t.Fatalf("propose on the leader: %d, %v", idx, err)
	}
	var f uint64
	for _, id := range ids {
		if id != l {
			f = id
		}
	}
	var nle *NotLeaderError
	if _, err := cn.nodes[f].Propose(context.Background(), []byte("b")); !errors.As(err, &nle) || nle.Leader != l {
		t.Fatalf("propose on follower %d: %v, want not-leader naming %d", f, err, l)
	}
	if _, err := leader.Propose(context.Background(), nil); !errors.Is(err, ErrEmptyEntry) {
		t.Fatalf("empty proposal: %v", err)
	}
	if _, err := leader.Propose(context.Background(), make([]byte, MaxEntryBytes+1)); !errors.Is(err, ErrEntryTooLarge) {
		t.Fatalf("oversized proposal: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := leader.Propose(ctx, []byte("c")); !errors.Is(err, context.Canceled) {
		t.Fatalf("propose with a cancelled context: %v", err)
	}

	changed := leader.LeaderChanged()
	cn.mu.Lock()
	cn.cut[l] = true
	cn.mu.Unlock()
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := leader.Propose(ctx, []byte("cut off")); !errors.Is(err, ErrLeadershipLost) {
		t.Fatalf("propose on a cut-off leader: %v, want ErrLeadershipLost", err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("LeaderChanged did not fire when the leader stepped down")
	}
	if id, _ := leader.Leader(); id == l {
		t.Fatalf("cut-off node %d still names itself leader", l)
	}

	cn.mu.Lock()
	cn.cut[l] = false
	cn.mu.Unlock()
	nl := cn.leader(t, 0)
	if _, err := cn.nodes[nl].Propose(ctx, []byte("d")); err != nil {
		t.Fatalf("propose after the heal: %v", err)
	}

	leader.Close()
	if _, err := leader.Propose(context.Background(), []byte("e")); !errors.Is(err, ErrStopped) {
		t.Fatalf("propose after Close: %v, want ErrStopped", err)
	}
}

package quorum

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// syncApp is a memApp safe to read from the test goroutine.
type syncApp struct {
	mu  sync.Mutex
	app memApp
}

func (a *syncApp) Restore(s Snapshot) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.app.Restore(s)
}

func (a *syncApp) Apply(es []Entry) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.app.Apply(es)
}

func (a *syncApp) Snapshot() ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.app.Snapshot()
}

func (a *syncApp) has(data string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.app.entries {
		if string(e.Data) == data {
			return true
		}
	}
	return false
}

type tcpMember struct {
	id   uint64
	addr string
	dir  string
	ln   net.Listener
	tr   *TCPTransport
	node *Node
	app  *syncApp
}

type tcpCluster struct {
	t       *testing.T
	voters  map[uint64]string
	members map[uint64]*tcpMember
	timing  Timing
}

func newTCPCluster(t *testing.T, n int) *tcpCluster {
	timing, err := TimingFromKafka(DefaultElectionTimeoutMs, DefaultFetchTimeoutMs, DefaultTickInterval)
	if err != nil {
		t.Fatal(err)
	}
	c := &tcpCluster{t: t, voters: map[uint64]string{}, members: map[uint64]*tcpMember{}, timing: timing}
	dir := t.TempDir()
	lns := map[uint64]net.Listener{}
	for i := 1; i <= n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[uint64(i)] = ln
		c.voters[uint64(i)] = ln.Addr().String()
	}
	for id, ln := range lns {
		m := &tcpMember{id: id, addr: c.voters[id], dir: filepath.Join(dir, fmt.Sprint(id))}
		c.members[id] = m
		c.start(m, ln)
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			c.kill(m)
		}
	})
	return c
}

func (c *tcpCluster) start(m *tcpMember, ln net.Listener) {
	t := c.t
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	tr, err := NewTCPTransport(TransportConfig{NodeID: m.id, Voters: c.voters, ClusterID: "tcp-test", Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	m.ln, m.tr, m.app = ln, tr, &syncApp{}
	go tr.Serve(ln)
	m.node, err = Open(Config{
		NodeID: m.id, Voters: c.voters, Dir: m.dir, ClusterID: "tcp-test", Timing: c.timing,
		SnapshotEntries: 10, RetainEntries: 2, Logger: logger,
	}, m.app, tr)
	if err != nil {
		t.Fatal(err)
	}
}

// kill stops a member abruptly: its listener and connections go first,
// then the node, with no leadership handed over.
func (c *tcpCluster) kill(m *tcpMember) {
	if m.node == nil {
		return
	}
	m.tr.Close()
	m.node.Close()
	m.node = nil
}

// leader waits until every live member agrees on a live leader.
func (c *tcpCluster) leader(within time.Duration, not uint64) (uint64, bool) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		var agreed uint64
		ok := true
		for _, m := range c.members {
			if m.node == nil {
				continue
			}
			l, _ := m.node.Leader()
			if l == 0 || l == not || (agreed != 0 && l != agreed) || c.members[l].node == nil {
				ok = false
				break
			}
			agreed = l
		}
		if ok && agreed != 0 {
			return agreed, true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0, false
}

func (c *tcpCluster) propose(leader uint64, data string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	idx, err := c.members[leader].node.Propose(ctx, []byte(data))
	if err != nil {
		c.t.Fatalf("propose %s on %d: %v", data, leader, err)
	}
	if idx == 0 {
		c.t.Fatalf("propose %s: index 0", data)
	}
}

// applied waits until every live member applied data.
func (c *tcpCluster) applied(data string, within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for _, m := range c.members {
		for m.node != nil && !m.app.has(data) {
			if time.Now().After(deadline) {
				c.t.Fatalf("node %d did not apply %q within %v", m.id, data, within)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// TestNodesOverTCP runs three nodes on 127.0.0.1 with Kafka's default
// quorum timing: a leader is elected and proposals commit on all three;
// the leader is killed, a new one is elected and proposals continue; the
// old leader restarts from its directory and catches up (by snapshot: the
// log was compacted meanwhile).
func TestNodesOverTCP(t *testing.T) {
	c := newTCPCluster(t, 3)
	// The first election waits out one randomised timeout (1-2 s).
	first, ok := c.leader(15*time.Second, 0)
	if !ok {
		t.Fatal("no leader within 15 s")
	}
	for i := range 15 {
		c.propose(first, fmt.Sprintf("a%d", i))
	}
	c.applied("a14", 10*time.Second)

	// A follower refuses a proposal and names the leader.
	var follower uint64
	for id := range c.members {
		if id != first {
			follower = id
			break
		}
	}
	_, err := c.members[follower].node.Propose(context.Background(), []byte("x"))
	var nle *NotLeaderError
	if !errors.As(err, &nle) || !errors.Is(err, ErrNotLeader) || nle.Leader != first {
		t.Fatalf("proposal to follower %d: %v, want not-leader naming %d", follower, err, first)
	}

	old := c.members[first]
	killed := time.Now()
	c.kill(old)
	next, ok := c.leader(15*time.Second, first)
	elapsed := time.Since(killed)
	if !ok {
		t.Fatal("no new leader within 15 s of the leader's death")
	}
	t.Logf("new leader %d %v after leader %d was killed (timing %+v)", next, elapsed.Round(time.Millisecond), first, c.timing)
	// Followers suspect the leader after a randomised 1-2 s; pre-vote and
	// vote take a few round trips. 6 s leaves room for a loaded machine.
	if elapsed > 6*time.Second {
		t.Errorf("new leader took %v, want under 6 s", elapsed)
	}
	for i := range 25 {
		c.propose(next, fmt.Sprintf("b%d", i))
	}
	c.applied("b24", 10*time.Second)

	ln, err := net.Listen("tcp", old.addr)
	if err != nil {
		t.Fatalf("relisten on %s: %v", old.addr, err)
	}
	c.start(old, ln)
	c.applied("b24", 15*time.Second)
	if !old.app.has("a0") {
		t.Fatal("restarted node lost entries it applied before")
	}
	old.app.mu.Lock()
	restores := old.app.app.restores
	old.app.mu.Unlock()
	// One restore from its own snapshot, one from the leader's.
	if restores < 2 {
		t.Fatalf("restarted node restored %d snapshots, want its own and the leader's", restores)
	}
	c.propose(next, "c0")
	c.applied("c0", 10*time.Second)
	if l, ok := c.leader(5*time.Second, 0); !ok || l != next {
		t.Fatalf("leader %d after the rejoin, want %d to keep leading", l, next)
	}
}

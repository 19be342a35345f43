package brokertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/faults/netns"
	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// ErrNoIsolation reports an Isolate of a StartProcessCluster node whose
// cluster was started without WithNetworkNamespaces: processes on one
// loopback cannot be cut from each other.
var ErrNoIsolation = errors.New("brokertest: Isolate needs WithNetworkNamespaces")

// nsIsolation is Isolate, Heal and Isolated for nodes placed in network
// namespaces of their own; its zero value has no network and refuses
// Isolate with ErrNoIsolation.
type nsIsolation struct {
	nw    *netns.Network
	nodes int

	mu       sync.Mutex
	isolated []int
}

// Isolate drops every packet between node id and its peers, in both
// directions (faults/netns): their connections go silent and stay open,
// and new connections time out, as across a network partition, while the
// test's clients still reach the node. Without WithNetworkNamespaces it
// returns ErrNoIsolation. As with StartCluster's, Leader, WaitISR and
// Controller then ask the other nodes.
func (s *nsIsolation) Isolate(id int) error {
	if s.nw == nil {
		return ErrNoIsolation
	}
	if id < 1 || id > s.nodes {
		return fmt.Errorf("%w: %d", ErrUnknownNode, id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.nw.Isolate(id); err != nil {
		return fmt.Errorf("brokertest: isolate node %d: %w", id, err)
	}
	if !slices.Contains(s.isolated, id) {
		s.isolated = append(s.isolated, id)
	}
	return nil
}

// Heal lets packets between node id and its peers through again. The
// network removes every cut at once, so the other isolated nodes are cut
// again right after: their connections may pass a packet in between.
func (s *nsIsolation) Heal(id int) error {
	if s.nw == nil {
		return ErrNoIsolation
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.isolated = slices.DeleteFunc(s.isolated, func(n int) bool { return n == id })
	if err := s.nw.Heal(); err != nil {
		return fmt.Errorf("brokertest: heal node %d: %w", id, err)
	}
	for _, n := range s.isolated {
		if err := s.nw.Isolate(n); err != nil {
			return fmt.Errorf("brokertest: isolate node %d again: %w", n, err)
		}
	}
	return nil
}

// Isolated reports whether node id is cut from its peers
// (clusterctl.Isolator).
func (s *nsIsolation) Isolated(id int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.isolated, id)
}

// newNamespaces makes a network of n namespaces, skipping the test when
// this machine cannot.
func newNamespaces(t testing.TB, n int) *netns.Network {
	t.Helper()
	if err := netns.Available(); err != nil {
		t.Skipf("brokertest: WithNetworkNamespaces: %v", err)
	}
	nw, err := netns.New(n)
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	return nw
}

// close removes the network namespaces; their nodes must be gone.
func (s *nsIsolation) close() error {
	if s.nw == nil {
		return nil
	}
	err := s.nw.Close()
	s.nw = nil
	return err
}

// waitStopped returns once every thread of node id's process pid is
// stopped, as /proc shows: a signal is delivered asynchronously, and on a
// loaded machine a thread may still answer a request sent right after the
// kill(2) of SIGSTOP. Where /proc does not exist, it returns at once.
func waitStopped(id, pid int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cluster.Poll(ctx, 10*time.Millisecond, func() error { return stopped(pid) }); err != nil {
		return fmt.Errorf("brokertest: node %d after SIGSTOP: %w", id, err)
	}
	return nil
}

// stopped returns nil once every thread of process pid is in the stopped
// state (T), or when /proc cannot tell.
func stopped(pid int) error {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		return nil
	}
	for _, path := range tasks {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the thread exited
		}
		// pid (comm) state ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return fmt.Errorf("unreadable %s", path)
		}
		if st := b[i+2]; st != 'T' && st != 't' {
			return fmt.Errorf("thread %s is in state %c", filepath.Base(filepath.Dir(path)), st)
		}
	}
	return nil
}

// closeAtEnd closes c when the test ends, after printing the end of its
// nodes' logs when the test failed.
func closeAtEnd(t testing.TB, c cluster.Cluster) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("brokertest: the nodes' logs end:\n%s", c.Logs(4000))
		}
		if err := c.Close(); err != nil {
			t.Errorf("brokertest: closing the cluster: %v", err)
		}
	})
}

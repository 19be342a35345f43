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

	"github.com/cascade-kafka/cascade/broker/brokertest/clusterctl"
	"github.com/cascade-kafka/cascade/faults/netns"
	"github.com/cascade-kafka/cascade/matrix/cascadecluster"
	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// WithNetworkNamespaces runs each node of StartProcessCluster in a Linux
// network namespace of its own (faults/netns), so that Isolate can cut it
// from its peers with packet filters; the test's clients reach every node
// on a private bridge. It needs root, ip and iptables: without them
// StartProcessCluster skips the test, saying why. StartCluster refuses it.
func WithNetworkNamespaces() ClusterOption {
	return func(s *clusterSettings) { s.netns = true }
}

// ErrNoIsolation reports an Isolate of a StartProcessCluster node whose
// cluster was started without WithNetworkNamespaces: processes on one
// loopback cannot be cut from each other.
var ErrNoIsolation = errors.New("brokertest: Isolate needs WithNetworkNamespaces")

// ProcessCluster is a cluster of cmd/cascade processes
// (matrix/cascadecluster), each a combined broker and controller node
// configured as StartCluster's nodes are, with the same controls: Kill is
// a SIGKILL, Stop a SIGTERM, Pause a SIGSTOP and Resume a SIGCONT of the
// node's process, Restart starts it again on the same directory, ports
// and configuration, and Isolate, with WithNetworkNamespaces, drops every
// packet between the node and its peers.
type ProcessCluster struct {
	*cascadecluster.Cluster
	helpers
	nw *netns.Network // nil without WithNetworkNamespaces

	mu       sync.Mutex
	isolated []int
}

var (
	_ Controls            = (*ProcessCluster)(nil)
	_ clusterctl.Isolator = (*ProcessCluster)(nil)
)

// StartProcessCluster builds cmd/cascade once per test binary
// (cascadecluster.Binary; a TestMain may remove it afterwards with
// cascadecluster.Cleanup), starts n nodes as processes, each with its
// own loopback ports (or, with WithNetworkNamespaces, its own network
// namespace), and returns when every broker lists itself in its own
// Metadata. WithOverrides, WithNodeOverrides and WithStartTimeout apply
// as to StartCluster. Every node is killed and its directory removed when
// the test ends; CASCADE_TEST_LOG=1 copies every node's log to stderr.
func StartProcessCluster(t testing.TB, n int, opts ...ClusterOption) *ProcessCluster {
	t.Helper()
	s := settings(t, n, opts)
	c := &ProcessCluster{helpers: helpers{timeout: s.startTimeout}}
	c.helpers.c = c
	if s.netns {
		if err := netns.Available(); err != nil {
			t.Skipf("brokertest: WithNetworkNamespaces: %v", err)
		}
		var err error
		if c.nw, err = netns.New(n); err != nil {
			t.Fatalf("brokertest: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.startTimeout+2*time.Minute) // and the build
	defer cancel()
	o := cascadecluster.Options{Nodes: n, Overrides: s.overrides, NodeOverrides: s.nodeOverrides, StartTimeout: s.startTimeout}
	if c.nw != nil {
		o.Placement = c.nw
	}
	if os.Getenv("CASCADE_TEST_LOG") != "" {
		o.Log = os.Stderr
	}
	var err error
	c.Cluster, err = cascadecluster.Start(ctx, o)
	if err != nil {
		if c.nw != nil {
			err = errors.Join(err, c.nw.Close())
		}
		t.Fatalf("brokertest: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("brokertest: the nodes' logs end:\n%s", c.Logs(4000))
		}
		if err := c.Close(); err != nil {
			t.Errorf("brokertest: closing the cluster: %v", err)
		}
	})
	return c
}

// Close kills every node and removes the cluster's directory and network
// namespaces; the test's cleanup calls it too.
func (c *ProcessCluster) Close() error {
	err := c.Cluster.Close()
	if c.nw != nil {
		err = errors.Join(err, c.nw.Close())
		c.nw = nil
	}
	return err
}

// Pause sends SIGSTOP to node id (cascadecluster's Pause) and returns
// once every thread of its process has stopped, as /proc shows: a signal
// is delivered asynchronously, and on a loaded machine a thread may still
// answer a request sent right after the kill(2). Where /proc does not
// exist, it returns after the signal.
func (c *ProcessCluster) Pause(id int) error {
	if err := c.Cluster.Pause(id); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pid := c.Node(id).Pid()
	if err := cluster.Poll(ctx, 10*time.Millisecond, func() error { return stopped(pid) }); err != nil {
		return fmt.Errorf("brokertest: node %d after SIGSTOP: %w", id, err)
	}
	return nil
}

// stopped returns nil once every thread of process pid is in the
// stopped state (T), or when /proc cannot tell.
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

// Isolate drops every packet between node id and its peers, in both
// directions (faults/netns): their connections go silent and stay open,
// and new connections time out, as across a network partition, while the
// test's clients still reach the node. Without WithNetworkNamespaces it
// returns ErrNoIsolation. As with StartCluster's, Leader, WaitISR and
// Controller then ask the other nodes.
func (c *ProcessCluster) Isolate(id int) error {
	if c.nw == nil {
		return ErrNoIsolation
	}
	if c.Node(id) == nil {
		return fmt.Errorf("%w: %d", ErrUnknownNode, id)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.nw.Isolate(id); err != nil {
		return fmt.Errorf("brokertest: isolate node %d: %w", id, err)
	}
	if !slices.Contains(c.isolated, id) {
		c.isolated = append(c.isolated, id)
	}
	return nil
}

// Heal lets packets between node id and its peers through again. The
// network removes every cut at once, so the other isolated nodes are cut
// again right after: their connections may pass a packet in between.
func (c *ProcessCluster) Heal(id int) error {
	if c.nw == nil {
		return ErrNoIsolation
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.isolated = slices.DeleteFunc(c.isolated, func(n int) bool { return n == id })
	if err := c.nw.Heal(); err != nil {
		return fmt.Errorf("brokertest: heal node %d: %w", id, err)
	}
	for _, n := range c.isolated {
		if err := c.nw.Isolate(n); err != nil {
			return fmt.Errorf("brokertest: isolate node %d again: %w", n, err)
		}
	}
	return nil
}

// Isolated reports whether node id is cut from its peers
// (clusterctl.Isolator).
func (c *ProcessCluster) Isolated(id int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.isolated, id)
}

// LogDir returns node id's log.dirs, or "".
func (c *ProcessCluster) LogDir(id int) string {
	if nd := c.Node(id); nd != nil {
		return filepath.Join(nd.Dir, "data")
	}
	return ""
}

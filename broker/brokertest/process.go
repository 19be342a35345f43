package brokertest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/broker/brokertest/clusterctl"
	"github.com/cascade-kafka/cascade/matrix/cascadecluster"
)

// WithNetworkNamespaces runs each node of StartProcessCluster in a Linux
// network namespace of its own (faults/netns), so that Isolate can cut it
// from its peers with packet filters; the test's clients reach every node
// on a private bridge. It needs root, ip and iptables: without them
// StartProcessCluster skips the test, saying why. StartCluster refuses it.
func WithNetworkNamespaces() ClusterOption {
	return func(s *clusterSettings) { s.netns = true }
}

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
	nsIsolation
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
	c.nsIsolation.nodes = n
	if s.netns {
		c.nw = newNamespaces(t, n)
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
		t.Fatalf("brokertest: %v", errors.Join(err, c.nsIsolation.close()))
	}
	closeAtEnd(t, c)
	return c
}

// Close kills every node and removes the cluster's directory and network
// namespaces; the test's cleanup calls it too.
func (c *ProcessCluster) Close() error {
	return errors.Join(c.Cluster.Close(), c.nsIsolation.close())
}

// Pause sends SIGSTOP to node id (cascadecluster's Pause) and returns
// once every thread of its process has stopped (waitStopped).
func (c *ProcessCluster) Pause(id int) error {
	if err := c.Cluster.Pause(id); err != nil {
		return err
	}
	return waitStopped(id, c.Node(id).Pid())
}

// LogDir returns node id's log.dirs, or "".
func (c *ProcessCluster) LogDir(id int) string {
	if nd := c.Node(id); nd != nil {
		return filepath.Join(nd.Dir, "data")
	}
	return ""
}

package cascadecontainer

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest/clusterctl"
	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// controlTimeout bounds each engine call of Target's methods, which take
// no context.
const controlTimeout = 2 * time.Minute

// Target returns the cluster as a matrix/cluster.Cluster, whose methods
// take no context and bound each engine call by two minutes: Kill is
// docker kill, Stop docker stop, Pause docker pause, Restart Start, Live
// asks the engine whether the container runs unpaused, and Close is
// Terminate. The matrix's cluster suites and helpers
// (cluster.WaitForBrokers, broker/brokertest/clusterctl) run on it, as on
// brokertest's clusters and matrix/cascadecluster's processes.
func (c *Cluster) Target() cluster.Cluster { return target{c} }

// target adapts a Cluster to cluster.Cluster.
type target struct{ c *Cluster }

func bounded(f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), controlTimeout)
	defer cancel()
	return f(ctx)
}

func (t target) Name() string { return "Cascade (containers)" }

func (t target) BrokerIDs() []int {
	ids := make([]int, len(t.c.Nodes))
	for i, nd := range t.c.Nodes {
		ids[i] = nd.ID
	}
	return ids
}

func (t target) Seeds() []string {
	as, _ := t.c.Brokers(context.Background())
	return as
}

func (t target) ControllerAddr(id int) string {
	if nd, err := t.c.Node(id); err == nil {
		return nd.ControllerAddr
	}
	return ""
}

func (t target) Live(id int) bool {
	nd, err := t.c.Node(id)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := nd.State(ctx)
	return err == nil && st.Running && !st.Paused
}

func (t target) Request(ctx context.Context, id int, req kmsg.Request) (kmsg.Response, error) {
	nd, err := t.c.Node(id)
	if err != nil {
		return nil, err
	}
	return t.c.conns.Send(ctx, nd.Addr, req)
}

func (t target) ControllerRequest(ctx context.Context, id int, req kmsg.Request) (kmsg.Response, error) {
	nd, err := t.c.Node(id)
	if err != nil {
		return nil, err
	}
	return t.c.conns.Send(ctx, nd.ControllerAddr, req)
}

func (t target) Kill(id int) error {
	return bounded(func(ctx context.Context) error { return t.c.Kill(ctx, id) })
}

func (t target) Stop(id int) error {
	return bounded(func(ctx context.Context) error { return t.c.Stop(ctx, id) })
}

func (t target) Pause(id int) error {
	return bounded(func(ctx context.Context) error { return t.c.Pause(ctx, id) })
}

func (t target) Resume(id int) error {
	return bounded(func(ctx context.Context) error { return t.c.Resume(ctx, id) })
}

func (t target) Restart(ctx context.Context, id int) error { return t.c.Start(ctx, id) }

func (t target) Logs(n int) string {
	var b strings.Builder
	for _, nd := range t.c.Nodes {
		fmt.Fprintf(&b, "=== node %d ===%s\n", nd.ID, cluster.Tail(logTail(nd.DockerContainer), n))
	}
	return b.String()
}

func (t target) Close() error {
	return bounded(func(ctx context.Context) error { return t.c.Terminate(ctx) })
}

// Leader waits until a running, unpaused node leads topic's partition, as
// such a node's Metadata names it, and returns its id
// (clusterctl.Leader).
func (c *Cluster) Leader(ctx context.Context, topic string, partition int32) (int, error) {
	return clusterctl.Leader(ctx, c.Target(), topic, partition)
}

// WaitISR waits until topic's partition has a running, unpaused leader and
// exactly n in-sync replicas (clusterctl.WaitISR).
func (c *Cluster) WaitISR(ctx context.Context, topic string, partition int32, n int) error {
	return clusterctl.WaitISR(ctx, c.Target(), topic, partition, n)
}

// Controller returns the active controller: the voter leading the
// metadata quorum (DescribeQuorum on the controller listeners,
// clusterctl.Controller).
func (c *Cluster) Controller(ctx context.Context) (int, error) {
	return clusterctl.Controller(ctx, c.Target())
}

// MoveLeader makes node the leader of topic's partition, as an operator
// does: a reassignment that puts it first among the replicas, then a
// preferred leader election (clusterctl.MoveLeader).
func (c *Cluster) MoveLeader(ctx context.Context, topic string, partition int32, node int) error {
	return clusterctl.MoveLeader(ctx, c.Target(), topic, partition, node)
}

// Replicas returns topic's partition's replicas, as Metadata lists them.
func (c *Cluster) Replicas(ctx context.Context, topic string, partition int32) ([]int, error) {
	return clusterctl.Replicas(ctx, c.Target(), topic, partition)
}

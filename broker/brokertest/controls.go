package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/broker/brokertest/clusterctl"
	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// Controls is what both of brokertest's clusters offer a test: the nodes'
// controls of matrix/cluster.Cluster (Kill, Stop, Restart, Pause, Resume),
// Isolate and Heal, and the helpers that find and move leaderships, so
// that one test body runs against the nodes in the test's process
// (StartCluster) and against cmd/cascade processes (StartProcessCluster).
// What each control does differs between the two only where a process
// gives more; each method's comment says how.
type Controls interface {
	cluster.Cluster
	// Isolate cuts node id from every other node while clients still
	// reach it; Heal joins it again; Isolated reports the cut.
	Isolate(id int) error
	Heal(id int) error
	Isolated(id int) bool
	// Leader waits until a reachable node leads the partition and
	// returns it.
	Leader(topic string, partition int32) (int, error)
	// WaitISR waits until the partition has a reachable leader and n
	// in-sync replicas.
	WaitISR(topic string, partition int32, n int) error
	// Controller returns the active controller.
	Controller() (int, error)
	// MoveLeader makes node the partition's leader.
	MoveLeader(topic string, partition int32, node int) error
	// Replicas returns the partition's replicas.
	Replicas(topic string, partition int32) ([]int, error)
	// CreateTopic creates a topic and waits for a full ISR.
	CreateTopic(t testing.TB, topic string, partitions int32, rf int16, configs map[string]*string)
	// Client returns a franz-go client seeded with every node.
	Client(t testing.TB, opts ...kgo.Opt) *kgo.Client
	// Bootstrap returns the client addresses as a comma list.
	Bootstrap() string
	// LogDir returns node id's log.dirs, kept across Kill and Restart.
	LogDir(id int) string
}

// helpers are the methods both clusters share: clusterctl's helpers,
// each bounded by the cluster's timeout, and clients seeded with c's
// nodes.
type helpers struct {
	c       cluster.Cluster
	timeout time.Duration
}

// bounded runs f with a context bounded by the cluster's timeout.
func (h helpers) bounded(f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
	defer cancel()
	return f(ctx)
}

// Leader waits until a reachable node (live, not paused, not isolated)
// leads topic's partition, as a reachable node's Metadata names it, and
// returns its id (clusterctl.Leader). After an Isolate, Pause or Kill of
// the leader it returns once the others have elected another.
func (h helpers) Leader(topic string, partition int32) (id int, err error) {
	err = h.bounded(func(ctx context.Context) error { id, err = clusterctl.Leader(ctx, h.c, topic, partition); return err })
	return id, err
}

// WaitISR waits until topic's partition has a reachable leader and
// exactly n in-sync replicas, as a reachable node's Metadata says
// (clusterctl.WaitISR).
func (h helpers) WaitISR(topic string, partition int32, n int) error {
	return h.bounded(func(ctx context.Context) error { return clusterctl.WaitISR(ctx, h.c, topic, partition, n) })
}

// Controller returns the active controller: the reachable voter leading
// the metadata quorum at the highest epoch (DescribeQuorum on the
// controller listeners, clusterctl.Controller).
func (h helpers) Controller() (id int, err error) {
	err = h.bounded(func(ctx context.Context) error { id, err = clusterctl.Controller(ctx, h.c); return err })
	return id, err
}

// MoveLeader makes node the leader of topic's partition and waits until
// Metadata names it (clusterctl.MoveLeader), as an operator does: a
// reassignment that puts node first among the replicas
// (AlterPartitionReassignments, KIP-455), then a preferred leader election
// (ElectLeaders, KIP-460). node must be a replica in the ISR, else
// ErrNotReplica; after a Kill of the preferred leader and its Restart,
// this moves the leadership back.
func (h helpers) MoveLeader(topic string, partition int32, node int) error {
	return h.bounded(func(ctx context.Context) error { return clusterctl.MoveLeader(ctx, h.c, topic, partition, node) })
}

// Replicas returns topic's partition's replicas, as Metadata lists them.
func (h helpers) Replicas(topic string, partition int32) (ids []int, err error) {
	err = h.bounded(func(ctx context.Context) error {
		ids, err = clusterctl.Replicas(ctx, h.c, topic, partition)
		return err
	})
	return ids, err
}

// CreateTopic creates topic with the given partitions, replication
// factor and configs (nil for none), and waits until every partition has
// a leader and a full ISR.
func (h helpers) CreateTopic(t testing.TB, topic string, partitions int32, rf int16, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
	defer cancel()
	resp, err := h.Admin(t).CreateTopic(ctx, partitions, rf, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("brokertest: create topic %s: %v", topic, err)
	}
	for p := range partitions {
		if err := h.WaitISR(topic, p, int(rf)); err != nil {
			t.Fatal(err)
		}
	}
}

// Client returns a franz-go client seeded with every node, closed when
// the test ends. opts are appended.
func (h helpers) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return newClient(t, h.c.Seeds(), opts)
}

// Admin returns a kadm client over a new franz-go client.
func (h helpers) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(h.Client(t))
}

// ErrNotReplica reports a MoveLeader to a node that holds no replica of
// the partition.
var ErrNotReplica = clusterctl.ErrNotReplica

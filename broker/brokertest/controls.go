package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

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
}

// createTopic creates topic on c and waits until every partition has a
// leader and a full ISR, each step bounded by timeout.
func createTopic(t testing.TB, c Controls, timeout time.Duration, topic string, partitions int32, rf int16, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	resp, err := kadm.NewClient(c.Client(t)).CreateTopic(ctx, partitions, rf, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("brokertest: create topic %s: %v", topic, err)
	}
	for p := range partitions {
		if err := c.WaitISR(topic, p, int(rf)); err != nil {
			t.Fatal(err)
		}
	}
}

package brokertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/matrix/apachekafka"
)

// kafkaCluster is an Apache Kafka cluster (matrix/apachekafka) with the
// Controls of a ProcessCluster, so that the control tests' expectations
// are checked against Kafka itself.
type kafkaCluster struct {
	*apachekafka.Cluster
	helpers
	nsIsolation
}

// StartKafkaCluster starts n combined Apache Kafka nodes, in network
// namespaces of their own with WithNetworkNamespaces, as a Controls. It
// fails when the distribution cannot be provisioned (Java, Maven).
func StartKafkaCluster(t testing.TB, n int, opts ...ClusterOption) Controls {
	t.Helper()
	s := settings(t, n, opts)
	c := &kafkaCluster{helpers: helpers{timeout: 2 * s.startTimeout}}
	c.helpers.c = c
	c.nsIsolation.nodes = n
	if s.netns {
		c.nw = newNamespaces(t, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	o := apachekafka.ClusterOptions{Nodes: n, Overrides: s.overrides, NodeOverrides: s.nodeOverrides}
	if c.nw != nil {
		o.Placement = c.nw
	}
	var err error
	if c.Cluster, err = apachekafka.StartCluster(ctx, o); err != nil {
		t.Fatalf("brokertest: %v", errors.Join(err, c.nsIsolation.close()))
	}
	closeAtEnd(t, c)
	return c
}

func (c *kafkaCluster) Pause(id int) error {
	if err := c.Cluster.Pause(id); err != nil {
		return err
	}
	return waitStopped(id, c.Node(id).Pid())
}

func (c *kafkaCluster) LogDir(id int) string { return c.Node(id).DataDir() }

func (c *kafkaCluster) Close() error {
	return errors.Join(c.Cluster.Close(), c.nsIsolation.close())
}

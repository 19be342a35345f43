package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cascade-kafka/cascade/matrix/apachekafka"
	"github.com/cascade-kafka/cascade/matrix/cascadecluster"
)

// brokerOverrides merges the flush settings of flushMs and then the
// caller's overrides.
func brokerOverrides(flushMs int, overrides map[string]string) map[string]string {
	ov := map[string]string{}
	for k, v := range flushOverrides(flushMs) {
		ov[k] = v
	}
	for k, v := range overrides {
		ov[k] = v
	}
	return ov
}

// clusterDir returns a fresh directory for one round's cluster.
func clusterDir(workDir, name string, round int) (string, error) {
	dir := filepath.Join(workDir, fmt.Sprintf("%s-cluster-r%d", name, round))
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	return dir, os.MkdirAll(dir, 0o755)
}

// clusterStopper closes a started cluster (its nodes are killed: nothing
// of a benchmark cluster needs to survive) and removes dir unless keep.
func clusterStopper(closeCluster func() error, dir string, keep bool) func() error {
	return func() error {
		err := closeCluster()
		if !keep {
			err = errors.Join(err, os.RemoveAll(dir))
		}
		return err
	}
}

// clusterInstance returns the Instance of a started cluster: every node's
// process, and its log dir, "data" in the node's directory (dir).
func clusterInstance[N interface{ Pid() int }](addr string, nodes []N, dir func(N) string, stop func() error) *Instance {
	inst := &Instance{Addr: addr, stop: stop}
	for _, n := range nodes {
		inst.Pids = append(inst.Pids, n.Pid())
		inst.DataDirs = append(inst.DataDirs, filepath.Join(dir(n), "data"))
	}
	return inst
}

// startCluster starts c.Nodes cmd/cascade processes, each a combined
// broker and controller, with matrix/cascadecluster.
func (c Cascade) startCluster(ctx context.Context, round int) (*Instance, error) {
	dir, err := clusterDir(c.WorkDir, "cascade", round)
	if err != nil {
		return nil, err
	}
	cl, err := cascadecluster.Start(ctx, cascadecluster.Options{Nodes: c.Nodes, Bin: c.Bin, Dir: dir,
		Overrides: brokerOverrides(c.FlushMs, c.Overrides)})
	if err != nil {
		return nil, fmt.Errorf("starting a %d-node Cascade cluster: %w", c.Nodes, err)
	}
	return clusterInstance(cl.Bootstrap(), cl.Nodes(), func(n *cascadecluster.Node) string { return n.Dir },
		clusterStopper(cl.Close, dir, c.KeepData)), nil
}

// startCluster starts an Apache Kafka KRaft cluster of a.Nodes combined
// nodes with matrix/apachekafka, each JVM with the heap and flags of the
// single broker.
func (a ApacheKafka) startCluster(ctx context.Context, round int) (*Instance, error) {
	dir, err := clusterDir(a.WorkDir, "apache-kafka", round)
	if err != nil {
		return nil, err
	}
	cl, err := a.Dist.StartCluster(ctx, apachekafka.ClusterOptions{Nodes: a.Nodes, Dir: dir, Heap: "1G",
		JVMOptions: KafkaJVMOptions, Overrides: brokerOverrides(a.FlushMs, a.Overrides)})
	if err != nil {
		return nil, fmt.Errorf("starting a %d-node Apache Kafka cluster: %w", a.Nodes, err)
	}
	return clusterInstance(cl.Bootstrap(), cl.Nodes(), func(n *apachekafka.Node) string { return n.Dir },
		clusterStopper(cl.Close, dir, a.KeepData)), nil
}

// Package clusterctl asks a running cluster, through the Kafka protocol
// only, where its leaderships are and moves them, for tests that control
// the cluster's nodes: Leader, WaitISR, Replicas, Controller and
// MoveLeader work on any matrix/cluster.Cluster (brokertest's clusters,
// matrix/cascadecluster, matrix/apachekafka, the containers of
// docker/cascadecontainer), so each kind of cluster offers the same
// helpers with the same meaning.
//
// A node that the cluster reports cut off from its peers (Isolator) may
// answer from a stale view, as an isolated Kafka broker does: it still
// names itself leader of what it led. The helpers therefore ask only the
// nodes that are live and not cut off, and never name a cut-off node as a
// leader:
//
//	ctx, cancel := context.WithTimeout(ctx, time.Minute)
//	defer cancel()
//	leader, err := clusterctl.Leader(ctx, c, "orders", 0)
//	err = clusterctl.WaitISR(ctx, c, "orders", 0, 3)
//	err = clusterctl.MoveLeader(ctx, c, "orders", 0, 2)
//	ctl, err := clusterctl.Controller(ctx, c)
package clusterctl

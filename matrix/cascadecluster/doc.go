// Package cascadecluster starts a cluster of separate cmd/cascade processes
// configured as Kafka KRaft nodes are (process.roles=broker,controller,
// node.id, controller.quorum.voters, a CONTROLLER listener), the Cascade
// counterpart of apachekafka.StartCluster: both satisfy cluster.Cluster, so
// one cluster suite runs against Cascade and Apache Kafka alike.
//
// Binary builds cmd/cascade once per test process (go build into a
// temporary directory; concurrent callers wait for the one build), and
// Cleanup removes it. Start writes one server.properties per node on free
// loopback ports, starts every node and returns when each broker lists
// itself in its own Metadata (registered with the controller and
// unfenced). Kill (SIGKILL), Stop (SIGTERM), Pause (SIGSTOP), Resume
// (SIGCONT) and Restart (same directory, ports and configuration) act on
// one node; Close kills them all.
//
//	c, err := cascadecluster.Start(ctx, cascadecluster.Options{})
//	if err != nil { ... }
//	defer c.Close()
//	cl, _ := kgo.NewClient(kgo.SeedBrokers(c.Seeds()...))
//
// Nothing here imports Cascade's broker: the cluster is a black box reached
// over TCP, as the matrix treats every target.
package cascadecluster

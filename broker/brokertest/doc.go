// Package brokertest starts real Cascade brokers inside a test process, on
// real loopback sockets with temporary data dirs and cleanup registered
// with the test: a single broker (Start) or a cluster of combined broker
// and controller nodes with a Raft metadata quorum (StartCluster). Any
// Kafka client can connect; franz-go helpers are included because most of
// Cascade's tests use franz-go.
//
// # One broker
//
//	b := brokertest.Start(t)                                      // defaults
//	b := brokertest.Start(t, map[string]string{"auto.create.topics.enable": "false"})
//	cl := b.Client(t)                                             // *kgo.Client
//	b.Restart(t)                                                  // same data dir and port
//
// # A cluster in the test's process
//
// StartCluster(t, n) runs n nodes, each with its own client (PLAINTEXT) and
// CONTROLLER listeners on 127.0.0.1, its own log dir and its own voter of
// the metadata quorum (controller.quorum.voters lists all n), configured
// as Kafka KRaft combined nodes. It returns once every broker is
// registered and unfenced:
//
//	c := brokertest.StartCluster(t, 3,
//		brokertest.WithOverrides(map[string]string{"min.insync.replicas": "2"}))
//	c.CreateTopic(t, "orders", 1, 3, nil)          // RF=3, waits for a full ISR
//	cl := c.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()))
//	// ... produce ...
//	leader, _ := c.Leader("orders", 0)
//	c.Kill(leader)                                 // a crash: see below
//	c.WaitISR("orders", 0, 2)                      // the survivors
//	c.Restart(ctx, leader)                         // same dir, same ports
//	c.WaitISR("orders", 0, 3)
//	c.MoveLeader("orders", 0, leader)              // preferred election back
//	ctl, _ := c.Controller()                       // the quorum's leader
//
// Seeds and Bootstrap give the client addresses; Node(id) the listener
// addresses and log dir of one node; Broker(id) its running
// *broker.Broker. The Cluster satisfies matrix/cluster.Cluster, so that
// package's helpers (WaitForBrokers, QuorumLeader, Metadata, ...) and the
// matrix's cluster suites run against it as against a cluster of
// processes. Set CASCADE_TEST_LOG=1 to see every node's log on stderr;
// Logs(n) returns the end of each node's log for a failure message.
//
// What the controls do, and how close an in-process node gets to a
// process:
//
//   - Kill(id) stops the node abruptly (broker.Broker.Kill): no controlled
//     shutdown and no hand-over of the quorum leadership, its listeners
//     and every connection closed at once, its logs closed unflushed
//     without checkpoints or the clean-shutdown marker, so Restart
//     recovers them as after a crash and the peers notice only through
//     missed heartbeats and election timeouts. Not simulated: goroutines
//     are not stopped mid-instruction, so requests in hand run to their end
//     (their answers fail to be written) and no write is torn; nothing
//     unsynced is lost, as with SIGKILL (the page cache stays), and unlike
//     a power loss.
//   - Stop(id) is the clean stop of SIGTERM: a controlled shutdown that
//     moves the node's leaderships first, a flush and the clean-shutdown
//     marker.
//   - Restart(ctx, id) starts a killed or stopped node on the same log
//     dir, ports and configuration.
//   - Pause and Resume return ErrNotInProcess: a paused process keeps its
//     sockets open and says nothing, and a Go program cannot freeze some of
//     its own goroutines; silencing a node's listeners alone would leave it
//     sending heartbeats, Raft messages and fetches, so it would still
//     lead. Network partitions between in-process nodes (an Isolate and
//     Heal) are not offered either: cutting a node off needs every link
//     to and from it cut, but its peers dial it at the one address it
//     advertises and at controller.quorum.voters, which are the same for
//     all of them, so a proxy in front of a node (faults/proxy) cannot
//     tell which peer a connection comes from, and the broker has no
//     dialer a test could swap per node. The fault suites cut links
//     between cmd/cascade processes, each in a network namespace of its
//     own (matrix/cascadecluster's Placement, faults/netns).
//   - MoveLeader(topic, partition, id) reorders the replicas so that id
//     is first (AlterPartitionReassignments) and runs a preferred leader
//     election (ElectLeaders, KIP-460); a node with no replica of the
//     partition is ErrNotReplica.
//
// # A cluster of processes
//
// For SIGKILL-real crashes, SIGSTOP pauses and network partitions, use
// matrix/cascadecluster: it builds cmd/cascade once per test binary and
// runs each node as its own process with the same configuration as
// StartCluster (cascadecluster.NodeProperties), with Kill (SIGKILL), Stop
// (SIGTERM), Pause (SIGSTOP), Resume (SIGCONT) and Restart, and satisfies
// the same matrix/cluster.Cluster interface:
//
//	c, err := cascadecluster.Start(ctx, cascadecluster.Options{Nodes: 3,
//		Overrides: map[string]string{"min.insync.replicas": "2"}})
//	if err != nil {
//		t.Fatal(err)
//	}
//	defer c.Close()
//	cl, _ := kgo.NewClient(kgo.SeedBrokers(c.Seeds()...))
//	c.Kill(2)                  // SIGKILL
//	c.Restart(ctx, 2)
//
// Containers of the broker image (testcontainers-go), one node or a
// cluster, are in docker/cascadecontainer.
package brokertest

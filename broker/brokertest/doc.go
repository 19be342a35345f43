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
//	c.Isolate(leader)                              // cut from its peers, clients still reach it
//	c.Heal(leader)
//	c.Pause(ctl)                                   // every connection to and from it frozen
//	c.Resume(ctl)
//
// The package's examples (ExampleStartCluster, ExampleCluster_Isolate,
// ExampleCluster_Pause, ExampleStartProcessCluster, ExampleControls) show
// whole tests.
//
// Seeds and Bootstrap give the client addresses; Node(id) the listener
// addresses and log dir of one node; Broker(id) its running
// *broker.Broker. The Cluster satisfies matrix/cluster.Cluster, so that
// package's helpers (WaitForBrokers, QuorumLeader, Metadata, ...) and the
// matrix's cluster suites run against it as against a cluster of
// processes. Set CASCADE_TEST_LOG=1 to see every node's log on stderr;
// Logs(n) returns the end of each node's log for a failure message.
//
// # How the nodes are wired
//
// Every connection a node opens to a node (Raft messages to the other
// voters, broker registration, heartbeats and AlterPartition to the active
// controller, forwarded requests, replica fetches, transaction markers)
// is dialled through broker.Config.Dial, a field of the embedding API and
// no Kafka property, which brokertest sets to route each one through a
// link of its own: a pipe whose bytes a pump copies to the peer's
// listener. Clients reach node n through forwarders on the address n
// advertises (Node.Addr) and on one in front of its controller listener;
// they listen only while the node runs, so that a client's dial of a node
// that is down is refused, as a dead broker's is.
// A pump copies only while its gate is open, so a closed gate makes a
// connection silent in both directions while it stays open: what was sent
// waits (the sender's writes block once the pipe is full) and arrives
// when the gate opens, unless either side gave up on the connection
// first, as across a partition shorter than TCP's retransmission timeout.
//
// # What the controls do, and how close an in-process node gets to a
// process
//
//   - Kill(id) stops the node abruptly (broker.Broker.Kill): no controlled
//     shutdown and no hand-over of the quorum leadership, its listeners
//     and every connection closed at once, its logs closed unflushed
//     without checkpoints or the clean-shutdown marker, so Restart
//     recovers them as after a crash and the peers notice only through
//     missed heartbeats, refused dials and election timeouts. Not
//     simulated: goroutines are not stopped mid-instruction, so requests
//     in hand run to their end (their answers fail to be written) and no
//     write is torn; nothing unsynced is lost, as with SIGKILL (the page
//     cache stays), and unlike a power loss.
//   - Stop(id) is the clean stop of SIGTERM: a controlled shutdown that
//     moves the node's leaderships first, a flush and the clean-shutdown
//     marker.
//   - Restart(ctx, id) starts a killed or stopped node on the same log
//     dir, ports and configuration.
//   - Isolate(id) closes the gates between the node and every other node,
//     in both directions, and a dial between them hangs until its
//     deadline, as an unanswered SYN does; its clients' gates stay open.
//     Heal(id) opens them again. It is Kafka's network partition of one
//     broker: the isolated node still answers clients from its own view
//     (it believes it leads what it led, and cannot commit anything), the
//     others fence it after broker.session.timeout.ms and elect leaders
//     from the rest of the ISR, and after the heal it truncates what it
//     alone took and rejoins the ISR. Leader, WaitISR and Controller ask
//     only nodes that are not isolated and never name an isolated one.
//   - Pause(id) closes every gate of the node: its clients', its
//     controller listener's and its peers' in both directions. New
//     connections are accepted (as a stopped process's kernel accepts
//     them) and carry nothing; Live reports false. Resume(id) opens them.
//     Unlike a SIGSTOP, the node itself keeps running: its timers fire, so
//     while it hears nothing it times out and retries its own requests,
//     and may give up its quorum leadership (CheckQuorum) on its own
//     clock; what it sent meanwhile arrives at Resume. StartProcessCluster
//     gives a real SIGSTOP.
//   - MoveLeader(topic, partition, id) reorders the replicas so that id
//     is first (AlterPartitionReassignments) and runs a preferred leader
//     election (ElectLeaders, KIP-460); a node with no replica of the
//     partition is ErrNotReplica.
//   - Leader, WaitISR, Replicas and Controller (broker/brokertest/clusterctl)
//     ask the nodes over the Kafka protocol: the partition's leader as
//     Metadata names it, its ISR, and the voter leading the metadata quorum
//     (DescribeQuorum).
//
// # A cluster of processes
//
// StartProcessCluster(t, n) runs the same nodes as cmd/cascade processes
// (matrix/cascadecluster: cmd/cascade is built once per test binary, and a
// TestMain may remove the build with cascadecluster.Cleanup), with the
// same methods (the Controls interface, which both clusters satisfy, so
// one test body runs against both): Kill is SIGKILL, Stop SIGTERM, Pause
// SIGSTOP, Resume SIGCONT, Restart the same directory, ports and
// configuration. With WithNetworkNamespaces every node runs in a Linux
// network namespace of its own (faults/netns, which needs root, ip and
// iptables; without them the test is skipped, saying why), and Isolate
// drops every packet between the node and its peers while the test's
// clients still reach it; without it, Isolate returns ErrNoIsolation,
// since processes on one loopback cannot be cut from each other:
//
//	c := brokertest.StartProcessCluster(t, 3, brokertest.WithNetworkNamespaces(),
//		brokertest.WithOverrides(map[string]string{"min.insync.replicas": "2"}))
//	c.CreateTopic(t, "orders", 1, 3, nil)
//	leader, _ := c.Leader("orders", 0)
//	c.Pause(leader)                                // SIGSTOP
//	c.WaitISR("orders", 0, 2)                      // fenced after the session timeout
//	c.Resume(leader)                               // SIGCONT
//	c.Isolate(leader)                              // packet filters
//	c.Heal(leader)
//
// Containers of the broker image (testcontainers-go), one node or a
// cluster, are in docker/cascadecontainer.
package brokertest

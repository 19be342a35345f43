// Package netns builds the private network the cluster fault suites run
// their nodes on: one Linux network namespace per node, joined by a bridge
// in the test's own namespace, as Jepsen's nemeses partition real hosts.
// A node's process runs inside its namespace (Command) and listens on the
// node's address; the test's clients reach every node through the bridge.
//
// Partitions are packet filters inside the nodes' namespaces (a DROP rule
// per direction in one chain per namespace), so that a node cut from its
// peers keeps its open connections, which go silent as across a real
// network partition, and stays reachable by clients unless the caller's
// namespace is cut too. A proxy cannot do this: every node reaches a peer
// through the one address the peer advertises, so a proxy in front of it
// cannot tell which node a connection comes from.
//
// Shaping is per node pair and leaves the clients' traffic alone. Limit
// caps a pair's bandwidth with an htb class on each node's side of its
// veth, filled by a u32 filter on the peer's address. Delay adds latency
// without the kernel's netem queueing discipline, which some kernels
// (this project's CI machine's among them) lack: on a network made
// WithForwarders, every TCP connection a node opens to a peer is sent by
// a DNAT rule in the node's nat OUTPUT chain to a forwarder on the
// node's loopback, a listener the test process opened inside the node's
// namespace, which dials the peer from that namespace (with a packet mark
// the DNAT rule skips, and the node's own address) and holds each chunk
// of bytes for the pair's delay from its arrival, in a queue, so that
// latency grows and throughput does not fall. A DNAT rule changes only
// the connections opened after it, so the forwarders exist from New on
// and pass bytes undelayed until Delay. A Cut silences a forwarded
// connection on both legs (the filter also matches the connection's
// original destination), and a new one is never accepted, as a direct one
// would not be. One difference remains: a node that dials a peer not
// listening sees its connection accepted and then reset, not refused.
// Unshape removes limits and delays; Heal removes cuts only.
//
// It needs root, ip (iproute2) and iptables, and tc for Limit; Available
// says whether this machine has the first three. Namespaces carry the creating process's id, so a test
// process killed before Close leaves nothing the next New does not remove.
//
// Use:
//
//	nw, err := netns.New(3)
//	defer nw.Close()
//	cmd := nw.Command(1, bin, "--override", "listeners=PLAINTEXT://"+nw.Node(1).IP+":9092")
//	nw.Isolate(1) // node 1 from nodes 2 and 3; clients still reach it
//	nw.Heal()
//
//	nw, err := netns.New(3, netns.WithForwarders())
//	nw.Delay(1, 2, 100*time.Millisecond) // each way
//	nw.Limit(1, 3, 2_000_000)            // 2 Mbit/s each way
//	nw.Unshape()
package netns

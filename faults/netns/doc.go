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
// It needs root, ip (iproute2) and iptables; Available says whether this
// machine has them. Namespaces carry the creating process's id, so a test
// process killed before Close leaves nothing the next New does not remove.
//
// Use:
//
//	nw, err := netns.New(3)
//	defer nw.Close()
//	cmd := nw.Command(1, bin, "--override", "listeners=PLAINTEXT://"+nw.Node(1).IP+":9092")
//	nw.Isolate(1) // node 1 from nodes 2 and 3; clients still reach it
//	nw.Heal()
package netns

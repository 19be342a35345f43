package cluster

import (
	"net"
	"os/exec"
	"strconv"
)

// Placement puts a cluster's nodes on hosts of their own instead of
// loopback ports: each node listens on its own address and its process is
// started through the placement, as the fault suites run every node in a
// network namespace of its own (faults/netns) so that a node can be cut
// from its peers.
type Placement interface {
	// Host returns the address node id listens on and advertises.
	Host(id int) string
	// Command returns the command that runs name with args on node id.
	// Its process must be name's own, so that signals reach the node.
	Command(id int, name string, args ...string) *exec.Cmd
}

// Placed ports: every node of a placement has its own address, so each
// uses the same ports.
const (
	PlacedPort           = 9092
	PlacedControllerPort = 9093
)

// PlacedAddrs returns node id's broker and controller listener addresses
// on placement p.
func PlacedAddrs(p Placement, id int) (addr, controller string) {
	host := p.Host(id)
	return net.JoinHostPort(host, strconv.Itoa(PlacedPort)), net.JoinHostPort(host, strconv.Itoa(PlacedControllerPort))
}

// Command returns name with args run on node id of p, or directly when p
// is nil.
func Command(p Placement, id int, name string, args ...string) *exec.Cmd {
	if p == nil {
		return exec.Command(name, args...)
	}
	return p.Command(id, name, args...)
}

package netns

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrUnavailable is returned by Available and New when this machine cannot
// make network namespaces: not root, or ip or iptables missing.
var ErrUnavailable = errors.New("netns: network namespaces unavailable")

// chain is the filter chain each node's namespace jumps to from INPUT and
// OUTPUT; a cut is a pair of DROP rules in it, a heal flushes it.
const chain = "CASCADE-FAULTS"

// namePrefix starts every namespace this package makes:
// cfaults-<pid>-<id>-<node>. The pid lets New remove what a killed test
// process left behind.
const namePrefix = "cfaults-"

// Network is a bridge in the caller's namespace and one namespace per
// node, each with one address on the bridge's /24. The caller's namespace
// (the test's clients) reaches every node through the bridge at HostIP.
type Network struct {
	id     string
	bridge string
	hostIP string
	nodes  []*Node
	// forward is the FORWARD rule added in the caller's namespace so that
	// a firewall dropping forwarded traffic (as Docker's does) passes the
	// bridge's own; empty when none was needed.
	forward []string

	// forwarding says whether New ran a forwarder per node
	// (WithForwarders); fwd are they, by node - 1.
	forwarding bool
	fwd        []*forwarder

	mu   sync.Mutex
	cuts map[[2]int]bool
	// htb are the nodes whose veth has the htb qdisc of a Limit; limits
	// and delays are the shaped pairs, lower node first.
	htb    map[int]bool
	limits map[[2]int]int64
	delays map[[2]int]time.Duration
	// changed is closed and replaced whenever a delay changes, waking the
	// forwarders' queues.
	changed chan struct{}
}

// Node is one node's namespace.
type Node struct {
	// NS is the namespace's name (ip netns exec NS ...).
	NS string
	// IP is the node's address on the bridge.
	IP string
	// veth is the bridge side of the node's veth pair.
	veth string
}

// Available reports whether New can work here, as ErrUnavailable wrapping
// the reason when it cannot.
func Available() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: not running as root", ErrUnavailable)
	}
	for _, bin := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
	}
	probe := namePrefix + strconv.Itoa(os.Getpid()) + "-probe"
	if err := run("ip", "netns", "add", probe); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return run("ip", "netns", "del", probe)
}

// New makes a network of n nodes on a fresh 10.x.y.0/24 that no route of
// the caller's namespace uses, after removing the namespaces and bridges
// that test processes no longer running left behind. Close removes it.
func New(n int, opts ...Option) (*Network, error) {
	if n < 1 || n > 250 {
		return nil, fmt.Errorf("netns: %d nodes: want 1 to 250", n)
	}
	if err := Available(); err != nil {
		return nil, err
	}
	removeStale()
	subnet, err := freeSubnet()
	if err != nil {
		return nil, err
	}
	var raw [3]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, err
	}
	id := hex.EncodeToString(raw[:])
	nw := &Network{id: id, bridge: "cfb" + id, hostIP: subnet + ".254", cuts: map[[2]int]bool{},
		htb: map[int]bool{}, limits: map[[2]int]int64{}, delays: map[[2]int]time.Duration{}, changed: make(chan struct{})}
	for _, o := range opts {
		o(nw)
	}
	if err := nw.build(n, subnet); err != nil {
		nw.Close()
		return nil, err
	}
	if !nw.forwarding {
		return nw, nil
	}
	if err := nw.startForwarders(); err != nil {
		nw.Close()
		return nil, err
	}
	return nw, nil
}

func (nw *Network) build(n int, subnet string) error {
	steps := [][]string{
		{"ip", "link", "add", nw.bridge, "type", "bridge"},
		{"ip", "addr", "add", nw.hostIP + "/24", "dev", nw.bridge},
		{"ip", "link", "set", nw.bridge, "up"},
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			return err
		}
	}
	// Docker's firewall drops forwarded packets by default, and with
	// br_netfilter loaded that includes frames between two ports of one
	// bridge.
	nw.forward = []string{"FORWARD", "-i", nw.bridge, "-o", nw.bridge, "-j", "ACCEPT"}
	if err := run(append([]string{"iptables", "-I"}, nw.forward...)...); err != nil {
		nw.forward = nil
		return err
	}
	for i := 1; i <= n; i++ {
		node := &Node{
			NS:   fmt.Sprintf("%s%d-%s-%d", namePrefix, os.Getpid(), nw.id, i),
			IP:   fmt.Sprintf("%s.%d", subnet, i),
			veth: fmt.Sprintf("cfv%s%d", nw.id, i),
		}
		nw.nodes = append(nw.nodes, node)
		steps := [][]string{
			{"ip", "netns", "add", node.NS},
			{"ip", "link", "add", node.veth, "type", "veth", "peer", "name", node.veth + "p"},
			{"ip", "link", "set", node.veth + "p", "netns", node.NS},
			{"ip", "-n", node.NS, "link", "set", node.veth + "p", "name", inner},
			{"ip", "-n", node.NS, "addr", "add", node.IP + "/24", "dev", inner},
			{"ip", "-n", node.NS, "link", "set", inner, "up"},
			{"ip", "-n", node.NS, "link", "set", "lo", "up"},
			{"ip", "link", "set", node.veth, "master", nw.bridge},
			{"ip", "link", "set", node.veth, "up"},
			{"ip", "netns", "exec", node.NS, "iptables", "-N", chain},
			{"ip", "netns", "exec", node.NS, "iptables", "-A", "INPUT", "-j", chain},
			{"ip", "netns", "exec", node.NS, "iptables", "-A", "OUTPUT", "-j", chain},
		}
		for _, s := range steps {
			if err := run(s...); err != nil {
				return err
			}
		}
	}
	return nil
}

// Nodes returns the number of nodes.
func (nw *Network) Nodes() int { return len(nw.nodes) }

// Node returns node i, counted from 1.
func (nw *Network) Node(i int) *Node { return nw.nodes[i-1] }

// HostIP is the caller's address on the bridge: what a node sees as the
// source of the test's own connections.
func (nw *Network) HostIP() string { return nw.hostIP }

// Host returns node i's address, so that a Network places the nodes of a
// matrix cluster (matrix/cluster.Placement).
func (nw *Network) Host(i int) string { return nw.Node(i).IP }

// Command returns name with args run inside node i's namespace. ip netns
// exec enters the namespace and then executes name, so the command's
// process is name itself: a signal sent to it reaches the program.
func (nw *Network) Command(i int, name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", nw.Node(i).NS, name}, args...)...)
}

// host stands for the caller's namespace in Cut.
const host = 0

// Cut drops every packet between nodes a and b in both directions; a node
// of 0 is the caller's namespace (the test's clients). Connections stay
// open and go silent, as across a real partition. A third rule drops the
// packets of connections first addressed to the peer, whatever their
// address now: on a network WithForwarders, the leg between a node and
// its forwarder, so that a forwarded connection goes silent on both legs
// and a new one is never accepted, as a direct one would not be.
func (nw *Network) Cut(a, b int) error {
	if a == b || a < 0 || b < 0 || a > len(nw.nodes) || b > len(nw.nodes) || (a == host && b == host) {
		return fmt.Errorf("netns: cannot cut %d from %d", a, b)
	}
	key := [2]int{min(a, b), max(a, b)}
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.cuts[key] {
		return nil
	}
	for _, side := range [][2]int{{a, b}, {b, a}} {
		if side[0] == host {
			continue // the node's own rules drop both directions
		}
		ns, peer := nw.Node(side[0]).NS, nw.addr(side[1])
		for _, match := range [][]string{{"-s", peer}, {"-d", peer}, {"-m", "conntrack", "--ctorigdst", peer}} {
			args := append([]string{"ip", "netns", "exec", ns, "iptables", "-A", chain}, match...)
			if err := run(append(args, "-j", "DROP")...); err != nil {
				return err
			}
		}
	}
	nw.cuts[key] = true
	return nil
}

// Isolate cuts node a from every other node (not from the caller's
// namespace, so clients still reach it).
func (nw *Network) Isolate(a int) error {
	for b := 1; b <= len(nw.nodes); b++ {
		if b != a {
			if err := nw.Cut(a, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// Heal removes every cut; limits and delays stay (Unshape removes
// those).
func (nw *Network) Heal() error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	var errs []error
	for _, node := range nw.nodes {
		errs = append(errs, run("ip", "netns", "exec", node.NS, "iptables", "-F", chain))
	}
	clear(nw.cuts)
	return errors.Join(errs...)
}

// Cuts lists the node pairs cut now, lower node first.
func (nw *Network) Cuts() [][2]int {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	var out [][2]int
	for k := range nw.cuts {
		out = append(out, k)
	}
	return out
}

func (nw *Network) addr(i int) string {
	if i == host {
		return nw.hostIP
	}
	return nw.Node(i).IP
}

// Close removes the namespaces, the bridge and the FORWARD rule. Processes
// still running in a namespace keep it until they exit: stop them first.
func (nw *Network) Close() error {
	var errs []error
	for _, f := range nw.fwd {
		f.stop()
	}
	nw.fwd = nil
	for _, node := range nw.nodes {
		if exists("/run/netns/" + node.NS) {
			errs = append(errs, run("ip", "netns", "del", node.NS))
		}
	}
	nw.nodes = nil
	if linkExists(nw.bridge) {
		errs = append(errs, run("ip", "link", "del", nw.bridge))
	}
	if nw.forward != nil {
		errs = append(errs, run(append([]string{"iptables", "-D"}, nw.forward...)...))
		nw.forward = nil
	}
	return errors.Join(errs...)
}

// removeStale removes the namespaces of test processes that are gone, and
// bridges no namespace of a live network is attached to.
func removeStale() {
	entries, _ := os.ReadDir("/run/netns")
	live := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		rest, ok := strings.CutPrefix(name, namePrefix)
		if !ok {
			continue
		}
		parts := strings.Split(rest, "-")
		pid, err := strconv.Atoi(parts[0])
		if err != nil {
			continue
		}
		if alive(pid) {
			if len(parts) > 1 {
				live[parts[1]] = true
			}
			continue
		}
		run("ip", "netns", "del", name)
	}
	out, err := exec.Command("ip", "-o", "link", "show", "type", "bridge").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name := strings.TrimSuffix(f[1], ":")
		if id, ok := strings.CutPrefix(name, "cfb"); ok && !live[id] {
			run("ip", "link", "del", name)
			run("iptables", "-D", "FORWARD", "-i", name, "-o", name, "-j", "ACCEPT")
		}
	}
}

// freeSubnet picks 10.x.y (x in 200-249) that no address of the caller's
// namespace is in.
func freeSubnet() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", err
	}
	used := map[string]bool{}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if v4 := ipn.IP.To4(); v4 != nil {
				used[fmt.Sprintf("%d.%d.%d", v4[0], v4[1], v4[2])] = true
			}
		}
	}
	var b [2]byte
	for range 64 {
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		s := fmt.Sprintf("10.%d.%d", 200+int(b[0])%50, b[1])
		if !used[s] {
			return s, nil
		}
	}
	return "", errors.New("netns: no free 10.x.y.0/24 found")
}

func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil || errors.Is(syscall.Kill(pid, 0), syscall.EPERM)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func linkExists(name string) bool {
	return exec.Command("ip", "link", "show", name).Run() == nil
}

// run runs one command, returning its output in the error.
func run(args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("netns: %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

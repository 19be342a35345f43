package apachekafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// ClusterRoles says how a cluster's nodes divide Kafka's two KRaft roles.
type ClusterRoles int

const (
	// CombinedRoles runs every node as broker and controller
	// (process.roles=broker,controller); the nodes are ids 1..Nodes and all
	// of them are voters of the metadata quorum.
	CombinedRoles ClusterRoles = iota
	// DedicatedControllers runs three controller-only nodes (ids 1..3, the
	// voters) and Nodes broker-only nodes (ids 4..3+Nodes), as Kafka's
	// production layout does.
	DedicatedControllers
)

// dedicatedVoters is the size of the controller quorum in
// DedicatedControllers mode.
const dedicatedVoters = 3

// ClusterOptions configures StartCluster. The zero value is a three-node
// combined cluster with Kafka's default timings.
type ClusterOptions struct {
	// Nodes is the number of nodes that run a broker; zero means 3.
	Nodes int
	// Roles chooses combined nodes (the default) or dedicated controllers.
	Roles ClusterRoles
	// Overrides are server.properties entries applied to every node after
	// the cluster's own, as kafka-server-start.sh --override does.
	Overrides map[string]string
	// NodeOverrides are entries for one node id, applied after Overrides.
	NodeOverrides map[int]map[string]string
	// ExtraListeners are listeners one broker node binds and advertises
	// beside its PLAINTEXT and CONTROLLER ones, by node id
	// ("NAME://host:port,..."; their protocols go in Overrides'
	// listener.security.protocol.map). The cluster still waits for and
	// addresses every node on its PLAINTEXT listener.
	ExtraListeners map[int]string
	// Dir holds one directory per node ("node-<id>"). Empty means a new
	// temporary directory that Close removes.
	Dir string
	// Heap is each JVM's -Xmx value; empty means "384m", so that three
	// nodes fit on a small machine.
	Heap string
	// StartTimeout bounds the start-up of each node; zero means 120 seconds.
	StartTimeout time.Duration
	// JVMOptions, when non-nil, replace the fast start-up flags as
	// BrokerOptions.JVMOptions does.
	JVMOptions []string
	// Placement, when set, runs every node on its own host (a network
	// namespace of the fault suites) instead of loopback ports.
	Placement cluster.Placement
}

// Node is one Apache Kafka process of a Cluster.
type Node struct {
	// ID is the node's node.id.
	ID int
	// Roles is the node's process.roles value.
	Roles string
	// Addr is the PLAINTEXT listener on 127.0.0.1; empty on a
	// controller-only node.
	Addr string
	// ControllerAddr is the CONTROLLER listener on 127.0.0.1; empty on a
	// broker-only node.
	ControllerAddr string
	// Dir holds the node's server.properties, its log file kafka.log and its
	// log dir data/.
	Dir string

	proc   *Broker
	paused bool
}

// IsBroker reports whether the node runs a broker.
func (n *Node) IsBroker() bool { return n.Addr != "" }

// IsController reports whether the node is a voter of the metadata quorum.
func (n *Node) IsController() bool { return n.ControllerAddr != "" }

// LogPath returns the file holding the node's log.
func (n *Node) LogPath() string { return n.proc.LogPath() }

// DataDir returns the node's log.dirs directory.
func (n *Node) DataDir() string { return n.proc.DataDir() }

// Pid returns the node's process id, or 0 before it started.
func (n *Node) Pid() int { return n.proc.Pid() }

// Process returns the node's current process, or nil before it started. A
// restart replaces it.
func (n *Node) Process() *os.Process {
	if n.proc.cmd == nil {
		return nil
	}
	return n.proc.cmd.Process
}

// Running reports whether the node's process has not exited.
func (n *Node) Running() bool {
	if n.proc.cmd == nil {
		return false
	}
	select {
	case <-n.proc.exited:
		return false
	default:
		return true
	}
}

// Cluster is a running multi-node Apache Kafka KRaft cluster: every node a
// child process on its own loopback ports, all formatted with one cluster id
// and a static voter set (controller.quorum.voters).
type Cluster struct {
	dist      *Dist
	clusterID string
	dir       string
	removeDir bool

	mu    sync.Mutex // Guards nodes' paused flags.
	nodes []*Node    // Ordered by id.

	conns cluster.Conns // One client per listener address; see admin.go.
}

// ErrUnknownNode reports a node id that is not in the cluster.
var ErrUnknownNode = errors.New("apachekafka: no such node")

// StartCluster provisions the pinned distribution (Ensure) and starts a
// cluster on it; see Dist.StartCluster.
func StartCluster(ctx context.Context, opts ClusterOptions) (*Cluster, error) {
	d, err := Ensure(ctx)
	if err != nil {
		return nil, err
	}
	return d.StartCluster(ctx, opts)
}

// StartCluster formats one log dir per node with a shared cluster id, starts
// every node at once (a KRaft quorum forms only when a majority of voters
// runs) and returns when every broker is registered and listed in Metadata
// and every controller answers on its listener. On failure the error carries
// the end of every node's log. Ports colliding with another process are
// retried with new ones, as StartBroker does.
func (d *Dist) StartCluster(ctx context.Context, opts ClusterOptions) (*Cluster, error) {
	return cluster.RetryPorts(ctx, func() (*Cluster, error) { return d.startCluster(ctx, opts) })
}

func (d *Dist) startCluster(ctx context.Context, opts ClusterOptions) (_ *Cluster, err error) {
	brokers := opts.Nodes
	if brokers == 0 {
		brokers = 3
	}
	if brokers < 0 {
		return nil, fmt.Errorf("apachekafka: ClusterOptions.Nodes %d is negative", brokers)
	}
	c := &Cluster{dist: d}
	if c.dir, c.removeDir, err = cluster.WorkDir(opts.Dir, "apache-kafka-cluster-"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	c.clusterID, err = newClusterID()
	if err != nil {
		return nil, err
	}
	specs := clusterLayout(opts.Roles, brokers)
	for id := range opts.NodeOverrides {
		if id < 1 || id > len(specs) {
			return nil, fmt.Errorf("%w: NodeOverrides names node %d of %d", ErrUnknownNode, id, len(specs))
		}
	}
	ports, err := cluster.FreePorts(2 * len(specs))
	if err != nil {
		return nil, err
	}
	for i, s := range specs {
		n := &Node{ID: s.id, Roles: s.roles, Dir: filepath.Join(c.dir, "node-"+strconv.Itoa(s.id))}
		if s.broker {
			n.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i]))
		}
		if s.controller {
			n.ControllerAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i+1]))
		}
		if opts.Placement != nil {
			addr, ctrl := cluster.PlacedAddrs(opts.Placement, s.id)
			if s.broker {
				n.Addr = addr
			}
			if s.controller {
				n.ControllerAddr = ctrl
			}
		}
		c.nodes = append(c.nodes, n)
	}
	voters := c.voters()

	heap := opts.Heap
	if heap == "" {
		heap = "384m"
	}
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = 120 * time.Second
	}
	for _, n := range c.nodes {
		props := NodeProperties(n, voters, brokers)
		if extra := opts.ExtraListeners[n.ID]; extra != "" && n.IsBroker() {
			props["listeners"] += "," + extra
			props["advertised.listeners"] += "," + extra
		}
		for k, v := range opts.Overrides {
			props[k] = v
		}
		for k, v := range opts.NodeOverrides[n.ID] {
			props[k] = v
		}
		if err := c.prepareNode(ctx, n, props, heap, opts.JVMOptions, timeout); err != nil {
			return nil, err
		}
		n.proc.place, n.proc.placeID = opts.Placement, n.ID
	}

	launches := make([]cluster.Launch, len(c.nodes))
	for i, n := range c.nodes {
		launches[i] = cluster.Launch{ID: n.ID, LogPath: n.LogPath(), Start: func() error { return n.proc.launch(ctx) }}
	}
	if err := cluster.LaunchAll(launches, func() string { return c.Logs(3000) }); err != nil {
		return nil, fmt.Errorf("apachekafka: %w", err)
	}
	return c, nil
}

// nodeSpec is one node of a layout before ports are chosen.
type nodeSpec struct {
	id                 int
	roles              string
	broker, controller bool
}

// clusterLayout returns the nodes of a cluster: combined nodes 1..brokers,
// or controllers 1..3 followed by brokers 4..3+brokers.
func clusterLayout(roles ClusterRoles, brokers int) []nodeSpec {
	var specs []nodeSpec
	if roles == DedicatedControllers {
		for i := 1; i <= dedicatedVoters; i++ {
			specs = append(specs, nodeSpec{id: i, roles: "controller", controller: true})
		}
		for i := 1; i <= brokers; i++ {
			specs = append(specs, nodeSpec{id: dedicatedVoters + i, roles: "broker", broker: true})
		}
		return specs
	}
	for i := 1; i <= brokers; i++ {
		specs = append(specs, nodeSpec{id: i, roles: "broker,controller", broker: true, controller: true})
	}
	return specs
}

// voters returns controller.quorum.voters: id@host:port of every controller.
func (c *Cluster) voters() string {
	var vs []string
	for _, n := range c.nodes {
		if n.IsController() {
			vs = append(vs, strconv.Itoa(n.ID)+"@"+n.ControllerAddr)
		}
	}
	return strings.Join(vs, ",")
}

// NodeProperties returns the server.properties of one cluster node: its
// roles and listeners, the static voter set, and Kafka's defaults for
// everything else (session and election timeouts included), except that
// internal topics' replication is capped at the number of brokers and
// group.initial.rebalance.delay.ms is 0 so that groups form without
// Kafka's 3 s wait, as the single-node oracle does.
func NodeProperties(n *Node, voters string, brokers int) map[string]string {
	var listeners, protocols []string
	if n.IsBroker() {
		listeners = append(listeners, "PLAINTEXT://"+n.Addr)
		protocols = append(protocols, "PLAINTEXT:PLAINTEXT")
	}
	if n.IsController() {
		listeners = append(listeners, "CONTROLLER://"+n.ControllerAddr)
		protocols = append(protocols, "CONTROLLER:PLAINTEXT")
	} else {
		// A broker-only node names the controller listener's protocol too,
		// to reach the voters.
		protocols = append(protocols, "CONTROLLER:PLAINTEXT")
	}
	p := map[string]string{
		"process.roles":                  n.Roles,
		"node.id":                        strconv.Itoa(n.ID),
		"listeners":                      strings.Join(listeners, ","),
		"controller.listener.names":      "CONTROLLER",
		"listener.security.protocol.map": strings.Join(protocols, ","),
		"controller.quorum.voters":       voters,
		"log.dirs":                       filepath.Join(n.Dir, "data"),
	}
	if n.IsBroker() {
		rf := strconv.Itoa(min(3, brokers))
		isr := strconv.Itoa(min(2, brokers))
		p["advertised.listeners"] = "PLAINTEXT://" + n.Addr
		p["inter.broker.listener.name"] = "PLAINTEXT"
		p["offsets.topic.replication.factor"] = rf
		p["transaction.state.log.replication.factor"] = rf
		p["transaction.state.log.min.isr"] = isr
		p["share.coordinator.state.topic.replication.factor"] = rf
		p["share.coordinator.state.topic.min.isr"] = isr
		p["group.initial.rebalance.delay.ms"] = "0"
	}
	return p
}

// prepareNode writes a node's server.properties, formats its log dir and
// builds the process handle that launch starts.
func (c *Cluster) prepareNode(ctx context.Context, n *Node, props map[string]string, heap string, jvmOpts []string, timeout time.Duration) error {
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return fmt.Errorf("apachekafka: create %s: %w", n.Dir, err)
	}
	propsPath := filepath.Join(n.Dir, "server.properties")
	if err := os.WriteFile(propsPath, []byte(cluster.FormatProperties(props)), 0o644); err != nil {
		return fmt.Errorf("apachekafka: write server.properties: %w", err)
	}
	b := &Broker{dist: c.dist, addr: n.Addr, ctrlAddr: n.ControllerAddr, dir: n.Dir,
		logPath: filepath.Join(n.Dir, "kafka.log"), clusterID: c.clusterID, propsPath: propsPath,
		timeout: timeout, exited: make(chan struct{})}
	if err := os.RemoveAll(b.DataDir()); err != nil {
		return fmt.Errorf("apachekafka: clear data dir: %w", err)
	}
	// As kafka-storage.sh format -t <id> -c <props>: with a static quorum
	// (controller.quorum.voters) every node, controller or broker, is
	// formatted alike; --standalone and --initial-controllers belong to a
	// dynamic quorum (controller.quorum.bootstrap.servers, KIP-853).
	if _, err := c.dist.Run(ctx, "kafka.tools.StorageTool", "format", "-t", c.clusterID, "-c", propsPath); err != nil {
		return fmt.Errorf("apachekafka: format node %d: %w", n.ID, err)
	}
	b.jvm = []string{"-Xmx" + heap, "-Xms64m", "-XX:+UseG1GC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
		"-Djava.awt.headless=true"}
	if jvmOpts != nil {
		b.jvm = append([]string{"-Xmx" + heap}, jvmOpts...)
	}
	id := n.ID
	if n.IsBroker() {
		b.ready = func(ctx context.Context) error { return c.brokerRegistered(ctx, id) }
	} else {
		b.ready = func(ctx context.Context) error { return c.controllerAnswers(ctx, id) }
	}
	n.proc = b
	return nil
}

// ClusterID returns the cluster id every node was formatted with.
func (c *Cluster) ClusterID() string { return c.clusterID }

// Dir returns the directory holding the nodes' directories.
func (c *Cluster) Dir() string { return c.dir }

// Version returns the Apache Kafka version of the cluster.
func (c *Cluster) Version() string { return c.dist.version }

// Nodes returns every node, ordered by id.
func (c *Cluster) Nodes() []*Node { return append([]*Node(nil), c.nodes...) }

// Node returns the node with the given id, or nil.
func (c *Cluster) Node(id int) *Node {
	for _, n := range c.nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// BrokerIDs returns the ids of the nodes that run a broker.
func (c *Cluster) BrokerIDs() []int {
	var ids []int
	for _, n := range c.nodes {
		if n.IsBroker() {
			ids = append(ids, n.ID)
		}
	}
	return ids
}

// Bootstrap returns every broker's address as a comma list, for
// bootstrap.servers or kgo.SeedBrokers(strings.Split(..., ",")...).
func (c *Cluster) Bootstrap() string { return strings.Join(c.BrokerAddrs(), ",") }

// Seeds returns every broker's address (cluster.Cluster).
func (c *Cluster) Seeds() []string { return c.BrokerAddrs() }

// Name returns "Apache Kafka" and the version (cluster.Cluster).
func (c *Cluster) Name() string { return "Apache Kafka " + c.dist.version }

// ControllerAddr returns node id's CONTROLLER listener, or "" when it is
// not a voter or not in the cluster.
func (c *Cluster) ControllerAddr(id int) string {
	if n := c.Node(id); n != nil {
		return n.ControllerAddr
	}
	return ""
}

// BrokerAddrs returns every broker's address.
func (c *Cluster) BrokerAddrs() []string {
	var as []string
	for _, n := range c.nodes {
		if n.IsBroker() {
			as = append(as, n.Addr)
		}
	}
	return as
}

func (c *Cluster) node(id int) (*Node, error) {
	n := c.Node(id)
	if n == nil {
		return nil, fmt.Errorf("%w: %d", ErrUnknownNode, id)
	}
	return n, nil
}

// Kill sends SIGKILL to a node, as a crash would, and waits for the process
// to exit. Its directory stays for Restart.
func (c *Cluster) Kill(id int) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	if err := n.proc.Kill(); err != nil {
		return err
	}
	c.setPaused(n, false)
	c.dropClients(n)
	return nil
}

// Stop sends SIGTERM to a node (Kafka's controlled shutdown: a broker hands
// its leaderships over first) and waits up to 30 seconds for it to exit
// before killing it. Its directory stays for Restart.
func (c *Cluster) Stop(id int) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	if c.isPaused(n) {
		// A stopped process handles SIGTERM only once continued.
		if err := c.Resume(id); err != nil {
			return err
		}
	}
	err = n.proc.Stop()
	c.dropClients(n)
	return err
}

// Pause sends SIGSTOP to a node: its sockets stay open and its peers see
// only silence, as with a long garbage-collection pause or a hung host.
func (c *Cluster) Pause(id int) error { return c.signal(id, syscall.SIGSTOP, true) }

// Resume sends SIGCONT to a paused node.
func (c *Cluster) Resume(id int) error { return c.signal(id, syscall.SIGCONT, false) }

func (c *Cluster) signal(id int, sig syscall.Signal, paused bool) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	p := n.Process()
	if p == nil || !n.Running() {
		return fmt.Errorf("apachekafka: node %d is not running", id)
	}
	if err := p.Signal(sig); err != nil {
		return fmt.Errorf("apachekafka: signal node %d: %w", id, err)
	}
	c.setPaused(n, paused)
	return nil
}

func (c *Cluster) setPaused(n *Node, p bool) {
	c.mu.Lock()
	n.paused = p
	c.mu.Unlock()
}

func (c *Cluster) isPaused(n *Node) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return n.paused
}

// Restart starts a killed or stopped node again on the same directory,
// ports and configuration, and returns when it is ready as at start-up (a
// broker registered and in Metadata, which after a kill waits for the old
// registration's broker.session.timeout.ms to expire).
func (c *Cluster) Restart(ctx context.Context, id int) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	return n.proc.Restart(ctx)
}

// Close kills every node and removes a temporary directory (unless
// CASCADE_KEEP_KAFKA is set). The nodes are killed rather than stopped:
// a controlled shutdown of the last brokers waits on a quorum that is
// going away, and nothing of a test cluster needs to survive.
func (c *Cluster) Close() error {
	var errs []error
	for _, n := range c.nodes {
		if n.proc == nil {
			continue
		}
		if err := n.proc.Kill(); err != nil {
			errs = append(errs, err)
		}
		if n.proc.logFile != nil {
			n.proc.logFile.Close()
		}
	}
	c.conns.Close()
	if err := cluster.RemoveWorkDir(c.dir, c.removeDir, "CASCADE_KEEP_KAFKA"); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Logs returns the last n bytes of every node's log, each under a header
// naming the node, for printing when a test fails.
func (c *Cluster) Logs(n int) string {
	var b strings.Builder
	nodes := c.Nodes()
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	for _, nd := range nodes {
		if nd.proc == nil {
			continue
		}
		fmt.Fprintf(&b, "=== node %d (%s) log %s ===\n%s\n", nd.ID, nd.Roles, nd.LogPath(), cluster.ReadTail(nd.LogPath(), n))
	}
	return b.String()
}

var _ cluster.Cluster = (*Cluster)(nil)

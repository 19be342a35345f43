package cascadecluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// Options configures Start. The zero value is three combined nodes with
// Cascade's defaults, which are Kafka's timings.
type Options struct {
	// Nodes is the number of nodes, each broker and controller; zero
	// means 3.
	Nodes int
	// Overrides are server.properties entries applied to every node after
	// the cluster's own (NodeProperties).
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
	// Log, when set, receives every node's output too, each line prefixed
	// with the node ("node 2 | "). Each node's output always goes to
	// cascade.log in its directory.
	Log io.Writer
	// Args are extra command-line arguments of every node, such as "-v"
	// (debug logging).
	Args []string
	// StartTimeout bounds the start-up (and each restart) of each node;
	// zero means 60 seconds.
	StartTimeout time.Duration
	// Placement, when set, runs every node on its own host (a network
	// namespace of the fault suites) instead of loopback ports.
	Placement cluster.Placement
	// Bin is the cmd/cascade binary every node runs; empty means Binary's
	// build of the enclosing module.
	Bin string
}

// Node is one cmd/cascade process of a Cluster.
type Node struct {
	// ID is the node's node.id.
	ID int
	// Addr is the PLAINTEXT listener on 127.0.0.1.
	Addr string
	// ControllerAddr is the CONTROLLER listener on 127.0.0.1.
	ControllerAddr string
	// Dir holds the node's server.properties, its log cascade.log and its
	// log dir data/.
	Dir string

	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	logFile *os.File
	paused  bool
}

// LogPath returns the file holding the node's output.
func (n *Node) LogPath() string { return filepath.Join(n.Dir, "cascade.log") }

// Running reports whether the node's process has not exited.
func (n *Node) Running() bool {
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// Pid returns the node's process id, or 0 when it never started.
func (n *Node) Pid() int {
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Cluster is a running cluster of cmd/cascade processes, each a combined
// broker and controller on its own loopback ports, with a static voter set.
type Cluster struct {
	bin       string
	dir       string
	removeDir bool
	timeout   time.Duration
	args      []string
	log       *lineWriter
	place     cluster.Placement

	mu    sync.Mutex // Guards the nodes' processes and paused flags.
	nodes []*Node    // Ordered by id.

	conns cluster.Conns
}

var _ cluster.Cluster = (*Cluster)(nil)

// ErrUnknownNode reports a node id that is not in the cluster.
var ErrUnknownNode = errors.New("cascadecluster: no such node")

// Start builds cmd/cascade (Binary) unless Options.Bin names one, writes
// every node's server.properties on free loopback ports, starts every node
// at once (the quorum forms only when a majority runs) and returns when every broker lists itself in its
// own Metadata. On failure every node is killed and the error carries the
// end of every node's log; ports another process took meanwhile are
// retried with new ones.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	bin := opts.Bin
	if bin == "" {
		var err error
		if bin, err = Binary(ctx); err != nil {
			return nil, err
		}
	}
	return cluster.RetryPorts(ctx, func() (*Cluster, error) { return start(ctx, bin, opts) })
}

func start(ctx context.Context, bin string, opts Options) (_ *Cluster, err error) {
	nodes := opts.Nodes
	if nodes == 0 {
		nodes = 3
	}
	if nodes < 0 {
		return nil, fmt.Errorf("cascadecluster: Options.Nodes %d is negative", nodes)
	}
	for id := range opts.NodeOverrides {
		if id < 1 || id > nodes {
			return nil, fmt.Errorf("%w: NodeOverrides names node %d of %d", ErrUnknownNode, id, nodes)
		}
	}
	c := &Cluster{bin: bin, timeout: opts.StartTimeout, args: opts.Args, place: opts.Placement}
	if c.timeout == 0 {
		c.timeout = 60 * time.Second
	}
	if opts.Log != nil {
		c.log = &lineWriter{w: opts.Log}
	}
	if c.dir, c.removeDir, err = cluster.WorkDir(opts.Dir, "cascade-cluster-"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	ports, err := cluster.FreePorts(2 * nodes)
	if err != nil {
		return nil, err
	}
	for i := 0; i < nodes; i++ {
		id := i + 1
		n := &Node{ID: id, Dir: filepath.Join(c.dir, "node-"+strconv.Itoa(id)),
			Addr:           net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i])),
			ControllerAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i+1]))}
		if c.place != nil {
			n.Addr, n.ControllerAddr = cluster.PlacedAddrs(c.place, id)
		}
		c.nodes = append(c.nodes, n)
	}
	voters := c.voters()
	for _, n := range c.nodes {
		props := NodeProperties(n, voters, nodes)
		if extra := opts.ExtraListeners[n.ID]; extra != "" {
			props["listeners"] += "," + extra
			props["advertised.listeners"] += "," + extra
		}
		for k, v := range opts.Overrides {
			props[k] = v
		}
		for k, v := range opts.NodeOverrides[n.ID] {
			props[k] = v
		}
		if err := os.MkdirAll(n.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("cascadecluster: create %s: %w", n.Dir, err)
		}
		if err := os.WriteFile(n.propsPath(), []byte(cluster.FormatProperties(props)), 0o644); err != nil {
			return nil, fmt.Errorf("cascadecluster: write server.properties: %w", err)
		}
	}
	launches := make([]cluster.Launch, len(c.nodes))
	for i, n := range c.nodes {
		launches[i] = cluster.Launch{ID: n.ID, LogPath: n.LogPath(), Start: func() error { return c.launch(ctx, n) }}
	}
	if err := cluster.LaunchAll(launches, func() string { return c.Logs(3000) }); err != nil {
		return nil, fmt.Errorf("cascadecluster: %w", err)
	}
	return c, nil
}

func (n *Node) propsPath() string { return filepath.Join(n.Dir, "server.properties") }

// voters returns controller.quorum.voters: id@host:port of every node.
func (c *Cluster) voters() string {
	var vs []string
	for _, n := range c.nodes {
		vs = append(vs, strconv.Itoa(n.ID)+"@"+n.ControllerAddr)
	}
	return strings.Join(vs, ",")
}

// NodeProperties returns the server.properties of one node of a cluster
// of nodes nodes: a combined broker and controller with its two listeners
// and the static voter set, Cascade's defaults (Kafka's) for everything
// else, except that the internal topics' replication is capped at the
// number of nodes and group.initial.rebalance.delay.ms is 0, as
// apachekafka's cluster has. Share groups do not exist in Cascade, so
// their state topic keeps 1 replica.
func NodeProperties(n *Node, voters string, nodes int) map[string]string {
	rf, isr := strconv.Itoa(min(3, nodes)), strconv.Itoa(min(2, nodes))
	return map[string]string{
		"process.roles":                                    "broker,controller",
		"node.id":                                          strconv.Itoa(n.ID),
		"listeners":                                        "PLAINTEXT://" + n.Addr + ",CONTROLLER://" + n.ControllerAddr,
		"advertised.listeners":                             "PLAINTEXT://" + n.Addr,
		"controller.listener.names":                        "CONTROLLER",
		"inter.broker.listener.name":                       "PLAINTEXT",
		"listener.security.protocol.map":                   "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"controller.quorum.voters":                         voters,
		"log.dirs":                                         filepath.Join(n.Dir, "data"),
		"offsets.topic.replication.factor":                 rf,
		"transaction.state.log.replication.factor":         rf,
		"transaction.state.log.min.isr":                    isr,
		"share.coordinator.state.topic.replication.factor": "1",
		"share.coordinator.state.topic.min.isr":            "1",
		"group.initial.rebalance.delay.ms":                 "0",
	}
}

// launch starts node n's process and waits until it is ready. Its output
// is appended to its log file, so a restart keeps the history.
func (c *Cluster) launch(ctx context.Context, n *Node) error {
	f, err := os.OpenFile(n.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("cascadecluster: open log: %w", err)
	}
	// The node must outlive ctx, which bounds only the start-up.
	cmd := cluster.Command(c.place, n.ID, c.bin, append([]string{"-config", n.propsPath()}, c.args...)...)
	cmd.Dir = n.Dir
	var out io.Writer = f
	if c.log != nil {
		out = io.MultiWriter(f, c.log.node(n.ID))
	}
	cmd.Stdout, cmd.Stderr = out, out
	cluster.SetParentDeath(cmd)
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("cascadecluster: start node %d: %w", n.ID, err)
	}
	exited := make(chan struct{})
	c.mu.Lock()
	n.cmd, n.exited, n.logFile, n.paused = cmd, exited, f, false
	c.mu.Unlock()
	go func() {
		err := cmd.Wait()
		c.mu.Lock()
		n.waitErr = err
		c.mu.Unlock()
		close(exited)
	}()
	wctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var last error
	for {
		if last = cluster.Registered(wctx, c, n.ID); last == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("node %d exited: %v", n.ID, n.waitErr)
		case <-wctx.Done():
			return fmt.Errorf("node %d not ready: %w (last: %v)", n.ID, wctx.Err(), last)
		case <-time.After(cluster.PollInterval):
		}
	}
}

// Name returns "Cascade" (cluster.Cluster).
func (c *Cluster) Name() string { return "Cascade (cmd/cascade processes)" }

// Dir returns the directory holding the nodes' directories.
func (c *Cluster) Dir() string { return c.dir }

// Nodes returns every node, ordered by id.
func (c *Cluster) Nodes() []*Node { return append([]*Node(nil), c.nodes...) }

// Node returns the node with the given id, or nil.
func (c *Cluster) Node(id int) *Node {
	if id < 1 || id > len(c.nodes) {
		return nil
	}
	return c.nodes[id-1]
}

func (c *Cluster) node(id int) (*Node, error) {
	n := c.Node(id)
	if n == nil {
		return nil, fmt.Errorf("%w: %d", ErrUnknownNode, id)
	}
	return n, nil
}

// BrokerIDs returns every node's id: each runs a broker.
func (c *Cluster) BrokerIDs() []int {
	ids := make([]int, len(c.nodes))
	for i, n := range c.nodes {
		ids[i] = n.ID
	}
	return ids
}

// Seeds returns every broker's address, for a client's bootstrap list.
func (c *Cluster) Seeds() []string {
	as := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		as[i] = n.Addr
	}
	return as
}

// Bootstrap returns Seeds as a comma list, for bootstrap.servers.
func (c *Cluster) Bootstrap() string { return strings.Join(c.Seeds(), ",") }

// ControllerAddr returns node id's CONTROLLER listener, or "".
func (c *Cluster) ControllerAddr(id int) string {
	if n := c.Node(id); n != nil {
		return n.ControllerAddr
	}
	return ""
}

// Live reports whether node id runs and is not paused.
func (c *Cluster) Live(id int) bool {
	n := c.Node(id)
	if n == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return n.Running() && !n.paused
}

// Request sends req to node id's broker listener and returns the answer,
// without retries or routing.
func (c *Cluster) Request(ctx context.Context, id int, req kmsg.Request) (kmsg.Response, error) {
	return c.send(ctx, id, false, req)
}

// ControllerRequest sends req to node id's controller listener.
func (c *Cluster) ControllerRequest(ctx context.Context, id int, req kmsg.Request) (kmsg.Response, error) {
	return c.send(ctx, id, true, req)
}

func (c *Cluster) send(ctx context.Context, id int, controller bool, req kmsg.Request) (kmsg.Response, error) {
	n := c.Node(id)
	if n == nil {
		return nil, fmt.Errorf("%w: %d", ErrUnknownNode, id)
	}
	addr := n.Addr
	if controller {
		addr = n.ControllerAddr
	}
	return c.conns.Send(ctx, addr, req)
}

// process returns node n's running process, or nil.
func (c *Cluster) process(n *Node) *os.Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !n.Running() {
		return nil
	}
	return n.cmd.Process
}

// Kill sends SIGKILL to node id, as a crash would, and waits for the exit.
// Its directory stays for Restart. Killing a node that is not running does
// nothing.
func (c *Cluster) Kill(id int) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	c.kill(n)
	return nil
}

func (c *Cluster) kill(n *Node) {
	if p := c.process(n); p != nil {
		_ = p.Kill() // The process may have exited meanwhile; the wait tells.
		<-n.exited
	}
	c.mu.Lock()
	n.paused = false
	c.mu.Unlock()
	c.conns.Drop(n.Addr, n.ControllerAddr)
}

// stopTimeout bounds a node's clean shutdown after SIGTERM.
const stopTimeout = 30 * time.Second

// Stop sends SIGTERM to node id (continuing it first when paused) and waits
// up to 30 seconds for it to exit before killing it. Its directory stays
// for Restart.
func (c *Cluster) Stop(id int) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	p := c.process(n)
	if p == nil {
		return nil
	}
	defer c.conns.Drop(n.Addr, n.ControllerAddr)
	_ = p.Signal(syscall.SIGCONT) // A stopped process handles SIGTERM only once continued.
	c.mu.Lock()
	n.paused = false
	c.mu.Unlock()
	if err := p.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("cascadecluster: SIGTERM node %d: %w", id, err)
	}
	select {
	case <-n.exited:
		return nil
	case <-time.After(stopTimeout):
		c.kill(n)
		return fmt.Errorf("cascadecluster: node %d ignored SIGTERM for %v and was killed; log %s", id, stopTimeout, n.LogPath())
	}
}

// Pause sends SIGSTOP to node id: its sockets stay open and its peers see
// only silence, as with a hung host.
func (c *Cluster) Pause(id int) error { return c.signal(id, syscall.SIGSTOP, true) }

// Resume sends SIGCONT to a paused node.
func (c *Cluster) Resume(id int) error { return c.signal(id, syscall.SIGCONT, false) }

func (c *Cluster) signal(id int, sig syscall.Signal, paused bool) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	p := c.process(n)
	if p == nil {
		return fmt.Errorf("cascadecluster: node %d is not running", id)
	}
	if err := p.Signal(sig); err != nil {
		return fmt.Errorf("cascadecluster: signal node %d: %w", id, err)
	}
	c.mu.Lock()
	n.paused = paused
	c.mu.Unlock()
	return nil
}

// Restart starts a killed or stopped node again on the same directory,
// ports and configuration, and returns when it lists itself in its own
// Metadata again.
func (c *Cluster) Restart(ctx context.Context, id int) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	if c.process(n) != nil {
		return fmt.Errorf("cascadecluster: Restart of running node %d", id)
	}
	c.mu.Lock()
	if n.logFile != nil {
		n.logFile.Close()
		n.logFile = nil
	}
	c.mu.Unlock()
	if err := c.launch(ctx, n); err != nil {
		c.kill(n)
		return fmt.Errorf("cascadecluster: node %d did not restart: %w; log %s ends:\n%s", id, err, n.LogPath(), cluster.ReadTail(n.LogPath(), 3000))
	}
	return nil
}

// Close kills every node and removes a temporary directory (unless
// CASCADE_KEEP_CLUSTER is set). Nodes are killed rather than stopped:
// nothing of a test cluster needs to survive.
func (c *Cluster) Close() error {
	for _, n := range c.nodes {
		c.kill(n)
		c.mu.Lock()
		if n.logFile != nil {
			n.logFile.Close()
			n.logFile = nil
		}
		c.mu.Unlock()
	}
	c.conns.Close()
	return cluster.RemoveWorkDir(c.dir, c.removeDir, "CASCADE_KEEP_CLUSTER")
}

// Logs returns the last n bytes of every node's log, each under a header
// naming the node, for printing when a test fails.
func (c *Cluster) Logs(n int) string {
	var b strings.Builder
	for _, nd := range c.nodes {
		fmt.Fprintf(&b, "=== node %d log %s ===\n%s\n", nd.ID, nd.LogPath(), cluster.ReadTail(nd.LogPath(), n))
	}
	return b.String()
}

// lineWriter copies the nodes' output to one writer, whole lines at a
// time, each prefixed with its node.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) node(id int) io.Writer {
	return &nodeWriter{l: l, prefix: []byte(fmt.Sprintf("node %d | ", id))}
}

type nodeWriter struct {
	l      *lineWriter
	prefix []byte
	buf    []byte // A line not yet ended.
}

func (w *nodeWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.l.mu.Lock()
		_, err := w.l.w.Write(append(append([]byte(nil), w.prefix...), w.buf[:i+1]...))
		w.l.mu.Unlock()
		w.buf = w.buf[i+1:]
		if err != nil {
			return len(p), err
		}
	}
}

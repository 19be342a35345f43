package brokertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker"
	"github.com/cascade-kafka/cascade/broker/brokertest/clusterctl"
	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/matrix/cascadecluster"
	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// ClusterOption configures StartCluster.
type ClusterOption func(*clusterSettings)

type clusterSettings struct {
	overrides     map[string]string
	nodeOverrides map[int]map[string]string
	startTimeout  time.Duration
	netns         bool
}

// WithOverrides sets broker properties, by Apache Kafka's names, on every
// node, after the cluster's own (listeners, node.id, the voters...). Later
// options win.
func WithOverrides(props map[string]string) ClusterOption {
	return func(s *clusterSettings) {
		for k, v := range props {
			s.overrides[k] = v
		}
	}
}

// WithNodeOverrides sets broker properties on node id only, after
// WithOverrides.
func WithNodeOverrides(id int, props map[string]string) ClusterOption {
	return func(s *clusterSettings) {
		if s.nodeOverrides[id] == nil {
			s.nodeOverrides[id] = map[string]string{}
		}
		for k, v := range props {
			s.nodeOverrides[id][k] = v
		}
	}
}

// WithStartTimeout bounds the start of the cluster and of each Restart;
// the default is 60 seconds.
func WithStartTimeout(d time.Duration) ClusterOption {
	return func(s *clusterSettings) { s.startTimeout = d }
}

// Cluster is a cluster of combined broker and controller nodes running in
// the test's process, each with its own loopback listeners, log dir and
// member of the Raft metadata quorum. Every connection between two nodes
// runs through a link of its own, and clients reach each node through a
// forwarder on the address it advertises, so that Isolate cuts a node from
// its peers and Pause freezes every connection to and from it. It
// satisfies matrix/cluster.Cluster, so that package's helpers
// (WaitForBrokers, QuorumLeader, Metadata...) work on it too.
type Cluster struct {
	helpers
	t   testing.TB
	net *network

	mu    sync.Mutex // Guards each node's Broker.
	nodes []*Node    // Ordered by id, from 1.

	conns cluster.Conns
}

var (
	_ cluster.Cluster     = (*Cluster)(nil)
	_ clusterctl.Isolator = (*Cluster)(nil)
	_ Controls            = (*Cluster)(nil)
)

// Node is one node of a Cluster.
type Node struct {
	// ID is the node's node.id.
	ID int
	// Addr is the address the node advertises for its PLAINTEXT (client
	// and inter-broker) listener, where clients reach it: a forwarder to
	// ListenAddr, which Pause freezes. The node's peers reach ListenAddr
	// through their links to the node instead.
	Addr string
	// ListenAddr is the PLAINTEXT listener itself.
	ListenAddr string
	// ControllerAddr is the CONTROLLER listener, a voter of the quorum.
	ControllerAddr string
	// Dir is the node's log dir, kept across Kill and Restart.
	Dir string
	// Props are the properties the node starts with.
	Props map[string]string

	ctlFront string         // the forwarder to ControllerAddr that ControllerRequest uses
	b        *broker.Broker // nil while killed or stopped
	log      *tail
}

// ErrUnknownNode reports a node id that is not in the cluster.
var ErrUnknownNode = errors.New("brokertest: no such node")

// StartCluster starts n combined nodes (process.roles=broker,controller)
// with a static voter set on free loopback ports, each with a t.TempDir
// log dir, and returns when every broker lists every node in its Metadata
// (registered and unfenced). The configuration is
// cascadecluster.NodeProperties' (the internal topics replicated on up to
// three nodes), except that each node advertises its front (Node.Addr);
// user topics default to Kafka's defaults (default.replication.factor=1,
// min.insync.replicas=1), which WithOverrides changes. Every node is
// killed when the test ends.
func StartCluster(t testing.TB, n int, opts ...ClusterOption) *Cluster {
	t.Helper()
	s := settings(t, n, opts)
	if s.netns {
		t.Fatal("brokertest: WithNetworkNamespaces is for StartProcessCluster; StartCluster's nodes are isolated by their links")
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.startTimeout)
	defer cancel()
	c, err := cluster.RetryPorts(ctx, func() (*Cluster, error) { return startCluster(t, n, s) })
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	t.Cleanup(c.close)
	return c
}

// settings applies opts to the defaults, failing the test on a bad node
// id.
func settings(t testing.TB, n int, opts []ClusterOption) clusterSettings {
	t.Helper()
	if n < 1 {
		t.Fatalf("brokertest: a cluster of %d nodes", n)
	}
	s := clusterSettings{overrides: map[string]string{}, nodeOverrides: map[int]map[string]string{}, startTimeout: 60 * time.Second}
	for _, o := range opts {
		o(&s)
	}
	for id := range s.nodeOverrides {
		if id < 1 || id > n {
			t.Fatalf("brokertest: WithNodeOverrides names node %d of %d", id, n)
		}
	}
	return s
}

func startCluster(t testing.TB, n int, s clusterSettings) (*Cluster, error) {
	ports, err := cluster.FreePorts(2 * n)
	if err != nil {
		return nil, err
	}
	c := &Cluster{helpers: helpers{timeout: s.startTimeout}, t: t, net: newNetwork()}
	c.helpers.c = c
	var voters []string
	for i := range n {
		nd := &Node{ID: i + 1, Dir: t.TempDir(), log: &tail{max: 64 << 10},
			ListenAddr:     net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i])),
			ControllerAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i+1]))}
		if nd.Addr, err = c.net.front(nd.ID, nd.ListenAddr); err == nil {
			nd.ctlFront, err = c.net.front(nd.ID, nd.ControllerAddr)
		}
		if err != nil {
			return nil, errors.Join(err, c.net.close())
		}
		c.nodes = append(c.nodes, nd)
		voters = append(voters, strconv.Itoa(nd.ID)+"@"+nd.ControllerAddr)
	}
	for _, nd := range c.nodes {
		nd.Props = nodeProps(nd, strings.Join(voters, ","))
		// Clients, and peers through their links, go to the front.
		nd.Props["advertised.listeners"] = "PLAINTEXT://" + nd.Addr
		for k, v := range s.overrides {
			nd.Props[k] = v
		}
		for k, v := range s.nodeOverrides[nd.ID] {
			nd.Props[k] = v
		}
	}
	// Every node at once: a combined node's start waits for the quorum,
	// which forms only when a majority runs.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, nd := range c.nodes {
		wg.Go(func() { errs[i] = c.start(nd) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		err = errors.Join(err, c.Close())
		if strings.Contains(strings.ToLower(err.Error()), "address already in use") {
			return nil, fmt.Errorf("%w: %v", cluster.ErrPortInUse, err)
		}
		return nil, fmt.Errorf("cluster did not start: %w\n%s", err, c.Logs(3000))
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.startTimeout)
	defer cancel()
	if err := cluster.WaitForBrokers(ctx, c, c.BrokerIDs()...); err != nil {
		logs := c.Logs(3000)
		return nil, fmt.Errorf("cluster did not form: %w\n%s", errors.Join(err, c.Close()), logs)
	}
	return c, nil
}

// nodeProps is a combined node's configuration: the same as each process
// of matrix/cascadecluster gets.
func nodeProps(nd *Node, voters string) map[string]string {
	return cascadecluster.NodeProperties(&cascadecluster.Node{ID: nd.ID, Addr: nd.ListenAddr, ControllerAddr: nd.ControllerAddr, Dir: nd.Dir}, voters, strings.Count(voters, ",")+1)
}

// start starts node nd's broker and waits until it lists itself in its
// own Metadata.
func (c *Cluster) start(nd *Node) error {
	cfg, err := config.New(nd.Props)
	if err != nil {
		return fmt.Errorf("node %d: config: %w", nd.ID, err)
	}
	if err := c.net.setFronts(nd.ID, true); err != nil {
		return err
	}
	var out io.Writer = nd.log
	if os.Getenv("CASCADE_TEST_LOG") != "" {
		out = io.MultiWriter(nd.log, prefixed{w: os.Stderr, prefix: "node " + strconv.Itoa(nd.ID) + " | "})
	}
	logger := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	b, err := broker.Start(ctx, broker.Config{Broker: cfg, Logger: logger, Dial: c.net.dialer(nd.ID)})
	if err != nil {
		return errors.Join(fmt.Errorf("node %d: %w", nd.ID, err), c.net.setFronts(nd.ID, false))
	}
	c.mu.Lock()
	nd.b = b
	c.mu.Unlock()
	return cluster.Poll(ctx, cluster.PollInterval, func() error { return cluster.Registered(ctx, c, nd.ID) })
}

// Node returns node id, or nil.
func (c *Cluster) Node(id int) *Node {
	if id < 1 || id > len(c.nodes) {
		return nil
	}
	return c.nodes[id-1]
}

func (c *Cluster) node(id int) (*Node, error) {
	if nd := c.Node(id); nd != nil {
		return nd, nil
	}
	return nil, fmt.Errorf("%w: %d", ErrUnknownNode, id)
}

// LogDir returns node id's log.dirs, or "".
func (c *Cluster) LogDir(id int) string {
	if nd := c.Node(id); nd != nil {
		return nd.Props["log.dirs"]
	}
	return ""
}

// Broker returns node id's running broker, or nil while it is killed or
// stopped, for in-process inspection (Partitions, Metadata).
func (c *Cluster) Broker(id int) *broker.Broker {
	nd := c.Node(id)
	if nd == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return nd.b
}

// Name describes the cluster (cluster.Cluster).
func (c *Cluster) Name() string { return "Cascade (in-process nodes)" }

// BrokerIDs returns every node's id.
func (c *Cluster) BrokerIDs() []int {
	ids := make([]int, len(c.nodes))
	for i, nd := range c.nodes {
		ids[i] = nd.ID
	}
	return ids
}

// Seeds returns every node's client address, for kgo.SeedBrokers.
func (c *Cluster) Seeds() []string {
	as := make([]string, len(c.nodes))
	for i, nd := range c.nodes {
		as[i] = nd.Addr
	}
	return as
}

// Bootstrap returns Seeds as a comma list, for bootstrap.servers.
func (c *Cluster) Bootstrap() string { return strings.Join(c.Seeds(), ",") }

// ControllerAddr returns node id's CONTROLLER listener, or "".
func (c *Cluster) ControllerAddr(id int) string {
	if nd := c.Node(id); nd != nil {
		return nd.ControllerAddr
	}
	return ""
}

// Live reports whether node id runs and is not paused.
func (c *Cluster) Live(id int) bool { return c.Broker(id) != nil && !c.net.isPaused(id) }

// Isolated reports whether node id is cut from its peers by Isolate
// (clusterctl.Isolator).
func (c *Cluster) Isolated(id int) bool { return c.net.isIsolated(id) }

// Request sends req to node id's client listener through the address it
// advertises (Node.Addr), as a client does, without retries or routing.
func (c *Cluster) Request(ctx context.Context, id int, req kmsg.Request) (kmsg.Response, error) {
	nd, err := c.node(id)
	if err != nil {
		return nil, err
	}
	return c.conns.Send(ctx, nd.Addr, req)
}

// ControllerRequest sends req to node id's controller listener, through
// a forwarder that Pause freezes as it does the client listener's.
func (c *Cluster) ControllerRequest(ctx context.Context, id int, req kmsg.Request) (kmsg.Response, error) {
	nd, err := c.node(id)
	if err != nil {
		return nil, err
	}
	return c.conns.Send(ctx, nd.ctlFront, req)
}

// take removes node id's broker from the cluster, for Kill and Stop.
func (c *Cluster) take(id int) (*Node, *broker.Broker, error) {
	nd, err := c.node(id)
	if err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	b := nd.b
	nd.b = nil
	c.mu.Unlock()
	c.conns.Drop(nd.Addr, nd.ctlFront)
	if b == nil {
		return nd, nil, nil
	}
	// A client's dial of a node that is down is refused; the caller
	// stops b whatever the error.
	return nd, b, c.net.setFronts(id, false)
}

// Kill stops node id abruptly (broker.Broker.Kill): no controlled
// shutdown or quorum hand-over, its listeners and connections closed at
// once, its logs closed unflushed and without the clean-shutdown marker,
// so a Restart recovers them as after a crash. Unlike a SIGKILL it lets
// requests in hand finish and never tears a write; Kill of
// matrix/cascadecluster is a real SIGKILL. Killing a node that is not
// running does nothing.
func (c *Cluster) Kill(id int) error {
	_, b, err := c.take(id)
	if b == nil {
		return err
	}
	c.net.set(c.net.paused, id, false) // A killed process is no longer stopped.
	return errors.Join(err, b.Kill())
}

// Stop stops node id cleanly (broker.Broker.Close): a controlled shutdown
// that moves its leaderships first, as SIGTERM to cmd/cascade does.
func (c *Cluster) Stop(id int) error {
	// A controlled shutdown needs the controller: thaw a paused node
	// first, as SIGCONT before SIGTERM.
	if err := c.Resume(id); err != nil {
		return err
	}
	_, b, err := c.take(id)
	if b == nil {
		return err
	}
	return errors.Join(err, b.Close())
}

// Pause freezes node id: every connection to and from it, its clients'
// and its peers' (their links and its fronts), goes silent and stays open,
// and new connections are accepted but carry nothing, as with a SIGSTOP of
// its process. Unlike a SIGSTOP the node itself keeps running: its timers
// fire, so it may time out its own requests, retry, and give up on its
// leaderships and its quorum role on its own clock while it hears nothing;
// what it sends waits in the frozen connections and arrives on Resume,
// unless the receiver closed the connection first. Live reports false
// meanwhile. StartProcessCluster's Pause is a real SIGSTOP.
func (c *Cluster) Pause(id int) error {
	if _, err := c.node(id); err != nil {
		return err
	}
	if c.Broker(id) == nil {
		return fmt.Errorf("brokertest: Pause of node %d, which is not running", id)
	}
	c.net.set(c.net.paused, id, true)
	return nil
}

// Resume thaws the connections Pause froze.
func (c *Cluster) Resume(id int) error {
	if _, err := c.node(id); err != nil {
		return err
	}
	c.net.set(c.net.paused, id, false)
	return nil
}

// Isolate cuts node id from every other node, as a network partition
// would, while clients still reach it: its links to and from its peers
// (Raft messages, heartbeats and AlterPartition to the active controller,
// replica fetches either way, forwarded and transaction requests) go
// silent and stay open, and its and their new dials to each other hang
// until their timeouts. Its own clients and the test's requests
// (Request, ControllerRequest) still reach it. An isolated node may answer
// from a stale view, as an isolated Kafka broker does, so Leader, WaitISR
// and Controller ask the other nodes and never name it. It lasts across
// Kill and Restart, until Heal; but Restart waits for the node's
// registration, which needs a majority of the quorum, so the Restart of
// an isolated node fails at its timeout.
func (c *Cluster) Isolate(id int) error {
	if _, err := c.node(id); err != nil {
		return err
	}
	c.net.set(c.net.isolated, id, true)
	return nil
}

// Heal undoes Isolate of node id: what waited in its connections flows
// again, and the node rejoins as across a healed partition.
func (c *Cluster) Heal(id int) error {
	if _, err := c.node(id); err != nil {
		return err
	}
	c.net.set(c.net.isolated, id, false)
	return nil
}

// Restart starts a killed or stopped node again on the same log dir,
// ports and configuration, and returns when it lists itself in its own
// Metadata again.
func (c *Cluster) Restart(_ context.Context, id int) error {
	nd, err := c.node(id)
	if err != nil {
		return err
	}
	if c.Broker(id) != nil {
		return fmt.Errorf("brokertest: Restart of running node %d", id)
	}
	if err := c.start(nd); err != nil {
		if _, b, ferr := c.take(id); b != nil {
			err = errors.Join(err, ferr, b.Kill())
		}
		return fmt.Errorf("brokertest: node %d did not restart: %w\n%s", id, err, nd.log.String())
	}
	return nil
}

// Logs returns the last n bytes of every node's log, each under a header
// naming the node.
func (c *Cluster) Logs(n int) string {
	var b strings.Builder
	for _, nd := range c.nodes {
		fmt.Fprintf(&b, "=== node %d ===\n%s\n", nd.ID, cluster.Tail(nd.log.String(), n))
	}
	return b.String()
}

// Close kills every node (cluster.Cluster); the test's cleanup calls it
// too.
func (c *Cluster) Close() error {
	var errs []error
	for _, nd := range c.nodes {
		errs = append(errs, c.Kill(nd.ID))
	}
	c.conns.Close()
	errs = append(errs, c.net.close())
	return errors.Join(errs...)
}

func (c *Cluster) close() {
	if err := c.Close(); err != nil {
		c.t.Errorf("brokertest: killing the cluster: %v", err)
	}
}

// tail keeps the last max bytes of a node's log.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// prefixed writes each log line (slog writes one line per call) with a
// prefix naming its node.
type prefixed struct {
	w      io.Writer
	prefix string
}

func (p prefixed) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, p.prefix+string(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}

package brokertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker"
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
// member of the Raft metadata quorum. It satisfies matrix/cluster.Cluster,
// so that package's helpers (WaitForBrokers, QuorumLeader, Metadata...)
// work on it too.
type Cluster struct {
	t       testing.TB
	timeout time.Duration

	mu    sync.Mutex // Guards each node's Broker.
	nodes []*Node    // Ordered by id, from 1.

	conns cluster.Conns
}

var _ cluster.Cluster = (*Cluster)(nil)

// Node is one node of a Cluster.
type Node struct {
	// ID is the node's node.id.
	ID int
	// Addr is the PLAINTEXT (client and inter-broker) listener.
	Addr string
	// ControllerAddr is the CONTROLLER listener, a voter of the quorum.
	ControllerAddr string
	// Dir is the node's log dir, kept across Kill and Restart.
	Dir string
	// Props are the properties the node starts with.
	Props map[string]string

	b   *broker.Broker // nil while killed or stopped
	log *tail
}

// ErrNotInProcess reports a control that only a node in its own process
// gives: Pause and Resume (see Cluster.Pause).
var ErrNotInProcess = errors.New("brokertest: not possible for a node inside the test's process; use matrix/cascadecluster")

// ErrUnknownNode reports a node id that is not in the cluster.
var ErrUnknownNode = errors.New("brokertest: no such node")

// StartCluster starts n combined nodes (process.roles=broker,controller)
// with a static voter set on free loopback ports, each with a t.TempDir
// log dir, and returns when every broker lists every node in its Metadata
// (registered and unfenced). The internal topics have replication factor
// 1, as Cascade's coordinators require today; user topics default to
// Kafka's defaults (default.replication.factor=1, min.insync.replicas=1),
// which WithOverrides changes. Every node is killed when the test ends.
func StartCluster(t testing.TB, n int, opts ...ClusterOption) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("brokertest: StartCluster of %d nodes", n)
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
	ctx, cancel := context.WithTimeout(context.Background(), s.startTimeout)
	defer cancel()
	c, err := cluster.RetryPorts(ctx, func() (*Cluster, error) { return startCluster(t, n, s) })
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	t.Cleanup(c.close)
	return c
}

func startCluster(t testing.TB, n int, s clusterSettings) (*Cluster, error) {
	ports, err := cluster.FreePorts(2 * n)
	if err != nil {
		return nil, err
	}
	c := &Cluster{t: t, timeout: s.startTimeout}
	var voters []string
	for i := range n {
		nd := &Node{ID: i + 1, Dir: t.TempDir(), log: &tail{max: 64 << 10},
			Addr:           net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i])),
			ControllerAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i+1]))}
		c.nodes = append(c.nodes, nd)
		voters = append(voters, strconv.Itoa(nd.ID)+"@"+nd.ControllerAddr)
	}
	for _, nd := range c.nodes {
		nd.Props = nodeProps(nd, strings.Join(voters, ","))
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
	return cascadecluster.NodeProperties(&cascadecluster.Node{ID: nd.ID, Addr: nd.Addr, ControllerAddr: nd.ControllerAddr, Dir: nd.Dir}, voters, strings.Count(voters, ",")+1)
}

// start starts node nd's broker and waits until it lists itself in its
// own Metadata.
func (c *Cluster) start(nd *Node) error {
	cfg, err := config.New(nd.Props)
	if err != nil {
		return fmt.Errorf("node %d: config: %w", nd.ID, err)
	}
	var out io.Writer = nd.log
	if os.Getenv("CASCADE_TEST_LOG") != "" {
		out = io.MultiWriter(nd.log, prefixed{w: os.Stderr, prefix: "node " + strconv.Itoa(nd.ID) + " | "})
	}
	logger := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	b, err := broker.Start(ctx, broker.Config{Broker: cfg, Logger: logger})
	if err != nil {
		return fmt.Errorf("node %d: %w", nd.ID, err)
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

// Live reports whether node id runs.
func (c *Cluster) Live(id int) bool { return c.Broker(id) != nil }

// Request sends req to node id's client listener, without retries or
// routing.
func (c *Cluster) Request(ctx context.Context, id int, req kmsg.Request) (kmsg.Response, error) {
	nd, err := c.node(id)
	if err != nil {
		return nil, err
	}
	return c.conns.Send(ctx, nd.Addr, req)
}

// ControllerRequest sends req to node id's controller listener.
func (c *Cluster) ControllerRequest(ctx context.Context, id int, req kmsg.Request) (kmsg.Response, error) {
	nd, err := c.node(id)
	if err != nil {
		return nil, err
	}
	return c.conns.Send(ctx, nd.ControllerAddr, req)
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
	c.conns.Drop(nd.Addr, nd.ControllerAddr)
	return nd, b, nil
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
	if err != nil || b == nil {
		return err
	}
	return b.Kill()
}

// Stop stops node id cleanly (broker.Broker.Close): a controlled shutdown
// that moves its leaderships first, as SIGTERM to cmd/cascade does.
func (c *Cluster) Stop(id int) error {
	_, b, err := c.take(id)
	if err != nil || b == nil {
		return err
	}
	return b.Close()
}

// Pause returns ErrNotInProcess. Pausing a node means freezing every one
// of its goroutines while its sockets stay open (SIGSTOP), and a Go
// process cannot freeze some of its own goroutines; silencing its
// listeners alone would leave the node sending heartbeats, Raft messages
// and fetches, so it would still lead. matrix/cascadecluster's Pause is
// the real one.
func (c *Cluster) Pause(int) error { return ErrNotInProcess }

// Resume returns ErrNotInProcess, as Pause.
func (c *Cluster) Resume(int) error { return ErrNotInProcess }

// Restart starts a killed or stopped node again on the same log dir,
// ports and configuration, and returns when it lists itself in its own
// Metadata again.
func (c *Cluster) Restart(_ context.Context, id int) error {
	nd, err := c.node(id)
	if err != nil {
		return err
	}
	if c.Live(id) {
		return fmt.Errorf("brokertest: Restart of running node %d", id)
	}
	if err := c.start(nd); err != nil {
		if _, b, _ := c.take(id); b != nil {
			err = errors.Join(err, b.Kill())
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
	return errors.Join(errs...)
}

func (c *Cluster) close() {
	if err := c.Close(); err != nil {
		c.t.Errorf("brokertest: killing the cluster: %v", err)
	}
}

// Client returns a franz-go client seeded with every node, closed when
// the test ends. opts are appended.
func (c *Cluster) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return newClient(t, c.Seeds(), opts)
}

// Admin returns a kadm client over a new franz-go client.
func (c *Cluster) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(c.Client(t))
}

// ctx bounds one control of the cluster.
func (c *Cluster) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), c.timeout)
}

// CreateTopic creates topic with the given partitions and replication
// factor and configs (nil for none), and waits until every partition has
// a leader and a full ISR.
func (c *Cluster) CreateTopic(t testing.TB, topic string, partitions int32, rf int16, configs map[string]*string) {
	t.Helper()
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := c.Admin(t).CreateTopic(ctx, partitions, rf, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("brokertest: create topic %s: %v", topic, err)
	}
	for p := range partitions {
		if err := c.WaitISR(topic, p, int(rf)); err != nil {
			t.Fatal(err)
		}
	}
}

// partition returns a live broker's Metadata of one partition.
func (c *Cluster) partition(ctx context.Context, topic string, partition int32) (kmsg.MetadataResponseTopicPartition, error) {
	var none kmsg.MetadataResponseTopicPartition
	md, err := cluster.Metadata(ctx, c, []string{topic}, 0)
	if err != nil {
		return none, err
	}
	for _, mt := range md.Topics {
		if mt.Topic == nil || *mt.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(mt.ErrorCode); err != nil {
			return none, fmt.Errorf("topic %s: %w", topic, err)
		}
		for _, mp := range mt.Partitions {
			if mp.Partition == partition {
				return mp, kerr.ErrorForCode(mp.ErrorCode)
			}
		}
	}
	return none, fmt.Errorf("%s-%d is not in Metadata", topic, partition)
}

// Leader waits until a live node leads topic's partition and returns its
// id, as a live broker's Metadata names it.
func (c *Cluster) Leader(topic string, partition int32) (int, error) {
	ctx, cancel := c.ctx()
	defer cancel()
	leader := -1
	err := cluster.Poll(ctx, cluster.PollInterval, func() error {
		mp, err := c.partition(ctx, topic, partition)
		if err != nil {
			return err
		}
		if !c.Live(int(mp.Leader)) {
			return fmt.Errorf("%s-%d's leader is %d, not a live node", topic, partition, mp.Leader)
		}
		leader = int(mp.Leader)
		return nil
	})
	if err != nil {
		return -1, fmt.Errorf("brokertest: leader of %s-%d: %w", topic, partition, err)
	}
	return leader, nil
}

// WaitISR waits until topic's partition has a live leader and exactly n
// in-sync replicas, as a live broker's Metadata says.
func (c *Cluster) WaitISR(topic string, partition int32, n int) error {
	ctx, cancel := c.ctx()
	defer cancel()
	err := cluster.Poll(ctx, cluster.PollInterval, func() error {
		mp, err := c.partition(ctx, topic, partition)
		if err != nil {
			return err
		}
		if !c.Live(int(mp.Leader)) || len(mp.ISR) != n {
			return fmt.Errorf("%s-%d: leader %d, ISR %v", topic, partition, mp.Leader, mp.ISR)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("brokertest: ISR of %s-%d not %d: %w", topic, partition, n, err)
	}
	return nil
}

// Controller returns the active controller: the voter leading the
// metadata quorum (DescribeQuorum on the controller listeners).
func (c *Cluster) Controller() (int, error) {
	ctx, cancel := c.ctx()
	defer cancel()
	id := -1
	err := cluster.Poll(ctx, cluster.PollInterval, func() error {
		var err error
		id, _, err = cluster.QuorumLeader(ctx, c)
		return err
	})
	if err != nil {
		return -1, fmt.Errorf("brokertest: %w", err)
	}
	return id, nil
}

// ErrNotReplica reports a MoveLeader to a node that holds no replica of
// the partition.
var ErrNotReplica = errors.New("brokertest: not a replica of the partition")

// MoveLeader makes node the leader of topic's partition and waits until
// Metadata names it, as an operator does with kafka-reassign-partitions
// and kafka-leader-election.sh: a node that is not the partition's first
// (preferred) replica is made first by a reassignment that only reorders
// the replicas (AlterPartitionReassignments, KIP-455, complete at once),
// then a preferred leader election (ElectLeaders, KIP-460) moves the
// leadership. node must be a replica in the ISR; after a Kill of the
// preferred leader and its Restart, this moves the leadership back.
func (c *Cluster) MoveLeader(topic string, partition int32, node int) error {
	ctx, cancel := c.ctx()
	defer cancel()
	mp, err := c.partition(ctx, topic, partition)
	if err != nil {
		return fmt.Errorf("brokertest: move leader of %s-%d: %w", topic, partition, err)
	}
	order := []int32{int32(node)}
	for _, r := range mp.Replicas {
		if int(r) != node {
			order = append(order, r)
		}
	}
	if len(order) != len(mp.Replicas) {
		return fmt.Errorf("%w: %s-%d's replicas are %v, not node %d", ErrNotReplica, topic, partition, mp.Replicas, node)
	}
	if int(mp.Leader) == node {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.liveSeeds()...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if int(mp.Replicas[0]) != node {
		req := kadm.AlterPartitionAssignmentsReq{}
		req.Assign(topic, partition, order)
		res, err := adm.AlterPartitionAssignments(ctx, req)
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			return fmt.Errorf("brokertest: reorder the replicas of %s-%d to %v: %w", topic, partition, order, err)
		}
		err = cluster.Poll(ctx, cluster.PollInterval, func() error {
			mp, err := c.partition(ctx, topic, partition)
			if err != nil {
				return err
			}
			if int(mp.Replicas[0]) != node {
				return fmt.Errorf("Metadata names replicas %v", mp.Replicas)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("brokertest: reorder the replicas of %s-%d: %w", topic, partition, err)
		}
	}
	set := kadm.TopicsSet{}
	set.Add(topic, partition)
	err = cluster.Poll(ctx, cluster.PollInterval, func() error {
		res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
		if err != nil {
			return err
		}
		r := res[topic][partition]
		// ELECTION_NOT_NEEDED: it leads already (Metadata was behind).
		if r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded) {
			return r.Err
		}
		mp, err := c.partition(ctx, topic, partition)
		if err != nil {
			return err
		}
		if int(mp.Leader) != node {
			return fmt.Errorf("Metadata names leader %d", mp.Leader)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("brokertest: move leader of %s-%d to node %d: %w", topic, partition, node, err)
	}
	return nil
}

// liveSeeds returns the client addresses of the running nodes.
func (c *Cluster) liveSeeds() []string {
	var as []string
	for _, nd := range c.nodes {
		if c.Live(nd.ID) {
			as = append(as, nd.Addr)
		}
	}
	return as
}

// Replicas returns topic's partition's replicas, as Metadata lists them.
func (c *Cluster) Replicas(topic string, partition int32) ([]int, error) {
	ctx, cancel := c.ctx()
	defer cancel()
	mp, err := c.partition(ctx, topic, partition)
	if err != nil {
		return nil, fmt.Errorf("brokertest: replicas of %s-%d: %w", topic, partition, err)
	}
	ids := make([]int, len(mp.Replicas))
	for i, r := range mp.Replicas {
		ids[i] = int(r)
	}
	return slices.Clip(ids), nil
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

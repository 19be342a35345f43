package broker

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"

	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/handler"
	"github.com/cascade-kafka/cascade/broker/logging"
	"github.com/cascade-kafka/cascade/broker/metadata"
	"github.com/cascade-kafka/cascade/broker/quorum"
)

// clusterNode is the cluster half of a node of a multi-node KRaft cluster,
// composed of the parts its process.roles name (cluster_roles.go): a
// controller part (controller and combined nodes: a voter of the metadata
// quorum over the controller listener, the ctl replica store it feeds, and
// the active controller that runs while this node is the raft leader) and
// a broker part (broker and combined nodes: the broker replica store, the
// broker lifecycle of registration and heartbeats against the active
// controller, and forwarding of admin requests to it). A broker-only node
// is no voter: it follows the committed log as a quorum.Observer.
//
// On a combined node both stores see the same committed batches: broker is
// the broker side's (partitions, handlers), whose writes go to the active
// controller wherever it is; ctl is the controller listener's, whose
// writes run on this node's active controller or fail with NOT_CONTROLLER.
// The handler code that validates and answers CreateTopics and the other
// forwarded admin requests is the same for both; only where the write
// lands differs.
type clusterNode struct {
	bc        *config.Broker
	logger    *slog.Logger
	clusterID string
	voters    map[uint64]string
	self      int32
	dial      DialFunc // Config.Dial: every TCP connection to another node
	// ctlDial dials another node's controller listener and peerDial
	// another broker's inter-broker listener, each with that listener's
	// security (clusterDialers).
	ctlDial, peerDial DialFunc

	*controllerPart // nil on a broker-only node
	*brokerPart     // nil on a controller-only node

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// clusterKeys are the keys config marks as having no effect on the single
// node that a cluster node honours: broker registration and heartbeats,
// fencing, and the quorum's timing.
var clusterKeys = map[string]bool{
	"initial.broker.registration.timeout.ms": true, // the initial catch-up bound of a broker
	"broker.heartbeat.interval.ms":           true,
	"broker.session.timeout.ms":              true,
	"broker.rack":                            true,
	"replica.selector.class":                 true, // the leader names a consumer's follower (KIP-392)
	"controller.quorum.election.timeout.ms":  true,
	"controller.quorum.fetch.timeout.ms":     true,
	"controller.quorum.request.timeout.ms":   true,
}

// clusterIDFor returns the quorum's cluster id: cluster.id when set, else
// one derived from controller.quorum.voters, so that every voter of one
// static quorum agrees on it before anything is committed (the quorum's
// transport refuses frames of another id from the first message on). The
// first active controller commits it as the log's ClusterIDRecord.
func clusterIDFor(bc *config.Broker) string {
	if bc.ClusterID != "" {
		return bc.ClusterID
	}
	ids := make([]string, 0, len(bc.Cluster.Voters))
	for _, v := range bc.Cluster.Voters {
		ids = append(ids, strconv.Itoa(int(v.ID))+"@"+v.Addr())
	}
	slices.Sort(ids)
	sum := sha256.Sum256([]byte(fmt.Sprint(ids)))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// startClusterNode starts the parts of the node that process.roles
// names: a controller binds the controller listener, opens the metadata
// quorum under log.dirs[0] and starts the active-controller watcher; a
// broker-only node follows the quorum as an observer and returns once it
// has caught up. The broker side's lifecycle starts later
// (startBrokerSide), once the client listener is bound and the handlers
// exist.
func startClusterNode(ctx context.Context, bc *config.Broker, dial DialFunc, loggers *logging.Levels) (*clusterNode, error) {
	c := &bc.Cluster
	n := &clusterNode{bc: bc, logger: loggers.Logger("cascade.cluster"), clusterID: clusterIDFor(bc),
		voters: map[uint64]string{}, self: bc.NodeID, dial: dial}
	var err error
	if n.ctlDial, n.peerDial, err = clusterDialers(bc, dial, n.logger); err != nil {
		return nil, err
	}
	for _, v := range c.Voters {
		n.voters[uint64(v.ID)] = v.Addr()
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	if c.Roles.Broker {
		n.brokerPart = newBrokerPart(n, loggers)
	}
	ok := false
	defer func() {
		if !ok {
			n.close()
		}
	}()
	switch {
	case c.Roles.Controller:
		err = n.startController(ctx, loggers)
		if err == nil && c.Roles.Broker {
			err = n.awaitCatchUp(ctx, func(ctx context.Context) error {
				_, err := n.voterCatchUp(ctx)
				return err
			})
		}
	default:
		err = n.startObserver(ctx, loggers)
	}
	if err != nil {
		return nil, err
	}
	ok = true
	return n, nil
}

// startBrokerSide starts the broker lifecycle once env (the client
// listener's handlers) exists; the broker registers endpoints, one per
// client listener. On a combined node the controller listener
// answers forwarded requests with the same handlers over the ctl store.
func (n *clusterNode) startBrokerSide(env *handler.Env, endpoints []metadata.Endpoint) {
	n.env.Store(env)
	n.endpoints = endpoints
	if n.controllerPart != nil {
		ce := *env
		ce.Meta = n.ctl
		n.ctlEnv.Store(&ce)
	}
	n.wg.Go(n.runLifecycle)
}

// close stops the broker lifecycle, the controller, the quorum (or the
// observer) and the controller listener.
func (n *clusterNode) close() error {
	n.cancel()
	var errs []error
	if n.controllerPart != nil {
		errs = append(errs, n.controllerPart.close())
	}
	if n.brokerPart != nil && n.observer != nil {
		errs = append(errs, n.observer.Close())
	}
	n.wg.Wait()
	if n.brokerPart != nil {
		n.heartbeats.close()
		n.forwards.close()
		n.txnPeers.close()
	}
	if err := errors.Join(errs...); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, quorum.ErrStopped) {
		return err
	}
	return nil
}

// leader returns the active controller's id and controller-listener
// address as this node's quorum member knows them; ok is false while no
// leader is known.
func (n *clusterNode) leader() (id int32, addr string, ok bool) {
	l := n.leaderID()
	if l == 0 {
		return -1, "", false
	}
	return int32(l), n.voters[l], true
}

// ControllerID implements handler.Cluster: the id Metadata and
// DescribeCluster give clients as controller. Clients cannot reach a
// controller-only node (KIP-590: they send admin requests to a broker,
// which forwards them), so Kafka's KRaftMetadataCache names a random live
// broker. Cascade names the active controller while it is a live broker (a
// combined node, where admin requests then need no forwarding), else this
// broker, else the lowest live one; -1 while no active controller is
// known or no broker is live.
func (n *clusterNode) ControllerID() int32 {
	id, _, ok := n.leader()
	if !ok {
		return -1
	}
	live := n.LiveBrokers()
	isLive := func(x int32) bool {
		return slices.ContainsFunc(live, func(b handler.BrokerAddr) bool { return b.ID == x })
	}
	switch {
	case isLive(id):
		return id
	case isLive(n.self):
		return n.self
	case len(live) > 0:
		return live[0].ID
	}
	return -1
}

// LiveBrokers implements handler.Cluster: the unfenced registrations of the
// broker side's image, with their endpoint of this node's first client
// listener. Each client listener answers through a listenerView, which
// lists the endpoints of its own listener.
func (n *clusterNode) LiveBrokers() []handler.BrokerAddr {
	return n.liveOn(n.bc.BrokerListeners()[0].Name)
}

// listenerView is the handler.Cluster of one client listener: as Kafka's
// MetadataCache lists alive brokers by the listener a request came in on,
// a client of the SASL_SSL listener is given every broker's SASL_SSL
// endpoint in Metadata, FindCoordinator and DescribeCluster.
type listenerView struct {
	*clusterNode
	name string
}

func (v listenerView) LiveBrokers() []handler.BrokerAddr { return v.liveOn(v.name) }

// liveOn lists the live brokers with their endpoint of listener name; a
// broker that registered no such endpoint is left out, as Kafka's
// MetadataCache leaves out a broker without the listener.
func (n *clusterNode) liveOn(name string) []handler.BrokerAddr {
	var out []handler.BrokerAddr
	for _, b := range n.broker.Image().Brokers() {
		if b.Fenced {
			continue
		}
		for _, e := range b.Endpoints {
			if e.Name == name {
				out = append(out, handler.BrokerAddr{ID: b.ID, Host: e.Host, Port: int32(e.Port), Rack: b.Rack})
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b handler.BrokerAddr) int { return int(a.ID - b.ID) })
	return out
}

// metaApp is the quorum's Application: every committed batch goes to both
// replica stores, at its raft index.
type metaApp []*metadata.Store

func (a metaApp) Restore(s quorum.Snapshot) error {
	if len(s.Data) == 0 {
		return nil
	}
	for _, st := range a {
		if err := st.RestoreSnapshot(int64(s.Index), s.Data); err != nil {
			return err
		}
	}
	return nil
}

func (a metaApp) Apply(entries []quorum.Entry) error {
	for _, e := range entries {
		for _, st := range a {
			if err := st.ApplyCommitted(int64(e.Index), e.Data); err != nil {
				return err
			}
		}
	}
	return nil
}

func (a metaApp) Snapshot() ([]byte, error) {
	return metadata.EncodeBatch(a[0].Image().Records()), nil
}

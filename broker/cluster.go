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
	"sync/atomic"
	"time"

	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/handler"
	"github.com/cascade-kafka/cascade/broker/logging"
	"github.com/cascade-kafka/cascade/broker/metadata"
	"github.com/cascade-kafka/cascade/broker/quorum"
	"github.com/cascade-kafka/cascade/broker/wire"
)

// clusterNode is the cluster half of a combined broker,controller node of
// a multi-voter quorum: the metadata quorum (quorum.Node over the
// controller listener), the two replica metadata stores it feeds, the
// active controller that runs while this node is the raft leader, and the
// broker lifecycle (registration, heartbeats) against whichever node is.
//
// Two stores see the same committed batches: broker is the broker side's
// (partitions, handlers), whose writes go to the active controller wherever
// it is; ctl is the controller listener's, whose writes run on this node's
// active controller or fail with NOT_CONTROLLER. The handler code that
// validates and answers CreateTopics and the other forwarded admin
// requests is the same for both; only where the write lands differs.
type clusterNode struct {
	bc        *config.Broker
	logger    *slog.Logger
	clusterID string
	voters    map[uint64]string
	self      int32

	broker *metadata.Store
	ctl    *metadata.Store
	tr     *quorum.TCPTransport
	raft   *quorum.Node
	ln     net.Listener
	active *activeController

	env    atomic.Pointer[handler.Env] // the broker side's, once Start built it
	ctlEnv atomic.Pointer[handler.Env] // env with Meta = ctl

	heartbeats *ctlClient // broker lifecycle requests
	forwards   *ctlClient // forwarded admin requests and auto-creation
	txnPeers   *txnPeers  // transaction requests to other brokers

	epoch atomic.Int64 // this broker's epoch; -1 until registered

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	connsMu sync.Mutex
	conns   map[net.Conn]struct{}
}

// clusterKeys are the keys config marks as having no effect on the single
// node that a cluster node honours: broker registration and heartbeats,
// fencing, and the quorum's timing.
var clusterKeys = map[string]bool{
	"broker.heartbeat.interval.ms":          true,
	"broker.session.timeout.ms":             true,
	"broker.rack":                           true,
	"controller.quorum.election.timeout.ms": true,
	"controller.quorum.fetch.timeout.ms":    true,
	"controller.quorum.request.timeout.ms":  true,
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

// startClusterNode binds the controller listener, opens the metadata
// quorum under log.dirs[0] and starts the active-controller watcher. The
// broker side starts later (startBrokerSide), once the client listener is
// bound and the handlers exist.
func startClusterNode(ctx context.Context, bc *config.Broker, loggers *logging.Levels) (*clusterNode, error) {
	c := &bc.Cluster
	if len(c.ControllerListeners) == 0 {
		return nil, errors.New("broker: a controller needs a controller listener (controller.listener.names)")
	}
	n := &clusterNode{bc: bc, logger: loggers.Logger("cascade.cluster"), clusterID: clusterIDFor(bc),
		voters: map[uint64]string{}, self: bc.NodeID, conns: map[net.Conn]struct{}{}}
	n.epoch.Store(-1)
	for _, v := range c.Voters {
		n.voters[uint64(v.ID)] = v.Addr()
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.broker = metadata.NewReplica(&brokerWriter{n: n}, metadata.Options{Broker: bc, Logger: loggers.Logger("cascade.metadata")})
	n.active = newActiveController(n)
	n.ctl = metadata.NewReplica(&ctlWriter{a: n.active}, metadata.Options{Broker: bc, Logger: loggers.Logger("cascade.metadata")})
	timeout := c.Quorum.RequestTimeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	n.heartbeats = newCtlClient("cascade-broker-"+strconv.Itoa(int(n.self)), timeout)
	n.forwards = newCtlClient("cascade-forward-"+strconv.Itoa(int(n.self)), 30*time.Second)
	n.txnPeers = newTxnPeers(n.self)
	ok := false
	defer func() {
		if !ok {
			n.close()
		}
	}()
	var err error
	n.ln, err = wire.Listen(ctx, c.ControllerListeners[0].Addr(), int(bc.SocketReceiveBufferBytes))
	if err != nil {
		return nil, fmt.Errorf("broker: controller listener: %w", err)
	}
	n.tr, err = quorum.NewTCPTransport(quorum.TransportConfig{NodeID: uint64(n.self), Voters: n.voters,
		ClusterID: n.clusterID, Logger: loggers.Logger("cascade.quorum")})
	if err != nil {
		return nil, err
	}
	timing, err := quorum.TimingFromKafka(int(c.Quorum.ElectionTimeout.Milliseconds()), int(c.Quorum.FetchTimeout.Milliseconds()), quorum.DefaultTickInterval)
	if err != nil {
		return nil, err
	}
	n.wg.Go(func() { n.serveController() })
	n.raft, err = quorum.Open(quorum.Config{NodeID: uint64(n.self), Voters: n.voters,
		Dir: metadataDir(bc) + "/raft", ClusterID: n.clusterID, Timing: timing,
		Logger: loggers.Logger("cascade.quorum")}, metaApp{n.broker, n.ctl}, n.tr)
	if err != nil {
		return nil, err
	}
	n.wg.Go(n.active.run)
	ok = true
	return n, nil
}

// startBrokerSide starts the broker lifecycle once env (the client
// listener's handlers) exists.
func (n *clusterNode) startBrokerSide(env *handler.Env) {
	n.env.Store(env)
	ce := *env
	ce.Meta = n.ctl
	n.ctlEnv.Store(&ce)
	n.wg.Go(n.runLifecycle)
}

// close stops the broker lifecycle, the controller, the quorum and the
// controller listener.
func (n *clusterNode) close() error {
	n.cancel()
	var errs []error
	if n.ln != nil {
		errs = append(errs, n.ln.Close())
	}
	n.connsMu.Lock()
	for c := range n.conns {
		c.Close()
	}
	n.connsMu.Unlock()
	if n.raft != nil {
		errs = append(errs, n.raft.Close())
	}
	if n.tr != nil {
		errs = append(errs, n.tr.Close())
	}
	n.wg.Wait()
	n.heartbeats.close()
	n.forwards.close()
	n.txnPeers.close()
	if err := errors.Join(errs...); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, quorum.ErrStopped) {
		return err
	}
	return nil
}

// leader returns the active controller's id and controller-listener
// address as this node's quorum member knows them; ok is false while no
// leader is known.
func (n *clusterNode) leader() (id int32, addr string, ok bool) {
	l, _ := n.raft.Leader()
	if l == 0 {
		return -1, "", false
	}
	return int32(l), n.voters[l], true
}

// ControllerID implements handler.Cluster.
func (n *clusterNode) ControllerID() int32 {
	id, _, _ := n.leader()
	return id
}

// LiveBrokers implements handler.Cluster: the unfenced registrations of the
// broker side's image, with their endpoint of this node's client listener
// name, as Kafka's MetadataCache lists alive brokers of the listener the
// request came in on.
func (n *clusterNode) LiveBrokers() []handler.BrokerAddr {
	name := n.bc.BrokerListeners()[0].Name
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

package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/handler"
	"github.com/cascade-kafka/cascade/broker/logging"
	"github.com/cascade-kafka/cascade/broker/metadata"
	"github.com/cascade-kafka/cascade/broker/quorum"
	"github.com/cascade-kafka/cascade/broker/security"
	"github.com/cascade-kafka/cascade/broker/wire"
)

// controllerPart is what process.roles=controller adds to a node: a voter
// of the metadata quorum on the controller listener, the ctl replica store
// the quorum feeds, and the active controller that runs on it while this
// node leads. Its methods sit on clusterNode, which embeds it.
type controllerPart struct {
	ctl  *metadata.Store
	tr   *quorum.TCPTransport
	raft *quorum.Node
	ln   net.Listener
	sec  *security.Secured // the controller listener's security
	// authz authorizes the quorum's traffic from the controller's own
	// image, before the handlers exist; nil without an authorizer.
	authz  *acl.Authorizer
	active *activeController

	ctlEnv atomic.Pointer[handler.Env] // the handlers of forwarded requests, with Meta = ctl

	connsMu sync.Mutex
	conns   map[net.Conn]struct{}

	frameWarn warnLimiter // refused quorum frames
}

// brokerPart is what process.roles=broker adds to a node: the broker
// replica store the client listener's handlers read, the lifecycle of
// registration and heartbeats, and the clients that reach the active
// controller. On a broker-only node an observer feeds the store.
type brokerPart struct {
	broker   *metadata.Store
	observer *quorum.Observer // nil on a combined node: the voter feeds the store

	env atomic.Pointer[handler.Env] // the broker side's, once Start built it
	// endpoints are the client listeners' advertised endpoints, which the
	// broker registers; set with env.
	endpoints []metadata.Endpoint

	heartbeats *ctlClient // broker lifecycle requests
	forwards   *ctlClient // forwarded admin requests and auto-creation
	txnPeers   *txnPeers  // transaction requests to other brokers

	epoch atomic.Int64 // this broker's epoch; -1 until registered
	// previousEpoch is the epoch the log dirs' clean shutdown recorded,
	// -1 after a crash: the registration's PreviousBrokerEpoch.
	previousEpoch int64
}

func newBrokerPart(n *clusterNode, loggers *logging.Levels) *brokerPart {
	timeout := n.bc.Cluster.Quorum.RequestTimeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	p := &brokerPart{
		broker:     metadata.NewReplica(&brokerWriter{n: n}, metadata.Options{Broker: n.bc, Logger: loggers.Logger("cascade.metadata")}),
		heartbeats: newCtlClient("cascade-broker-"+strconv.Itoa(int(n.self)), timeout, n.ctlDial),
		forwards:   newCtlClient("cascade-forward-"+strconv.Itoa(int(n.self)), 30*time.Second, n.ctlDial),
		txnPeers:   newTxnPeers(n.self, n.peerDial),
	}
	p.epoch.Store(-1)
	p.previousEpoch = -1
	return p
}

// startController binds the controller listener, opens the metadata
// quorum under log.dirs[0] and starts the active-controller watcher.
func (n *clusterNode) startController(ctx context.Context, loggers *logging.Levels) error {
	c := &n.bc.Cluster
	if len(c.ControllerListeners) == 0 {
		return errors.New("broker: a controller needs a controller listener (controller.listener.names)")
	}
	p := &controllerPart{conns: map[net.Conn]struct{}{}}
	n.controllerPart = p
	p.active = newActiveController(n)
	p.ctl = metadata.NewReplica(&ctlWriter{a: p.active}, metadata.Options{Broker: n.bc, Logger: loggers.Logger("cascade.metadata")})
	p.authz = newAuthorizer(n.bc, p.ctl)
	var err error
	if p.sec, err = n.controllerSecurity(c.ControllerListeners[0]); err != nil {
		return fmt.Errorf("broker: controller listener: %w", err)
	}
	p.ln, err = wire.Listen(ctx, c.ControllerListeners[0].Addr(), int(n.bc.SocketReceiveBufferBytes))
	if err != nil {
		return fmt.Errorf("broker: controller listener: %w", err)
	}
	p.tr, err = quorum.NewTCPTransport(quorum.TransportConfig{NodeID: uint64(n.self), Voters: n.voters,
		ClusterID: n.clusterID, Dial: n.ctlDial, Logger: loggers.Logger("cascade.quorum")})
	if err != nil {
		return err
	}
	timing, err := quorum.TimingFromKafka(int(c.Quorum.ElectionTimeout.Milliseconds()), int(c.Quorum.FetchTimeout.Milliseconds()), quorum.DefaultTickInterval)
	if err != nil {
		return err
	}
	app := metaApp{p.ctl}
	if n.brokerPart != nil {
		app = metaApp{n.broker, p.ctl}
	}
	// metadata.log.max.record.bytes.between.snapshots: a snapshot once
	// that much metadata was applied since the last, and no more than that
	// kept in the log before it.
	snapBytes := uint64(max(0, c.MetadataLog.SnapshotMaxNewRecordBytes))
	p.raft, err = quorum.Open(quorum.Config{NodeID: uint64(n.self), Voters: n.voters,
		Dir: metadataDir(n.bc) + "/raft", ClusterID: n.clusterID, Timing: timing,
		SnapshotBytes: snapBytes, RetainBytes: snapBytes,
		Logger: loggers.Logger("cascade.quorum")}, app, p.tr)
	if err != nil {
		return err
	}
	// Served once the quorum member exists: connections that came
	// earlier wait in the listener's backlog.
	n.wg.Go(func() { n.serveController() })
	n.wg.Go(p.active.run)
	return nil
}

// close stops the quorum and the controller listener.
func (p *controllerPart) close() error {
	var errs []error
	if p.ln != nil {
		errs = append(errs, p.ln.Close())
	}
	if p.sec != nil {
		p.sec.Close()
	}
	p.connsMu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.connsMu.Unlock()
	if p.raft != nil {
		errs = append(errs, p.raft.Close())
	}
	if p.tr != nil {
		errs = append(errs, p.tr.Close())
	}
	return errors.Join(errs...)
}

// startObserver starts following the quorum as an observer, for a
// broker-only node, and waits until the broker store holds what was
// committed when it started, so the client listener never answers from an
// image older than the broker's last run: as Kafka's BrokerServer, which
// waits for the initial metadata catch-up before it serves. The wait is
// bounded by initial.broker.registration.timeout.ms.
func (n *clusterNode) startObserver(ctx context.Context, loggers *logging.Levels) error {
	c := &n.bc.Cluster
	if len(n.voters) == 0 {
		return errors.New("broker: a broker-only node needs controller.quorum.voters")
	}
	timeout := c.Quorum.RequestTimeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	var err error
	n.observer, err = quorum.StartObserver(quorum.ObserverConfig{NodeID: n.self, Voters: n.voters, ClusterID: n.clusterID,
		MaxBytes: 1 << 20, MaxWait: observerWait, RequestTimeout: timeout, Backoff: c.Quorum.RetryBackoff, Dial: n.ctlDial,
		Logger: loggers.Logger("cascade.quorum")}, metaApp{n.broker})
	if err != nil {
		return err
	}
	return n.awaitCatchUp(ctx, func(ctx context.Context) error {
		select {
		case <-n.observer.CaughtUp():
			return nil
		case <-n.observer.Done():
			return fmt.Errorf("broker: following the metadata quorum: %w", n.observer.Err())
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// awaitCatchUp runs wait, the node's initial metadata catch-up: until it
// returns, the broker store may hold less than the quorum had committed
// when this node started, so the client listener does not serve yet (a
// restarted node would list itself as live and lead its partitions at
// their old epochs until the log replayed past its fencing), as Kafka's
// BrokerServer waits for its initial catch-up. The wait is bounded by
// initial.broker.registration.timeout.ms, after which the node gives up
// starting, as Kafka's broker exits when it cannot register in time.
func (n *clusterNode) awaitCatchUp(ctx context.Context, wait func(context.Context) error) error {
	bound := n.bc.Cluster.InitialRegistrationTimeout
	if bound <= 0 {
		bound = time.Minute
	}
	wctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	start := time.Now()
	err := wait(wctx)
	switch {
	case err == nil:
		n.logger.Info("broker caught up with the metadata log", "metadata.offset", n.broker.Image().Offset, "took", time.Since(start))
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case wctx.Err() != nil:
		return fmt.Errorf("broker: the metadata log was not caught up within initial.broker.registration.timeout.ms (%v): no active controller of controller.quorum.voters answered", bound)
	}
	return err
}

// observerKeys are the keys a broker-only node honours beyond clusterKeys:
// the pause between voters it fetches from.
var observerKeys = map[string]bool{
	"controller.quorum.retry.backoff.ms": true,
}

// observerWait is how long a voter holds a broker-only node's fetch while
// nothing new commits, as Kafka's observers' fetch wait
// (controller.quorum.fetch.timeout.ms bounds it; KafkaRaftClient's fetch
// max wait is 500 ms).
const observerWait = 500 * time.Millisecond

// leaderID returns the raft leader this node knows: its own quorum
// member's view on a controller, the last observer answer's on a
// broker-only node; 0 when none.
func (n *clusterNode) leaderID() uint64 {
	if n.controllerPart != nil {
		l, _ := n.raft.Leader()
		return l
	}
	l, _ := n.observer.Leader()
	return l
}

// startControllerSide makes env (the handlers of a controller-only node,
// with Meta = ctl and no partitions or coordinators) answer the forwarded
// admin requests on the controller listener.
func (n *clusterNode) startControllerSide(env *handler.Env) {
	n.ctlEnv.Store(env)
}

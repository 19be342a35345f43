package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cascade-kafka/cascade/broker/controller"
	"github.com/cascade-kafka/cascade/broker/metadata"
	"github.com/cascade-kafka/cascade/broker/quorum"
)

// controllerTick is how often the active controller runs controller.Tick
// (session timeouts, periodic elections). Kafka's controller checks for a
// stale broker on every event-loop pass; a quarter second keeps fencing
// within that of broker.session.timeout.ms.
const controllerTick = 250 * time.Millisecond

// activeController runs package controller's state machine while this node
// is the quorum's leader. Operations are serialised: each plans against
// the latest image of the controller store, proposes its batch and waits
// until it is committed and applied before the next one plans, so the
// image every plan sees includes every batch this controller proposed.
//
// Offsets: a batch's offset is its raft index (the stores' Image.Offset).
// The next batch's offset is taken to be the image's Offset plus one,
// which is exact once the activation barrier (the first batch of a term)
// has applied: after it the only entries of the term are this
// controller's own proposals, one at a time. Broker epochs (the offset of
// the RegisterBrokerRecord, as Kafka) are therefore raft indexes, unique
// and increasing.
type activeController struct {
	n *clusterNode

	mu   sync.Mutex
	c    *controller.Controller // nil when not active
	term uint64
	seed int64

	silence silence // brokers not heard from in this term
}

func newActiveController(n *clusterNode) *activeController {
	return &activeController{n: n, seed: time.Now().UnixNano(), silence: newSilence()}
}

// isActive reports whether this node's controller is active in the
// quorum's current term: its activation barrier is committed.
func (a *activeController) isActive() bool {
	leader, term := a.n.raft.Leader()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.c != nil && leader == uint64(a.n.self) && a.term == term
}

// notController is the error of an operation on a node that is not (or no
// longer) the active controller.
func notController(format string, args ...any) error {
	return &metadata.Error{Kind: metadata.ErrNotController, Message: fmt.Sprintf(format, args...)}
}

// run follows elections: it activates a new Controller when this node
// becomes leader of a new term, deactivates it when leadership moves, and
// ticks the active one.
func (a *activeController) run() {
	t := time.NewTicker(controllerTick)
	defer t.Stop()
	for {
		changed := a.n.raft.LeaderChanged()
		select {
		case <-a.n.ctx.Done():
			return
		case <-a.n.raft.Done():
			return
		case <-changed:
		case <-t.C:
		}
		leader, term := a.n.raft.Leader()
		a.mu.Lock()
		isActive := a.c != nil && a.term == term
		a.mu.Unlock()
		switch {
		case leader != uint64(a.n.self):
			a.mu.Lock()
			if a.c != nil {
				a.n.logger.Info("no longer the active controller", "leader", leader, "term", term)
			}
			a.c = nil
			a.mu.Unlock()
		case !isActive:
			a.activate(term)
		default:
			a.tick()
		}
	}
}

// activate starts a Controller for term once the activation barrier is
// committed: one batch (the cluster id on a new log, and the
// metadata.version feature level) whose commit means every entry of
// earlier terms has been applied here, so the first plan sees all of them.
func (a *activeController) activate(term uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seed++
	cfg := controller.DefaultConfig(a.n.self, rand.New(rand.NewSource(a.seed)))
	bc := a.n.bc
	cfg.SessionTimeout = bc.Cluster.SessionTimeout
	cfg.HeartbeatInterval = bc.Cluster.HeartbeatInterval
	cfg.NumPartitions = bc.NumPartitions
	cfg.DefaultReplicationFactor = max(1, bc.DefaultReplicationFactor)
	cfg.AutoLeaderRebalance = bc.Cluster.Replication.AutoLeaderRebalance
	cfg.LeaderImbalanceCheckInterval = bc.Cluster.Replication.LeaderImbalanceCheckInterval
	cfg.UncleanLeaderElection = bc.Cluster.Replication.UncleanLeaderElection
	cfg.UncleanLeaderElectionInterval = bc.Cluster.Replication.UncleanLeaderElectionInterval
	cfg.Broker = bc
	c, err := controller.New(cfg)
	if err != nil {
		a.n.logger.Error("starting the controller", "err", err)
		return
	}
	var recs []metadata.Record
	if a.n.ctl.Image().ClusterID == "" {
		recs = append(recs, metadata.ClusterIDRecord{ClusterID: a.n.clusterID})
	}
	recs = append(recs, metadata.FeatureLevelRecord{Name: "metadata.version", Level: metadata.MetadataVersion})
	start := time.Now()
	ctx, cancel := context.WithTimeout(a.n.ctx, bc.Cluster.SessionTimeout)
	defer cancel()
	if _, err := a.n.raft.Propose(ctx, metadata.EncodeBatch(recs)); err != nil {
		a.n.logger.Info("controller activation not committed", "term", term, "err", err)
		return
	}
	a.c, a.term = c, term
	a.silence.reset(time.Now())
	a.n.logger.Info("active controller", "node.id", a.n.self, "term", term, "activation", time.Since(start),
		"metadata.offset", a.n.ctl.Image().Offset)
	// Brokers whose process went away with the previous controller
	// would otherwise wait out broker.session.timeout.ms.
	for _, b := range a.n.ctl.Image().Brokers() {
		if !b.Fenced && b.ID != a.n.self {
			a.n.wg.Go(func() { a.probeGone(b.ID, b.Epoch) })
		}
	}
}

// do runs one operation: plan against the latest image, propose the
// records, wait for the commit. plan receives the offset the batch will
// have.
func (a *activeController) do(ctx context.Context, plan func(c *controller.Controller, img *metadata.Image, now time.Time, next int64) ([]metadata.Record, error)) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	leader, term := a.n.raft.Leader()
	if a.c == nil || leader != uint64(a.n.self) || term != a.term {
		return notController("The active controller is %d, not %d", int32(leader), a.n.self)
	}
	img := a.n.ctl.Image()
	recs, err := plan(a.c, img, time.Now(), img.Offset+1)
	if err != nil || len(recs) == 0 {
		return err
	}
	// Every operation holds the controller while its batch commits, so
	// none may wait without bound: one stuck proposal would hold every
	// heartbeat behind it.
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, max(a.n.bc.Cluster.SessionTimeout, time.Second))
		defer cancel()
	}
	if _, err := a.n.raft.Propose(ctx, metadata.EncodeBatch(recs)); err != nil {
		// The controller's sessions may now be ahead of the log, and a
		// batch that timed out may still commit, after which the next
		// batch's offset is no longer the image's plus one: the next
		// pass of run activates a new Controller behind a barrier.
		a.c = nil
		if errors.Is(err, quorum.ErrNotLeader) || errors.Is(err, quorum.ErrLeadershipLost) {
			return notController("Leadership moved while proposing: %v", err)
		}
		return &metadata.Error{Kind: metadata.ErrStorage, Message: "proposing to the metadata quorum: " + err.Error()}
	}
	return nil
}

// tick runs controller.Tick: fences brokers whose session lapsed.
func (a *activeController) tick() {
	var reply controller.TickReply
	err := a.do(a.n.ctx, func(c *controller.Controller, img *metadata.Image, now time.Time, _ int64) ([]metadata.Record, error) {
		recs, r, err := c.Tick(img, now)
		reply = r
		return recs, err
	})
	if err != nil && !errors.Is(err, metadata.ErrNotController) {
		a.n.logger.Warn("controller tick", "err", err)
	}
	if len(reply.Fenced) > 0 {
		a.n.logger.Info("fenced brokers whose session lapsed", "brokers", reply.Fenced)
	}
	if reply.Elections > 0 {
		a.n.logger.Info("elected leaders by the periodic preferred-leader or unclean check", "partitions", reply.Elections)
	}
	a.probeSilent()
}

// probeGone reports broker id gone (controller.BrokerGone) when a dial of
// its controller listener (a broker-only node's registered listener) is
// refused (dialRefused): the process is not there, as when its connection
// to this controller was reset. Any other outcome (it keeps answering, the
// dial times out) leaves it to its session timeout.
func (a *activeController) probeGone(id int32, epoch int64) {
	addr, ok := a.n.voters[uint64(id)]
	if !ok {
		// A broker-only node: the first endpoint it registered.
		b, found := a.n.ctl.Image().Broker(id)
		if !found || len(b.Endpoints) == 0 {
			return
		}
		addr = net.JoinHostPort(b.Endpoints[0].Host, strconv.Itoa(int(b.Endpoints[0].Port)))
	}
	if !dialRefused(a.n.ctx, a.n.dial, addr) {
		return
	}
	err := a.do(a.n.ctx, func(c *controller.Controller, img *metadata.Image, _ time.Time, _ int64) ([]metadata.Record, error) {
		if b, ok := img.Broker(id); !ok || b.Fenced {
			return nil, nil
		}
		return c.BrokerGone(img, id, epoch)
	})
	if err == nil {
		a.n.logger.Info("fenced a broker whose process is gone", "broker", id, "epoch", epoch)
	} else if !errors.Is(err, metadata.ErrNotController) {
		a.n.logger.Info("broker gone not applied", "broker", id, "err", err)
	}
}

// dialRefused reports whether a dial of addr is refused, probing again
// after each of goneProbeWaits while the dial succeeds or is reset: a
// process killed at once closes its sockets in no set order, so the
// connection whose end started the probe may close while its listener
// still accepts (or resets what it had accepted).
func dialRefused(ctx context.Context, dial DialFunc, addr string) bool {
	for _, wait := range goneProbeWaits {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		conn, err := dialWithin(ctx, dial, addr, time.Second)
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			return true
		case err == nil:
			conn.Close()
		case !errors.Is(err, syscall.ECONNRESET):
			return false // a timeout: not known to be gone
		}
	}
	return false
}

// goneProbeWaits are the pauses before each of dialRefused's dials: about
// two seconds in all, well inside any session timeout.
var goneProbeWaits = []time.Duration{0, 100 * time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond, time.Second}

// ctlWriter is the controller store's metadata.Writer: each write runs on
// this node's active controller (NOT_CONTROLLER elsewhere).
type ctlWriter struct{ a *activeController }

func (w *ctlWriter) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(w.a.n.ctx, 30*time.Second)
}

func (w *ctlWriter) CreateTopics(reqs []metadata.CreateTopic, validateOnly bool) []metadata.CreateResult {
	ctx, cancel := w.ctx()
	defer cancel()
	var res []metadata.CreateResult
	err := w.a.do(ctx, func(c *controller.Controller, img *metadata.Image, _ time.Time, _ int64) ([]metadata.Record, error) {
		recs, r, err := c.CreateTopics(img, reqs, validateOnly)
		res = r
		return recs, err
	})
	if err != nil {
		res = make([]metadata.CreateResult, len(reqs))
		for i, r := range reqs {
			res[i] = metadata.CreateResult{Name: r.Name, Err: err}
		}
	}
	return res
}

func (w *ctlWriter) DeleteTopics(reqs []metadata.DeleteTopic) []metadata.DeleteResult {
	ctx, cancel := w.ctx()
	defer cancel()
	var res []metadata.DeleteResult
	err := w.a.do(ctx, func(c *controller.Controller, img *metadata.Image, _ time.Time, _ int64) ([]metadata.Record, error) {
		recs, r, err := c.DeleteTopics(img, reqs)
		res = r
		return recs, err
	})
	if err != nil {
		res = make([]metadata.DeleteResult, len(reqs))
		for i, r := range reqs {
			res[i] = metadata.DeleteResult{Name: r.Name, ID: r.ID, Err: err}
		}
	}
	return res
}

func (w *ctlWriter) CreatePartitions(reqs []metadata.CreatePartitions, validateOnly bool) []metadata.CreatePartitionsResult {
	ctx, cancel := w.ctx()
	defer cancel()
	var res []metadata.CreatePartitionsResult
	err := w.a.do(ctx, func(c *controller.Controller, img *metadata.Image, _ time.Time, _ int64) ([]metadata.Record, error) {
		recs, r, err := c.CreatePartitions(img, reqs, validateOnly)
		res = r
		return recs, err
	})
	if err != nil {
		res = make([]metadata.CreatePartitionsResult, len(reqs))
		for i, r := range reqs {
			res[i] = metadata.CreatePartitionsResult{Name: r.Name, Err: err}
		}
	}
	return res
}

func (w *ctlWriter) IncrementalAlterTopicConfigs(topic string, ops []metadata.ConfigOp, validateOnly bool) error {
	ctx, cancel := w.ctx()
	defer cancel()
	return w.a.do(ctx, func(c *controller.Controller, img *metadata.Image, _ time.Time, _ int64) ([]metadata.Record, error) {
		recs, err := c.IncrementalAlterTopicConfigs(img, topic, ops)
		if validateOnly {
			return nil, err
		}
		return recs, err
	})
}

func (w *ctlWriter) AlterTopicConfigs(topic string, configs map[string]*string, validateOnly bool) error {
	ctx, cancel := w.ctx()
	defer cancel()
	return w.a.do(ctx, func(c *controller.Controller, img *metadata.Image, _ time.Time, _ int64) ([]metadata.Record, error) {
		recs, err := c.AlterTopicConfigs(img, topic, configs)
		if validateOnly {
			return nil, err
		}
		return recs, err
	})
}

// AllocateProducerIDs reserves a block for this node's own broker side.
func (w *ctlWriter) AllocateProducerIDs() (int64, int64, error) {
	if w.a.n.brokerPart == nil {
		return 0, 0, &metadata.Error{Kind: metadata.ErrInvalidRequest, Message: "a controller-only node has no broker to allocate producer ids for"}
	}
	return w.a.allocateProducerIDs(w.a.n.self, w.a.n.epoch.Load())
}

func (a *activeController) allocateProducerIDs(id int32, epoch int64) (int64, int64, error) {
	ctx, cancel := context.WithTimeout(a.n.ctx, 30*time.Second)
	defer cancel()
	var block controller.ProducerIDBlock
	err := a.do(ctx, func(c *controller.Controller, img *metadata.Image, _ time.Time, _ int64) ([]metadata.Record, error) {
		recs, b, err := c.AllocateProducerIDs(img, id, epoch)
		block = b
		return recs, err
	})
	return block.First, int64(block.Size), err
}

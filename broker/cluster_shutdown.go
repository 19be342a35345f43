package broker

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// resignBound bounds how long a stopping active controller waits for the
// quorum leadership it hands over to be taken.
const resignBound = 5 * time.Second

// controlledShutdown is the clean stop of a cluster node, before its
// listeners close: as Kafka's BrokerServer.shutdown with
// controlled.shutdown.enable, the broker side asks the active controller to
// let it go (BrokerHeartbeat with WantShutDown) until the controller answers
// ShouldShutDown. The controller first records the broker in controlled
// shutdown (a BrokerRegistrationChangeRecord with InControlledShutdown) and
// moves its leaderships to other ISR members (with replication factor 1 its
// partitions become leaderless), then, once it leads nothing and the other
// brokers have caught up past that change, fences it, so it leaves
// Metadata at once rather than after broker.session.timeout.ms. Kafka waits
// up to five minutes for that answer (KafkaBroker.shutdown's timeout);
// Cascade waits at most broker.session.timeout.ms, the time after which the
// controller would fence a broker that went silent anyway.
//
// A node that is also the active controller then hands the quorum
// leadership to the most caught-up live voter (quorum.TransferLeadership),
// as Kafka's KafkaRaftClient resigns on shutdown, so the next controller
// takes over at once instead of after controller.quorum.fetch.timeout.ms.
func (n *clusterNode) controlledShutdown() {
	start := time.Now()
	switch ok, err := n.askToShutDown(n.bc.Cluster.SessionTimeout); {
	case ok:
		n.logger.Info("controlled shutdown: the controller let this broker go", "took", time.Since(start))
	case err != nil:
		n.logger.Warn("controlled shutdown not approved; stopping anyway", "took", time.Since(start), "err", err)
	}
	if id, _, ok := n.leader(); !ok || id != n.self {
		return
	}
	ctx, cancel := context.WithTimeout(n.ctx, resignBound)
	defer cancel()
	to, err := n.raft.TransferLeadership(ctx)
	switch {
	case err != nil:
		n.logger.Warn("handing over the quorum leadership", "to", to, "err", err)
	case to != 0:
		n.logger.Info("handed the quorum leadership over", "to", to)
	}
}

// askToShutDown heartbeats with WantShutDown until the controller answers
// ShouldShutDown or bound passes. ok is false, with a nil error, for a
// broker that never registered: there is nothing to shut down.
func (n *clusterNode) askToShutDown(bound time.Duration) (ok bool, err error) {
	if n.epoch.Load() < 0 {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(n.ctx, bound)
	defer cancel()
	wait := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			if err == nil {
				err = errors.New("the controller did not answer ShouldShutDown")
			}
			return false, err
		case <-time.After(wait):
		}
		// As BrokerLifecycleManager in PENDING_CONTROLLED_SHUTDOWN: the
		// first answers come quickly, then heartbeats resume their pace.
		wait = min(n.bc.Cluster.HeartbeatInterval, 200*time.Millisecond)
		_, addr, known := n.leader()
		if !known {
			err = errors.New("no active controller known")
			continue
		}
		r := kmsg.NewPtrBrokerHeartbeatRequest()
		r.SetVersion(1)
		r.BrokerID, r.BrokerEpoch = n.self, n.epoch.Load()
		r.CurrentMetadataOffset = n.broker.Image().Offset
		r.WantShutdown = true
		resp, rerr := n.heartbeats.do(ctx, addr, r)
		if rerr != nil {
			err = rerr
			continue
		}
		hr := resp.(*kmsg.BrokerHeartbeatResponse)
		switch {
		case hr.ErrorCode == kerr.StaleBrokerEpoch.Code:
			// Fenced and replaced: the controller no longer counts
			// this incarnation, so there is nothing to wait for.
			return false, kerr.StaleBrokerEpoch
		case hr.ErrorCode != 0:
			err = kerr.ErrorForCode(hr.ErrorCode)
		case hr.ShouldShutdown:
			return true, nil
		}
	}
}

package broker

import (
	"context"

	"github.com/cascade-kafka/cascade/broker/handler"
	"github.com/cascade-kafka/cascade/broker/logging"
	"github.com/cascade-kafka/cascade/broker/metrics"
)

// startControllerOnly starts a process.roles=controller node, as Kafka's
// ControllerServer: a voter of the metadata quorum serving the controller
// listener only. It binds no client listener, hosts no partitions and no
// coordinators, and does not register as a broker, so Metadata never lists
// it. The admin requests brokers forward are answered by the same handlers
// as a broker's, over the controller's store.
func (b *Broker) startControllerOnly(ctx context.Context, loggers *logging.Levels) error {
	cfg, bc := b.cfg, b.cfg.Broker
	var err error
	if b.cluster, err = startClusterNode(ctx, bc, cfg.Dial, loggers); err != nil {
		return err
	}
	b.meta = b.cluster.ctl
	b.env = &handler.Env{
		NodeID:  bc.NodeID,
		Config:  bc,
		Meta:    b.cluster.ctl,
		Metrics: metrics.New(cfg.Registry),
		Now:     cfg.Now,
		Logger:  loggers.Logger("cascade.handler"),
		Loggers: loggers,
		// The controller authorizes the requests its listener serves
		// with the connection's identity, as Kafka's ControllerApis.
		Authorizer: newAuthorizer(bc, b.cluster.ctl),
	}
	b.cluster.startControllerSide(b.env)
	if cfg.AdminListener != "" {
		if err := b.startAdmin(cfg.AdminListener, cfg.Registry); err != nil {
			return err
		}
	}
	logUnserved(b.logger, bc, true)
	b.logger.Info("cascade controller started", "node.id", bc.NodeID, "controller.listener", b.cluster.ln.Addr().String(),
		"log.dirs", bc.LogDirs, "cluster.id", b.cluster.clusterID)
	return nil
}

package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/security"
	"github.com/cascade-kafka/cascade/broker/security/sasl"
)

// Security between the nodes of a cluster, as Kafka's brokers and
// controllers secure it: every listener of listeners is bound and served
// with its own security; a broker reaches another broker (replica fetching,
// transaction markers and verification) on that broker's endpoint of
// inter.broker.listener.name (or the listener of
// security.inter.broker.protocol) with that listener's client security and
// sasl.mechanism.inter.broker.protocol; the quorum between controllers and
// a broker's registration, heartbeats, AlterPartition and forwarded
// requests go over the first of controller.listener.names with its
// protocol from listener.security.protocol.map and
// sasl.mechanism.controller.protocol, served with that listener's security
// on the controller side. The username and password a node presents are
// its listener.name.<listener>.<mechanism>.sasl.jaas.config's, as Kafka's
// broker logs in with them.

// clusterDialers returns the dialers of a cluster node's connections to the
// controller listener and to other brokers' inter-broker listener: dial (nil
// is a net.Dialer) followed by the listener's TLS handshake and SASL
// exchange. A configuration whose client side cannot be built (a store
// that does not load, a JAAS config without this node's credentials, a
// mechanism Cascade does not speak) is refused at start.
//
// A connection refused for its credentials or certificate is logged (a
// warning, at most one per address every frameWarnEvery) on logger, when
// set: the peer keeps refusing until an operator fixes one side.
func clusterDialers(bc *config.Broker, dial DialFunc, logger *slog.Logger) (ctl, peer DialFunc, err error) {
	c := &bc.Cluster
	if len(c.ControllerListenerNames) == 0 {
		return nil, nil, errors.New("broker: a cluster node needs controller.listener.names")
	}
	name := c.ControllerListenerNames[0]
	mech, _ := bc.ListenerValue(name, "sasl.mechanism.controller.protocol")
	cc, err := security.NewClient(bc, name, c.ControllerSecurityProtocol, mech)
	if err != nil {
		return nil, nil, fmt.Errorf("broker: controller listener: %w", err)
	}
	ctl = warnRefused(cc.Dial(dial), "controller listener "+name, logger)
	if !c.Roles.Broker {
		return ctl, nil, nil
	}
	mech, _ = bc.ListenerValue(c.InterBrokerListener, "sasl.mechanism.inter.broker.protocol")
	pc, err := security.NewClient(bc, c.InterBrokerListener, c.InterBrokerSecurityProtocol, mech)
	if err != nil {
		return nil, nil, fmt.Errorf("broker: inter-broker listener: %w", err)
	}
	return ctl, warnRefused(pc.Dial(dial), "inter-broker listener "+c.InterBrokerListener, logger), nil
}

// warnRefused logs the dials of d that fail to authenticate.
func warnRefused(d DialFunc, what string, logger *slog.Logger) DialFunc {
	if logger == nil {
		return d
	}
	var warn warnLimiter
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := d(ctx, network, address)
		if err != nil && errors.Is(err, security.ErrPeerAuthentication) && warn.allow(address, time.Now()) {
			logger.Warn("a peer refused this node's credentials or certificate on the "+what+
				"; check the listener's sasl.jaas.config username and password, and its key and trust stores",
				"address", address, "err", err)
		}
		return conn, err
	}
}

// controllerSecurity builds the server side of the controller listener.
// Its SCRAM credentials are those of the controller's image.
func (n *clusterNode) controllerSecurity(l config.Listener) (*security.Secured, error) {
	return security.Listener(n.bc, l, security.Options{
		Scram: func(mechanism, user string) (sasl.ScramCredential, bool) {
			return n.ctl.Image().ScramCredential(mechanism, user)
		},
		Logger: n.logger,
	})
}

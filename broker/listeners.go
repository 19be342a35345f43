package broker

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/handler"
	"github.com/cascade-kafka/cascade/broker/metadata"
	"github.com/cascade-kafka/cascade/broker/security"
	"github.com/cascade-kafka/cascade/broker/security/sasl"
	"github.com/cascade-kafka/cascade/broker/wire"
)

// boundListener is one client listener after bind, with its security.
type boundListener struct {
	cfg config.Listener
	ln  net.Listener
	sec *security.Secured
}

// checkClusterSecurity checks what a node of a multi-node cluster needs
// of its listeners' security beyond a single node's: nothing more is
// refused, since every listener is served with its own security and the
// connections between nodes take the inter-broker and controller
// listeners' (cluster_security.go); a client side that cannot be built is
// refused when the node starts (clusterDialers).
func checkClusterSecurity(bc *config.Broker) error {
	if bc.Cluster.Standalone() {
		return nil
	}
	_, _, err := clusterDialers(bc, nil, nil)
	return err
}

// bindExtra binds the client listeners after the first (which Start binds
// as b.ln): a node serves every listener of listeners, each with the
// security of its protocol, and advertises on each its own address.
func (b *Broker) bindExtra(ctx context.Context, bc *config.Broker, listeners []config.Listener) error {
	for _, l := range listeners[1:] {
		ln, err := wire.Listen(ctx, l.Addr(), int(bc.SocketReceiveBufferBytes))
		if err != nil {
			return fmt.Errorf("broker: listener %s: %w", l.Name, err)
		}
		b.extra = append(b.extra, &boundListener{cfg: l, ln: ln})
	}
	return nil
}

// secureListeners builds the security of every bound client listener.
func (b *Broker) secureListeners(bc *config.Broker, first config.Listener) error {
	opts := security.Options{
		Scram: func(mechanism, user string) (sasl.ScramCredential, bool) {
			return b.meta.Image().ScramCredential(mechanism, user)
		},
		Now:    b.cfg.Now,
		Logger: b.logger,
	}
	b.first = &boundListener{cfg: first, ln: b.ln}
	for _, bl := range append([]*boundListener{b.first}, b.extra...) {
		sec, err := security.Listener(bc, bl.cfg, opts)
		if err != nil {
			return err
		}
		bl.sec = sec
	}
	return nil
}

// serveExtra serves the listeners after the first, each through a copy of
// env whose advertised address is that listener's, as Kafka answers
// Metadata with the endpoints of the listener a request came in on.
func (b *Broker) serveExtra(bc *config.Broker, env *handler.Env) {
	for _, bl := range b.extra {
		lenv := *env
		lenv.Host, lenv.Port = advertisedFor(bc, bl.cfg.Name, bl.ln.Addr().(*net.TCPAddr))
		wl := bl.sec.Wire
		wl.Dispatcher = &lenv
		if b.cluster != nil {
			lenv.Cluster = listenerView{clusterNode: b.cluster, name: bl.cfg.Name}
			wl.Dispatcher = &clusterDispatcher{n: b.cluster, env: &lenv}
		}
		go func() {
			if err := b.srv.ServeListener(bl.ln, wl); err != nil && !errors.Is(err, wire.ErrServerClosed) {
				b.logger.Error("client listener stopped", "listener", bl.cfg.Name, "err", err)
			}
		}()
	}
}

// closeSecurity stops watching every listener's certificate files.
func (b *Broker) closeSecurity() {
	for _, bl := range append([]*boundListener{b.first}, b.extra...) {
		if bl != nil && bl.sec != nil {
			bl.sec.Close()
		}
	}
}

// advertisedFor returns the host and port Metadata publishes on listener
// name: its advertised.listeners entry, else the bound address.
func advertisedFor(bc *config.Broker, name string, bound *net.TCPAddr) (string, int32) {
	l, ok := bc.Cluster.Advertised[name]
	return advertisedAddr(l, ok, bound)
}

// advertisedAddr is l's host and port where set (ok), else the bound
// address's; an unspecified host is published as localhost.
func advertisedAddr(l config.Listener, ok bool, bound *net.TCPAddr) (string, int32) {
	host, port := bound.IP.String(), bound.Port
	if ok && l.Host != "" {
		host = l.Host
	}
	if ok && l.Port != 0 {
		port = l.Port
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return host, int32(port)
}

// endpoints returns the advertised endpoint of every client listener, in
// the order of listeners, as a broker registers them (Kafka's
// BrokerRegistrationRequest carries every listener).
func (b *Broker) endpoints(bc *config.Broker) []metadata.Endpoint {
	var out []metadata.Endpoint
	for _, bl := range append([]*boundListener{b.first}, b.extra...) {
		host, port := advertisedFor(bc, bl.cfg.Name, bl.ln.Addr().(*net.TCPAddr))
		out = append(out, metadata.Endpoint{Name: bl.cfg.Name, Host: host, Port: uint16(port), SecurityProtocol: protocolCode(bl.cfg.SecurityProtocol)})
	}
	return out
}

// protocolCode is the number of a security protocol name in a
// registration, as Kafka's SecurityProtocol.
func protocolCode(name string) int16 {
	switch name {
	case config.ProtocolSSL:
		return metadata.ProtocolSSL
	case config.ProtocolSASLPlaintext:
		return metadata.ProtocolSASLPlaintext
	case config.ProtocolSASLSSL:
		return metadata.ProtocolSASLSSL
	}
	return metadata.ProtocolPlaintext
}

// ListenerAddr returns the bound address of a client listener by name, ""
// when there is none.
func (b *Broker) ListenerAddr(name string) string {
	for _, bl := range append([]*boundListener{b.first}, b.extra...) {
		if bl != nil && bl.cfg.Name == name {
			return bl.ln.Addr().String()
		}
	}
	return ""
}

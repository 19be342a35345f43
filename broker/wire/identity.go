package wire

import (
	"net"

	"github.com/cascade-kafka/cascade/broker/security/principal"
)

// Identity is who a connection speaks for, as Kafka's RequestContext
// carries it: the principal, the client's IP address and the listener.
type Identity struct {
	Principal string
	Host      string
	Listener  string
}

// PlaintextIdentity is the identity of a connection before any
// authentication: User:ANONYMOUS (Kafka's KafkaPrincipal.ANONYMOUS), from
// the remote address's IP, on listener (PLAINTEXT when unnamed). A TLS
// client certificate or a SASL exchange replaces the principal.
func PlaintextIdentity(c net.Conn, listener string) Identity {
	if listener == "" {
		listener = "PLAINTEXT"
	}
	id := Identity{Principal: principal.Anonymous, Listener: listener}
	if ip := remoteIP(c); ip.IsValid() {
		id.Host = ip.String()
	}
	return id
}

// stamp sets the identity on a request.
func (id Identity) stamp(r *Request) {
	r.Principal, r.ClientHost, r.Listener = id.Principal, id.Host, id.Listener
}

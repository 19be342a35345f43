package wire

import "net"

// Identity is who a connection speaks for, as Kafka's RequestContext
// carries it: the principal, the client's IP address and the listener.
type Identity struct {
	Principal string
	Host      string
	Listener  string
}

// anonymous is Kafka's KafkaPrincipal.ANONYMOUS, the principal of every
// PLAINTEXT connection (DefaultKafkaPrincipalBuilder).
const anonymous = "User:ANONYMOUS"

// PlaintextIdentity is the identity of a PLAINTEXT connection: anonymous,
// from the remote address's IP, on listener (PLAINTEXT when unnamed).
// Authenticated listeners (TLS client certificates, SASL) replace the
// principal once their handshake names one.
func PlaintextIdentity(c net.Conn, listener string) Identity {
	if listener == "" {
		listener = "PLAINTEXT"
	}
	host := ""
	switch a := c.RemoteAddr().(type) {
	case *net.TCPAddr:
		host = a.IP.String()
	case nil:
	default:
		if h, _, err := net.SplitHostPort(a.String()); err == nil {
			host = h
		}
	}
	return Identity{Principal: anonymous, Host: host, Listener: listener}
}

// stamp sets the identity on a request.
func (id Identity) stamp(r *Request) {
	r.Principal, r.ClientHost, r.Listener = id.Principal, id.Host, id.Listener
}

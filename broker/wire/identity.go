package wire

import "net"

// identity is who a connection speaks for, as Kafka's RequestContext
// carries it: the principal, the client's IP address and the listener.
type identity struct {
	principal string
	host      string
	listener  string
}

// anonymous is Kafka's KafkaPrincipal.ANONYMOUS, the principal of every
// PLAINTEXT connection (DefaultKafkaPrincipalBuilder).
const anonymous = "User:ANONYMOUS"

// plaintextIdentity is the identity of a PLAINTEXT connection: anonymous,
// from the remote address's IP, on listener (PLAINTEXT when unnamed).
// Authenticated listeners (TLS client certificates, SASL) replace the
// principal once their handshake names one.
func plaintextIdentity(c net.Conn, listener string) identity {
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
	return identity{principal: anonymous, host: host, listener: listener}
}

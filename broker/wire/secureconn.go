package wire

import (
	"bufio"
	"context"
	"net"
	"time"
)

// SecureConn secures one accepted connection of listener l that a Server's
// request loop does not serve (a cluster node's controller listener, whose
// quorum frames are not Kafka requests), as ServeListener does before the
// first request: the TLS handshake, then the SASL exchange. timeout bounds
// the handshake and each read of the exchange; ctx ends them. It returns
// the connection to use, a reader holding whatever the peer sent after
// authenticating, and who the connection speaks for. On error the
// connection is closed.
func SecureConn(ctx context.Context, c net.Conn, l *Listener, timeout time.Duration) (net.Conn, *bufio.Reader, Identity, error) {
	s := &Server{ctx: ctx, IdleTimeout: timeout}
	id := PlaintextIdentity(c, l.Name)
	sc, err := s.secure(c, l, &id)
	if err != nil {
		c.Close()
		return nil, nil, Identity{}, err
	}
	ic := &idleConn{Conn: sc, act: &activity{}}
	cn := &conn{s: s, r: bufio.NewReaderSize(ic, 64<<10), ic: ic, act: ic.act, remote: c.RemoteAddr().String(), id: id}
	if l.SASL != nil {
		if err := cn.authenticate(sc, l.SASL); err != nil {
			sc.Close()
			return nil, nil, Identity{}, err
		}
		if err := sc.SetReadDeadline(time.Time{}); err != nil {
			sc.Close()
			return nil, nil, Identity{}, err
		}
	}
	return sc, cn.r, cn.id, nil
}

package wire

import (
	"context"
	"net"
	"syscall"
)

// Listen opens a TCP listener on addr whose SO_RCVBUF is recvBuffer bytes
// (socket.receive.buffer.bytes), or the OS default when recvBuffer <= 0. As
// Kafka's Acceptor.openServerSocket, the size is set on the listening
// socket, so that connections inherit it before their handshake and the TCP
// window scale they agree on can use all of it.
func Listen(ctx context.Context, addr string, recvBuffer int) (net.Listener, error) {
	lc := net.ListenConfig{}
	if recvBuffer > 0 {
		lc.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) { serr = setRecvBuffer(fd, recvBuffer) }); err != nil {
				return err
			}
			return serr
		}
	}
	return lc.Listen(ctx, "tcp", addr)
}

// tuneConn applies the per-connection socket options of an accepted
// connection, as Kafka's Acceptor.accept: TCP_NODELAY (Go's default
// already), keep-alive, and SO_SNDBUF (socket.send.buffer.bytes) when
// sendBuffer > 0. SO_RCVBUF is set again when recvBuffer > 0, for
// listeners not opened with Listen.
func tuneConn(c net.Conn, sendBuffer, recvBuffer int) error {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil // net.Pipe in tests
	}
	if err := tc.SetKeepAlive(true); err != nil {
		return err
	}
	if sendBuffer > 0 {
		if err := tc.SetWriteBuffer(sendBuffer); err != nil {
			return err
		}
	}
	if recvBuffer > 0 {
		if err := tc.SetReadBuffer(recvBuffer); err != nil {
			return err
		}
	}
	return nil
}

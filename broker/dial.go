package broker

import (
	"context"
	"net"
	"time"
)

// DialFunc opens a connection; it has net.Dialer.DialContext's signature.
// A timeout of the dial comes with ctx.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// dialWithin dials address over TCP with dial, or a net.Dialer when dial
// is nil, giving up after timeout.
func dialWithin(ctx context.Context, dial DialFunc, address string, timeout time.Duration) (net.Conn, error) {
	if dial == nil {
		return (&net.Dialer{Timeout: timeout}).DialContext(ctx, "tcp", address)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return dial(ctx, "tcp", address)
}

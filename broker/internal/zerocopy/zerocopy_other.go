//go:build !linux

package zerocopy

import (
	"net"
	"os"
)

// Sent is zero where sendfile is not used.
func Sent() int64 { return 0 }

// Sendfile is only implemented on Linux; elsewhere it reports the bytes not
// handled, and callers copy them.
func Sendfile(c net.Conn, f *os.File, off, n int64, renew func() bool) (int64, bool, error) {
	return 0, false, nil
}

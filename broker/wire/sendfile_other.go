//go:build !linux

package wire

import (
	"net"
	"os"
	"sync/atomic"
)

// sendfileBytes stays zero where sendfile is not used.
var sendfileBytes atomic.Int64

// sendfileChunk is only implemented on Linux; elsewhere file sections are
// copied through Write.
func sendfileChunk(c net.Conn, f *os.File, off, n int64, renew func() bool) (int64, bool, error) {
	return 0, false, nil
}

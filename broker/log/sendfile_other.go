//go:build !linux

package log

import (
	"net"
	"os"
	"sync/atomic"
)

// sendfileBytes stays zero where sendfile is not used.
var sendfileBytes atomic.Int64

// sendfile is only implemented on Linux; elsewhere regions are copied.
func sendfile(c *net.TCPConn, f *os.File, off, n int64) (int64, bool, error) {
	return 0, false, nil
}

package log

import (
	"net"
	"os"
	"sync/atomic"
	"syscall"
)

// sendfileBytes counts bytes sent with sendfile(2), so tests can check the
// zero-copy path was taken.
var sendfileBytes atomic.Int64

// sendfile copies n bytes of f at off to c with sendfile(2), waiting for
// socket writability through the runtime poller. handled is false when the
// descriptors cannot be obtained, so the caller falls back to a copy.
func sendfile(c *net.TCPConn, f *os.File, off, n int64) (written int64, handled bool, err error) {
	dst, err := c.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	src, err := f.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	var werr, serr error
	cerr := src.Control(func(sfd uintptr) {
		serr = dst.Write(func(dfd uintptr) bool {
			for written < n {
				chunk := min(n-written, 1<<30)
				m, err := syscall.Sendfile(int(dfd), int(sfd), &off, int(chunk))
				if m > 0 {
					written += int64(m)
					sendfileBytes.Add(int64(m))
				}
				switch {
				case err == syscall.EAGAIN:
					return false // wait until writable
				case err == syscall.EINTR:
					continue
				case err != nil:
					werr = err
					return true
				case m == 0:
					werr = syscall.EIO // file shorter than the region
					return true
				}
			}
			return true
		})
	})
	if cerr != nil {
		return written, true, cerr
	}
	if serr != nil {
		return written, true, serr
	}
	if werr != nil {
		return written, true, &net.OpError{Op: "sendfile", Net: "tcp", Err: werr}
	}
	return written, true, nil
}

package zerocopy

import (
	"net"
	"os"
	"sync/atomic"
	"syscall"
)

// sent counts bytes sent with sendfile(2).
var sent atomic.Int64

// Sent returns the bytes sent with sendfile(2) so far, so tests can check
// that the zero-copy path was taken.
func Sent() int64 { return sent.Load() }

// Sendfile sends up to n bytes of f at off to c with sendfile(2), at an
// explicit file offset (readers of one file never share a position),
// waiting for writability through the runtime poller under c's write
// deadline. When the socket is full after some bytes have gone and renew
// (which may be nil) reports true, it returns, so that the caller can record
// the progress and renew the write deadline. handled is false when c or f
// has no descriptor, so the caller falls back to a copy.
func Sendfile(c net.Conn, f *os.File, off, n int64, renew func() bool) (written int64, handled bool, err error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, false, nil
	}
	dst, err := sc.SyscallConn()
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
				m, err := syscall.Sendfile(int(dfd), int(sfd), &off, int(min(n-written, 1<<30)))
				if m > 0 {
					written += int64(m)
					sent.Add(int64(m))
				}
				switch {
				case err == syscall.EAGAIN:
					// Return with the progress made if the
					// deadline needs renewing; otherwise wait
					// for writability.
					return written > 0 && renew != nil && renew()
				case err == syscall.EINTR:
					continue
				case err != nil:
					werr = err
					return true
				case m == 0:
					werr = syscall.EIO // file shorter than the section
					return true
				}
			}
			return true
		})
	})
	switch {
	case cerr != nil:
		return written, true, cerr
	case serr != nil:
		return written, true, serr
	case werr != nil:
		return written, true, &net.OpError{Op: "sendfile", Net: "tcp", Err: werr}
	}
	return written, true, nil
}

package log

import (
	"io"
	"net"
	"sync/atomic"

	"github.com/cascade-kafka/cascade/broker/internal/zerocopy"
)

// region is a byte range of one segment file. It holds a reference on the
// segment and a use of its open .log file, so the file stays open (even if
// deleted, and however full the handle cache) until Release.
type region struct {
	s        *segment
	h        *fileHandle
	off, n   int64
	released atomic.Bool
}

// oneRegion is a region and the one-element slice a Read returns it in,
// allocated together.
type oneRegion struct {
	r   region
	arr [1]Region
}

// Len returns the region's size in bytes.
func (r *region) Len() int { return int(r.n) }

// Release drops the region's hold on its segment. Calling it twice is safe.
func (r *region) Release() {
	if r.released.CompareAndSwap(false, true) {
		r.h.release()
		r.s.unref()
	}
}

// ReadAt reads from the region (io.ReaderAt), for callers that need the
// bytes in memory.
func (r *region) ReadAt(p []byte, off int64) (int, error) {
	return io.NewSectionReader(r.h.f, r.off, r.n).ReadAt(p, off)
}

// WriteTo writes the region to w. When w is a *net.TCPConn the bytes go
// from the page cache to the socket with sendfile(2) at an explicit file
// offset, so concurrent readers of one segment never share a file position.
func (r *region) WriteTo(w io.Writer) (int64, error) {
	if c, ok := w.(*net.TCPConn); ok {
		if n, handled, err := zerocopy.Sendfile(c, r.h.f, r.off, r.n, nil); handled {
			return n, err
		}
	}
	return io.Copy(w, io.NewSectionReader(r.h.f, r.off, r.n))
}

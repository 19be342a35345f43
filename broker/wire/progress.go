package wire

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/cascade-kafka/cascade/broker/internal/zerocopy"
)

// writeChunk is the most bytes handed to one Write of the connection, so
// that progress is recorded (and the write deadline renewed) at least once
// per chunk.
const writeChunk = 64 << 10

// activity is what a connection's writer and executor share with its
// reader for idle expiry: when a response byte last reached the socket or
// a request was last served, and whether one is being served now.
type activity struct {
	lastWrite atomic.Int64 // unix nanoseconds
	// busy is set while a request of the connection is being served:
	// time in the broker is not the client's idleness.
	busy atomic.Int32
}

// errWriteIdle ends a connection whose response write made no progress for
// the idle timeout: a client that stopped reading.
var errWriteIdle = fmt.Errorf("%w: response write made no progress", ErrIdle)

func (a *activity) wrote(t time.Time) { a.lastWrite.Store(t.UnixNano()) }

// served ends the serving of a request: its end counts as activity, so
// the idle timeout runs from there, not from the last byte before it.
func (a *activity) served() {
	a.wrote(time.Now())
	a.busy.Add(-1)
}

func (a *activity) last() time.Time { return time.Unix(0, a.lastWrite.Load()) }

// progressWriter is the connection as the writer sees it. It measures
// progress, not intent, as Kafka's Selector does: each chunk is written
// under a write deadline at most half the idle timeout away (renewed once
// less than a quarter is left), lastWrite moves only when a write returns
// having moved bytes, and a write that moves nothing for the whole idle
// timeout fails with ErrIdle. So a client that stops reading is closed
// between one and two connections.max.idle.ms after its last byte was
// taken, while a client that reads slowly stays open; while bytes move,
// lastWrite is renewed at least every half idle timeout, so the reader
// never mistakes a slow write for idleness.
type progressWriter struct {
	c    net.Conn
	idle time.Duration
	act  *activity
	// since is when the current response began to be written or last
	// made progress, whichever is later.
	since time.Time
	// deadlineAt is the write deadline set last.
	deadlineAt time.Time
}

// begin starts writing a response: the idle timeout of its first bytes
// runs from now, not from the previous response.
func (w *progressWriter) begin() { w.since = time.Now() }

// Write writes p in chunks of writeChunk bytes.
func (w *progressWriter) Write(p []byte) (int, error) {
	var total int
	for len(p) > 0 {
		chunk := p[:min(len(p), writeChunk)]
		if err := w.deadline(); err != nil {
			return total, err
		}
		n, err := w.c.Write(chunk)
		total += n
		p = p[n:]
		if err := w.progress(n, err); err != nil {
			return total, err
		}
	}
	return total, nil
}

// deadline sets the write deadline for the next chunk to half the idle
// timeout from now, unless the one set earlier is still at least a quarter
// of it away (which spares a timer update per chunk).
func (w *progressWriter) deadline() error {
	if w.idle <= 0 {
		return nil
	}
	now := time.Now()
	if w.deadlineAt.Sub(now) >= w.idle/4 {
		return nil
	}
	w.deadlineAt = now.Add(w.idle / 2)
	return w.c.SetWriteDeadline(w.deadlineAt)
}

// renew reports whether a write that has made progress should return to
// let the caller record it and renew the deadline: when the deadline is
// less than a quarter of the idle timeout away.
func (w *progressWriter) renew() bool {
	return w.idle > 0 && time.Until(w.deadlineAt) < w.idle/4
}

// progress records n bytes written and decides whether err ends the write:
// a deadline expiry is only an error when nothing was written for the whole
// idle timeout.
func (w *progressWriter) progress(n int, err error) error {
	now := time.Now()
	if n > 0 {
		w.since = now
		w.act.wrote(now)
	}
	if err == nil {
		return nil
	}
	if w.idle > 0 && errors.Is(err, os.ErrDeadlineExceeded) {
		if now.Sub(w.since) < w.idle {
			return nil
		}
		return fmt.Errorf("%w (%v)", errWriteIdle, w.idle)
	}
	return err
}

// ReadFrom copies src to the connection. A section of a file, which is how
// a Fetch response's log regions write themselves to anything that is not a
// *net.TCPConn, goes with sendfile(2) at explicit offsets where the platform
// allows it (zerocopy.Sendfile), so zero-copy survives the progress accounting.
// Anything else is copied through Write.
func (w *progressWriter) ReadFrom(src io.Reader) (int64, error) {
	if sr, ok := src.(*io.SectionReader); ok {
		if f, base, size := sr.Outer(); f != nil {
			if file, ok := f.(*os.File); ok {
				if n, handled, err := w.sendSection(file, sr, base, size); handled {
					return n, err
				}
			}
		}
	}
	return io.CopyBuffer(writerOnly{w}, src, make([]byte, writeChunk))
}

// sendSection sends the unread rest of sr, a section [base, base+size) of
// f, with sendfile. handled is false when sendfile cannot be used and
// nothing was sent.
func (w *progressWriter) sendSection(f *os.File, sr *io.SectionReader, base, size int64) (int64, bool, error) {
	pos, err := sr.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, false, nil
	}
	off, end := base+pos, base+size
	var total int64
	for off < end {
		if err := w.deadline(); err != nil {
			return total, true, err
		}
		n, handled, err := zerocopy.Sendfile(w.c, f, off, end-off, w.renew)
		if !handled {
			if total == 0 {
				return 0, false, nil
			}
			return total, true, errors.New("wire: sendfile became unavailable mid-response")
		}
		off += n
		total += n
		if _, serr := sr.Seek(pos+total, io.SeekStart); serr != nil {
			return total, true, serr
		}
		if err := w.progress(int(n), err); err != nil {
			return total, true, err
		}
	}
	return total, true, nil
}

// writerOnly hides progressWriter's ReadFrom from io.CopyBuffer.
type writerOnly struct{ io.Writer }

package wire

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/record"
)

// Request is one framed request whose header has been parsed. Body is the
// rest of the frame, still encoded; the dispatcher decodes it with kmsg once
// it has checked the version.
type Request struct {
	Header RequestHeader
	Body   []byte
	// Remote is the peer's address, for logs and quotas.
	Remote string
	// Principal is the connection's authenticated principal as Kafka's
	// KafkaPrincipal prints it ("User:ANONYMOUS" until a SASL exchange or a
	// client certificate names another).
	Principal string
	// ClientHost is the client's IP address, as ACLs match a host.
	ClientHost string
	// Listener is the name of the listener the connection came in on.
	Listener string

	decoded  func()
	consumed func()
}

// Consumed tells the server that the dispatcher no longer reads Body or
// anything decoded from it, though it has not answered yet (a Produce whose
// records are appended and that waits for acks=all): the request's whole
// reservation goes back to the budget, as Kafka releases a request's
// buffer once its handler returns while its delayed produce waits, so that
// waiting produces do not hold other connections' reads back. The frame is
// reused only after the response is written. It must be called from
// Dispatch's goroutine; further calls do nothing.
func (r *Request) Consumed() {
	r.Decoded()
	if f := r.consumed; f != nil {
		r.consumed = nil
		f()
	}
}

// Decoded tells the server that Body has been decoded: the reservation
// taken for decoding it goes back to the budget, all of it, or all but the
// frame's own bytes when the decoded request may alias the frame (byte
// fields, unknown tagged fields), as Kafka frees a request's buffer once it
// is parsed. A request that waits long after decoding (a long-poll Fetch)
// then holds no more than that. It must be called from Dispatch's
// goroutine, before Dispatch returns; further calls do nothing. A
// Dispatcher that never calls it keeps the reservation until it returns.
func (r *Request) Decoded() {
	if f := r.decoded; f != nil {
		r.decoded = nil
		f()
	}
}

// Body is a response body that writes itself, for responses that splice file
// regions in rather than copying them through a buffer (plaintext Fetch).
type Body interface {
	// Len is the exact number of bytes WriteTo writes.
	Len() int
	// WriteTo writes the body to w, which is the connection itself so that
	// file regions can use sendfile.
	WriteTo(w io.Writer) (int64, error)
	// Release frees what the body holds; it is called exactly once, whether
	// or not the body was written.
	Release()
}

// Response is a dispatcher's answer to one request. The zero Response means
// "send nothing" (Produce with acks=0).
type Response struct {
	Msg  kmsg.Response // encoded with kmsg after the response header
	Body Body          // used instead of Msg when set
}

func (r Response) release() {
	if r.Body != nil {
		r.Body.Release()
	}
}

// Dispatcher answers requests. A returned error closes the connection after
// the responses already queued have been written, as Kafka does when it cannot
// parse or authorise a request.
//
// The request's Body (and anything decoded from it without copying, such as
// kmsg's byte fields) may live in a pooled buffer: it stays valid while
// Dispatch runs and until the returned Response has been written, and is
// reused after that. A Dispatcher must copy what it keeps longer. Today only
// Produce frames are pooled (see pooledFrame).
type Dispatcher interface {
	Dispatch(ctx context.Context, req *Request) (Response, error)
}

// Server accepts connections and runs the per-connection loops.
type Server struct {
	Dispatcher Dispatcher
	// MaxRequestBytes is socket.request.max.bytes; 0 means the default.
	MaxRequestBytes int32
	// IdleTimeout is connections.max.idle.ms: a connection on which no
	// request byte is read, no response byte reaches the socket and no
	// request is being served for this long is closed, as by Kafka's
	// Selector idle expiry; a response the client has stopped reading does
	// not keep it open. 0 disables it.
	IdleTimeout time.Duration
	// SendBufferBytes and ReceiveBufferBytes are socket.send.buffer.bytes
	// and socket.receive.buffer.bytes, set on each accepted connection
	// (SO_SNDBUF, SO_RCVBUF); <= 0 leaves the OS default. Open the
	// listener with Listen to set the receive buffer before handshakes.
	SendBufferBytes    int
	ReceiveBufferBytes int
	// RecordLimits are the limits record batches are validated under
	// (the log's MaxDecompressedBytes and MaxDecodeMemory); zero fields
	// mean the record package's defaults. A Produce's reservation counts
	// the decoder memory its validation may hold under them.
	RecordLimits record.Limits
	// MaxInFlight bounds the responses queued for one connection's writer
	// before its executor stops serving; 0 means 16.
	MaxInFlight int
	// Budget is queued.max.request.bytes, shared by every connection:
	// each request holds a Lease of the bytes it has delivered while it
	// is read, of its decoded size (Reservation, or the scanned estimate)
	// until the dispatcher calls Decoded, and of its frame at most until
	// the dispatcher returns. nil is unbounded.
	Budget *Budget
	// Quotas are the connection limits (max.connections and its
	// neighbours); nil is unlimited.
	Quotas *ConnectionQuotas
	// Now is the clock of the connection-creation rate; nil is time.Now.
	Now      func() time.Time
	Logger   *slog.Logger
	Observer Observer

	mu     sync.Mutex
	lns    map[net.Listener]struct{}
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
	quotas *quotas
	accept acceptLog
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("wire: server closed")

// ErrIdle ends a connection idle longer than the server's IdleTimeout.
var ErrIdle = errors.New("wire: connection idle longer than connections.max.idle.ms")

// ErrDecodeTooLarge closes a connection whose request of a decodeCapped API
// would decode to more than twice socket.request.max.bytes (decodeCap), or
// is too malformed to be sized while it could.
var ErrDecodeTooLarge = errors.New("wire: request would decode to more than twice socket.request.max.bytes")

func (s *Server) init() {
	if s.ctx == nil {
		s.ctx, s.cancel = context.WithCancel(context.Background())
		s.lns = map[net.Listener]struct{}{}
		s.conns = map[net.Conn]struct{}{}
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
}

// Close stops accepting, closes every connection, cancels in-flight handlers
// (a long-polling Fetch returns at once) and waits for the connection
// goroutines to end.
func (s *Server) Close() error {
	s.mu.Lock()
	s.init()
	s.closed = true
	for ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

type outgoing struct {
	key, version  int16
	correlationID int32
	resp          Response
	// frame is the pooled request buffer, released once resp is written
	// (the response may alias it); nil for an unpooled frame.
	frame *[]byte
	// closeAfter, when set, closes the connection once resp is written
	// (a failed re-authentication), and is why.
	closeAfter error
}

// writeLoop writes responses in the order the executor queued them, through
// a progressWriter, so that a write which moves nothing for IdleTimeout
// fails with ErrIdle and closes the connection. After a write error it keeps
// draining (releasing bodies) so the executor never blocks on a dead
// writer; the reader then fails on its own read of the closed conn. It
// returns the first write error.
func (s *Server) writeLoop(c net.Conn, out <-chan outgoing, act *activity) error {
	w := &progressWriter{c: c, idle: s.IdleTimeout, act: act}
	var buf []byte
	var failed error
	for o := range out {
		if failed != nil {
			o.resp.release()
			releaseFrame(o.frame)
			continue
		}
		var n int
		var err error
		w.begin()
		buf, n, err = s.writeOne(w, buf[:0], o)
		// The response is on the wire (or never will be): nothing
		// refers to the request's bytes any more.
		releaseFrame(o.frame)
		if err != nil {
			failed = err
			c.Close()
			continue
		}
		if s.Observer != nil {
			s.Observer.BytesOut(n)
		}
		if o.closeAfter != nil {
			failed = o.closeAfter
			c.Close()
			continue
		}
		if cap(buf) > 1<<20 {
			buf = nil // do not pin one huge response's buffer forever
		}
	}
	return failed
}

// writeOne writes one response, encoding into buf, and returns buf for reuse
// by the next response.
func (s *Server) writeOne(c *progressWriter, buf []byte, o outgoing) (_ []byte, _ int, err error) {
	defer o.resp.release()
	defer func() {
		if r := recover(); r != nil {
			err = s.recovered(c.c.RemoteAddr().String(), o.key, o.version, r)
		}
	}()
	buf, at := AppendFrameLength(buf)
	buf = AppendResponseHeader(buf, o.correlationID, ResponseHeaderFlexible(o.key, o.version))
	if o.resp.Body == nil {
		buf = o.resp.Msg.AppendTo(buf)
		FinishFrame(buf, at, 0)
		_, err := c.Write(buf)
		return buf, len(buf), err
	}
	FinishFrame(buf, at, o.resp.Body.Len())
	if _, err := c.Write(buf); err != nil {
		return buf, 0, err
	}
	n, err := o.resp.Body.WriteTo(c)
	return buf, len(buf) + int(n), err
}

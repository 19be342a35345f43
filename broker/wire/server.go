package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Request is one framed request whose header has been parsed. Body is the
// rest of the frame, still encoded; the dispatcher decodes it with kmsg once
// it has checked the version.
type Request struct {
	Header RequestHeader
	Body   []byte
	// Remote is the peer's address, for logs and quotas.
	Remote string
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

// Observer receives connection-level counts for metrics. All methods must be
// safe for concurrent use.
type Observer interface {
	BytesIn(n int)
	BytesOut(n int)
	Connection(open bool)
}

// Server accepts connections and runs the per-connection loops.
type Server struct {
	Dispatcher Dispatcher
	// MaxRequestBytes is socket.request.max.bytes; 0 means the default.
	MaxRequestBytes int32
	// IdleTimeout is connections.max.idle.ms: a connection on which no
	// request byte is read and no response byte reaches the socket for
	// this long is closed, as by Kafka's Selector idle expiry; a response
	// the client has stopped reading does not keep it open. 0 disables it.
	IdleTimeout time.Duration
	// SendBufferBytes and ReceiveBufferBytes are socket.send.buffer.bytes
	// and socket.receive.buffer.bytes, set on each accepted connection
	// (SO_SNDBUF, SO_RCVBUF); <= 0 leaves the OS default. Open the
	// listener with Listen to set the receive buffer before handshakes.
	SendBufferBytes    int
	ReceiveBufferBytes int
	// MaxInFlight bounds the responses queued for one connection's writer
	// before its reader stops reading; 0 means 16.
	MaxInFlight int
	// Budget is queued.max.request.bytes, shared by every connection:
	// each request reserves its worst-case decoded size (Reservation)
	// before its body is read and releases it when its handler returns.
	// nil is unbounded.
	Budget   *Budget
	Logger   *slog.Logger
	Observer Observer

	mu     sync.Mutex
	lns    map[net.Listener]struct{}
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
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

// Serve accepts connections on ln until ln fails or Close is called. It
// returns ErrServerClosed after Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	s.init()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// As net/http: back off on temporary accept failures
				// (EMFILE) instead of spinning.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		if err := tuneConn(c, s.SendBufferBytes, s.ReceiveBufferBytes); err != nil {
			s.Logger.Warn("setting socket options", "remote", c.RemoteAddr().String(), "err", err)
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return ErrServerClosed
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c)
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

func (s *Server) serveConn(c net.Conn) {
	defer s.wg.Done()
	if s.Observer != nil {
		s.Observer.Connection(true)
		defer s.Observer.Connection(false)
	}
	ctx, cancel := context.WithCancel(s.ctx)
	depth := s.MaxInFlight
	if depth <= 0 {
		depth = 16
	}
	out := make(chan outgoing, depth)
	writerDone := make(chan struct{})
	act := &activity{}
	go func() {
		defer close(writerDone)
		s.writeLoop(c, out, act)
	}()
	err := s.readLoop(ctx, &idleConn{Conn: c, idle: s.IdleTimeout, act: act}, out)
	close(out)
	<-writerDone
	cancel()
	c.Close()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		s.Logger.Debug("connection closed", "remote", c.RemoteAddr().String(), "err", err)
	}
}

type outgoing struct {
	key, version  int16
	correlationID int32
	resp          Response
	// frame is the pooled request buffer, released once resp is written
	// (the response may alias it); nil for an unpooled frame.
	frame *[]byte
}

func (s *Server) readLoop(ctx context.Context, c net.Conn, out chan<- outgoing) error {
	max := s.MaxRequestBytes
	if max <= 0 {
		max = DefaultMaxRequestBytes
	}
	remote := c.RemoteAddr().String()
	for {
		frame, pooled, res, err := s.readRequest(ctx, c, max)
		if err != nil {
			return err
		}
		if s.Observer != nil {
			s.Observer.BytesIn(len(frame) + 4)
		}
		resp, err := s.handle(ctx, frame, res, remote)
		if err != nil {
			resp.release()
			releaseFrame(pooled)
			return err
		}
		if resp.Msg == nil && resp.Body == nil {
			releaseFrame(pooled)
			continue
		}
		h := resp.header
		select {
		case out <- outgoing{key: h.Key, version: h.Version, correlationID: h.CorrelationID, resp: resp.Response, frame: pooled}:
		case <-ctx.Done():
			resp.release()
			releaseFrame(pooled)
			return ctx.Err()
		}
	}
}

type handled struct {
	Response
	header RequestHeader
}

// reservation is what readRequest reserved for one frame.
type reservation struct {
	// n is the bytes acquired from the Budget (0 without one).
	n int64
	// size is what the frame is allowed to decode to (readReservation),
	// with or without a Budget.
	size int64
	// clipped is set when size is below the frame's worst-case decode:
	// the scan must show the decode fits.
	clipped bool
}

// handle parses frame's header and dispatches it. The reservation made for
// the frame is trimmed to the scanned estimate where there is one, and
// released when the dispatcher returns: the decoded request is garbage then.
// A clipped reservation that the scan cannot show to be enough closes the
// connection before the request is decoded.
func (s *Server) handle(ctx context.Context, frame []byte, res reservation, remote string) (handled, error) {
	reserved := res.n
	defer func() { s.Budget.Release(reserved) }()
	h, body, err := ParseRequestHeader(frame)
	if err != nil {
		return handled{}, err
	}
	if sizeScanned(h.Key) && (reserved > 0 || res.clipped) {
		est, ok := sizeEstimate(h.Key, h.Version, body)
		switch {
		case res.clipped && (!ok || est > res.size):
			return handled{}, fmt.Errorf("%w: %s frame of %d bytes (estimate %d, well-formed %t)",
				ErrDecodeTooLarge, kmsg.NameForKey(h.Key), len(frame), est, ok)
		case ok && est < reserved:
			s.Budget.Release(reserved - est)
			reserved = est
		}
	}
	resp, err := s.Dispatcher.Dispatch(ctx, &Request{Header: h, Body: body, Remote: remote})
	return handled{Response: resp, header: h}, err
}

// readRequest reads one request frame. As Kafka's NetworkReceive it refuses a
// length above max before reading the body; it then reads the api key and
// version, refuses an unknown key or a frame above the key's APIFrameCap,
// and reserves the frame's worst-case decoded size from the Budget (waiting,
// with the connection unread, while the budget is spent) before it
// allocates the body. The returned reservation is 0 when there is no budget.
// For an API whose frames are pooled (pooledFrame) the frame lives in the
// returned buffer, which the caller releases with releaseFrame once nothing
// refers to it; otherwise that buffer is nil and the frame is the caller's.
func (s *Server) readRequest(ctx context.Context, c net.Conn, max int32) (frame []byte, pooled *[]byte, res reservation, err error) {
	if s.IdleTimeout > 0 {
		if err := c.SetReadDeadline(time.Now().Add(s.IdleTimeout)); err != nil {
			return nil, nil, reservation{}, err
		}
	}
	var hdr [8]byte
	if _, err := io.ReadFull(c, hdr[:4]); err != nil {
		return nil, nil, reservation{}, err
	}
	n := int32(binary.BigEndian.Uint32(hdr[:4]))
	switch {
	case n < 0:
		return nil, nil, reservation{}, fmt.Errorf("%w: %d", ErrNegativeFrame, n)
	case n == 0:
		return nil, nil, reservation{}, ErrEmptyFrame
	case n > max:
		return nil, nil, reservation{}, fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, n, max)
	case n < 4:
		// Too short for a header; read it so the parser says why.
		frame := make([]byte, n)
		_, err := io.ReadFull(c, frame)
		return frame, nil, reservation{}, noEOF(err)
	}
	if _, err := io.ReadFull(c, hdr[4:8]); err != nil {
		return nil, nil, reservation{}, noEOF(err)
	}
	key := int16(binary.BigEndian.Uint16(hdr[4:]))
	version := int16(binary.BigEndian.Uint16(hdr[6:]))
	if kmsg.RequestForKey(key) == nil {
		return nil, nil, reservation{}, fmt.Errorf("%w %d", ErrUnknownAPIKey, key)
	}
	if limit := APIFrameCap(key, version, max); n > limit {
		return nil, nil, reservation{}, fmt.Errorf("%w: %s frame of %d bytes > %d", ErrFrameTooLarge, kmsg.NameForKey(key), n, limit)
	}
	reserved, clipped := readReservation(key, version, n, max)
	res = reservation{size: reserved, clipped: clipped}
	if s.Budget != nil {
		res.n = reserved
		if err := s.Budget.Acquire(ctx, reserved); err != nil {
			return nil, nil, reservation{}, err
		}
		if s.IdleTimeout > 0 {
			// Time spent waiting for the budget is the broker's, not
			// the client's idleness.
			if err := c.SetReadDeadline(time.Now().Add(s.IdleTimeout)); err != nil {
				s.Budget.Release(res.n)
				return nil, nil, reservation{}, err
			}
		}
	}
	if pooledFrame(key) {
		pooled = getFrame(int(n))
		frame = *pooled
	} else {
		frame = make([]byte, n)
	}
	copy(frame, hdr[4:8])
	if _, err := io.ReadFull(c, frame[4:]); err != nil {
		s.Budget.Release(res.n)
		releaseFrame(pooled)
		return nil, nil, reservation{}, noEOF(err)
	}
	return frame, pooled, res, nil
}

// noEOF turns an EOF inside a frame into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// writeLoop writes responses in the order the reader queued them, through a
// progressWriter, so that a write which moves nothing for IdleTimeout fails
// with ErrIdle and closes the connection. After a
// write error it keeps draining (releasing bodies) so the reader never blocks
// on a dead writer; the reader then fails on its own read of the closed conn.
func (s *Server) writeLoop(c net.Conn, out <-chan outgoing, act *activity) {
	w := &progressWriter{c: c, idle: s.IdleTimeout, act: act}
	var buf []byte
	var failed bool
	for o := range out {
		if failed {
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
			failed = true
			c.Close()
			if errors.Is(err, ErrIdle) {
				s.Logger.Debug("connection closed", "remote", c.RemoteAddr().String(), "err", err)
			}
			continue
		}
		if s.Observer != nil {
			s.Observer.BytesOut(n)
		}
		if cap(buf) > 1<<20 {
			buf = nil // do not pin one huge response's buffer forever
		}
	}
}

// writeOne writes one response, encoding into buf, and returns buf for reuse
// by the next response.
func (s *Server) writeOne(c *progressWriter, buf []byte, o outgoing) ([]byte, int, error) {
	defer o.resp.release()
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

// idleConn is a connection as its reader sees it. A read that reaches the
// read deadline (IdleTimeout after the reader began waiting for a request)
// ends the connection with ErrIdle only if no request byte was read and no
// response byte reached the socket within IdleTimeout; otherwise the
// deadline moves on. So, as with Kafka's Selector, only a connection with no
// traffic either way is idle: a client slowly reading a large response, or
// slowly sending a large request, is not. A client that stops reading a
// response is expired by the writer (progressWriter), whose lastWrite then
// stops moving.
type idleConn struct {
	net.Conn
	idle     time.Duration
	act      *activity
	lastRead time.Time
}

func (c *idleConn) Read(p []byte) (int, error) {
	for {
		n, err := c.Conn.Read(p)
		if n > 0 && c.idle > 0 {
			c.lastRead = time.Now()
		}
		if err == nil || n > 0 || c.idle <= 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		now := time.Now()
		last := c.lastRead
		if w := c.act.last(); w.After(last) {
			last = w
		}
		next := last.Add(c.idle)
		if !next.After(now) {
			return 0, fmt.Errorf("%w (%v)", ErrIdle, c.idle)
		}
		if err := c.Conn.SetReadDeadline(next); err != nil {
			return 0, err
		}
	}
}

package wire

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"runtime/debug"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// readStep is the first buffer a frame body is read into. Each further
// step is readGrowth times larger, up to the frame's size, and is reserved
// from the Budget before it is allocated, so a connection holds at most
// readGrowth times the bytes it has delivered (and at least readStep),
// never what its length prefix merely announces. Growing by 4 copies a
// frame's bytes about a third of a time over; doubling measured twice the
// read time of a 1 MiB Produce.
const (
	readStep   = 64 << 10
	readGrowth = 4
)

// heldRequests is how many requests a connection's reader may have queued
// while an earlier one is served; beyond them it holds one more read
// request and watches the socket for a close (hold), and reads nothing
// further, so a client cannot queue more.
const heldRequests = 1

// ErrPanic closes a connection whose request made the server panic.
var ErrPanic = errors.New("wire: panic serving a request")

// conn is one client connection. Three goroutines serve it: the reader
// reads frames and watches the socket, the executor runs one request at a
// time in arrival order, and the writer writes responses in that order. The
// reader keeps reading while a request is served, so a close or reset
// cancels the connection's context at once, and a parked long poll is
// woken and dropped (Kafka's purgatory drops the delayed fetches of a
// closed connection).
type conn struct {
	s      *Server
	r      *bufio.Reader
	ic     *idleConn
	act    *activity
	remote string
	max    int32
	ctx    context.Context
	cancel context.CancelCauseFunc
	// id is who the connection's requests come from; session is its
	// SASL session, nil on a listener without SASL.
	id      Identity
	session *session
	// disp answers the connection's requests: its listener's
	// dispatcher, else the server's.
	disp Dispatcher
}

// pending is one request read in full, waiting to be served.
type pending struct {
	key   int16
	frame []byte
	// pooled holds frame when it is a pooled buffer (pooledFrame); it is
	// released once the response has been written.
	pooled *[]byte
	lease  *Lease
	// size is what the frame is allowed to decode to (readReservation);
	// clipped is set when that is below its worst case, so the scan must
	// show the decode fits.
	size    int64
	clipped bool
	// decompress is what validating a Produce's record sets may hold
	// beside the frame while it is served (produceDecompression).
	decompress int64
	// header and body are the parsed frame.
	header RequestHeader
	body   []byte
}

func (p *pending) drop() {
	p.lease.Release()
	releaseFrame(p.pooled)
}

// serveConn runs one connection until it closes, and then releases
// everything it held. On a secured listener the TLS handshake and the SASL
// exchange come first, read and answered in this goroutine before any
// other request is read.
func (s *Server) serveConn(c net.Conn, l *Listener) {
	if s.Observer != nil {
		s.Observer.Connection(true)
		defer s.Observer.Connection(false)
	}
	id := PlaintextIdentity(c, l.Name)
	raw := c
	c, err := s.secure(c, l, &id)
	if err != nil {
		raw.Close()
		s.Logger.Debug("connection closed", "remote", raw.RemoteAddr().String(), "err", err)
		return
	}
	max := s.MaxRequestBytes
	if max <= 0 {
		max = DefaultMaxRequestBytes
	}
	depth := s.MaxInFlight
	if depth <= 0 {
		depth = 16
	}
	act := &activity{}
	ic := &idleConn{Conn: c, idle: s.IdleTimeout, act: act}
	cn := &conn{s: s, r: bufio.NewReaderSize(ic, 4<<10), ic: ic, act: act, remote: c.RemoteAddr().String(), max: max, id: id,
		disp: s.Dispatcher}
	if l.Dispatcher != nil {
		cn.disp = l.Dispatcher
	}
	cn.ctx, cn.cancel = context.WithCancelCause(s.ctx)
	if l.SASL != nil {
		if err := cn.authenticate(c, l.SASL); err != nil {
			cn.cancel(err)
			c.Close()
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.Logger.Debug("connection closed", "remote", cn.remote, "listener", l.Name, "err", err)
			}
			return
		}
	}

	out := make(chan outgoing, depth)
	queue := make(chan *pending, heldRequests)
	execDone := make(chan struct{})
	writerDone := make(chan struct{})
	var writeErr error
	go func() {
		defer close(writerDone)
		writeErr = s.writeLoop(c, out, act)
		c.Close() // ends the reader once the last response is out
	}()
	var execErr error
	go func() {
		defer close(execDone)
		defer close(out)
		execErr = cn.execLoop(queue, out)
		cn.cancel(execErr) // wakes a reader waiting for the budget
	}()
	readErr := cn.readLoop(queue, execDone)
	// A closed, reset or broken connection drops what it is being
	// served: nobody is there to read the answer.
	cn.cancel(readErr)
	close(queue)
	<-execDone
	for p := range queue {
		p.drop()
	}
	<-writerDone
	c.Close()
	// The first failure is why the connection closed: a writer or
	// executor failure closes the socket under the reader.
	err = readErr
	for _, e := range []error{execErr, writeErr} {
		if e != nil {
			err = e
		}
	}
	switch {
	case errors.Is(err, errWriteIdle):
		s.connClosed("write_idle")
	case errors.Is(err, ErrIdle):
		s.connClosed("idle")
	case errors.Is(err, ErrPanic):
		s.connClosed("panic")
	}
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, context.Canceled) {
		s.Logger.Debug("connection closed", "remote", cn.remote, "err", err)
	}
}

// readLoop reads requests and queues them for the executor until the
// connection fails or the executor stops.
func (cn *conn) readLoop(queue chan<- *pending, execDone <-chan struct{}) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = cn.s.recovered(cn.remote, -1, -1, r)
		}
	}()
	for {
		p, err := cn.readRequest()
		if err != nil {
			return err
		}
		select {
		case queue <- p:
			continue
		case <-execDone:
			p.drop()
			return nil
		default:
		}
		if err := cn.hold(p, queue, execDone); errors.Is(err, errExecStopped) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// hold waits to queue p while the executor is busy and another request is
// held, and meanwhile keeps watching the socket: a probe waits for one more
// byte (into the reader's small buffer, so nothing more is read than that),
// and if the connection closes or fails first, the connection's context is
// cancelled at once, so that the request being served (a parked long poll)
// is dropped rather than waited for. Once bytes do arrive the client has
// pipelined further, and the wait goes on without watching.
func (cn *conn) hold(p *pending, queue chan<- *pending, execDone <-chan struct{}) error {
	probe := make(chan error, 1)
	go func() {
		_, err := cn.r.Peek(1)
		probe <- err
	}()
	select {
	case queue <- p:
		// The probe owns the reader until it returns: the next read
		// would wait for the same byte anyway.
		return <-probe
	case err := <-probe:
		if err != nil {
			// The client closed or broke the connection after sending
			// p. The request being served now (a parked long poll) is
			// ended, since nobody will read its answer, but p is still
			// served: an acks=0 Produce has no other chance.
			cn.cancel(err)
			select {
			case queue <- p:
			case <-execDone:
				p.drop()
			}
			return err
		}
	case <-execDone:
		p.drop()
		<-probe // the writer closes the socket, which ends the probe
		return errExecStopped
	}
	select {
	case queue <- p:
		return nil
	case <-execDone:
		p.drop()
		return errExecStopped
	}
}

// errExecStopped ends a reader whose executor stopped (its error closes
// the connection).
var errExecStopped = errors.New("wire: connection's executor stopped")

// execLoop serves queued requests one at a time, in order, and queues their
// responses for the writer. Every request read before the connection
// closed is served, as Kafka's Selector serves the receives a closing
// channel has staged (an acks=0 producer may close right after its last
// send); the closed connection's context only ends waits early, and the
// answers go nowhere.
func (cn *conn) execLoop(queue <-chan *pending, out chan<- outgoing) error {
	for p := range queue {
		o, err := cn.execute(p)
		if err != nil {
			return err // the reader drops what it holds
		}
		if o.resp.Msg == nil && o.resp.Body == nil {
			releaseFrame(o.frame)
			continue
		}
		select {
		case out <- o:
		case <-cn.ctx.Done():
			o.resp.release()
			releaseFrame(o.frame)
		}
		if o.closeAfter != nil {
			return o.closeAfter // the writer sends o, then closes
		}
	}
	return nil
}

// execute dispatches p and returns its response, with the pooled frame the
// response may alias. The decode reservation is given back when the
// dispatcher calls Decoded (all of it, or all but the frame when the
// decoded request can alias the frame), and the rest when it returns. The
// executor never waits for the budget: the reader reserved everything p
// needs, so a request whose connection serves an earlier one can always
// finish, and the budget cannot deadlock on it.
func (cn *conn) execute(p *pending) (o outgoing, err error) {
	s := cn.s
	defer p.lease.Release()
	// Time in the broker is not the client's idleness.
	cn.act.busy.Add(1)
	defer cn.act.served()
	h := p.header
	defer func() {
		if r := recover(); r != nil {
			o.resp.release()
			releaseFrame(p.pooled)
			o, err = outgoing{}, s.recovered(cn.remote, h.Key, h.Version, r)
		}
	}()
	if o, handled, err := cn.secured(p); handled {
		return o, err
	}
	req := &Request{Header: h, Body: p.body, Remote: cn.remote}
	cn.id.stamp(req)
	req.decoded = func() {
		if retainsFrame(h.Key, h.Version) {
			p.lease.Shrink(int64(len(p.frame)) + p.decompress)
			return
		}
		p.lease.Release()
		if p.pooled == nil {
			p.frame, p.body, req.Body = nil, nil, nil // garbage once decoded
		}
	}
	req.consumed = p.lease.Release
	resp, err := cn.disp.Dispatch(cn.ctx, req)
	if err != nil {
		resp.release()
		releaseFrame(p.pooled)
		return outgoing{}, err
	}
	return outgoing{key: h.Key, version: h.Version, correlationID: h.CorrelationID, resp: resp, frame: p.pooled}, nil
}

// secured handles, on a SASL listener, what comes before dispatch: a
// request after the session expired closes the connection, and a
// re-authentication's SaslHandshake and SaslAuthenticate are answered here.
// handled is false for a request to dispatch.
func (cn *conn) secured(p *pending) (outgoing, bool, error) {
	ss := cn.session
	if ss == nil {
		return outgoing{}, false, nil
	}
	h := p.header
	if ss.reauth == nil && h.Key != SaslHandshakeKey && ss.expired() {
		cn.s.connClosed("session_expired")
		return outgoing{}, true, ErrSessionExpired
	}
	resp, handled, err := cn.reauthenticate(h, p.body)
	if !handled {
		return outgoing{}, false, nil
	}
	releaseFrame(p.pooled)
	if resp.Msg == nil {
		if err == nil {
			err = ErrAuthentication
		}
		return outgoing{}, true, err
	}
	return outgoing{key: h.Key, version: h.Version, correlationID: h.CorrelationID, resp: resp, closeAfter: err}, true, nil
}

// reserveDecode parses p's header and grows its lease from the frame to
// what decoding it may allocate: the scanned estimate where there is one,
// else Reservation. A clipped reservation that the scan cannot show to be
// enough closes the connection before the request is decoded.
func (cn *conn) reserveDecode(p *pending) error {
	s := cn.s
	h, body, err := ParseRequestHeader(p.frame)
	if err != nil {
		s.refused("bad_header")
		return err
	}
	p.header, p.body = h, body
	want := p.size
	if sizeScanned(h.Key) && (s.Budget != nil || p.clipped) {
		est, ok := sizeEstimate(h.Key, h.Version, body)
		switch {
		case p.clipped && (!ok || est > p.size):
			s.refused("decode_too_large")
			return fmt.Errorf("%w: %s frame of %d bytes (estimate %d, well-formed %t)",
				ErrDecodeTooLarge, kmsg.NameForKey(h.Key), len(p.frame), est, ok)
		case ok && est < want:
			want = est
		}
	}
	if h.Key == produceKey && s.Budget != nil {
		p.decompress = produceDecompression(h.Version, body, s.RecordLimits)
		want += p.decompress
	}
	if n := want - p.lease.Held(); n > 0 {
		return cn.grow(p.lease, n)
	}
	p.lease.Shrink(want)
	return nil
}

// recovered logs and counts a panic contained to its connection, as
// net/http's conn.serve, and returns the error that closes it. key and
// version are -1 when no request was being served.
func (s *Server) recovered(remote string, key, version int16, r any) error {
	s.Logger.Error("panic serving a request; closing its connection", "remote", remote,
		"api", kmsg.NameForKey(key), "api_key", key, "api_version", version, "panic", fmt.Sprint(r),
		"stack", string(debug.Stack()))
	if s.Observer != nil {
		s.Observer.PanicRecovered(key)
	}
	return fmt.Errorf("%w: api key %d version %d: %v", ErrPanic, key, version, r)
}

// grow adds n bytes to l for the reader. Time spent waiting for the budget
// is the broker's, not the client's idleness.
func (cn *conn) grow(l *Lease, n int64) error {
	if err := l.Grow(cn.ctx, n); err != nil {
		return err
	}
	cn.ic.touch()
	return nil
}

// readRequest reads one request frame. As Kafka's NetworkReceive it refuses
// a length above socket.request.max.bytes before reading the body; it then
// reads the api key and version, refuses an unknown key or a frame above
// the key's APIFrameCap, and reads the body in growing steps, each reserved
// from the Budget before it is allocated (waiting, with the connection
// unread, while the budget is spent). Once the whole frame is in, it takes
// the decode reservation (reserveDecode).
func (cn *conn) readRequest() (*pending, error) {
	s := cn.s
	if s.IdleTimeout > 0 {
		if err := cn.ic.SetReadDeadline(time.Now().Add(s.IdleTimeout)); err != nil {
			return nil, err
		}
	}
	var hdr [8]byte
	if _, err := io.ReadFull(cn.r, hdr[:4]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(hdr[:4]))
	switch {
	case n < 0:
		s.refused("negative")
		return nil, fmt.Errorf("%w: %d", ErrNegativeFrame, n)
	case n == 0:
		s.refused("empty")
		return nil, ErrEmptyFrame
	case n > cn.max:
		s.refused("too_large")
		return nil, fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, n, cn.max)
	case n < 4:
		s.refused("bad_header")
		return nil, fmt.Errorf("%w: frame of %d bytes", ErrShortHeader, n)
	}
	if _, err := io.ReadFull(cn.r, hdr[4:8]); err != nil {
		return nil, noEOF(err)
	}
	key := int16(binary.BigEndian.Uint16(hdr[4:]))
	version := int16(binary.BigEndian.Uint16(hdr[6:]))
	if kmsg.RequestForKey(key) == nil {
		s.refused("unknown_api")
		return nil, fmt.Errorf("%w %d", ErrUnknownAPIKey, key)
	}
	if limit := APIFrameCap(key, version, cn.max); n > limit {
		s.refused("api_frame_cap")
		return nil, fmt.Errorf("%w: %s frame of %d bytes > %d", ErrFrameTooLarge, kmsg.NameForKey(key), n, limit)
	}
	size, clipped := readReservation(key, version, n, cn.max)
	p := &pending{key: key, lease: s.Budget.Lease(), size: size, clipped: clipped}
	if err := cn.readBody(p, int(n), hdr[4:8]); err != nil {
		p.drop()
		return nil, err
	}
	if err := cn.reserveDecode(p); err != nil {
		p.drop()
		return nil, err
	}
	if s.Observer != nil {
		s.Observer.BytesIn(int(n) + 4)
	}
	return p, nil
}

// readBody reads the n-byte frame that begins with head into p.frame,
// growing the buffer from readStep and reserving each step before it is
// allocated.
func (cn *conn) readBody(p *pending, n int, head []byte) error {
	pooled := pooledFrame(p.key)
	filled := 0
	for step := min(n, readStep); ; step = min(n, readGrowth*step) {
		if err := cn.grow(p.lease, int64(step-filled)); err != nil {
			return err
		}
		var buf []byte
		var pb *[]byte
		if pooled {
			pb = getFrame(step)
			buf = *pb
		} else {
			buf = make([]byte, step)
		}
		if filled == 0 {
			filled = copy(buf, head)
		} else {
			copy(buf, p.frame[:filled])
		}
		putFrame(p.pooled, false) // outgrown: never seen by a request
		p.frame, p.pooled = buf, pb
		if _, err := io.ReadFull(cn.r, buf[filled:]); err != nil {
			return noEOF(err)
		}
		filled = step
		if step == n {
			return nil
		}
	}
}

// noEOF turns an EOF inside a frame into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// retainsFrame reports whether a decoded request of key at version may
// still refer to its frame: kmsg aliases byte fields (records, group
// metadata, assignments) and, in flexible versions, unknown tagged fields to
// the frame. Such a request keeps its frame's bytes reserved until the
// dispatcher returns, as Kafka keeps the buffer of a request whose schema
// has BYTES fields (ApiKeys.requiresDelayedAllocation); any other request
// gives its whole reservation back once decoded.
func retainsFrame(key, version int16) bool {
	return isFlexible(key, version) || hasByteFields(key)
}

var byteFields sync.Map // int16 -> bool

func hasByteFields(key int16) bool {
	if v, ok := byteFields.Load(key); ok {
		return v.(bool)
	}
	req := kmsg.RequestForKey(key)
	has := req != nil && typeHasBytes(reflect.TypeOf(req), 0)
	byteFields.Store(key, has)
	return has
}

func typeHasBytes(t reflect.Type, depth int) bool {
	if depth > 16 {
		return true // not expected in kmsg; assume the worst
	}
	switch t.Kind() {
	case reflect.Slice:
		return t.Elem().Kind() == reflect.Uint8 || typeHasBytes(t.Elem(), depth+1)
	case reflect.Pointer, reflect.Array:
		return typeHasBytes(t.Elem(), depth+1)
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && typeHasBytes(f.Type, depth+1) {
				return true
			}
		}
	}
	return false
}

// idleConn is a connection as its reader sees it. A read that reaches the
// read deadline (IdleTimeout after the reader began waiting for a request)
// ends the connection with ErrIdle only if no request byte was read, no
// response byte reached the socket and no request was being served within
// IdleTimeout; otherwise the deadline moves on. So, as with Kafka's
// Selector, only a connection with no traffic either way is idle: a client
// slowly reading a large response, slowly sending a large request, or
// waiting on a long poll, is not. A client that stops reading a response is
// expired by the writer (progressWriter), whose lastWrite then stops moving.
type idleConn struct {
	net.Conn
	idle     time.Duration
	act      *activity
	lastRead time.Time
}

// touch counts now as activity, after the reader waited on the broker.
func (c *idleConn) touch() {
	if c.idle > 0 {
		c.lastRead = time.Now()
	}
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
		if c.act.busy.Load() > 0 {
			last = now
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

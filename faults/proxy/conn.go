package proxy

import (
	"encoding/binary"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// pendingReq is one request awaiting its response, in request order.
type pendingReq struct {
	corr         int32
	key, version int16
	// inject is the whole response frame to send instead of the broker's.
	inject []byte
	act    Action
	rnd    *Rand
}

// conn is one proxied client connection and its upstream connection.
type conn struct {
	p                *Proxy
	client, upstream net.Conn
	done             chan struct{}
	once             sync.Once
	// pending holds requests forwarded or answered, in order; responses
	// are matched against its head by correlation id.
	pending  chan *pendingReq
	up, down *link
}

// link is one direction of a connection and its toxics' per-connection
// state.
type link struct {
	c      *conn
	stream string
	sink   func(Chunk) error
	mu     sync.Mutex
	states map[*toxic]*Stub
}

func newConn(p *Proxy, client, upstream net.Conn) *conn {
	c := &conn{p: p, client: client, upstream: upstream, done: make(chan struct{}), pending: make(chan *pendingReq, 4096)}
	c.up = &link{c: c, stream: Upstream, states: map[*toxic]*Stub{}, sink: c.writeUpstream}
	c.down = &link{c: c, stream: Downstream, states: map[*toxic]*Stub{}, sink: c.writeClient}
	return c
}

func (c *conn) close() {
	c.once.Do(func() {
		close(c.done)
		c.client.Close()
		c.upstream.Close()
		c.p.forget(c)
	})
}

func (c *conn) reset() {
	if tc, ok := c.client.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	if tc, ok := c.upstream.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.close()
}

func (c *conn) run() {
	upIn := make(chan Chunk, 64)
	downIn := make(chan Chunk, 64)
	go c.read(c.client, upIn)
	go c.read(c.upstream, downIn)
	go c.requests(upIn)
	c.responses(downIn)
}

// read frames src into out, ending with an EOF chunk.
func (c *conn) read(src net.Conn, out chan<- Chunk) {
	for {
		b, err := readFrame(src)
		ch := Chunk{Data: b, Time: time.Now(), EOF: err != nil}
		select {
		case out <- ch:
		case <-c.done:
			return
		}
		if err != nil {
			return
		}
	}
}

// requests handles client-to-broker frames: Kafka-aware toxics decide, then
// the upstream chain of byte toxics carries the frame to the broker.
func (c *conn) requests(in <-chan Chunk) {
	defer c.close()
	for {
		var ch Chunk
		select {
		case ch = <-in:
		case <-c.done:
			return
		}
		if ch.EOF {
			c.up.send(ch)
			return
		}
		r, err := parseRequest(ch.Data)
		if err != nil {
			slog.Debug("proxy: closing connection", "proxy", c.p.name, "err", err)
			return
		}
		pr := &pendingReq{corr: r.CorrelationID, key: r.Key, version: r.Version}
		tx, act := c.p.kafkaAction(r)
		if tx != nil {
			pr.act, pr.rnd = act, tx.rnd
		}
		respond := expectsResponse(r)
		if act.ErrorCode != 0 {
			if !respond {
				continue // acks=0: the request is simply lost
			}
			frame, err := errorResponse(r, act.ErrorCode)
			if err != nil {
				slog.Warn("proxy: cannot build error response; closing connection", "proxy", c.p.name, "err", err)
				return
			}
			pr.inject = frame
			if !c.enqueue(pr) {
				return
			}
			continue
		}
		if respond {
			ch.req = pr
		}
		if err := c.up.send(ch); err != nil {
			return
		}
	}
}

func (c *conn) enqueue(pr *pendingReq) bool {
	select {
	case c.pending <- pr:
		return true
	case <-c.done:
		return false
	}
}

func (c *conn) writeUpstream(ch Chunk) error {
	if ch.EOF {
		return ErrClose
	}
	if ch.req != nil && !c.enqueue(ch.req) {
		return ErrClose
	}
	_, err := c.upstream.Write(ch.Data)
	return err
}

func (c *conn) writeClient(ch Chunk) error {
	if ch.EOF {
		return ErrClose
	}
	_, err := c.client.Write(ch.Data)
	return err
}

// responses handles broker-to-client frames in request order, sending
// injected answers in their place.
func (c *conn) responses(in <-chan Chunk) {
	defer c.close()
	for {
		var pr *pendingReq
		var ch Chunk
		have := false
		select {
		case pr = <-c.pending:
		case ch = <-in:
			have = true
			// The request is registered before it is written upstream, so
			// a response always finds its request queued.
			select {
			case pr = <-c.pending:
			default:
				if !ch.EOF {
					slog.Debug("proxy: unsolicited response; closing", "proxy", c.p.name)
				}
				c.down.send(Chunk{EOF: true, Time: time.Now()})
				return
			}
		case <-c.done:
			return
		}
		if pr.inject != nil {
			if have {
				// A broker frame arrived while an injected answer was next:
				// keep it for the following request.
				if err := c.down.send(Chunk{Data: pr.inject, Time: time.Now()}); err != nil {
					return
				}
				if !c.answer(ch) {
					return
				}
				continue
			}
			if err := c.down.send(Chunk{Data: pr.inject, Time: time.Now()}); err != nil {
				return
			}
			continue
		}
		if !have {
			select {
			case ch = <-in:
			case <-c.done:
				return
			}
		}
		if !c.deliver(pr, ch) {
			return
		}
	}
}

// answer delivers ch, which arrived while injected answers were due, to the
// next forwarded request, sending any injected answers queued before it.
func (c *conn) answer(ch Chunk) bool {
	for {
		var pr *pendingReq
		select {
		case pr = <-c.pending:
		case <-c.done:
			return false
		}
		if pr.inject == nil {
			return c.deliver(pr, ch)
		}
		if err := c.down.send(Chunk{Data: pr.inject, Time: time.Now()}); err != nil {
			return false
		}
	}
}

// deliver applies the request's Kafka action to its response ch and sends
// it on; false closes the connection.
func (c *conn) deliver(pr *pendingReq, ch Chunk) bool {
	if ch.EOF {
		c.down.send(ch)
		return false
	}
	if len(ch.Data) < 8 || int32(binary.BigEndian.Uint32(ch.Data[4:])) != pr.corr {
		slog.Debug("proxy: response out of order; closing", "proxy", c.p.name)
		return false
	}
	if pr.act.DropResponse {
		return false
	}
	if pr.act.DelayResponse > 0 {
		t := time.NewTimer(pr.act.DelayResponse)
		select {
		case <-t.C:
		case <-c.done:
			t.Stop()
			return false
		}
	}
	switch {
	case pr.act.Fetch != "" && pr.key == 1:
		ch.Data = c.mutateFetch(pr, ch.Data)
	case pr.key == 3 || pr.key == 10 || pr.key == 60:
		ch.Data = c.p.g.rewrite(pr, ch.Data)
	}
	return c.down.send(ch) == nil
}

// mutateFetch corrupts one CRC-covered byte of, or duplicates, the first
// record batch in a Fetch response.
func (c *conn) mutateFetch(pr *pendingReq, frame []byte) []byte {
	resp, body, err := responseBody(frame, pr.key, pr.version)
	if err != nil || resp.ReadFrom(body) != nil {
		return frame
	}
	f := resp.(*kmsg.FetchResponse)
	for ti := range f.Topics {
		for pi := range f.Topics[ti].Partitions {
			p := &f.Topics[ti].Partitions[pi]
			b := p.RecordBatches
			if len(b) < 61 {
				continue
			}
			n := 12 + int(int32(binary.BigEndian.Uint32(b[8:])))
			if n < 61 || n > len(b) {
				continue
			}
			out := make([]byte, 0, len(b)+n)
			if pr.act.Fetch == "duplicate" {
				out = append(append(out, b[:n]...), b...)
			} else {
				out = append(out, b...)
				// Bytes from the attributes on are covered by the batch CRC
				// (Kafka's DefaultRecordBatch layout).
				out[21+pr.rnd.Int64N(int64(n-21))] ^= 0xff
			}
			p.RecordBatches = out
			return encodeResponse(pr.corr, f)
		}
	}
	return frame
}

// send runs ch through the direction's current toxics, then to the socket.
// An error means the connection is closing.
func (l *link) send(ch Chunk) error {
	chain := l.c.p.byteToxics(l.stream)
	err := l.run(chain, 0, ch)
	if err != nil {
		l.c.close()
	}
	return err
}

func (l *link) run(chain []*toxic, i int, ch Chunk) error {
	if i == len(chain) {
		return l.sink(ch)
	}
	s := l.stub(chain[i])
	if s == nil {
		return l.run(chain, i+1, ch)
	}
	s.next = func(c Chunk) error { return l.run(chain, i+1, c) }
	return chain[i].impl.(Toxic).Pipe(s, ch)
}

// stub returns the toxic's per-connection stub, creating it on first use:
// toxicity is drawn once per connection (as toxiproxy), and nil means the
// toxic does not apply to this connection.
func (l *link) stub(tx *toxic) *Stub {
	l.mu.Lock()
	s, ok := l.states[tx]
	if ok {
		l.mu.Unlock()
		return s
	}
	if tx.spec.Toxicity < 1 && tx.rnd.Float64() >= tx.spec.Toxicity {
		l.states[tx] = nil
		l.mu.Unlock()
		return nil
	}
	s = &Stub{Rand: tx.rnd, Done: tx.removed, c: l.c}
	if st, ok := tx.impl.(Stateful); ok {
		s.State = st.NewState()
	}
	l.states[tx] = s
	l.mu.Unlock()
	if a, ok := tx.impl.(Attacher); ok {
		a.Attach(s)
	}
	return s
}

package quorum

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// Transport carries raft messages to peers. Send must not block: raft
// tolerates loss, so a transport drops what it cannot queue.
type Transport interface {
	Send(msgs []*pb.Message)
}

// Peer is the side of a Node a transport talks to: inbound messages and
// delivery reports (as raftexample's rafthttp reports to its raft node).
type Peer interface {
	Step(ctx context.Context, m *pb.Message) error
	ReportUnreachable(id uint64)
	ReportSnapshot(id uint64, ok bool)
}

// Attacher is a Transport that reports to the Node using it; Open attaches
// the new Node.
type Attacher interface {
	Attach(p Peer)
}

// TransportConfig configures a TCPTransport.
type TransportConfig struct {
	NodeID    uint64
	Voters    map[uint64]string // voter id -> controller-listener address
	ClusterID string
	// MaxFrameBytes bounds a frame either way; zero means
	// DefaultMaxFrameBytes. A snapshot message carries the whole snapshot,
	// so the bound also bounds the snapshot a follower can be sent.
	MaxFrameBytes int
	// QueueLen bounds the messages waiting for one peer; zero means 1024.
	QueueLen int
	// DialTimeout bounds a connection attempt; zero means 1 s.
	DialTimeout time.Duration
	// Dial, when set, opens the connections to the peers; nil means a
	// net.Dialer. DialTimeout bounds each dial through its context.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// WriteTimeout bounds one write; zero means 2 s.
	WriteTimeout time.Duration
	// MinBackoff and MaxBackoff bound the pause between connection
	// attempts, doubled from min to max with jitter; zero means 50 ms and
	// 1 s.
	MinBackoff, MaxBackoff time.Duration
	Logger                 *slog.Logger
	Rand                   *rand.Rand
}

// TCPTransport is the raft transport over TCP: one persistent outbound
// connection per peer, redialled with backoff, fed from a bounded queue
// that drops when full; inbound connections carry frames the other way.
type TCPTransport struct {
	cfg    TransportConfig
	ctx    context.Context
	cancel context.CancelFunc
	peers  map[uint64]*peerConn
	wg     sync.WaitGroup

	mu    sync.Mutex
	to    Peer
	conns map[net.Conn]struct{}
	lns   []net.Listener
	rng   *rand.Rand
}

// NewTCPTransport starts the outbound side: one goroutine per peer.
func NewTCPTransport(cfg TransportConfig) (*TCPTransport, error) {
	if _, ok := cfg.Voters[cfg.NodeID]; !ok {
		return nil, fmt.Errorf("quorum: node %d is not a voter", cfg.NodeID)
	}
	if cfg.ClusterID == "" || len(cfg.ClusterID) > maxClusterIDLen {
		return nil, fmt.Errorf("quorum: cluster id %q must have 1 to %d bytes", cfg.ClusterID, maxClusterIDLen)
	}
	if cfg.MaxFrameBytes == 0 {
		cfg.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if cfg.MaxFrameBytes < minFrameBytes {
		// A frame bound below the largest append would stall
		// replication of a large entry forever.
		return nil, fmt.Errorf("quorum: max frame bytes %d below %d (an entry of MaxEntryBytes and an append's worth of others)", cfg.MaxFrameBytes, minFrameBytes)
	}
	if cfg.QueueLen == 0 {
		cfg.QueueLen = 1024
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = time.Second
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 2 * time.Second
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = 50 * time.Millisecond
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &TCPTransport{cfg: cfg, ctx: ctx, cancel: cancel, peers: map[uint64]*peerConn{}, conns: map[net.Conn]struct{}{}, rng: cfg.Rand}
	for id, addr := range cfg.Voters {
		if id == cfg.NodeID {
			continue
		}
		p := &peerConn{t: t, id: id, addr: addr, q: make(chan *pb.Message, cfg.QueueLen)}
		t.peers[id] = p
		t.wg.Go(p.run)
	}
	return t, nil
}

// Attach sets the node that receives inbound messages and delivery reports.
func (t *TCPTransport) Attach(p Peer) {
	t.mu.Lock()
	t.to = p
	t.mu.Unlock()
}

func (t *TCPTransport) peer() Peer {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.to
}

// Send queues msgs for their peers, dropping (and reporting the peer
// unreachable) what does not fit.
func (t *TCPTransport) Send(msgs []*pb.Message) {
	for _, m := range msgs {
		p, ok := t.peers[m.GetTo()]
		if !ok {
			continue
		}
		select {
		case p.q <- m:
		default:
			t.failed(p.id, m)
		}
	}
}

// failed reports a message that did not reach id.
func (t *TCPTransport) failed(id uint64, m *pb.Message) {
	to := t.peer()
	if to == nil {
		return
	}
	to.ReportUnreachable(id)
	if m.GetType() == pb.MsgSnap {
		to.ReportSnapshot(id, false)
	}
}

func (t *TCPTransport) jitter(d time.Duration) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return d/2 + time.Duration(t.rng.Int64N(int64(d/2)+1))
}

// peerConn is the outbound side to one peer.
type peerConn struct {
	t    *TCPTransport
	id   uint64
	addr string
	q    chan *pb.Message
}

func (p *peerConn) run() {
	cfg := p.t.cfg
	backoff := cfg.MinBackoff
	for {
		conn, err := dialTCP(p.t.ctx, cfg.Dial, p.addr, cfg.DialTimeout)
		if err != nil {
			if p.t.ctx.Err() != nil {
				return
			}
			p.drain()
			select {
			case <-time.After(p.t.jitter(backoff)):
			case <-p.t.ctx.Done():
				return
			}
			backoff = min(2*backoff, cfg.MaxBackoff)
			continue
		}
		backoff = cfg.MinBackoff
		err = p.write(conn)
		conn.Close()
		if p.t.ctx.Err() != nil {
			return
		}
		cfg.Logger.Debug("raft connection lost", "peer", p.id, "addr", p.addr, "err", err)
		if to := p.t.peer(); to != nil {
			to.ReportUnreachable(p.id)
		}
	}
}

// drain drops the queued messages while the peer cannot be reached.
func (p *peerConn) drain() {
	for {
		select {
		case m := <-p.q:
			p.t.failed(p.id, m)
		default:
			return
		}
	}
}

// write sends queued messages on conn until an error. The peer never
// writes on this connection, so a read returning means it closed.
func (p *peerConn) write(conn net.Conn) error {
	cfg := p.t.cfg
	closed := make(chan struct{})
	go func() {
		io.Copy(io.Discard, conn)
		close(closed)
	}()
	w := bufio.NewWriterSize(conn, 64<<10)
	var buf []byte
	var corr int32
	for {
		var m *pb.Message
		select {
		case m = <-p.q:
		case <-closed:
			return errors.New("closed by peer")
		case <-p.t.ctx.Done():
			return p.t.ctx.Err()
		}
		var err error
		corr++
		buf, err = appendFrame(buf[:0], cfg.ClusterID, corr, m)
		if err != nil || len(buf)-4 > cfg.MaxFrameBytes {
			cfg.Logger.Warn("raft message not sent", "peer", p.id, "type", m.GetType(), "bytes", len(buf), "err", err)
			p.t.failed(p.id, m)
			continue
		}
		conn.SetWriteDeadline(time.Now().Add(cfg.WriteTimeout))
		if _, err := w.Write(buf); err != nil {
			p.t.failed(p.id, m)
			return err
		}
		// A snapshot is flushed at once: raft waits for its report.
		snap := m.GetType() == pb.MsgSnap
		if snap || len(p.q) == 0 || w.Buffered() > 32<<10 {
			if err := w.Flush(); err != nil {
				p.t.failed(p.id, m)
				return err
			}
		}
		if snap {
			// As raftexample: written to the connection counts as sent;
			// if it was lost after all, the follower's rejection of the
			// next append sends raft back to probing.
			if to := p.t.peer(); to != nil {
				to.ReportSnapshot(p.id, true)
			}
		}
	}
}

// Serve accepts connections on ln and serves each with ServeConn until
// ln is closed or the transport is closed.
func (t *TCPTransport) Serve(ln net.Listener) error {
	t.mu.Lock()
	if t.ctx.Err() != nil {
		t.mu.Unlock()
		ln.Close()
		return net.ErrClosed
	}
	t.lns = append(t.lns, ln)
	t.mu.Unlock()
	for {
		conn, err := ln.Accept()
		if err != nil {
			return err
		}
		t.mu.Lock()
		if t.ctx.Err() != nil {
			t.mu.Unlock()
			conn.Close()
			return net.ErrClosed
		}
		t.wg.Add(1) // under mu, so never concurrent with Close's Wait
		t.mu.Unlock()
		go func() {
			defer t.wg.Done()
			if err := t.ServeConn(conn); err != nil && !errors.Is(err, io.EOF) && t.ctx.Err() == nil {
				t.cfg.Logger.Debug("raft connection closed", "remote", conn.RemoteAddr(), "err", err)
			}
		}()
	}
}

// ServeConn reads raft frames from conn and steps them into the attached
// node until an error, then closes conn. A frame above MaxFrameBytes, of
// another cluster, or from a non-voter closes the connection.
func (t *TCPTransport) ServeConn(conn net.Conn) error {
	t.mu.Lock()
	if t.ctx.Err() != nil {
		t.mu.Unlock()
		conn.Close()
		return net.ErrClosed
	}
	t.conns[conn] = struct{}{}
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.conns, conn)
		t.mu.Unlock()
		conn.Close()
	}()
	r := bufio.NewReaderSize(conn, 64<<10)
	for {
		frame, err := ReadFrame(r, t.cfg.MaxFrameBytes)
		if err != nil {
			return err
		}
		if key, _ := FrameAPIKey(frame); key == ObserverFetchAPIKey {
			if err := t.serveObserver(conn, frame); err != nil {
				return err
			}
			continue
		}
		if err := t.HandleFrame(t.ctx, frame); err != nil {
			return err
		}
	}
}

// observerServer is the side of a Node that answers observer fetches.
type observerServer interface {
	HandleObserverFrame(ctx context.Context, frame []byte) ([]byte, error)
}

// serveObserver answers an observer fetch that came in on a connection of
// Serve: the attached node answers it and the answer is written back.
func (t *TCPTransport) serveObserver(conn net.Conn, frame []byte) error {
	s, ok := t.peer().(observerServer)
	if !ok {
		return fmt.Errorf("%w: no node attached to answer an observer fetch", ErrObserverFrame)
	}
	out, err := s.HandleObserverFrame(t.ctx, frame)
	if err != nil {
		return err
	}
	conn.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout))
	_, err = conn.Write(out)
	return err
}

// HandleFrame steps the message of one frame (as ReadFrame returns it)
// into the attached node. A listener that multiplexes raft with Kafka
// requests calls it for frames whose api key is APIKey.
func (t *TCPTransport) HandleFrame(ctx context.Context, frame []byte) error {
	m, err := parseFrame(frame, t.cfg.ClusterID)
	if err != nil {
		return err
	}
	if _, ok := t.cfg.Voters[m.GetFrom()]; !ok || m.GetFrom() == t.cfg.NodeID {
		return fmt.Errorf("%w: message from %d, not a peer voter", ErrFrame, m.GetFrom())
	}
	if m.GetTo() != t.cfg.NodeID {
		return fmt.Errorf("%w: message for %d received by %d", ErrFrame, m.GetTo(), t.cfg.NodeID)
	}
	to := t.peer()
	if to == nil {
		return errors.New("quorum: no node attached")
	}
	return to.Step(ctx, m)
}

// Close stops the outbound connections, the listeners passed to Serve and
// the inbound connections, and waits for their goroutines.
func (t *TCPTransport) Close() error {
	t.mu.Lock()
	t.cancel()
	for _, ln := range t.lns {
		ln.Close()
	}
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
	return nil
}

// dialTCP dials address over TCP with dial, or a net.Dialer when dial is
// nil, giving up after timeout.
func dialTCP(ctx context.Context, dial func(context.Context, string, string) (net.Conn, error), address string, timeout time.Duration) (net.Conn, error) {
	if dial == nil {
		return (&net.Dialer{Timeout: timeout}).DialContext(ctx, "tcp", address)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return dial(ctx, "tcp", address)
}

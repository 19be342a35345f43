package quorum

import (
	"context"
	"errors"
	"fmt"
	"sync"

	pb "go.etcd.io/raft/v3/raftpb"
)

// ErrStopped is returned by a Node that is closed or stopped by an error.
var ErrStopped = errors.New("quorum: node stopped")

// Node is a quorum member with its I/O: a run loop goroutine that ticks
// the Core from the configured Ticker, steps inbound messages, places
// proposals, and runs each Ready (persist, send, apply, advance), as
// etcd's raftexample does.
type Node struct {
	cfg  Config
	core *Core
	tr   Transport

	propc   chan *proposal
	recvc   chan *pb.Message
	reportc chan report
	callc   chan func() // work on the loop: Describe, TransferLeadership
	stopc   chan struct{}
	donec   chan struct{}
	once    sync.Once

	mu      sync.Mutex
	leader  uint64
	term    uint64
	changed chan struct{}
	err     error

	peers peerTracker // the followers' answers; the loop's own
}

type proposal struct {
	data  []byte
	done  chan result
	index uint64
	term  uint64
}

type result struct {
	index uint64
	err   error
}

type report struct {
	id       uint64
	snapshot bool
	ok       bool
}

// Open opens the quorum directory, restores the application (its Restore
// then Apply are called from the run loop before anything else), attaches
// tr if it is an Attacher, and starts the run loop.
func Open(cfg Config, app Application, tr Transport) (*Node, error) {
	core, err := NewCore(cfg, app)
	if err != nil {
		return nil, err
	}
	n := &Node{
		cfg:     core.cfg,
		core:    core,
		tr:      tr,
		propc:   make(chan *proposal, 256),
		recvc:   make(chan *pb.Message, 1024),
		reportc: make(chan report, 256),
		callc:   make(chan func()),
		stopc:   make(chan struct{}),
		donec:   make(chan struct{}),
		changed: make(chan struct{}),
	}
	if a, ok := tr.(Attacher); ok {
		a.Attach(n)
	}
	go n.run()
	return n, nil
}

// Propose proposes data and returns its index once it is committed. A
// node that is not the leader returns a *NotLeaderError (errors.Is
// ErrNotLeader) naming the leader it knows; a leader that loses its
// leadership first returns ErrLeadershipLost.
func (n *Node) Propose(ctx context.Context, data []byte) (uint64, error) {
	p := &proposal{data: data, done: make(chan result, 1)}
	select {
	case n.propc <- p:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-n.donec:
		return 0, n.stopErr()
	}
	select {
	case r := <-p.done:
		return r.index, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-n.donec:
		// The loop answers every proposal before it exits.
		select {
		case r := <-p.done:
			return r.index, r.err
		default:
			return 0, n.stopErr()
		}
	}
}

// Step hands the node a message from a peer.
func (n *Node) Step(ctx context.Context, m *pb.Message) error {
	select {
	case n.recvc <- m:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-n.donec:
		return n.stopErr()
	}
}

// ReportUnreachable tells raft a message to id was lost. It never blocks:
// the report is advisory and dropped when the loop is busy.
func (n *Node) ReportUnreachable(id uint64) {
	select {
	case n.reportc <- report{id: id}:
	default:
	}
}

// ReportSnapshot tells raft whether a snapshot reached id; raft keeps the
// follower waiting for a snapshot until told, so this report waits.
func (n *Node) ReportSnapshot(id uint64, ok bool) {
	select {
	case n.reportc <- report{id: id, snapshot: true, ok: ok}:
	case <-n.donec:
	}
}

// Leader returns the leader this node knows of (0 when none) and the term.
func (n *Node) Leader() (id, term uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.leader, n.term
}

// LeaderChanged returns a channel closed at the next change of Leader();
// call it again for the change after.
func (n *Node) LeaderChanged() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.changed
}

// Done is closed when the run loop has stopped.
func (n *Node) Done() <-chan struct{} { return n.donec }

// Err returns why the node stopped, or nil while it runs or after Close.
func (n *Node) Err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.err
}

func (n *Node) stopErr() error {
	if err := n.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrStopped, err)
	}
	return ErrStopped
}

// Close stops the run loop and closes the storage; the transport is the
// caller's to close.
func (n *Node) Close() error {
	n.once.Do(func() { close(n.stopc) })
	<-n.donec
	return n.core.Close()
}

func (n *Node) run() {
	defer close(n.donec)
	tickc, stopTicker := n.cfg.Ticker(n.cfg.Timing.TickInterval)
	defer stopTicker()
	waiting := map[uint64]*proposal{} // by proposal id, until placed
	placed := map[uint64]*proposal{}  // by index, until committed
	failAll := func(err error) {
		for id, p := range waiting {
			p.done <- result{err: err}
			delete(waiting, id)
		}
		for i, p := range placed {
			p.done <- result{err: err}
			delete(placed, i)
		}
	}
	stop := func(err error) {
		n.mu.Lock()
		n.err = err
		n.leader = 0
		close(n.changed)
		n.changed = make(chan struct{})
		n.mu.Unlock()
		failAll(ErrStopped)
		for {
			select {
			case p := <-n.propc:
				p.done <- result{err: ErrStopped}
			default:
				return
			}
		}
	}
	// The first Ready releases the stored snapshot and log to the
	// application before any tick.
	if err := n.process(waiting, placed, failAll); err != nil {
		n.cfg.Logger.Error("quorum stopped", "err", err)
		stop(err)
		return
	}
	for {
		select {
		case <-tickc:
			n.core.Tick()
		case m := <-n.recvc:
			if err := n.core.Step(m); err != nil {
				n.cfg.Logger.Debug("raft message refused", "from", m.GetFrom(), "type", m.GetType(), "err", err)
			} else {
				n.observe(m)
			}
		case r := <-n.reportc:
			if r.snapshot {
				n.core.ReportSnapshot(r.id, r.ok)
			} else {
				n.core.ReportUnreachable(r.id)
			}
		case p := <-n.propc:
			// Take the proposals already queued too, so that one Ready
			// (one fsync) carries them all.
			for more := true; more; {
				n.propose(p, waiting)
				select {
				case p = <-n.propc:
				default:
					more = false
				}
			}
		case f := <-n.callc:
			f()
		case <-n.stopc:
			stop(nil)
			return
		}
		if err := n.process(waiting, placed, failAll); err != nil {
			n.cfg.Logger.Error("quorum stopped", "err", err)
			stop(err)
			return
		}
	}
}

func (n *Node) propose(p *proposal, waiting map[uint64]*proposal) {
	id, err := n.core.Propose(p.data)
	if err != nil {
		p.done <- result{err: err}
		return
	}
	waiting[id] = p
}

// process runs Ready steps until raft has nothing more.
func (n *Node) process(waiting, placed map[uint64]*proposal, failAll func(error)) error {
	for range 64 {
		b, ok, err := n.core.Ready()
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		n.tr.Send(b.Messages)
		for _, pl := range b.Placed {
			if p := waiting[pl.ID]; p != nil {
				delete(waiting, pl.ID)
				p.index, p.term = pl.Index, pl.Term
				placed[pl.Index] = p
			}
		}
		for _, id := range b.Dropped {
			if p := waiting[id]; p != nil {
				delete(waiting, id)
				p.done <- result{err: ErrLeadershipLost}
			}
		}
		if err := n.core.Advance(b); err != nil {
			return err
		}
		for _, e := range b.Committed {
			if p := placed[e.Index]; p != nil {
				delete(placed, e.Index)
				if e.Term == p.term {
					p.done <- result{index: e.Index}
				} else {
					p.done <- result{err: ErrLeadershipLost}
				}
			}
		}
		for i, p := range placed {
			if i <= b.Applied { // overwritten by an empty entry or covered by a snapshot
				delete(placed, i)
				p.done <- result{err: ErrLeadershipLost}
			}
		}
		if b.LeaderChanged {
			n.mu.Lock()
			n.leader, n.term = b.Leader, b.Term
			close(n.changed)
			n.changed = make(chan struct{})
			n.mu.Unlock()
			if b.Leader != n.cfg.NodeID {
				failAll(ErrLeadershipLost)
			}
		}
	}
	return nil
}

package brokertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/cascade-kafka/cascade/broker"
)

// client stands for the test's clients in a gate: they are no node.
const client = 0

// network wires the nodes of an in-process Cluster so that a test can cut
// and freeze their connections. Every connection a node opens to a node
// goes through the node's Dial (broker.Config.Dial): a link, one pipe per
// connection whose bytes a pump copies to a real connection to the peer's
// listener. Clients reach node n through its fronts, forwarders listening
// on the address n advertises and on one for its controller listener.
// Each pump copies a chunk only while its gate is open:
//
//   - between nodes a and b, unless either is paused or a != b and either
//     is isolated;
//   - between a client and node n, unless n is paused.
//
// A closed gate holds what it read and reads no more, so the sender's
// socket buffers fill and its writes block, and a close waits too: the
// connection goes silent in both directions and stays open, as across a
// network partition or towards a stopped process, and what was sent
// arrives after the heal unless the peer gave up on the connection first.
// A node's dial of a node it is cut from hangs until the dial's deadline,
// as an unanswered SYN does; dials are not held for a paused node, whose
// kernel would accept them.
type network struct {
	mu       sync.Mutex
	changed  chan struct{} // closed and replaced at every change of the gates
	paused   map[int]bool
	isolated map[int]bool
	targets  map[string]target // a node's listener or front address -> where it leads
	conns    map[net.Conn]struct{}
	fronts   []*front
	closed   bool
	done     chan struct{}
	wg       sync.WaitGroup
}

// target is a node's listener that a dialled address leads to.
type target struct {
	node int
	addr string // the listener's own address
}

func newNetwork() *network {
	return &network{changed: make(chan struct{}), paused: map[int]bool{}, isolated: map[int]bool{},
		targets: map[string]target{}, conns: map[net.Conn]struct{}{}, done: make(chan struct{})}
}

// front is a forwarder to one of a node's listeners. It listens only
// while the node runs, so that a client's dial of a node that is down is
// refused, as a dead broker's is.
type front struct {
	node     int
	addr     string       // where it listens
	upstream string       // the node's listener
	ln       net.Listener // nil while the node is down
}

// front starts a forwarder on a free loopback port to node's listener at
// addr, and returns its address. The address and addr itself both lead
// to the listener in a node's Dial.
func (nw *network) front(node int, addr string) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("brokertest: front of node %d: %w", node, err)
	}
	f := &front{node: node, addr: ln.Addr().String(), upstream: addr}
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.fronts = append(nw.fronts, f)
	nw.targets[f.addr] = target{node: node, addr: addr}
	nw.targets[addr] = target{node: node, addr: addr}
	nw.serveLocked(f, ln)
	return f.addr, nil
}

// serveLocked accepts on ln for f until ln closes.
func (nw *network) serveLocked(f *front, ln net.Listener) {
	f.ln = ln
	nw.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			nw.wg.Go(func() {
				up, err := net.Dial("tcp", f.upstream)
				if err != nil {
					c.Close() // the node went down meanwhile
					return
				}
				nw.splice(c, up, client, f.node)
			})
		}
	})
}

// setFronts opens (up) or closes node's fronts, on the same addresses:
// the node has started or stopped.
func (nw *network) setFronts(node int, up bool) error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	var errs []error
	for _, f := range nw.fronts {
		switch {
		case f.node != node || nw.closed || (f.ln != nil) == up:
		case up:
			ln, err := net.Listen("tcp", f.addr)
			if err != nil {
				errs = append(errs, fmt.Errorf("brokertest: reopen the front of node %d: %w", node, err))
				continue
			}
			nw.serveLocked(f, ln)
		default:
			errs = append(errs, f.ln.Close())
			f.ln = nil
		}
	}
	return errors.Join(errs...)
}

// dialer returns node from's broker.Config.Dial.
func (nw *network) dialer(from int) broker.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		nw.mu.Lock()
		to, ok := nw.targets[addr]
		nw.mu.Unlock()
		if !ok {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
		if !nw.wait(ctx.Done(), func() bool { return !nw.cutLocked(from, to.node) }) {
			return nil, &net.OpError{Op: "dial", Net: network, Err: &cutError{from: from, to: to.node, cause: context.Cause(ctx)}}
		}
		var d net.Dialer
		up, err := d.DialContext(ctx, network, to.addr)
		if err != nil {
			return nil, err
		}
		mine, theirs := net.Pipe()
		if !nw.splice(mine, up, from, to.node) {
			return nil, net.ErrClosed
		}
		return theirs, nil
	}
}

// splice pumps bytes between a (the side of from) and b (the side of to)
// through their gate until either ends, then closes both; false means
// the network is closed and so are a and b.
func (nw *network) splice(a, b net.Conn, from, to int) bool {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.closed {
		a.Close()
		b.Close()
		return false
	}
	nw.conns[a], nw.conns[b] = struct{}{}, struct{}{}
	var once sync.Once
	end := func() {
		once.Do(func() {
			a.Close()
			b.Close()
			nw.mu.Lock()
			delete(nw.conns, a)
			delete(nw.conns, b)
			nw.mu.Unlock()
		})
	}
	open := func() bool { return nw.openLocked(from, to) }
	// Started under nw.mu, so that none starts once close waits.
	nw.wg.Go(func() { nw.pump(b, a, open); end() })
	nw.wg.Go(func() { nw.pump(a, b, open); end() })
	return true
}

// pump copies src to dst, each chunk once open says so; an end of src
// (a close, a reset) waits for the gate as bytes do.
func (nw *network) pump(dst, src net.Conn, open func() bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if !nw.wait(nw.done, open) {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// wait returns true once ok holds (called with nw.mu held), false when
// stop is closed first or the network closes.
func (nw *network) wait(stop <-chan struct{}, ok func() bool) bool {
	for {
		nw.mu.Lock()
		if nw.closed {
			nw.mu.Unlock()
			return false
		}
		if ok() {
			nw.mu.Unlock()
			return true
		}
		ch := nw.changed
		nw.mu.Unlock()
		select {
		case <-ch:
		case <-stop:
			return false
		case <-nw.done:
			return false
		}
	}
}

// openLocked reports whether bytes flow between from (a node, or client)
// and node to.
func (nw *network) openLocked(from, to int) bool {
	return !nw.paused[from] && !nw.paused[to] && (from == client || !nw.cutLocked(from, to))
}

// cutLocked reports whether nodes a and b are cut from each other.
func (nw *network) cutLocked(a, b int) bool {
	return a != b && (nw.isolated[a] || nw.isolated[b])
}

// set changes a gate flag of node and wakes every waiting pump and dial.
func (nw *network) set(flags map[int]bool, node int, on bool) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if on {
		flags[node] = true
	} else {
		delete(flags, node)
	}
	close(nw.changed)
	nw.changed = make(chan struct{})
}

func (nw *network) isPaused(node int) bool {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return nw.paused[node]
}

func (nw *network) isIsolated(node int) bool {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return nw.isolated[node]
}

// close stops the fronts, ends every connection and waits for the pumps.
func (nw *network) close() error {
	nw.mu.Lock()
	if nw.closed {
		nw.mu.Unlock()
		return nil
	}
	nw.closed = true
	close(nw.done)
	var errs []error
	for _, f := range nw.fronts {
		if f.ln != nil {
			if err := f.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
				errs = append(errs, err)
			}
			f.ln = nil
		}
	}
	for c := range nw.conns {
		c.Close()
	}
	nw.mu.Unlock()
	nw.wg.Wait()
	return errors.Join(errs...)
}

// cutError is a dial that hung on a cut until its deadline: a timeout, as
// a SYN lost in a partition ends.
type cutError struct {
	from, to int
	cause    error
}

func (e *cutError) Error() string {
	return fmt.Sprintf("node %d is cut from node %d: %v", e.from, e.to, e.cause)
}
func (e *cutError) Unwrap() error   { return e.cause }
func (e *cutError) Timeout() bool   { return true }
func (e *cutError) Temporary() bool { return true }

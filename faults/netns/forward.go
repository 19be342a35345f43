package netns

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNoForwarders is returned by Delay on a network made without
// WithForwarders: connections already open between nodes would not pass
// through a forwarder added later.
var ErrNoForwarders = errors.New("netns: the network has no forwarders (netns.New without WithForwarders)")

// forwardMark is the packet mark of a forwarder's own connections to the
// node's peers, which the node's DNAT rules skip.
const forwardMark = 0xca5cade

// natChain is the nat chain each node's namespace jumps to from OUTPUT
// when the network has forwarders: one DNAT rule per peer.
const natChain = "CASCADE-SHAPING"

// chunkSize is the most a forwarder reads at once; queueChunks bounds
// each direction's queue of chunks in flight, so that a slow reader
// pushes back on the writer as a full TCP window would.
const (
	chunkSize   = 64 << 10
	queueChunks = 256
)

// Option changes what New builds.
type Option func(*Network)

// WithForwarders makes New run a forwarder in every node's namespace
// that every TCP connection from the node to a peer passes through, so
// that Delay can add latency to it: the kernel's netem queueing
// discipline, which would delay packets, is missing on some kernels.
// Each node's nat OUTPUT chain sends its connections to a peer's address
// to the forwarder, which dials the peer from the node's namespace (the
// peer sees the node's address, and Cut's filters drop the forwarded
// connection) with a mark the DNAT rule skips, and passes the bytes on
// unchanged and undelayed until Delay is called. A DNAT rule changes only
// connections opened after it, so the forwarders must exist before the
// nodes start.
func WithForwarders() Option {
	return func(nw *Network) { nw.forwarding = true }
}

// forwarder is one node's forwarder: a listener on the node's loopback,
// opened inside the node's namespace, and the connections it carries.
type forwarder struct {
	nw   *Network
	node int
	ln   net.Listener
	port int

	mu     sync.Mutex
	conns  map[*net.TCPConn]struct{}
	closed bool
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startForwarders opens every node's forwarder and adds the DNAT rules
// that send the node's connections to its peers through it.
func (nw *Network) startForwarders() error {
	for i := range nw.nodes {
		node := i + 1
		f := &forwarder{nw: nw, node: node, conns: map[*net.TCPConn]struct{}{}}
		f.ctx, f.cancel = context.WithCancel(context.Background())
		err := inNamespace(nw.Node(node).NS, func() error {
			var err error
			f.ln, err = net.Listen("tcp", "127.0.0.1:0")
			return err
		})
		if err != nil {
			return fmt.Errorf("netns: node %d's forwarder: %w", node, err)
		}
		f.port = f.ln.Addr().(*net.TCPAddr).Port
		nw.fwd = append(nw.fwd, f)
		f.wg.Add(1)
		go f.accept()
		ns := nw.Node(node).NS
		steps := [][]string{
			{"ip", "netns", "exec", ns, "iptables", "-t", "nat", "-N", natChain},
			{"ip", "netns", "exec", ns, "iptables", "-t", "nat", "-A", "OUTPUT", "-j", natChain},
		}
		for j, peer := range nw.nodes {
			if j == i {
				continue
			}
			steps = append(steps, []string{"ip", "netns", "exec", ns, "iptables", "-t", "nat", "-A", natChain,
				"-p", "tcp", "-d", peer.IP + "/32", "-m", "mark", "!", "--mark", strconv.Itoa(forwardMark),
				"-j", "DNAT", "--to-destination", "127.0.0.1:" + strconv.Itoa(f.port)})
		}
		for _, s := range steps {
			if err := run(s...); err != nil {
				return err
			}
		}
	}
	return nil
}

// stop closes the listener and every connection, and waits for the
// forwarder's goroutines.
func (f *forwarder) stop() {
	f.mu.Lock()
	f.closed = true
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.cancel()
	f.ln.Close()
	f.wg.Wait()
}

// track records c so that stop closes it; false when the forwarder is
// stopping (c is closed then).
func (f *forwarder) track(c *net.TCPConn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		c.Close()
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forwarder) untrack(c *net.TCPConn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	c.Close()
}

func (f *forwarder) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.wg.Add(1)
		go f.carry(c.(*net.TCPConn))
	}
}

// carry dials the peer the node meant to reach and passes bytes both
// ways, each direction delayed by the pair's delay. A refused or failed
// dial resets the node's connection, as the peer's refusal would have.
func (f *forwarder) carry(local *net.TCPConn) {
	defer f.wg.Done()
	if !f.track(local) {
		return
	}
	defer f.untrack(local)
	dst, err := originalDst(local)
	if err != nil {
		local.SetLinger(0)
		return
	}
	peer := f.nw.nodeAt(dst.IP.String())
	if peer == 0 {
		local.SetLinger(0)
		return
	}
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_MARK, forwardMark)
		}); err != nil {
			return err
		}
		return serr
	}}
	var up net.Conn
	err = inNamespace(f.nw.Node(f.node).NS, func() error {
		var err error
		up, err = d.DialContext(f.ctx, "tcp", dst.String())
		return err
	})
	if err != nil {
		local.SetLinger(0)
		return
	}
	upstream := up.(*net.TCPConn)
	if !f.track(upstream) {
		return
	}
	defer f.untrack(upstream)
	key := pairKey(f.node, peer)
	delay := func() time.Duration { return f.nw.delayOf(key) }
	done := make(chan struct{})
	var once sync.Once
	abort := func() {
		once.Do(func() {
			local.SetLinger(0)
			upstream.SetLinger(0)
			close(done)
		})
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); f.nw.pipe(upstream, local, delay, done, abort) }()
	go func() { defer wg.Done(); f.nw.pipe(local, upstream, delay, done, abort) }()
	wg.Wait()
}

// chunk is what one read returned and when it arrived; err ends the
// direction.
type chunk struct {
	at  time.Time
	b   []byte
	err error
}

// pipe copies src to dst, writing each chunk delay() after it arrived
// (delay read again whenever Delay changes it), through a queue so that
// the delay adds latency without lowering throughput. At src's end it
// closes dst for writing; a read or write error aborts both directions.
func (nw *Network) pipe(dst, src *net.TCPConn, delay func() time.Duration, done chan struct{}, abort func()) {
	q := make(chan chunk, queueChunks)
	go func() {
		buf := make([]byte, chunkSize)
		for {
			n, err := src.Read(buf)
			var c chunk
			if n > 0 {
				c = chunk{at: time.Now(), b: append([]byte(nil), buf[:n]...)}
				select {
				case q <- c:
				case <-done:
					return
				}
			}
			if err != nil {
				select {
				case q <- chunk{at: time.Now(), err: err}:
				case <-done:
				}
				return
			}
		}
	}()
	for {
		var c chunk
		select {
		case c = <-q:
		case <-done:
			return
		}
		if !nw.waitDue(c.at, delay, done) {
			return
		}
		if c.err != nil {
			if errors.Is(c.err, io.EOF) {
				if dst.CloseWrite() == nil {
					return
				}
			}
			abort()
			return
		}
		if _, err := dst.Write(c.b); err != nil {
			abort()
			return
		}
	}
}

// waitDue waits until at plus the pair's delay, looking at the delay
// again whenever Delay or Unshape changes one; false when done closed.
func (nw *Network) waitDue(at time.Time, delay func() time.Duration, done chan struct{}) bool {
	for {
		changed := nw.shapeChanged()
		wait := time.Until(at.Add(delay()))
		if wait <= 0 {
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-changed:
			t.Stop()
		case <-done:
			t.Stop()
			return false
		}
	}
}

// originalDst is the address c's peer dialed before the DNAT rule sent
// the connection here (SO_ORIGINAL_DST).
func originalDst(c *net.TCPConn) (*net.TCPAddr, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	const soOriginalDst = 80 // linux/netfilter_ipv4.h
	var addr *net.TCPAddr
	var serr error
	if err := rc.Control(func(fd uintptr) {
		// A sockaddr_in fits the 16 bytes of an ipv6_mreq.
		m, err := syscall.GetsockoptIPv6Mreq(int(fd), syscall.IPPROTO_IP, soOriginalDst)
		if err != nil {
			serr = err
			return
		}
		b := m.Multiaddr
		addr = &net.TCPAddr{IP: net.IPv4(b[4], b[5], b[6], b[7]), Port: int(binary.BigEndian.Uint16(b[2:4]))}
	}); err != nil {
		return nil, err
	}
	return addr, serr
}

// inNamespace runs fn on an OS thread that has entered the named network
// namespace; sockets fn opens stay in that namespace after the thread
// leaves it. A thread that cannot go back to its own namespace is never
// handed back to the runtime (it exits with its goroutine).
func inNamespace(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer own.Close()
		target, err := os.Open("/run/netns/" + ns)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := setns(target.Fd()); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns: entering %s: %w", ns, err)
			return
		}
		ferr := fn()
		if err := setns(own.Fd()); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("netns: leaving %s: %w", ns, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

func setns(fd uintptr) error { return unix.Setns(int(fd), unix.CLONE_NEWNET) }

// connCount is the number of sockets the forwarder holds open.
func (f *forwarder) connCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.conns)
}

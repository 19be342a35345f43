package netns

import (
	"errors"
	"io"
	"net"
	"slices"
	"testing"
	"time"
)

// newNetwork makes a network of n nodes that the test's end removes,
// skipping the test where namespaces are unavailable.
func newNetwork(t *testing.T, n int, opts ...Option) *Network {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip(err)
	}
	nw, err := New(n, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nw.Close(); err != nil {
			t.Error(err)
		}
	})
	return nw
}

// listenIn opens a TCP listener on addr inside node's namespace (0: the
// caller's).
func listenIn(t *testing.T, nw *Network, node int, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	open := func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	}
	var err error
	if node == host {
		err = open()
	} else {
		err = inNamespace(nw.Node(node).NS, open)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// dialFrom connects to addr from node's namespace (0: the caller's).
func dialFrom(nw *Network, node int, addr string, timeout time.Duration) (net.Conn, error) {
	if node == host {
		return net.DialTimeout("tcp", addr, timeout)
	}
	var c net.Conn
	err := inNamespace(nw.Node(node).NS, func() error {
		var err error
		c, err = net.DialTimeout("tcp", addr, timeout)
		return err
	})
	return c, err
}

// Throughput is measured at the receiver over measureWindow, after a
// warm-up that lets TCP's slow start and htb's initial burst pass.
const (
	warmUp        = 500 * time.Millisecond
	measureWindow = 2500 * time.Millisecond
)

// throughput sends from node from to a listener on node to's address (0:
// the caller's namespace) as fast as TCP lets it, and returns the rate
// the receiver saw in bits per second.
func throughput(t *testing.T, nw *Network, from, to int) float64 {
	t.Helper()
	ln := listenIn(t, nw, to, nw.addr(to)+":0")
	rate := make(chan float64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			rate <- -1
			return
		}
		defer c.Close()
		buf := make([]byte, 256<<10)
		var start time.Time
		var n int64
		for {
			k, err := c.Read(buf)
			if err != nil {
				rate <- -1
				return
			}
			now := time.Now()
			switch {
			case start.IsZero():
				start = now
			case now.Sub(start) < warmUp:
			case now.Sub(start) < warmUp+measureWindow:
				n += int64(k)
			default:
				rate <- float64(n*8) / measureWindow.Seconds()
				return
			}
		}
	}()
	c, err := dialFrom(nw, from, ln.Addr().String(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		buf := make([]byte, 64<<10)
		for {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	select {
	case r := <-rate:
		if r < 0 {
			t.Fatalf("node %d to node %d: the receiver failed", from, to)
		}
		return r
	case <-time.After(30 * time.Second):
		t.Fatalf("node %d to node %d: no measure within 30 s", from, to)
	}
	return 0
}

func TestLimit(t *testing.T) {
	nw := newNetwork(t, 3)
	const limit = 4_000_000
	before := throughput(t, nw, 1, 2)
	t.Logf("node 1 to node 2 unlimited: %.1f Mbit/s", before/1e6)
	if before < 10*limit {
		t.Skipf("the unlimited link carries only %.1f Mbit/s here: too slow to tell a %d Mbit/s limit", before/1e6, limit/1_000_000)
	}
	if err := nw.Limit(1, 2, limit); err != nil {
		t.Fatal(err)
	}
	within := func(what string, got float64) {
		t.Helper()
		t.Logf("%s: %.2f Mbit/s", what, got/1e6)
		if got < 0.5*limit || got > 1.5*limit {
			t.Errorf("%s: %.2f Mbit/s under a %d Mbit/s limit", what, got/1e6, limit/1_000_000)
		}
	}
	fast := func(what string, got float64) {
		t.Helper()
		t.Logf("%s: %.1f Mbit/s", what, got/1e6)
		if got < 5*limit {
			t.Errorf("%s: %.2f Mbit/s, want unshaped (over %d Mbit/s)", what, got/1e6, 5*limit/1_000_000)
		}
	}
	within("node 1 to node 2 limited", throughput(t, nw, 1, 2))
	within("node 2 to node 1 limited", throughput(t, nw, 2, 1))
	fast("clients to node 2", throughput(t, nw, host, 2))
	fast("node 2 to clients", throughput(t, nw, 2, host))
	fast("node 3 to node 2", throughput(t, nw, 3, 2))
	if got := nw.Limits(); len(got) != 1 || got[[2]int{1, 2}] != limit {
		t.Errorf("Limits() = %v", got)
	}

	// A second Limit changes the rate.
	if err := nw.Limit(2, 1, 2*limit); err != nil {
		t.Fatal(err)
	}
	if got := throughput(t, nw, 1, 2); got < limit*1.3 || got > 3*limit {
		t.Errorf("node 1 to node 2 after raising the limit to %d Mbit/s: %.2f Mbit/s", 2*limit/1_000_000, got/1e6)
	}
	// Heal leaves limits; Unshape removes them.
	if err := nw.Heal(); err != nil {
		t.Fatal(err)
	}
	if got := nw.Limits(); len(got) != 1 {
		t.Errorf("Heal removed limits: %v", got)
	}
	if err := nw.Unshape(); err != nil {
		t.Fatal(err)
	}
	fast("node 1 to node 2 after Unshape", throughput(t, nw, 1, 2))
}

// echoServer answers every byte it reads on each connection ln accepts,
// and sends the remote address of each connection to peers.
func echoServer(ln net.Listener, peers chan<- string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		select {
		case peers <- c.RemoteAddr().(*net.TCPAddr).IP.String():
		default:
		}
		go func() {
			defer c.Close()
			io.Copy(c, c)
		}()
	}
}

// rtt is the median of a few one-byte round trips on c.
func rtt(c net.Conn) (time.Duration, error) {
	var ds []time.Duration
	b := []byte{1}
	for range 7 {
		c.SetDeadline(time.Now().Add(2 * time.Second))
		start := time.Now()
		if _, err := c.Write(b); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(c, b); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return ds[len(ds)/2], nil
}

func TestDelay(t *testing.T) {
	nw := newNetwork(t, 3, WithForwarders())
	ln := listenIn(t, nw, 2, nw.Node(2).IP+":0")
	peers := make(chan string, 16)
	go echoServer(ln, peers)
	server := ln.Addr().String()
	dial := func(from int) net.Conn {
		t.Helper()
		c, err := dialFrom(nw, from, server, 2*time.Second)
		if err != nil {
			t.Fatalf("node %d to node 2: %v", from, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	measure := func(what string, c net.Conn, lo, hi time.Duration) {
		t.Helper()
		d, err := rtt(c)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s: round trip %v", what, d)
		if d < lo || d > hi {
			t.Errorf("%s: round trip %v, want %v to %v", what, d, lo, hi)
		}
	}
	const d = 100 * time.Millisecond
	fast := 40 * time.Millisecond
	open := dial(1)
	if got := <-peers; got != nw.Node(1).IP {
		t.Fatalf("node 2 sees node 1's forwarded connection from %s, want %s", got, nw.Node(1).IP)
	}
	measure("node 1 to node 2 through the forwarder", open, 0, fast)
	if got := nw.fwd[0].connCount(); got != 2 {
		t.Fatalf("node 1's forwarder carries %d sockets, want 2 (the connection is not forwarded)", got)
	}

	if err := nw.Delay(1, 2, d); err != nil {
		t.Fatal(err)
	}
	measure("node 1 to node 2 delayed, open connection", open, 2*d-10*time.Millisecond, 2*d+300*time.Millisecond)
	measure("node 1 to node 2 delayed, new connection", dial(1), 2*d-10*time.Millisecond, 2*d+300*time.Millisecond)
	measure("node 3 to node 2", dial(3), 0, fast)
	measure("clients to node 2", dial(host), 0, fast)
	// The delay is a queue, not a pause per read: a sleep of d per 64 KiB
	// chunk would carry 5 Mbit/s.
	if got := throughput(t, nw, 1, 2); got < 20e6 {
		t.Errorf("node 1 to node 2 delayed: %.1f Mbit/s, want over 20 (the delay throttles)", got/1e6)
	} else {
		t.Logf("node 1 to node 2 delayed: %.1f Mbit/s", got/1e6)
	}

	// A cut silences the forwarded connection and refuses new ones by
	// silence, as without forwarders.
	if err := nw.Cut(1, 2); err != nil {
		t.Fatal(err)
	}
	open.SetDeadline(time.Now().Add(time.Second))
	open.Write([]byte{1})
	var ne net.Error
	if _, err := io.ReadFull(open, make([]byte, 1)); err == nil {
		t.Fatal("a forwarded connection answered across a cut")
	} else if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a forwarded connection across a cut failed with %v, want a timeout", err)
	}
	if c, err := dialFrom(nw, 1, server, time.Second); err == nil {
		c.Close()
		t.Fatal("node 1 connected to node 2 across a cut")
	} else if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a new connection across a cut failed with %v, want a timeout", err)
	}
	measure("node 3 to node 2 during the cut", dial(3), 0, fast)

	if err := nw.Heal(); err != nil {
		t.Fatal(err)
	}
	measure("node 1 to node 2 healed, still delayed", dial(1), 2*d-10*time.Millisecond, 2*d+300*time.Millisecond)
	if err := nw.Unshape(); err != nil {
		t.Fatal(err)
	}
	measure("node 1 to node 2 unshaped", dial(1), 0, fast)
	if got := nw.Delays(); len(got) != 0 {
		t.Errorf("Delays() after Unshape = %v", got)
	}
}

func TestRefusesBadShapes(t *testing.T) {
	nw := &Network{nodes: []*Node{{}, {}}, cuts: map[[2]int]bool{}}
	for _, p := range [][2]int{{1, 1}, {0, 1}, {1, 3}} {
		if err := nw.Limit(p[0], p[1], 1e6); err == nil {
			t.Errorf("Limit(%d, %d) accepted", p[0], p[1])
		}
		if err := nw.Delay(p[0], p[1], time.Millisecond); err == nil {
			t.Errorf("Delay(%d, %d) accepted", p[0], p[1])
		}
	}
	if err := nw.Limit(1, 2, 10); err == nil {
		t.Error("a limit of 10 bit/s accepted")
	}
	if err := nw.Delay(1, 2, time.Millisecond); !errors.Is(err, ErrNoForwarders) {
		t.Errorf("Delay without forwarders: %v, want ErrNoForwarders", err)
	}
	nw.forwarding = true
	if err := nw.Delay(1, 2, -time.Millisecond); err == nil {
		t.Error("a negative delay accepted")
	}
}

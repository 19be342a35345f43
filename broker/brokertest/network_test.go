package brokertest

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// echo listens on loopback and echoes every connection until the test
// ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go serveEcho(ln)
	return ln.Addr().String()
}

func serveEcho(ln net.Listener) {
	for c, err := ln.Accept(); err == nil; c, err = ln.Accept() {
		go func(c net.Conn) {
			defer c.Close()
			io.Copy(c, c)
		}(c)
	}
}

// mustRoundTrip fails the test unless p comes back on c within 5 s.
func mustRoundTrip(t *testing.T, c net.Conn, p, what string) {
	t.Helper()
	if err := roundTrip(c, p, 5*time.Second); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// roundTrip writes p on c and reads it back within d.
func roundTrip(c net.Conn, p string, d time.Duration) error {
	c.SetDeadline(time.Now().Add(d))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte(p)); err != nil {
		return err
	}
	buf := make([]byte, len(p))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != p {
		return errors.New("echoed " + string(buf))
	}
	return nil
}

// TestNetworkIsolate checks the links of a cut node: an open connection
// goes silent and what was sent arrives after the heal; a new dial hangs
// until its deadline instead of being refused; clients still pass.
func TestNetworkIsolate(t *testing.T) {
	nw := newNetwork()
	defer nw.close()
	addr := echo(t)
	front, err := nw.front(2, addr)
	if err != nil {
		t.Fatal(err)
	}
	dial := nw.dialer(1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	link, err := dial(ctx, "tcp", front) // node 1 dials node 2's advertised address
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	mustRoundTrip(t, link, "before", "an open link")

	nw.set(nw.isolated, 2, true)
	if err := roundTrip(link, "during", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a link across a cut: %v, want a read timeout", err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	began := time.Now()
	_, err = dial(short, "tcp", addr)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || errors.Is(err, syscall.ECONNREFUSED) || time.Since(began) < 250*time.Millisecond {
		t.Fatalf("a dial across a cut: %v after %v, want a timeout at the deadline", err, time.Since(began))
	}
	// A client of the isolated node still reaches it.
	cl, err := net.Dial("tcp", front)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	mustRoundTrip(t, cl, "client", "a client of an isolated node")

	nw.set(nw.isolated, 2, false)
	// "during" was held, not lost: it comes back first after the heal.
	link.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, len("during"))
	if _, err := io.ReadFull(link, buf); err != nil || string(buf) != "during" {
		t.Fatalf("after the heal: %q, %v; want the held bytes", buf, err)
	}
	mustRoundTrip(t, link, "after", "after the heal")

	// A node that is down refuses its clients, on the same address once
	// it is back.
	if err := nw.setFronts(2, false); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("tcp", front); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("a dial of a node that is down: %v, want a refusal", err)
	}
	if err := nw.setFronts(2, true); err != nil {
		t.Fatal(err)
	}
	again, err := net.Dial("tcp", front)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	mustRoundTrip(t, again, "back", "a client of a node that is back")
}

// TestNetworkPause checks a paused node's connections: a client's and a
// peer's are accepted and carry nothing until Resume; a peer's dial is not
// held.
func TestNetworkPause(t *testing.T) {
	nw := newNetwork()
	defer nw.close()
	front, err := nw.front(2, echo(t))
	if err != nil {
		t.Fatal(err)
	}
	nw.set(nw.paused, 2, true)
	cl, err := net.Dial("tcp", front)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	link, err := nw.dialer(1)(ctx, "tcp", front)
	if err != nil {
		t.Fatalf("a dial of a paused node: %v, want its kernel's accept", err)
	}
	defer link.Close()
	for _, c := range []net.Conn{cl, link} {
		if err := roundTrip(c, "x", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a connection to a paused node: %v, want a read timeout", err)
		}
	}
	nw.set(nw.paused, 2, false)
	for _, c := range []net.Conn{cl, link} {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 2)
		if _, err := c.Write([]byte("y")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "xy" {
			t.Fatalf("after Resume: %q, %v; want the held x, then y", buf, err)
		}
	}
}

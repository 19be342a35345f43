package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// sockBuf reads a socket option of c's descriptor (Linux reports twice the
// size set, for bookkeeping overhead).
func sockBuf(t *testing.T, c syscall.Conn, opt int) int {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	if err := rc.Control(func(fd uintptr) { v, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, opt) }); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return v
}

// TestSocketBuffers checks that Listen sets SO_RCVBUF on the listening
// socket, inherited by accepted connections, and tuneConn SO_SNDBUF, as
// Kafka's Acceptor does for socket.receive.buffer.bytes and
// socket.send.buffer.bytes; and that -1 leaves the OS default.
func TestSocketBuffers(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("checks Linux's reported buffer sizes")
	}
	accept := func(recv int) *net.TCPConn {
		ln, err := Listen(context.Background(), "127.0.0.1:0", recv)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		sc, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sc.Close() })
		return sc.(*net.TCPConn)
	}
	c := accept(48 << 10)
	if got := sockBuf(t, c, syscall.SO_RCVBUF); got != 2*48<<10 {
		t.Fatalf("SO_RCVBUF %d, want %d", got, 2*48<<10)
	}
	if err := tuneConn(c, 40<<10, -1); err != nil {
		t.Fatal(err)
	}
	if got := sockBuf(t, c, syscall.SO_SNDBUF); got != 2*40<<10 {
		t.Fatalf("SO_SNDBUF %d, want %d", got, 2*40<<10)
	}
	if got := sockBuf(t, c, syscall.SO_KEEPALIVE); got != 1 {
		t.Fatalf("SO_KEEPALIVE %d", got)
	}
	// -1: the OS default, whatever it is, not the value set above.
	d := accept(-1)
	if err := tuneConn(d, -1, -1); err != nil {
		t.Fatal(err)
	}
	if got := sockBuf(t, d, syscall.SO_RCVBUF); got == 2*48<<10 {
		t.Fatalf("SO_RCVBUF %d with -1", got)
	}
}

// bigBody is a response body of n zero bytes.
type bigBody struct{ n int }

func (b bigBody) Len() int { return b.n }
func (b bigBody) WriteTo(w io.Writer) (int64, error) {
	return io.Copy(w, io.LimitReader(zeros{}, int64(b.n)))
}
func (bigBody) Release() {}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// bigDispatcher answers every ApiVersions request with a body of n bytes.
type bigDispatcher struct{ n int }

func (d bigDispatcher) Dispatch(ctx context.Context, req *Request) (Response, error) {
	return Response{Body: bigBody{d.n}}, nil
}

// TestIdleTimeoutSparesSlowReader checks that a connection whose client
// reads a large response more slowly than connections.max.idle.ms is not
// closed as idle while the response is being written (Kafka's Selector
// counts writes as activity), and is closed once nothing moves.
func TestIdleTimeoutSparesSlowReader(t *testing.T) {
	const idle = 200 * time.Millisecond
	ln, err := Listen(context.Background(), "127.0.0.1:0", -1)
	if err != nil {
		t.Fatal(err)
	}
	const size = 1 << 20
	s := &Server{Dispatcher: bigDispatcher{size}, IdleTimeout: idle, SendBufferBytes: 16 << 10}
	go s.Serve(ln)
	defer s.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(32 << 10)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	c.SetDeadline(time.Now().Add(15 * time.Second))
	start := time.Now()
	for round := int32(1); round <= 2; round++ {
		if _, err := c.Write(frameOf(encodeRequest(req, round, nil))); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		var hdr [8]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if n := binary.BigEndian.Uint32(hdr[:]); n != size+4 {
			t.Fatalf("frame of %d", n)
		}
		buf := make([]byte, 16<<10)
		for left := size; left > 0; {
			n, err := c.Read(buf[:min(len(buf), left)])
			if err != nil {
				t.Fatalf("round %d after %v: %v", round, time.Since(start), err)
			}
			left -= n
			if round == 1 && left == 0 {
				t.Logf("first response read in %v", time.Since(start))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if time.Since(start) < 2*idle {
		t.Fatalf("responses read in %v, too fast to test idleness", time.Since(start))
	}
	// Now nothing moves: the connection is closed.
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("read data from an idle connection")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("idle connection not closed")
	}
}

// syncDispatcher decodes each SyncGroup request with kmsg and answers with
// the total size of the assignments it decoded as the member assignment.
type syncDispatcher struct{}

func (syncDispatcher) Dispatch(ctx context.Context, req *Request) (Response, error) {
	r := kmsg.NewPtrSyncGroupRequest()
	r.SetVersion(req.Header.Version)
	if err := r.ReadFrom(req.Body); err != nil {
		return Response{}, err
	}
	resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.SetVersion(req.Header.Version)
	var total int
	for _, a := range r.GroupAssignment {
		total += len(a.MemberAssignment)
	}
	resp.MemberAssignment = binary.BigEndian.AppendUint32(nil, uint32(total))
	return Response{Msg: resp}, nil
}

// TestLargeScannedFrames checks that a SyncGroup frame far above the capped
// size (a 500-member group's assignments) is read and decoded, holding about
// its own size of the budget, while a crafted frame of the same size whose
// decode would exceed socket.request.max.bytes closes the connection before
// decoding; every reservation is released.
func TestLargeScannedFrames(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const maxReq = 16 << 20
	budget := NewBudget(64 << 20)
	s := &Server{Dispatcher: syncDispatcher{}, MaxRequestBytes: maxReq, Budget: budget}
	go s.Serve(ln)
	defer s.Close()

	req := kmsg.NewPtrSyncGroupRequest()
	req.SetVersion(5)
	req.Group, req.MemberID = "g", "leader"
	for i := 0; i < 500; i++ {
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID = "member-" + string(rune('a'+i%26))
		a.MemberAssignment = bytes.Repeat([]byte{byte(i)}, 10<<10)
		req.GroupAssignment = append(req.GroupAssignment, a)
	}
	frame := frameOf(encodeRequest(req, 1, nil))
	if capped := APIFrameCap(0x0b, 5, maxReq); len(frame) <= int(max(capped, MinAPIFrameCap)) && len(frame) < 4<<20 {
		t.Fatalf("frame of %d bytes is not large", len(frame))
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFrame(c, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.SetVersion(5)
	if err := resp.ReadFrom(got[5:]); err != nil { // correlation id, tags
		t.Fatal(err)
	}
	if n := binary.BigEndian.Uint32(resp.MemberAssignment); n != 500*10<<10 {
		t.Fatalf("server decoded %d assignment bytes", n)
	}
	if p := budget.Peak(); p > decodeCap(maxReq) {
		t.Fatalf("peak reservation %d above decodeCap", p)
	}

	// The same size of empty assignments would decode to about 16 times
	// its frame: refused before decoding.
	body := AppendRequestHeader(nil, RequestHeader{Key: 14, Version: 5, CorrelationID: 2, Flexible: true})
	body = append(body, 2, 'g', 0, 2, 'm', 0, 0, 0) // group, generation, member, instance, type, protocol
	const elems = 3 << 20 / 3
	body = binary.AppendUvarint(body, elems+1)
	for i := 0; i < elems; i++ {
		body = append(body, 1, 1, 0) // empty member id, empty assignment, no tags
	}
	body = append(body, 0)
	h, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	h.SetDeadline(time.Now().Add(10 * time.Second))
	h.Write(frameOf(body))
	if _, err := h.Read(make([]byte, 1)); err == nil {
		t.Fatal("answered a request decoding past socket.request.max.bytes")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("connection not closed")
	}
	deadline := time.Now().Add(5 * time.Second)
	for budget.InUse() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := budget.InUse(); n != 0 {
		t.Fatalf("%d bytes still reserved", n)
	}
}

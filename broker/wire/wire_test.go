package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func frameOf(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// countingReader fails the test if more than limit bytes are read.
type countingReader struct {
	r    io.Reader
	read int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += n
	return n, err
}

func TestReadFrame(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      []byte
		max     int32
		want    []byte
		wantErr error
		maxRead int
	}{
		{name: "ok", in: frameOf([]byte("abc")), max: 10, want: []byte("abc")},
		{name: "at max", in: frameOf([]byte("abcd")), max: 4, want: []byte("abcd")},
		{name: "oversize read no body", in: append(binary.BigEndian.AppendUint32(nil, 1<<30), make([]byte, 100)...), max: 4, wantErr: ErrFrameTooLarge, maxRead: 4},
		{name: "negative", in: binary.BigEndian.AppendUint32(nil, 0xffffffff), max: 4, wantErr: ErrNegativeFrame},
		{name: "empty", in: binary.BigEndian.AppendUint32(nil, 0), max: 4, wantErr: ErrEmptyFrame},
		{name: "truncated body", in: append(binary.BigEndian.AppendUint32(nil, 10), 1, 2), max: 100, wantErr: io.ErrUnexpectedEOF},
		{name: "truncated length", in: []byte{0, 0}, max: 100, wantErr: io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &countingReader{r: bytes.NewReader(tc.in)}
			got, err := ReadFrame(r, tc.max)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("got %q want %q", got, tc.want)
			}
			if tc.maxRead > 0 && r.read > tc.maxRead {
				t.Fatalf("read %d bytes, want at most %d", r.read, tc.maxRead)
			}
		})
	}
}

func encodeRequest(req kmsg.Request, corr int32, clientID *string) []byte {
	h := RequestHeader{Key: req.Key(), Version: req.GetVersion(), CorrelationID: corr, ClientID: clientID, Flexible: req.IsFlexible()}
	return req.AppendTo(AppendRequestHeader(nil, h))
}

func TestParseRequestHeader(t *testing.T) {
	id := "client-1"
	for _, v := range []int16{0, 4, 11, 12, 17} {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(v)
		req.MaxWaitMillis = 123
		b := encodeRequest(req, 77, &id)
		h, body, err := ParseRequestHeader(b)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if h.Key != 1 || h.Version != v || h.CorrelationID != 77 || h.ClientID == nil || *h.ClientID != id {
			t.Fatalf("v%d: header %+v", v, h)
		}
		if h.Flexible != (v >= 12) {
			t.Fatalf("v%d: flexible %v", v, h.Flexible)
		}
		got := kmsg.NewPtrFetchRequest()
		got.SetVersion(v)
		if err := got.ReadFrom(body); err != nil || got.MaxWaitMillis != 123 {
			t.Fatalf("v%d: body %v %d", v, err, got.MaxWaitMillis)
		}
	}
	// Null client id.
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(1)
	h, _, err := ParseRequestHeader(encodeRequest(req, 1, nil))
	if err != nil || h.ClientID != nil {
		t.Fatalf("null client id: %+v %v", h, err)
	}
	// Tagged fields in the header are skipped.
	b := AppendRequestHeader(nil, RequestHeader{Key: 3, Version: 12, CorrelationID: 9})
	b = append(b, 1, 5, 3, 'x', 'y', 'z')
	b = append(b, 0xAA)
	_, body, err := ParseRequestHeader(b)
	if err != nil || !bytes.Equal(body, []byte{0xAA}) {
		t.Fatalf("tags: %v %x", err, body)
	}
}

func TestParseRequestHeaderErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"short", []byte{0, 1, 0}},
		{"unknown key", AppendRequestHeader(nil, RequestHeader{Key: 9999})},
		{"negative version", AppendRequestHeader(nil, RequestHeader{Key: 1, Version: -3})},
		{"client id too long", []byte{0, 3, 0, 1, 0, 0, 0, 1, 0x7f, 0xff, 'a'}},
		{"client id bad", []byte{0, 3, 0, 1, 0, 0, 0, 1, 0xff, 0xf0}},
		{"tags truncated", append(AppendRequestHeader(nil, RequestHeader{Key: 3, Version: 12}), 1, 1, 100, 1)},
		{"tags missing", []byte{0, 3, 0, 12, 0, 0, 0, 1, 0xff, 0xff}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := ParseRequestHeader(tc.in); err == nil {
				t.Fatal("no error")
			}
		})
	}
	// ApiVersions at an unknown version parses (KIP-511) without the body.
	h, body, err := ParseRequestHeader(AppendRequestHeader(nil, RequestHeader{Key: 18, Version: 99, CorrelationID: 5}))
	if err != nil || h.Version != 99 || body != nil {
		t.Fatalf("apiversions v99: %+v %v", h, err)
	}
}

func TestResponseHeaderFlexible(t *testing.T) {
	if ResponseHeaderFlexible(18, 3) {
		t.Fatal("ApiVersions response header must be v0")
	}
	if !ResponseHeaderFlexible(1, 12) || ResponseHeaderFlexible(1, 11) {
		t.Fatal("fetch flexibility wrong")
	}
}

// FuzzDecodeRequest decodes arbitrary frames as a broker would: header, then
// the body with kmsg at the announced version. Nothing may panic.
func FuzzDecodeRequest(f *testing.F) {
	id := "fuzz"
	for _, r := range []kmsg.Request{kmsg.NewPtrFetchRequest(), kmsg.NewPtrProduceRequest(), kmsg.NewPtrMetadataRequest(), kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrListOffsetsRequest()} {
		for _, v := range []int16{0, 3, 9, 12} {
			if v > r.MaxVersion() {
				continue
			}
			r.SetVersion(v)
			f.Add(encodeRequest(r, 1, &id))
		}
	}
	f.Add([]byte{0, 0, 0, 9, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, body, err := ParseRequestHeader(b)
		if err != nil || body == nil {
			return
		}
		req := kmsg.RequestForKey(h.Key)
		if h.Version > req.MaxVersion() {
			return
		}
		req.SetVersion(h.Version)
		_ = req.ReadFrom(body)
	})
}

type echoDispatcher struct {
	calls atomic.Int32
}

func (d *echoDispatcher) Dispatch(ctx context.Context, req *Request) (Response, error) {
	d.calls.Add(1)
	if req.Header.Key != 18 {
		return Response{}, errors.New("only api versions")
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(req.Header.Version)
	resp.ThrottleMillis = req.Header.CorrelationID // echo for ordering checks
	if req.Header.CorrelationID%5 == 0 {
		time.Sleep(2 * time.Millisecond) // slow handler must not reorder
	}
	return Response{Msg: resp}, nil
}

func startServer(t *testing.T, d Dispatcher, max int32) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Dispatcher: d, MaxRequestBytes: max}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return s, ln.Addr().String()
}

func TestServerPipelinesInOrder(t *testing.T) {
	_, addr := startServer(t, &echoDispatcher{}, 1<<20)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 50
	var all []byte
	for i := int32(1); i <= n; i++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(3)
		all = append(all, frameOf(encodeRequest(req, i, nil))...)
	}
	if _, err := c.Write(all); err != nil {
		t.Fatal(err)
	}
	readInOrder(t, c, n)
}

// readInOrder reads n ApiVersions responses from c and checks that they
// answer correlation ids 1 to n in order, each echoing its id in
// ThrottleMillis as the test dispatchers do.
func readInOrder(t *testing.T, c net.Conn, n int32) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	for i := int32(1); i <= n; i++ {
		frame, err := ReadFrame(c, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if corr := int32(binary.BigEndian.Uint32(frame)); corr != i {
			t.Fatalf("response %d has correlation id %d", i, corr)
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.SetVersion(3)
		if err := resp.ReadFrom(frame[4:]); err != nil || resp.ThrottleMillis != i {
			t.Fatalf("response %d: %v throttle %d", i, err, resp.ThrottleMillis)
		}
	}
}

func TestServerClosesOnBadInputOthersUnaffected(t *testing.T) {
	d := &echoDispatcher{}
	_, addr := startServer(t, d, 1024)
	good, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	for _, bad := range [][]byte{
		binary.BigEndian.AppendUint32(nil, 1<<30),                   // oversize
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),                 // garbage
		frameOf(AppendRequestHeader(nil, RequestHeader{Key: 9999})), // unknown key
		frameOf(AppendRequestHeader(nil, RequestHeader{Key: 1})),    // dispatcher error
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(bad)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatalf("connection stayed open after %q", bad)
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("connection not closed after %q", bad)
		}
		c.Close()
	}
	// A truncated frame followed by a close leaves the server fine.
	c, _ := net.Dial("tcp", addr)
	c.Write(append(binary.BigEndian.AppendUint32(nil, 100), 1, 2, 3))
	c.Close()

	req := kmsg.NewPtrApiVersionsRequest()
	good.Write(frameOf(encodeRequest(req, 42, nil)))
	good.SetReadDeadline(time.Now().Add(5 * time.Second))
	frame, err := ReadFrame(good, 1<<20)
	if err != nil || binary.BigEndian.Uint32(frame) != 42 {
		t.Fatalf("good connection: %v", err)
	}
}

// blockingDispatcher blocks requests from one connection until released.
type blockingDispatcher struct{ release chan struct{} }

func (d *blockingDispatcher) Dispatch(ctx context.Context, req *Request) (Response, error) {
	if req.Header.CorrelationID == 1 {
		select {
		case <-d.release:
		case <-ctx.Done():
		}
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(req.Header.Version)
	return Response{Msg: resp}, nil
}

func TestSlowConnectionDoesNotBlockOthers(t *testing.T) {
	d := &blockingDispatcher{release: make(chan struct{})}
	s, addr := startServer(t, d, 1024)
	slow, _ := net.Dial("tcp", addr)
	defer slow.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	slow.Write(frameOf(encodeRequest(req, 1, nil)))
	fast, _ := net.Dial("tcp", addr)
	defer fast.Close()
	fast.Write(frameOf(encodeRequest(req, 2, nil)))
	fast.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := ReadFrame(fast, 1<<20); err != nil {
		t.Fatalf("fast connection blocked: %v", err)
	}
	// Close cancels the blocked handler instead of hanging.
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hung on a blocked handler")
	}
}

func TestIdleTimeoutClosesConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	obs := &countObserver{}
	s := &Server{Dispatcher: &echoDispatcher{}, IdleTimeout: 100 * time.Millisecond, Observer: obs}
	go s.Serve(ln)
	defer s.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("read data from an idle connection")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("idle connection not closed")
	}
	if !waitFor(2*time.Second, func() bool { return obs.count("closed idle") == 1 }) {
		t.Fatalf("observed %v", obs.counts)
	}
}

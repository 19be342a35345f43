package wire

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// decodeDispatcher decodes every request with kmsg, as the handler
// dispatcher does, and answers nothing.
type decodeDispatcher struct{}

func (decodeDispatcher) Dispatch(ctx context.Context, req *Request) (Response, error) {
	r := kmsg.RequestForKey(req.Header.Key)
	if req.Header.Version > r.MaxVersion() {
		return Response{}, nil
	}
	r.SetVersion(req.Header.Version)
	return Response{}, r.ReadFrom(req.Body)
}

// FuzzReadRequest feeds an arbitrary byte stream to one connection's read
// loop with a budget: nothing may panic or hang, and when the connection
// ends every reservation must have been released. Each well-formed Produce
// or Metadata frame must also be sized by the scan at least as large as its
// frame.
func FuzzReadRequest(f *testing.F) {
	id := "fuzz"
	for _, r := range []kmsg.Request{kmsg.NewPtrProduceRequest(), kmsg.NewPtrMetadataRequest(), kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrFetchRequest()} {
		for _, v := range []int16{3, 9, 12} {
			if v > r.MaxVersion() {
				continue
			}
			r.SetVersion(v)
			f.Add(encodeRequest(r, 1, &id))
		}
	}
	for _, hf := range hostileFrames(3, 12) {
		h := AppendRequestHeader(nil, RequestHeader{Key: 3, Version: 12, CorrelationID: 1, ClientID: &id, Flexible: true})
		body := append(h, hf.body[:min(len(hf.body), 600)]...)
		f.Add(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...))
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		budget := NewBudget(1 << 20)
		s := &Server{Dispatcher: decodeDispatcher{}, MaxRequestBytes: 1 << 16, Budget: budget}
		s.init()
		client, server := net.Pipe()
		go func() {
			client.Write(stream)
			client.Close()
		}()
		done := make(chan struct{})
		go func() {
			s.serveConn(server, &Listener{})
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("connection did not end")
		}
		if n := budget.InUse(); n != 0 {
			t.Fatalf("%d bytes still reserved", n)
		}
		// The scan never sizes a frame below its own bytes.
		if len(stream) > 12 {
			frame := stream[4:]
			if h, body, err := ParseRequestHeader(frame); err == nil && body != nil && sizeScanned(h.Key) {
				if est, ok := sizeEstimate(h.Key, h.Version, body); ok && est < int64(len(body)) {
					t.Fatalf("estimate %d below body %d", est, len(body))
				}
			}
		}
	})
}

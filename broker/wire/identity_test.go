package wire

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// identityDispatcher answers ApiVersions and records each request's
// identity.
type identityDispatcher struct{ seen chan Identity }

func (d *identityDispatcher) Dispatch(_ context.Context, req *Request) (Response, error) {
	d.seen <- Identity{Principal: req.Principal, Host: req.ClientHost, Listener: req.Listener}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(req.Header.Version)
	return Response{Msg: resp}, nil
}

// TestPlaintextIdentity checks that a PLAINTEXT connection's requests carry
// User:ANONYMOUS, the client's IP address (from whichever loopback address
// it dialled from) and the listener's name.
func TestPlaintextIdentity(t *testing.T) {
	for _, tc := range []struct{ listener, local, wantListener string }{
		{"", "127.0.0.1", "PLAINTEXT"},
		{"CLIENTS", "127.0.0.2", "CLIENTS"},
	} {
		d := &identityDispatcher{seen: make(chan Identity, 1)}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := &Server{Dispatcher: d}
		go s.ServeListener(ln, Listener{Name: tc.listener})
		dialer := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(tc.local)}}
		c, err := dialer.Dial("tcp", ln.Addr().String())
		if err != nil {
			s.Close()
			t.Skipf("cannot dial from %s: %v", tc.local, err)
		}
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(3)
		if _, err := c.Write(frameOf(encodeRequest(req, 1, nil))); err != nil {
			t.Fatal(err)
		}
		select {
		case id := <-d.seen:
			if want := (Identity{Principal: "User:ANONYMOUS", Host: tc.local, Listener: tc.wantListener}); id != want {
				t.Errorf("identity %+v, want %+v", id, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no request dispatched")
		}
		c.Close()
		s.Close()
	}
}

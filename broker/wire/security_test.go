package wire

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/security/principal"
	"github.com/cascade-kafka/cascade/broker/security/sasl"
	"github.com/cascade-kafka/cascade/internal/certtest"
)

// whoDispatcher answers ApiVersions and records who each request came from.
type whoDispatcher struct {
	mu   sync.Mutex
	seen []who
}

type who struct{ Principal, ClientHost, Listener string }

func (d *whoDispatcher) Dispatch(_ context.Context, req *Request) (Response, error) {
	d.mu.Lock()
	d.seen = append(d.seen, who{Principal: req.Principal, ClientHost: req.ClientHost, Listener: req.Listener})
	d.mu.Unlock()
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(req.Header.Version)
	return Response{Msg: resp}, nil
}

func (d *whoDispatcher) last(t *testing.T) who {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.seen) == 0 {
		t.Fatal("no request dispatched")
	}
	return d.seen[len(d.seen)-1]
}

// exchange writes req on c and returns the response body.
func exchange(t *testing.T, c net.Conn, req kmsg.Request) []byte {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(frameOf(encodeRequest(req, 1, nil))); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatal(err)
	}
	body = body[4:]
	if req.IsFlexible() && req.Key() != ApiVersionsKey {
		body = body[1:]
	}
	return body
}

func serveSecured(t *testing.T, l Listener) (*whoDispatcher, string) {
	t.Helper()
	d := &whoDispatcher{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Dispatcher: d}
	go s.ServeListener(ln, l)
	t.Cleanup(func() { s.Close() })
	return d, ln.Addr().String()
}

func TestListenerIdentity(t *testing.T) {
	ca := certtest.NewCA(t, "CN=Test CA")
	srv := ca.Issue(t, "CN=localhost", "localhost", "127.0.0.1")
	alice := ca.Issue(t, "CN=Alice,O=Example")
	rules, err := principal.ParseRules("RULE:^CN=(.*?),O=(.*)$/$1@$2/L,DEFAULT")
	if err != nil {
		t.Fatal(err)
	}
	serverTLS := &tls.Config{Certificates: []tls.Certificate{srv.TLS()}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: ca.Pool()}
	dial := func(addr string, cert *certtest.Cert) net.Conn {
		cc := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
		if cert != nil {
			cc.Certificates = []tls.Certificate{cert.TLS()}
		}
		c, err := tls.Dial("tcp", addr, cc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	api := kmsg.NewPtrApiVersionsRequest()
	api.Version = 3

	// PLAINTEXT.
	d, addr := serveSecured(t, Listener{Name: "PLAINTEXT"})
	c, _ := net.Dial("tcp", addr)
	defer c.Close()
	exchange(t, c, api)
	if got := d.last(t); got != (who{Principal: "User:ANONYMOUS", ClientHost: "127.0.0.1", Listener: "PLAINTEXT"}) {
		t.Fatalf("plaintext %+v", got)
	}
	// SSL with a client certificate, mapped; without one, anonymous.
	d, addr = serveSecured(t, Listener{Name: "SSL", TLS: serverTLS, CertPrincipal: rules.Map})
	exchange(t, dial(addr, alice), api)
	if got := d.last(t); got.Principal != "User:alice@example" || got.Listener != "SSL" {
		t.Fatalf("ssl %+v", got)
	}
	exchange(t, dial(addr, nil), api)
	if got := d.last(t); got.Principal != "User:ANONYMOUS" {
		t.Fatalf("ssl without a certificate %+v", got)
	}
	// The default mapping is the whole distinguished name.
	d, addr = serveSecured(t, Listener{Name: "SSL", TLS: serverTLS})
	exchange(t, dial(addr, alice), api)
	if got := d.last(t); got.Principal != "User:CN=Alice,O=Example" {
		t.Fatalf("ssl default mapping %+v", got)
	}
	// SASL_SSL: the SASL user, not the certificate.
	creds := sasl.Credentials{Plain: map[string]string{"bob": "pw"}}
	d, addr = serveSecured(t, Listener{Name: "SASL_SSL", TLS: serverTLS, SASL: &SASL{Mechanisms: []string{"PLAIN"},
		NewServer: func(m string) (SASLServer, error) { return sasl.NewServer(m, creds) }}})
	c = dial(addr, alice)
	exchange(t, c, api)
	if got := d.last(t); got.Principal != "User:ANONYMOUS" {
		t.Fatalf("before authentication %+v", got)
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	exchange(t, c, hs)
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 2, []byte("\x00bob\x00pw")
	ar := kmsg.NewPtrSASLAuthenticateResponse()
	ar.Version = 2
	if err := ar.ReadFrom(exchange(t, c, au)); err != nil || ar.ErrorCode != 0 {
		t.Fatalf("authenticate %+v %v", ar, err)
	}
	exchange(t, c, api)
	if got := d.last(t); got.Principal != "User:bob" || got.Listener != "SASL_SSL" {
		t.Fatalf("sasl_ssl %+v", got)
	}
	// A wrong password: SASL_AUTHENTICATION_FAILED, then a close.
	c = dial(addr, nil)
	exchange(t, c, hs)
	au.SASLAuthBytes = []byte("\x00bob\x00nope")
	if err := ar.ReadFrom(exchange(t, c, au)); err != nil || ar.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("wrong password %+v %v", ar, err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("connection open after a failed authentication")
	}
}

// FuzzSASLExchange feeds arbitrary bytes to a SASL listener's connection
// before authentication: the connection must end, without a panic, once
// the client closes.
func FuzzSASLExchange(f *testing.F) {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 1, []byte("\x00bob\x00pw")
	f.Add(append(frameOf(encodeRequest(hs, 1, nil)), frameOf(encodeRequest(au, 2, nil))...))
	hs0 := kmsg.NewPtrSASLHandshakeRequest()
	hs0.Mechanism = "SCRAM-SHA-256"
	f.Add(append(frameOf(encodeRequest(hs0, 1, nil)), frameOf([]byte("n,,n=bob,r=abc"))...))
	f.Add(frameOf(encodeRequest(kmsg.NewPtrMetadataRequest(), 1, nil)))
	f.Add([]byte{0, 0, 0, 2, 0, 17})
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff})
	creds := sasl.Credentials{Plain: map[string]string{"bob": "pw"}, Scram: func(string, string) (sasl.ScramCredential, bool) {
		return sasl.ScramCredential{}, false
	}}
	f.Fuzz(func(t *testing.T, in []byte) {
		d := &whoDispatcher{}
		s := &Server{Dispatcher: d}
		s.init()
		l := &Listener{Name: "SASL_PLAINTEXT", SASL: &SASL{Mechanisms: []string{"PLAIN", "SCRAM-SHA-256"},
			NewServer:       func(m string) (SASLServer, error) { return sasl.NewServer(m, creds) },
			MaxReceiveBytes: 4096}}
		client, server := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.serveConn(server, l)
		}()
		go io.Copy(io.Discard, client)
		client.SetWriteDeadline(time.Now().Add(time.Second))
		client.Write(in)
		client.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("connection did not end")
		}
		s.Close()
	})
}

package broker_test

import (
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"

	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/internal/certtest"
)

// TestSecureListenersBadInput sends what a misconfigured or hostile client
// sends to the secured listeners, on real sockets, and checks each
// connection ends as Kafka 4.4 ends it (SslTransportLayer,
// SaslServerAuthenticator, NetworkReceive) while a well-behaved SASL_SSL
// client on the same broker produces and consumes before and after every
// case without losing a connection:
//   - a plaintext Kafka request on the SSL port, garbage in a TLS
//     handshake record: the handshake fails, the connection closes, and no
//     Kafka frame comes back;
//   - a TLS ClientHello on the PLAINTEXT and SASL_PLAINTEXT ports: its
//     first four bytes read as a frame size past socket.request.max.bytes
//     (or sasl.server.max.receive.size), and the connection closes;
//   - garbage as the first SASL frame, SaslAuthenticate or Metadata before
//     SaslHandshake: InvalidRequestException, closed unanswered;
//   - garbage bytes after a v1 handshake: the header does not parse,
//     closed unanswered;
//   - a PLAIN token that is garbage, a SCRAM client-final with another
//     nonce, a proof computed with a tampered iteration count, a tampered
//     proof: SASL_AUTHENTICATION_FAILED, then closed;
//   - Metadata, ApiVersions or a second SaslHandshake after a v1
//     handshake: the request's error response with ILLEGAL_SASL_STATE
//     (handleSaslToken's IllegalSaslStateException), then closed.
func TestSecureListenersBadInput(t *testing.T) {
	ca := certtest.NewCA(t, "CN=Test CA")
	b := brokertest.Start(t, tlsProps(t, ca))
	addScramUsers(t, b)
	good := newSteadyClient(t, b.ListenerAddr("SASL_SSL"), ca)
	good.roundTrip(t, "before")

	plain, sasl, ssl := b.Addr(), b.ListenerAddr("SASL_PLAINTEXT"), b.ListenerAddr("SSL")
	cases := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"plaintext request on the SSL port", func(t *testing.T) {
			c := dialRaw(t, ssl)
			c.Write(new(kmsg.RequestFormatter).AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1))
			if got := readUntilClosed(t, c); len(got) > 0 && got[0] != 0x15 {
				t.Fatalf("answered %q, want a close (or a TLS alert)", got)
			}
		}},
		{"garbage in the TLS handshake", func(t *testing.T) {
			c := dialRaw(t, ssl)
			// A handshake record whose body is no ClientHello.
			c.Write(append([]byte{0x16, 0x03, 0x01, 0x00, 0x20}, []byte(strings.Repeat("\xde\xad\xbe\xef", 8))...))
			if got := readUntilClosed(t, c); len(got) > 0 && got[0] != 0x15 {
				t.Fatalf("answered %q, want a close (or a TLS alert)", got)
			}
		}},
		{"TLS client on the PLAINTEXT port", func(t *testing.T) { tlsOnPlain(t, plain, ca) }},
		{"TLS client on the SASL_PLAINTEXT port", func(t *testing.T) { tlsOnPlain(t, sasl, ca) }},
		{"garbage as the first SASL frame", func(t *testing.T) {
			c := dialRaw(t, sasl)
			c.Write([]byte{0, 0, 0, 6, 0x60, 0x82, 0xff, 0x00, 0x13, 0x37})
			expectClosedUnanswered(t, c)
		}},
		{"SaslAuthenticate before SaslHandshake", func(t *testing.T) {
			c := dialRaw(t, sasl)
			auth := kmsg.NewPtrSASLAuthenticateRequest()
			auth.SASLAuthBytes = []byte("\x00alice\x00alice-pw")
			if _, err := rawFrame(t, c, auth, true); err == nil {
				t.Fatal("SaslAuthenticate before SaslHandshake was answered")
			}
		}},
		{"Metadata before SaslHandshake", func(t *testing.T) {
			c := dialRaw(t, sasl)
			if _, err := rawFrame(t, c, kmsg.NewPtrMetadataRequest(), false); err == nil {
				t.Fatal("Metadata before SaslHandshake was answered")
			}
		}},
		{"garbage after SaslHandshake", func(t *testing.T) {
			c := handshaken(t, sasl, "SCRAM-SHA-512")
			c.Write([]byte{0, 0, 0, 3, 0xff, 0xff, 0xff})
			expectClosedUnanswered(t, c)
		}},
		{"garbage PLAIN token", func(t *testing.T) {
			c := handshaken(t, sasl, "PLAIN")
			expectAuthFailed(t, c, []byte("\xff\xfe\xfd no separators"))
		}},
		{"SCRAM client-final with another nonce", func(t *testing.T) {
			scramExchange(t, sasl, func(serverFirst string) string { return serverFirst }, func(final string) string {
				return replaceAttr(final, "r", "notthenonce0123456789")
			})
		}},
		{"SCRAM proof from a tampered iteration count", func(t *testing.T) {
			scramExchange(t, sasl, func(serverFirst string) string {
				return replaceAttr(serverFirst, "i", "8193")
			}, func(final string) string { return final })
		}},
		{"SCRAM tampered proof", func(t *testing.T) {
			scramExchange(t, sasl, func(serverFirst string) string { return serverFirst }, func(final string) string {
				p, err := base64.StdEncoding.DecodeString(attr(final, "p"))
				if err != nil || len(p) == 0 {
					t.Fatalf("client-final %q: %v", final, err)
				}
				p[0] ^= 0x01
				return replaceAttr(final, "p", base64.StdEncoding.EncodeToString(p))
			})
		}},
		{"Metadata after SaslHandshake", func(t *testing.T) {
			c := handshaken(t, sasl, "PLAIN")
			md := kmsg.NewPtrMetadataRequest()
			md.SetVersion(12)
			md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("t")}}
			body, err := rawFrame(t, c, md, true)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			resp := kmsg.NewPtrMetadataResponse()
			resp.SetVersion(12)
			if err := resp.ReadFrom(body); err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.IllegalSaslState.Code ||
				*resp.Topics[0].Topic != "t" || len(resp.Brokers) != 0 {
				t.Fatalf("answer %+v %v, want topic t with ILLEGAL_SASL_STATE and no brokers", resp, err)
			}
			expectClosedUnanswered(t, c)
		}},
		{"ApiVersions after SaslHandshake", func(t *testing.T) {
			c := handshaken(t, sasl, "PLAIN")
			body, err := rawFrame(t, c, kmsg.NewPtrApiVersionsRequest(), false)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			resp := kmsg.NewPtrApiVersionsResponse()
			if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != kerr.IllegalSaslState.Code || len(resp.ApiKeys) != 0 {
				t.Fatalf("answer %+v %v, want ILLEGAL_SASL_STATE", resp, err)
			}
			expectClosedUnanswered(t, c)
		}},
		{"second SaslHandshake", func(t *testing.T) {
			c := handshaken(t, sasl, "PLAIN")
			hs := kmsg.NewPtrSASLHandshakeRequest()
			hs.Version, hs.Mechanism = 1, "PLAIN"
			body, err := rawFrame(t, c, hs, false)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			resp := kmsg.NewPtrSASLHandshakeResponse()
			resp.Version = 1
			if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != kerr.IllegalSaslState.Code {
				t.Fatalf("answer %+v %v, want ILLEGAL_SASL_STATE", resp, err)
			}
			expectClosedUnanswered(t, c)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, tc.run)
		good.roundTrip(t, "after "+tc.name)
	}
	if n := good.disconnects.Load(); n != 0 {
		t.Fatalf("the well-behaved client lost %d connections", n)
	}
}

// steadyClient is a SASL_SSL client that keeps its connections for the
// whole test and counts any it loses.
type steadyClient struct {
	cl          *kgo.Client
	disconnects atomic.Int64
	sent        int
}

func (s *steadyClient) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) { s.disconnects.Add(1) }

func newSteadyClient(t *testing.T, addr string, ca *certtest.CA) *steadyClient {
	t.Helper()
	s := &steadyClient{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), fastMeta, kgo.AllowAutoTopicCreation(),
		kgo.DialTLSConfig(clientTLS(ca, nil)), kgo.SASL(scram.Auth{User: "carol", Pass: "carol-pw"}.AsSha512Mechanism()),
		kgo.ConsumeTopics("steady"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(s),
		kgo.ConnIdleTimeout(15*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	s.cl = cl
	return s
}

// roundTrip produces one record and consumes it.
func (s *steadyClient) roundTrip(t *testing.T, when string) {
	t.Helper()
	ctx := ctxT(t)
	v := "steady-" + when
	if err := s.cl.ProduceSync(ctx, &kgo.Record{Topic: "steady", Value: []byte(v)}).FirstErr(); err != nil {
		t.Fatalf("well-behaved client %s: produce: %v", when, err)
	}
	s.sent++
	for {
		fs := s.cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("well-behaved client %s: consume: %v", when, err)
		}
		recs := fs.Records()
		if len(recs) > 0 && string(recs[len(recs)-1].Value) == v {
			return
		}
	}
}

func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readUntilClosed reads until the broker closes c, at most 64 KiB and 10
// seconds, and returns what came.
func readUntilClosed(t *testing.T, c net.Conn) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(io.LimitReader(c, 64<<10))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection stayed open (read %d bytes)", len(got))
	}
	return got
}

func expectClosedUnanswered(t *testing.T, c net.Conn) {
	t.Helper()
	if got := readUntilClosed(t, c); len(got) != 0 {
		t.Fatalf("answered %d bytes, want a close", len(got))
	}
}

// tlsOnPlain runs a TLS handshake against a listener that does not speak
// TLS: it must fail, and the broker close the connection.
func tlsOnPlain(t *testing.T, addr string, ca *certtest.CA) {
	t.Helper()
	raw := dialRaw(t, addr)
	raw.SetDeadline(time.Now().Add(10 * time.Second))
	c := tls.Client(raw, clientTLS(ca, nil))
	err := c.Handshake()
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("TLS handshake on a plaintext port: %v, want it to fail with the connection closed", err)
	}
}

// handshaken returns a connection to a SASL listener after a v1
// SaslHandshake for mech.
func handshaken(t *testing.T, addr, mech string) net.Conn {
	t.Helper()
	c := dialRaw(t, addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, mech
	body, err := rawFrame(t, c, hs, false)
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.Version = 1
	if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("handshake %+v %v", resp, err)
	}
	return c
}

// authenticate sends one SaslAuthenticate v2 token and returns the answer.
func authenticate(t *testing.T, c net.Conn, token []byte) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version, req.SASLAuthBytes = 2, token
	body, err := rawFrame(t, c, req, true)
	if err != nil {
		t.Fatalf("SaslAuthenticate: %v", err)
	}
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.Version = 2
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	return resp
}

// expectAuthFailed sends token and expects SASL_AUTHENTICATION_FAILED,
// then a close.
func expectAuthFailed(t *testing.T, c net.Conn, token []byte) {
	t.Helper()
	resp := authenticate(t, c, token)
	if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("answer %+v, want SASL_AUTHENTICATION_FAILED", resp)
	}
	expectClosedUnanswered(t, c)
}

// scramExchange runs SCRAM-SHA-512 as carol with xdg-go/scram, passing the
// server-first message through serverFirst and the client-final through
// final, and expects the broker to refuse the client-final with Kafka's
// message. With both functions the identity the same exchange succeeds.
func scramExchange(t *testing.T, addr string, serverFirst, final func(string) string) {
	t.Helper()
	for _, tamper := range []bool{false, true} {
		c := handshaken(t, addr, "SCRAM-SHA-512")
		cl, err := xscram.SHA512.NewClient("carol", "carol-pw", "")
		if err != nil {
			t.Fatal(err)
		}
		conv := cl.NewConversation()
		first, err := conv.Step("")
		if err != nil {
			t.Fatal(err)
		}
		resp := authenticate(t, c, []byte(first))
		if resp.ErrorCode != 0 {
			t.Fatalf("client-first refused: %+v", resp)
		}
		sf := string(resp.SASLAuthBytes)
		if tamper {
			sf = serverFirst(sf)
		}
		fin, err := conv.Step(sf)
		if err != nil {
			t.Fatalf("client-final from %q: %v", sf, err)
		}
		if !tamper {
			if resp := authenticate(t, c, []byte(fin)); resp.ErrorCode != 0 {
				t.Fatalf("the untampered exchange failed: %+v", resp)
			}
			continue
		}
		resp = authenticate(t, c, []byte(final(fin)))
		want := "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
		if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || resp.ErrorMessage == nil || *resp.ErrorMessage != want {
			t.Fatalf("answer %+v, want SASL_AUTHENTICATION_FAILED: %s", resp, want)
		}
		expectClosedUnanswered(t, c)
	}
}

// attr returns the value of a SCRAM message's attribute.
func attr(msg, name string) string {
	for _, kv := range strings.Split(msg, ",") {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// replaceAttr returns msg with the attribute's value replaced.
func replaceAttr(msg, name, value string) string {
	parts := strings.Split(msg, ",")
	for i, kv := range parts {
		if strings.HasPrefix(kv, name+"=") {
			parts[i] = name + "=" + value
		}
	}
	return strings.Join(parts, ",")
}

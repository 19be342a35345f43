package broker_test

import (
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
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

// badInputCase is one piece of bad input to a listener, and how Kafka 4.4
// ends the connection (SslTransportLayer, SaslServerAuthenticator,
// NetworkReceive), as an outcome string: "closed" (no Kafka answer; a TLS
// alert may come), "TLS handshake failed", or the answer's error followed
// by ", closed".
type badInputCase struct {
	name     string
	listener string // SSL, PLAINTEXT or SASL_PLAINTEXT
	want     string
	run      func(t *testing.T, addr string, ca *certtest.CA) string
}

const scramRefused = "SASL_AUTHENTICATION_FAILED: Authentication failed during authentication due to invalid credentials " +
	"with SASL mechanism SCRAM-SHA-512, closed"

var badInputCases = []badInputCase{
	{"plaintext request on the SSL port", "SSL", "closed", func(t *testing.T, addr string, _ *certtest.CA) string {
		c := dialRaw(t, addr)
		c.Write(new(kmsg.RequestFormatter).AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1))
		return closedOutcome(t, c, true)
	}},
	{"garbage in the TLS handshake", "SSL", "closed", func(t *testing.T, addr string, _ *certtest.CA) string {
		c := dialRaw(t, addr)
		// A handshake record whose body is no ClientHello.
		c.Write(append([]byte{0x16, 0x03, 0x01, 0x00, 0x20}, []byte(strings.Repeat("\xde\xad\xbe\xef", 8))...))
		return closedOutcome(t, c, true)
	}},
	{"TLS client on the PLAINTEXT port", "PLAINTEXT", "TLS handshake failed", tlsOnPlain},
	{"TLS client on the SASL_PLAINTEXT port", "SASL_PLAINTEXT", "TLS handshake failed", tlsOnPlain},
	{"garbage as the first SASL frame", "SASL_PLAINTEXT", "closed", func(t *testing.T, addr string, _ *certtest.CA) string {
		c := dialRaw(t, addr)
		c.Write([]byte{0, 0, 0, 6, 0x60, 0x82, 0xff, 0x00, 0x13, 0x37})
		return closedOutcome(t, c, false)
	}},
	{"SaslAuthenticate before SaslHandshake", "SASL_PLAINTEXT", "closed", func(t *testing.T, addr string, _ *certtest.CA) string {
		auth := kmsg.NewPtrSASLAuthenticateRequest()
		auth.SASLAuthBytes = []byte("\x00alice\x00alice-pw")
		return answerOutcome(t, dialRaw(t, addr), auth)
	}},
	{"Metadata before SaslHandshake", "SASL_PLAINTEXT", "closed", func(t *testing.T, addr string, _ *certtest.CA) string {
		return answerOutcome(t, dialRaw(t, addr), kmsg.NewPtrMetadataRequest())
	}},
	{"garbage after SaslHandshake", "SASL_PLAINTEXT", "closed", func(t *testing.T, addr string, _ *certtest.CA) string {
		c := handshaken(t, addr, "SCRAM-SHA-512")
		c.Write([]byte{0, 0, 0, 3, 0xff, 0xff, 0xff})
		return closedOutcome(t, c, false)
	}},
	{"garbage PLAIN token", "SASL_PLAINTEXT", "SASL_AUTHENTICATION_FAILED: Invalid SASL/PLAIN response: expected 3 tokens, got 1, closed",
		func(t *testing.T, addr string, _ *certtest.CA) string {
			c := handshaken(t, addr, "PLAIN")
			return authOutcome(t, c, []byte("\xff\xfe\xfd no separators"))
		}},
	{"SCRAM client-final with another nonce", "SASL_PLAINTEXT", scramRefused, func(t *testing.T, addr string, _ *certtest.CA) string {
		return scramExchange(t, addr, func(sf string) string { return sf }, func(final string) string {
			return replaceAttr(final, "r", "notthenonce0123456789")
		})
	}},
	{"SCRAM proof from a tampered iteration count", "SASL_PLAINTEXT", scramRefused, func(t *testing.T, addr string, _ *certtest.CA) string {
		return scramExchange(t, addr, func(sf string) string { return replaceAttr(sf, "i", "8193") }, func(final string) string { return final })
	}},
	{"SCRAM tampered proof", "SASL_PLAINTEXT", scramRefused, func(t *testing.T, addr string, _ *certtest.CA) string {
		return scramExchange(t, addr, func(sf string) string { return sf }, func(final string) string {
			p, err := base64.StdEncoding.DecodeString(attr(final, "p"))
			if err != nil || len(p) == 0 {
				t.Fatalf("client-final %q: %v", final, err)
			}
			p[0] ^= 0x01
			return replaceAttr(final, "p", base64.StdEncoding.EncodeToString(p))
		})
	}},
	{"Metadata after SaslHandshake", "SASL_PLAINTEXT", "Metadata topics [t:ILLEGAL_SASL_STATE] brokers 0, closed",
		func(t *testing.T, addr string, _ *certtest.CA) string {
			md := kmsg.NewPtrMetadataRequest()
			md.SetVersion(12)
			md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("t")}}
			return answerOutcome(t, handshaken(t, addr, "PLAIN"), md)
		}},
	{"ApiVersions after SaslHandshake", "SASL_PLAINTEXT", "ApiVersions ILLEGAL_SASL_STATE keys 0, closed",
		func(t *testing.T, addr string, _ *certtest.CA) string {
			return answerOutcome(t, handshaken(t, addr, "PLAIN"), kmsg.NewPtrApiVersionsRequest())
		}},
	{"second SaslHandshake", "SASL_PLAINTEXT", "SaslHandshake ILLEGAL_SASL_STATE, closed",
		func(t *testing.T, addr string, _ *certtest.CA) string {
			hs := kmsg.NewPtrSASLHandshakeRequest()
			hs.Version, hs.Mechanism = 1, "PLAIN"
			return answerOutcome(t, handshaken(t, addr, "PLAIN"), hs)
		}},
}

// TestSecureListenersBadInput sends badInputCases to Cascade's secured
// listeners on real sockets and checks each connection ends as Kafka 4.4
// ends it, while a well-behaved SASL_SSL client on the same broker
// produces and consumes before and after every case without losing a
// connection. TestConformanceSecureBadInput sends the same to Apache Kafka.
func TestSecureListenersBadInput(t *testing.T) {
	ca := certtest.NewCA(t, "CN=Test CA")
	b := brokertest.Start(t, tlsProps(t, ca))
	addScramUsers(t, b)
	good := newSteadyClient(t, b.ListenerAddr("SASL_SSL"), ca)
	good.roundTrip(t, "before")
	addrs := map[string]string{"PLAINTEXT": b.Addr(), "SASL_PLAINTEXT": b.ListenerAddr("SASL_PLAINTEXT"), "SSL": b.ListenerAddr("SSL")}
	for _, tc := range badInputCases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.run(t, addrs[tc.listener], ca); got != tc.want {
				t.Errorf("outcome %q, want %q", got, tc.want)
			}
		})
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

// closedOutcome reads until the broker closes c, at most 64 KiB and 10
// seconds: "closed" when nothing came (or, with alert, only a TLS alert
// record), else what came.
func closedOutcome(t *testing.T, c net.Conn, alert bool) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(io.LimitReader(c, 64<<10))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Sprintf("open after %d bytes", len(got))
	}
	if len(got) == 0 || (alert && got[0] == 0x15) {
		return "closed"
	}
	return fmt.Sprintf("answered % x", got[:min(len(got), 16)])
}

// tlsOnPlain runs a TLS handshake against a listener that does not speak
// TLS.
func tlsOnPlain(t *testing.T, addr string, ca *certtest.CA) string {
	t.Helper()
	raw := dialRaw(t, addr)
	raw.SetDeadline(time.Now().Add(10 * time.Second))
	err := tls.Client(raw, clientTLS(ca, nil)).Handshake()
	var ne net.Error
	switch {
	case err == nil:
		return "TLS handshake completed"
	case errors.As(err, &ne) && ne.Timeout():
		return "TLS handshake timed out"
	}
	return "TLS handshake failed"
}

// answerOutcome sends req on c and describes the answer, then whether the
// connection closed.
func answerOutcome(t *testing.T, c net.Conn, req kmsg.Request) string {
	t.Helper()
	body, err := rawFrame(t, c, req, req.IsFlexible() && req.Key() != 18)
	if err != nil {
		return "closed"
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decoding %T: %v", resp, err)
	}
	var out string
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		var topics []string
		for _, tp := range r.Topics {
			topics = append(topics, *tp.Topic+":"+codeName(tp.ErrorCode))
		}
		out = fmt.Sprintf("Metadata topics [%s] brokers %d", strings.Join(topics, " "), len(r.Brokers))
	case *kmsg.ApiVersionsResponse:
		out = fmt.Sprintf("ApiVersions %s keys %d", codeName(r.ErrorCode), len(r.ApiKeys))
	case *kmsg.SASLHandshakeResponse:
		out = "SaslHandshake " + codeName(r.ErrorCode)
	default:
		out = fmt.Sprintf("%T", resp)
	}
	return out + ", " + closedOutcome(t, c, false)
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

// authOutcome sends token and describes the answer's error and message,
// then whether the connection closed.
func authOutcome(t *testing.T, c net.Conn, token []byte) string {
	t.Helper()
	resp := authenticate(t, c, token)
	out := codeName(resp.ErrorCode)
	if resp.ErrorMessage != nil {
		out += ": " + *resp.ErrorMessage
	}
	return out + ", " + closedOutcome(t, c, false)
}

// scramExchange runs SCRAM-SHA-512 as carol (8192 iterations) with
// xdg-go/scram, passing the server-first message through serverFirst and
// the client-final through final, and describes the broker's answer to the
// client-final. The same exchange untampered must succeed first, so the
// refusal is the tampering's.
func scramExchange(t *testing.T, addr string, serverFirst, final func(string) string) string {
	t.Helper()
	var out string
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
		out = authOutcome(t, c, []byte(final(fin)))
	}
	return out
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

// codeName is Kafka's name of an error code, NONE for 0.
func codeName(code int16) string {
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &ke) {
		return ke.Message
	}
	if code == 0 {
		return "NONE"
	}
	return fmt.Sprintf("code %d", code)
}

package broker_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

// saslProps are a single node with a PLAINTEXT listener (inter-broker, and
// where the test's admin creates SCRAM users) and a SASL_PLAINTEXT
// listener serving PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, configured as
// Kafka's brokers are.
func saslProps(extra map[string]string) map[string]string {
	p := map[string]string{
		"listeners":                  "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"inter.broker.listener.name": "PLAINTEXT",
		"sasl.enabled.mechanisms":    "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required ` +
			`username="admin" password="admin-pw" user_admin="admin-pw" user_alice="alice-pw";`,
		"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
		"listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
		"connection.failed.authentication.delay.ms":                   "10",
	}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

func addScramUsers(t *testing.T, b *brokertest.Broker) {
	t.Helper()
	adm := b.Admin(t)
	res, err := adm.AlterUserSCRAMs(ctxT(t), nil, []kadm.UpsertSCRAM{
		{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "bob-pw"},
		{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "carol-pw"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("%s: %v", r.User, r.Err)
		}
	}
}

// roundTrip produces and consumes one record through a client with m (nil:
// no SASL).
func roundTrip(t *testing.T, addr, topic string, m sasl.Mechanism, opts ...kgo.Opt) error {
	t.Helper()
	ctx := ctxT(t)
	if m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), fastMeta, kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Authentication first: a producer would retry a failed connection
	// until its delivery timeout.
	if _, err := cl.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
		return err
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v-" + topic)}).FirstErr(); err != nil {
		return err
	}
	fs := cl.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		return err
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "v-"+topic {
		t.Fatalf("consumed %v", recs)
	}
	return nil
}

func TestSASLFranzGo(t *testing.T) {
	b := brokertest.Start(t, saslProps(nil))
	addScramUsers(t, b)
	addr := b.ListenerAddr("SASL_PLAINTEXT")
	good := map[string]sasl.Mechanism{
		"plain":    plain.Auth{User: "alice", Pass: "alice-pw"}.AsMechanism(),
		"scram256": scram.Auth{User: "bob", Pass: "bob-pw"}.AsSha256Mechanism(),
		"scram512": scram.Auth{User: "carol", Pass: "carol-pw"}.AsSha512Mechanism(),
	}
	for name, m := range good {
		if err := roundTrip(t, addr, "t-"+name, m); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad := map[string]sasl.Mechanism{
		"plain":     plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism(),
		"scram256":  scram.Auth{User: "bob", Pass: "wrong"}.AsSha256Mechanism(),
		"scram512":  scram.Auth{User: "carol", Pass: "wrong"}.AsSha512Mechanism(),
		"mechanism": scram.Auth{User: "carol", Pass: "carol-pw"}.AsSha256Mechanism(), // carol has no SHA-256 credential
		"unknown":   scram.Auth{User: "dave", Pass: "x"}.AsSha512Mechanism(),
	}
	for name, m := range bad {
		err := roundTrip(t, addr, "bad-"+name, m)
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("%s: got %v, want SASL_AUTHENTICATION_FAILED", name, err)
		}
	}
	// The credentials are metadata records: they survive a restart.
	dir := b.Dir
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b.Broker = nil
	b = brokertest.Start(t, saslProps(map[string]string{"log.dirs": dir}))
	if err := roundTrip(t, b.ListenerAddr("SASL_PLAINTEXT"), "after-restart", good["scram512"]); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	described, err := b.Admin(t).DescribeUserSCRAMs(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if c := described["carol"]; c.Err != nil || len(c.CredInfos) != 1 || c.CredInfos[0].Iterations != 8192 {
		t.Fatalf("described %+v", described)
	}
}

// rawFrame writes one request frame on c and reads the reply frame's body
// (after the correlation id), or returns the read error.
func rawFrame(t *testing.T, c net.Conn, req kmsg.Request, flexibleHeader bool) ([]byte, error) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	hdr := kmsg.RequestFormatter{}
	buf := hdr.AppendRequest(nil, req, 7)
	if _, err := c.Write(buf); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := ioReadFull(c, size[:]); err != nil {
		return nil, err
	}
	n := int(size[0])<<24 | int(size[1])<<16 | int(size[2])<<8 | int(size[3])
	body := make([]byte, n)
	if _, err := ioReadFull(c, body); err != nil {
		return nil, err
	}
	body = body[4:]
	if flexibleHeader {
		body = body[1:]
	}
	return body, nil
}

func TestSASLWireRules(t *testing.T) {
	b := brokertest.Start(t, saslProps(nil))
	addr := b.ListenerAddr("SASL_PLAINTEXT")
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// A request other than ApiVersions or SaslHandshake before
	// authentication closes the connection.
	c := dial()
	if _, err := rawFrame(t, c, kmsg.NewPtrMetadataRequest(), false); err == nil {
		t.Fatal("Metadata before authentication was answered")
	}
	// An unknown mechanism: UNSUPPORTED_SASL_MECHANISM with the enabled
	// list, then a close.
	c = dial()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "GSSAPI"
	body, err := rawFrame(t, c, hs, false)
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.Version = 1
	if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code ||
		strings.Join(resp.SupportedMechanisms, ",") != "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512" {
		t.Fatalf("handshake %+v %v", resp, err)
	}
	if _, err := rawFrame(t, c, kmsg.NewPtrApiVersionsRequest(), false); err == nil {
		t.Fatal("connection open after an unsupported mechanism")
	}
	// The v0 flow: after SaslHandshake v0 the PLAIN token goes bare.
	c = dial()
	hs.Version, hs.Mechanism = 0, "PLAIN"
	if body, err = rawFrame(t, c, hs, false); err != nil {
		t.Fatal(err)
	}
	resp.Version = 0
	if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("v0 handshake %+v %v", resp, err)
	}
	tok := []byte("\x00alice\x00alice-pw")
	c.Write(append([]byte{0, 0, 0, byte(len(tok))}, tok...))
	var empty [4]byte
	if _, err := ioReadFull(c, empty[:]); err != nil || empty != [4]byte{} {
		t.Fatalf("v0 token answer %v %v", empty, err)
	}
	if _, err := rawFrame(t, c, kmsg.NewPtrMetadataRequest(), false); err != nil {
		t.Fatalf("Metadata after a v0 exchange: %v", err)
	}
	// On the PLAINTEXT listener SaslHandshake is ILLEGAL_SASL_STATE.
	c, err = net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hs.Version = 1
	if body, err = rawFrame(t, c, hs, false); err != nil {
		t.Fatal(err)
	}
	resp.Version = 1
	if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("plaintext handshake %+v %v", resp, err)
	}
}

// TestSASLReauthentication: with connections.max.reauth.ms the client is
// told the session's lifetime, franz-go re-authenticates before it ends,
// and a connection that does not is closed on its next request.
func TestSASLReauthentication(t *testing.T) {
	b := brokertest.Start(t, saslProps(map[string]string{"connections.max.reauth.ms": "1500"}))
	addr := b.ListenerAddr("SASL_PLAINTEXT")
	ctx := ctxT(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), fastMeta, kgo.AllowAutoTopicCreation(),
		kgo.SASL(plain.Auth{User: "alice", Pass: "alice-pw"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	deadline := time.Now().Add(4 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "reauth", Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatalf("produce %d across re-authentications: %v", i, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A raw connection that never re-authenticates.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	if _, err := rawFrame(t, c, hs, false); err != nil {
		t.Fatal(err)
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 1, []byte("\x00alice\x00alice-pw")
	body, err := rawFrame(t, c, au, false)
	if err != nil {
		t.Fatal(err)
	}
	ar := kmsg.NewPtrSASLAuthenticateResponse()
	ar.Version = 1
	if err := ar.ReadFrom(body); err != nil || ar.ErrorCode != 0 || ar.SessionLifetimeMillis != 1500 {
		t.Fatalf("authenticate %+v %v", ar, err)
	}
	if _, err := rawFrame(t, c, kmsg.NewPtrMetadataRequest(), false); err != nil {
		t.Fatalf("within the session: %v", err)
	}
	time.Sleep(1600 * time.Millisecond)
	if _, err := rawFrame(t, c, kmsg.NewPtrMetadataRequest(), false); err == nil {
		t.Fatal("a request after the session expired was answered")
	}
}

func ioReadFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

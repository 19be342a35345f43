package security_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/security"
	"github.com/cascade-kafka/cascade/broker/security/sasl"
	"github.com/cascade-kafka/cascade/broker/wire"
	"github.com/cascade-kafka/cascade/internal/certtest"
)

// nodeConfig is a node with a SASL_SSL listener INTERNAL on which it logs
// in as broker with password, and accepts broker with broker-secret.
func nodeConfig(t *testing.T, password string) *config.Broker {
	return nodeConfigWith(t, map[string]string{"sasl.enabled.mechanisms": "PLAIN",
		"listener.name.internal.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required ` +
			`username="broker" password="` + password + `" user_broker="broker-secret";`})
}

// nodeConfigWith is nodeConfig's TLS set-up with the SASL keys of sasl.
func nodeConfigWith(t *testing.T, sasl map[string]string) *config.Broker {
	t.Helper()
	dir := t.TempDir()
	ca := certtest.NewCA(t, "CN=Test CA")
	srv := ca.Issue(t, "CN=localhost,O=Test", "localhost", "127.0.0.1")
	props := map[string]string{
		"log.dirs":                                  filepath.Join(dir, "data"),
		"listeners":                                 "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
		"listener.security.protocol.map":            "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:PLAINTEXT",
		"ssl.keystore.type":                         "PKCS12",
		"ssl.keystore.location":                     srv.PKCS12(t, dir, "ks.p12", "pw"),
		"ssl.keystore.password":                     "pw",
		"ssl.truststore.type":                       "PEM",
		"ssl.truststore.location":                   ca.TrustPEM(t, dir, "trust.pem"),
		"connection.failed.authentication.delay.ms": "0",
	}
	for k, v := range sasl {
		props[k] = v
	}
	bc, err := config.New(props)
	if err != nil {
		t.Fatal(err)
	}
	return bc
}

// serveOnce accepts one connection on a listener secured as bc's
// INTERNAL and reports who it authenticated, or why not.
func serveOnce(t *testing.T, bc *config.Broker) (string, <-chan error, <-chan wire.Identity) {
	return serveOnceWith(t, bc, security.Options{})
}

// serveOnceWith is serveOnce with the listener's options.
func serveOnceWith(t *testing.T, bc *config.Broker, opts security.Options) (string, <-chan error, <-chan wire.Identity) {
	t.Helper()
	var internal config.Listener
	for _, l := range bc.Listeners {
		if l.Name == "INTERNAL" {
			internal = l
		}
	}
	sec, err := security.Listener(bc, internal, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sec.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	errs, ids := make(chan error, 1), make(chan wire.Identity, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			errs <- err
			return
		}
		sc, _, id, err := wire.SecureConn(context.Background(), c, &sec.Wire, 5*time.Second)
		if err != nil {
			errs <- err
			return
		}
		sc.Close()
		ids <- id
	}()
	return ln.Addr().String(), errs, ids
}

// dialPeer dials addr as bc's INTERNAL client side, with mechanism.
func dialPeer(t *testing.T, bc *config.Broker, addr, mechanism string) (net.Conn, error) {
	t.Helper()
	cl, err := security.NewClient(bc, "INTERNAL", config.ProtocolSASLSSL, mechanism)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.Dial(nil)(ctx, "tcp", addr)
}

func TestClientAuthenticatesToPeer(t *testing.T) {
	bc := nodeConfig(t, "broker-secret")
	addr, errs, ids := serveOnce(t, bc)
	conn, err := dialPeer(t, bc, addr, "PLAIN")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	select {
	case id := <-ids:
		if id.Principal != "User:broker" || id.Listener != "INTERNAL" {
			t.Fatalf("server saw %+v, want User:broker on INTERNAL", id)
		}
	case err := <-errs:
		t.Fatalf("server: %v", err)
	}
}

func TestClientWrongPasswordRefused(t *testing.T) {
	bc := nodeConfig(t, "wrong")
	addr, errs, _ := serveOnce(t, bc)
	if _, err := dialPeer(t, bc, addr, "PLAIN"); !errors.Is(err, security.ErrPeerAuthentication) {
		t.Fatalf("dial with a wrong password: %v, want ErrPeerAuthentication", err)
	}
	if err := <-errs; !errors.Is(err, wire.ErrAuthentication) {
		t.Fatalf("server: %v, want wire.ErrAuthentication", err)
	}
}

func TestSecureConnRefusesPlaintext(t *testing.T) {
	bc := nodeConfig(t, "broker-secret")
	addr, errs, _ := serveOnce(t, bc)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte{0, 0, 0, 8, 0, 18, 0, 0, 0, 0, 0, 1})
	if err := <-errs; !errors.Is(err, wire.ErrAuthentication) {
		t.Fatalf("server: %v, want wire.ErrAuthentication (TLS handshake)", err)
	}
}

func TestNewClientRefusesUnspokenMechanism(t *testing.T) {
	bc := nodeConfig(t, "broker-secret")
	if _, err := security.NewClient(bc, "INTERNAL", config.ProtocolSASLSSL, "GSSAPI"); err == nil {
		t.Fatal("GSSAPI between nodes accepted")
	}
	if _, err := security.NewClient(bc, "INTERNAL", config.ProtocolSASLSSL, "SCRAM-SHA-512"); err == nil {
		t.Fatal("a mechanism without a JAAS config accepted")
	}
}

func TestClientScramToPeer(t *testing.T) {
	const mech = "SCRAM-SHA-256"
	bc := nodeConfigWith(t, map[string]string{"sasl.enabled.mechanisms": mech,
		"listener.name.internal.scram-sha-256.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required ` +
			`username="broker" password="broker-secret";`})
	salt := []byte("0123456789abcdef")
	salted, err := sasl.SaltedPassword(mech, "broker-secret", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	cred := sasl.DeriveScram(mech, salt, salted, 4096)
	addr, errs, ids := serveOnceWith(t, bc, security.Options{Scram: func(m, user string) (sasl.ScramCredential, bool) {
		return cred, m == mech && user == "broker"
	}})
	conn, err := dialPeer(t, bc, addr, mech)
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	select {
	case id := <-ids:
		if id.Principal != "User:broker" {
			t.Fatalf("server saw %+v", id)
		}
	case err := <-errs:
		t.Fatalf("server: %v", err)
	}
}

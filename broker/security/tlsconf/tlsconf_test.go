package tlsconf

import (
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/internal/certtest"
)

// handshake connects a TLS client trusting ca to r's server config and
// returns the server certificate's subject.
func handshake(t *testing.T, r *Reloader, ca *certtest.CA, client *certtest.Cert, cfg func(*tls.Config)) (string, error) {
	t.Helper()
	cc := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
	if client != nil {
		cc.Certificates = []tls.Certificate{client.TLS()}
	}
	if cfg != nil {
		cfg(cc)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", r.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	errc := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			errc <- err
			return
		}
		defer c.Close()
		errc <- c.(*tls.Conn).Handshake()
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), cc)
	if err != nil {
		<-errc
		return "", err
	}
	defer c.Close()
	// TLS 1.3 reports a refused client certificate on the first read.
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if serr := <-errc; serr != nil {
		return "", serr
	}
	return c.ConnectionState().PeerCertificates[0].Subject.String(), nil
}

func TestStores(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "CN=Test CA")
	srv := ca.Issue(t, "CN=localhost,O=Cascade", "localhost", "127.0.0.1")
	cases := map[string]Config{
		"PKCS12": {KeystoreType: "PKCS12", KeystoreLocation: srv.PKCS12(t, dir, "k.p12", "ks-pw"), KeystorePassword: "ks-pw",
			TruststoreType: "PKCS12", TruststoreLocation: ca.TrustPKCS12(t, dir, "t.p12", "ts-pw"), TruststorePassword: "ts-pw"},
		"JKS": {KeystoreType: "JKS", KeystoreLocation: srv.JKS(t, dir, "k.jks", "ks-pw", "key-pw"), KeystorePassword: "ks-pw",
			KeyPassword: "key-pw", TruststoreType: "JKS", TruststoreLocation: ca.TrustJKS(t, dir, "t.jks", "ts-pw"),
			TruststorePassword: "ts-pw"},
		"PEM file": {KeystoreType: "PEM", KeystoreLocation: srv.PEMFile(t, dir, "k.pem"),
			TruststoreType: "PEM", TruststoreLocation: ca.TrustPEM(t, dir, "t.pem")},
		"PEM values": {KeystoreType: "PEM", KeystoreChain: srv.ChainPEM(), KeystoreKey: srv.KeyPEM(),
			TruststoreType: "PEM", TruststoreCerts: ca.ChainPEM()},
	}
	client := ca.Issue(t, "CN=alice,O=Example")
	for name, c := range cases {
		c.ClientAuth = "required"
		r, err := NewReloader(c, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if subj, err := handshake(t, r, ca, client, nil); err != nil || subj != "CN=localhost,O=Cascade" {
			t.Errorf("%s: %q %v", name, subj, err)
		}
		if _, err := handshake(t, r, ca, nil, nil); err == nil {
			t.Errorf("%s: a client without a certificate was accepted with ssl.client.auth=required", name)
		}
	}
	bad := map[string]Config{
		"wrong PKCS12 password": {KeystoreType: "PKCS12", KeystoreLocation: cases["PKCS12"].KeystoreLocation, KeystorePassword: "nope"},
		"wrong JKS key password": {KeystoreType: "JKS", KeystoreLocation: cases["JKS"].KeystoreLocation,
			KeystorePassword: "ks-pw", KeyPassword: "nope"},
		"no key store":         {KeystoreType: "JKS"},
		"PEM values, JKS type": {KeystoreType: "JKS", KeystoreChain: srv.ChainPEM(), KeystoreKey: srv.KeyPEM()},
		"client auth without trust": {KeystoreType: "PEM", KeystoreLocation: cases["PEM file"].KeystoreLocation,
			ClientAuth: "required"},
		"unknown suite": {KeystoreType: "PEM", KeystoreLocation: cases["PEM file"].KeystoreLocation,
			CipherSuites: []string{"TLS_RSA_WITH_NULL_MD5"}},
		"unknown protocol": {KeystoreType: "PEM", KeystoreLocation: cases["PEM file"].KeystoreLocation,
			EnabledProtocols: []string{"SSLv3"}},
	}
	for name, c := range bad {
		if _, err := NewReloader(c, nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestProtocolsAndSuites(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "CN=Test CA")
	srv := ca.Issue(t, "CN=localhost", "localhost")
	base := Config{KeystoreType: "PEM", KeystoreLocation: srv.PEMFile(t, dir, "k.pem")}
	c := base
	c.EnabledProtocols = []string{"TLSv1.2"}
	c.CipherSuites = []string{"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}
	r, err := NewReloader(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got tls.ConnectionState
	if _, err := handshake(t, r, ca, nil, func(cc *tls.Config) {
		cc.VerifyConnection = func(cs tls.ConnectionState) error { got = cs; return nil }
	}); err != nil {
		t.Fatal(err)
	}
	if got.Version != tls.VersionTLS12 || got.CipherSuite != tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 {
		t.Fatalf("negotiated %x %x", got.Version, got.CipherSuite)
	}
	if _, err := handshake(t, r, ca, nil, func(cc *tls.Config) { cc.MinVersion = tls.VersionTLS13 }); err == nil {
		t.Fatal("TLS 1.3 accepted with ssl.enabled.protocols=TLSv1.2")
	}
	c = base
	c.Protocol = "TLSv1.2" // ssl.protocol bounds the enabled TLSv1.3
	r, _ = NewReloader(c, nil)
	if _, err := handshake(t, r, ca, nil, func(cc *tls.Config) { cc.MinVersion = tls.VersionTLS13 }); err == nil {
		t.Fatal("TLS 1.3 accepted with ssl.protocol=TLSv1.2")
	}
}

// TestReload replaces the key store file: the next handshake after the
// check interval serves the new certificate; a store for another subject
// is refused and the old one kept.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "CN=Test CA")
	first := ca.Issue(t, "CN=localhost", "localhost")
	path := first.PKCS12(t, dir, "k.p12", "pw")
	r, err := NewReloader(Config{KeystoreType: "PKCS12", KeystoreLocation: path, KeystorePassword: "pw"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	serial := func() string {
		var s string
		if _, err := handshake(t, r, ca, nil, func(cc *tls.Config) {
			cc.VerifyConnection = func(cs tls.ConnectionState) error {
				s = cs.PeerCertificates[0].SerialNumber.String()
				return nil
			}
		}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got := serial(); got != first.Chain[0].SerialNumber.String() {
		t.Fatalf("serial %s", got)
	}
	second := ca.Issue(t, "CN=localhost", "localhost")
	second.PKCS12(t, dir, "new.p12", "pw")
	os.Rename(filepath.Join(dir, "new.p12"), path)
	future := time.Now().Add(2 * time.Second)
	os.Chtimes(path, future, future)
	time.Sleep(checkEvery + 50*time.Millisecond)
	if got := serial(); got != second.Chain[0].SerialNumber.String() {
		t.Fatalf("after the file changed: serial %s, want %s", got, second.Chain[0].SerialNumber)
	}
	other := ca.Issue(t, "CN=someone-else", "localhost")
	other.PKCS12(t, dir, "other.p12", "pw")
	os.Rename(filepath.Join(dir, "other.p12"), path)
	later := time.Now().Add(4 * time.Second)
	os.Chtimes(path, later, later)
	if ok, err := r.Reload(); ok || !errors.Is(err, ErrInvalid) {
		t.Fatalf("a key store for another subject: %v %v", ok, err)
	}
	if got := serial(); got != second.Chain[0].SerialNumber.String() {
		t.Fatalf("the refused store replaced the served one: %s", got)
	}
}

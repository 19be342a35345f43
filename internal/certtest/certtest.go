// Package certtest makes certificates and key stores for tests at run time:
// a CA, certificates it signs, and the same key and chain written as PEM,
// PKCS12 and JKS files, as Kafka's tests make them with TestSslUtils.
//
//	ca := certtest.NewCA(t, "CN=Test CA")
//	srv := ca.Issue(t, "CN=localhost", "localhost", "127.0.0.1")
//	ks := srv.PKCS12(t, dir, "pw") // ssl.keystore.location
package certtest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pavlo-v-chernykh/keystore-go/v4"
	"software.sslmate.com/src/go-pkcs12"
)

// Cert is a key and its certificate chain (leaf first).
type Cert struct {
	Key   *ecdsa.PrivateKey
	Chain []*x509.Certificate
}

// CA is a self-signed certificate authority.
type CA struct {
	Cert
	serial int64
}

// parseDN parses "CN=a,O=b,OU=c,C=d" into a pkix.Name.
func parseDN(dn string) pkix.Name {
	var n pkix.Name
	for _, part := range strings.Split(dn, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "CN":
			n.CommonName = v
		case "O":
			n.Organization = append(n.Organization, v)
		case "OU":
			n.OrganizationalUnit = append(n.OrganizationalUnit, v)
		case "C":
			n.Country = append(n.Country, v)
		case "L":
			n.Locality = append(n.Locality, v)
		}
	}
	return n
}

// NewCA makes a CA with subject dn.
func NewCA(t testing.TB, dn string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: parseDN(dn), NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &CA{Cert: Cert{Key: key, Chain: []*x509.Certificate{cert}}, serial: 1}
}

// Issue makes a certificate for subject dn with the given DNS names and IP
// addresses, usable by servers and clients.
func (ca *CA) Issue(t testing.TB, dn string, hosts ...string) *Cert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(ca.serial), Subject: parseDN(dn),
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Chain[0], &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &Cert{Key: key, Chain: []*x509.Certificate{cert, ca.Chain[0]}}
}

// TLS returns the certificate for a tls.Config.
func (c *Cert) TLS() tls.Certificate {
	out := tls.Certificate{PrivateKey: c.Key, Leaf: c.Chain[0]}
	for _, x := range c.Chain {
		out.Certificate = append(out.Certificate, x.Raw)
	}
	return out
}

// Pool returns a pool holding the CA's certificate.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Chain[0])
	return p
}

// ChainPEM returns the chain in PEM.
func (c *Cert) ChainPEM() string {
	var b bytes.Buffer
	for _, x := range c.Chain {
		pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: x.Raw})
	}
	return b.String()
}

// KeyPEM returns the key as an unencrypted PKCS#8 PEM block.
func (c *Cert) KeyPEM() string {
	der, err := x509.MarshalPKCS8PrivateKey(c.Key)
	if err != nil {
		panic("certtest: an ECDSA P-256 key does not marshal: " + err.Error()) // never for NewCA's keys
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

func write(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// PEMFile writes the key and chain to one PEM file (ssl.keystore.type=PEM
// with ssl.keystore.location) and returns its path.
func (c *Cert) PEMFile(t testing.TB, dir, name string) string {
	return write(t, dir, name, []byte(c.KeyPEM()+c.ChainPEM()))
}

// PKCS12 writes a PKCS12 key store with password and returns its path.
func (c *Cert) PKCS12(t testing.TB, dir, name, password string) string {
	t.Helper()
	data, err := pkcs12.Modern.Encode(c.Key, c.Chain[0], c.Chain[1:], password)
	if err != nil {
		t.Fatal(err)
	}
	return write(t, dir, name, data)
}

// JKS writes a JKS key store whose key entry has keyPassword, and returns
// its path.
func (c *Cert) JKS(t testing.TB, dir, name, storePassword, keyPassword string) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(c.Key)
	if err != nil {
		t.Fatal(err)
	}
	ks := keystore.New()
	e := keystore.PrivateKeyEntry{CreationTime: time.Now(), PrivateKey: der}
	for _, x := range c.Chain {
		e.CertificateChain = append(e.CertificateChain, keystore.Certificate{Type: "X509", Content: x.Raw})
	}
	if err := ks.SetPrivateKeyEntry("key", e, []byte(keyPassword)); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := ks.Store(&b, []byte(storePassword)); err != nil {
		t.Fatal(err)
	}
	return write(t, dir, name, b.Bytes())
}

// TrustPEM writes the CA certificate as a PEM trust store.
func (ca *CA) TrustPEM(t testing.TB, dir, name string) string {
	return write(t, dir, name, []byte(ca.ChainPEM()))
}

// TrustPKCS12 writes the CA certificate as a PKCS12 trust store.
func (ca *CA) TrustPKCS12(t testing.TB, dir, name, password string) string {
	t.Helper()
	data, err := pkcs12.Modern.EncodeTrustStore([]*x509.Certificate{ca.Chain[0]}, password)
	if err != nil {
		t.Fatal(err)
	}
	return write(t, dir, name, data)
}

// TrustJKS writes the CA certificate as a JKS trust store.
func (ca *CA) TrustJKS(t testing.TB, dir, name, password string) string {
	t.Helper()
	ks := keystore.New()
	if err := ks.SetTrustedCertificateEntry("ca", keystore.TrustedCertificateEntry{CreationTime: time.Now(),
		Certificate: keystore.Certificate{Type: "X509", Content: ca.Chain[0].Raw}}); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := ks.Store(&b, []byte(password)); err != nil {
		t.Fatal(err)
	}
	return write(t, dir, name, b.Bytes())
}

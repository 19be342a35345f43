package tlsconf

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/pavlo-v-chernykh/keystore-go/v4"
	"github.com/youmark/pkcs8"
	"software.sslmate.com/src/go-pkcs12"
)

// ErrInvalid is wrapped by every error about a key store, trust store or
// TLS setting that cannot be used.
var ErrInvalid = errors.New("tlsconf: invalid TLS configuration")

// maxStoreBytes bounds a key or trust store file.
const maxStoreBytes = 16 << 20

// Config is one listener's ssl.* configuration, with Kafka's meaning.
type Config struct {
	KeystoreType       string // JKS, PKCS12 or PEM
	KeystoreLocation   string
	KeystorePassword   string
	KeyPassword        string
	KeystoreChain      string // ssl.keystore.certificate.chain (PEM)
	KeystoreKey        string // ssl.keystore.key (PEM)
	TruststoreType     string
	TruststoreLocation string
	TruststorePassword string
	TruststoreCerts    string // ssl.truststore.certificates (PEM)
	// ClientAuth is ssl.client.auth: none, requested or required.
	ClientAuth       string
	EnabledProtocols []string
	Protocol         string
	CipherSuites     []string
	// EndpointIdentification is ssl.endpoint.identification.algorithm,
	// used by client configurations only.
	EndpointIdentification string
}

// FromConfig reads a Config through get, which returns the value of an
// ssl.* key for the listener ("" when unset).
func FromConfig(get func(key string) string) Config {
	list := func(k string) []string {
		var out []string
		for _, p := range strings.Split(get(k), ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out
	}
	return Config{
		KeystoreType: get("ssl.keystore.type"), KeystoreLocation: get("ssl.keystore.location"),
		KeystorePassword: get("ssl.keystore.password"), KeyPassword: get("ssl.key.password"),
		KeystoreChain: get("ssl.keystore.certificate.chain"), KeystoreKey: get("ssl.keystore.key"),
		TruststoreType: get("ssl.truststore.type"), TruststoreLocation: get("ssl.truststore.location"),
		TruststorePassword: get("ssl.truststore.password"), TruststoreCerts: get("ssl.truststore.certificates"),
		ClientAuth: get("ssl.client.auth"), EnabledProtocols: list("ssl.enabled.protocols"),
		Protocol: get("ssl.protocol"), CipherSuites: list("ssl.cipher.suites"),
		EndpointIdentification: get("ssl.endpoint.identification.algorithm"),
	}
}

// Material is what a Config's stores hold: the key and its certificate
// chain, and the trusted certificates (nil when there is no trust store).
type Material struct {
	Cert  tls.Certificate
	Trust *x509.CertPool
	// trusted are the trust store's certificates, to compare reloads.
	trusted int
}

// Load reads the key store and trust store of c, as Kafka's
// DefaultSslEngineFactory: a key store is required (a broker's SSL
// listener must present a certificate), a trust store only when clients
// are asked for certificates.
func Load(c Config) (*Material, error) {
	cert, err := loadKeystore(c)
	if err != nil {
		return nil, err
	}
	m := &Material{Cert: cert}
	certs, err := loadTruststore(c)
	if err != nil {
		return nil, err
	}
	if certs != nil {
		m.Trust = x509.NewCertPool()
		for _, t := range certs {
			m.Trust.AddCert(t)
		}
		m.trusted = len(certs)
	}
	return m, nil
}

func readStore(kind, path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: %w", ErrInvalid, kind, path, err)
	}
	if st.Size() > maxStoreBytes {
		return nil, fmt.Errorf("%w: %s %s is larger than %d bytes", ErrInvalid, kind, path, maxStoreBytes)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: %w", ErrInvalid, kind, path, err)
	}
	return b, nil
}

func loadKeystore(c Config) (tls.Certificate, error) {
	typ := strings.ToUpper(c.KeystoreType)
	if c.KeystoreChain != "" || c.KeystoreKey != "" {
		// As DefaultSslEngineFactory: PEM values in the config.
		if typ != "PEM" {
			return tls.Certificate{}, fmt.Errorf("%w: ssl.keystore.certificate.chain and ssl.keystore.key need ssl.keystore.type=PEM", ErrInvalid)
		}
		if c.KeystoreLocation != "" {
			return tls.Certificate{}, fmt.Errorf("%w: ssl.keystore.location cannot be set with ssl.keystore.key", ErrInvalid)
		}
		return pemKeyPair([]byte(c.KeystoreChain), []byte(c.KeystoreKey), c.KeyPassword)
	}
	if c.KeystoreLocation == "" {
		return tls.Certificate{}, fmt.Errorf("%w: an SSL listener needs a key store (ssl.keystore.location, or "+
			"ssl.keystore.certificate.chain and ssl.keystore.key with ssl.keystore.type=PEM)", ErrInvalid)
	}
	data, err := readStore("key store", c.KeystoreLocation)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPassword := c.KeyPassword
	if keyPassword == "" {
		keyPassword = c.KeystorePassword
	}
	switch typ {
	case "PEM":
		return pemKeyPair(data, data, c.KeyPassword)
	case "PKCS12":
		key, leaf, chain, err := pkcs12.DecodeChain(data, c.KeystorePassword)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("%w: PKCS12 key store %s: %w", ErrInvalid, c.KeystoreLocation, err)
		}
		out := tls.Certificate{PrivateKey: key, Leaf: leaf, Certificate: [][]byte{leaf.Raw}}
		for _, ca := range chain {
			out.Certificate = append(out.Certificate, ca.Raw)
		}
		return out, checkPair(out)
	case "JKS":
		ks := keystore.New()
		if err := ks.Load(bytes.NewReader(data), []byte(c.KeystorePassword)); err != nil {
			return tls.Certificate{}, fmt.Errorf("%w: JKS key store %s: %w", ErrInvalid, c.KeystoreLocation, err)
		}
		for _, alias := range ks.Aliases() {
			if !ks.IsPrivateKeyEntry(alias) {
				continue
			}
			e, err := ks.GetPrivateKeyEntry(alias, []byte(keyPassword))
			if err != nil {
				return tls.Certificate{}, fmt.Errorf("%w: JKS key store %s, entry %s (ssl.key.password): %w",
					ErrInvalid, c.KeystoreLocation, alias, err)
			}
			key, err := x509.ParsePKCS8PrivateKey(e.PrivateKey)
			if err != nil {
				return tls.Certificate{}, fmt.Errorf("%w: JKS key store %s, entry %s: %w", ErrInvalid, c.KeystoreLocation, alias, err)
			}
			out := tls.Certificate{PrivateKey: key}
			for _, ch := range e.CertificateChain {
				out.Certificate = append(out.Certificate, ch.Content)
			}
			if len(out.Certificate) == 0 {
				return tls.Certificate{}, fmt.Errorf("%w: JKS key store %s, entry %s has no certificate", ErrInvalid, c.KeystoreLocation, alias)
			}
			if out.Leaf, err = x509.ParseCertificate(out.Certificate[0]); err != nil {
				return tls.Certificate{}, fmt.Errorf("%w: JKS key store %s: %w", ErrInvalid, c.KeystoreLocation, err)
			}
			return out, checkPair(out)
		}
		return tls.Certificate{}, fmt.Errorf("%w: JKS key store %s has no private key entry", ErrInvalid, c.KeystoreLocation)
	}
	return tls.Certificate{}, fmt.Errorf("%w: ssl.keystore.type %q", ErrInvalid, c.KeystoreType)
}

// checkPair checks that a certificate's public key is its private key's.
func checkPair(c tls.Certificate) error {
	signer, ok := c.PrivateKey.(crypto.Signer)
	if !ok {
		return fmt.Errorf("%w: the key store's private key cannot sign", ErrInvalid)
	}
	pub, ok := c.Leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(signer.Public()) {
		return fmt.Errorf("%w: the key store's private key does not match its certificate", ErrInvalid)
	}
	return nil
}

// pemKeyPair parses a PEM certificate chain and a private key, as Kafka's
// PEM key store (KIP-651, DefaultSslEngineFactory.PemStore): with
// ssl.key.password an ENCRYPTED PRIVATE KEY (PKCS#8 EncryptedPrivateKeyInfo)
// decrypted with it, without one an unencrypted PRIVATE KEY (or PKCS#1 RSA
// and SEC 1 EC blocks, which Kafka does not read). Encrypted keys are
// PBES2 (PKCS#5 v2: PBKDF2 with HMAC-SHA1 or HMAC-SHA256, or scrypt;
// AES-128/192/256-CBC or -GCM, or DES-EDE3-CBC), what openssl 3 writes by
// default (AES-256-CBC, PBKDF2-HMAC-SHA256) and on request; the legacy
// PBES1 and PKCS#12 PBE forms are refused by name.
func pemKeyPair(chainPEM, keyPEM []byte, password string) (tls.Certificate, error) {
	var out tls.Certificate
	for rest := chainPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			out.Certificate = append(out.Certificate, b.Bytes)
		}
	}
	if len(out.Certificate) == 0 {
		return out, fmt.Errorf("%w: no CERTIFICATE in the PEM key store", ErrInvalid)
	}
	for rest := keyPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		var err error
		switch b.Type {
		case "PRIVATE KEY":
			if password != "" {
				// As PemStore: with a key password the key must be
				// an EncryptedPrivateKeyInfo.
				return out, fmt.Errorf("%w: ssl.key.password is set but the PEM private key is not encrypted", ErrInvalid)
			}
			out.PrivateKey, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			out.PrivateKey, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			out.PrivateKey, err = x509.ParseECPrivateKey(b.Bytes)
		case "ENCRYPTED PRIVATE KEY":
			out.PrivateKey, err = decryptPKCS8(b.Bytes, password)
		default:
			continue
		}
		if err != nil {
			return out, fmt.Errorf("%w: PEM private key: %w", ErrInvalid, err)
		}
		break
	}
	if out.PrivateKey == nil {
		return out, fmt.Errorf("%w: no private key in the PEM key store", ErrInvalid)
	}
	var err error
	if out.Leaf, err = x509.ParseCertificate(out.Certificate[0]); err != nil {
		return out, fmt.Errorf("%w: PEM certificate: %w", ErrInvalid, err)
	}
	return out, checkPair(out)
}

func pemCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: PEM trust store: %w", ErrInvalid, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no CERTIFICATE in the PEM trust store", ErrInvalid)
	}
	return out, nil
}

// loadTruststore returns the trusted certificates, nil when no trust
// store is configured.
func loadTruststore(c Config) ([]*x509.Certificate, error) {
	typ := strings.ToUpper(c.TruststoreType)
	if c.TruststoreCerts != "" {
		if typ != "PEM" {
			return nil, fmt.Errorf("%w: ssl.truststore.certificates needs ssl.truststore.type=PEM", ErrInvalid)
		}
		return pemCerts([]byte(c.TruststoreCerts))
	}
	if c.TruststoreLocation == "" {
		return nil, nil
	}
	data, err := readStore("trust store", c.TruststoreLocation)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "PEM":
		return pemCerts(data)
	case "PKCS12":
		certs, err := pkcs12.DecodeTrustStore(data, c.TruststorePassword)
		if err != nil {
			return nil, fmt.Errorf("%w: PKCS12 trust store %s: %w", ErrInvalid, c.TruststoreLocation, err)
		}
		return certs, nil
	case "JKS":
		ks := keystore.New()
		if err := ks.Load(bytes.NewReader(data), []byte(c.TruststorePassword)); err != nil {
			return nil, fmt.Errorf("%w: JKS trust store %s: %w", ErrInvalid, c.TruststoreLocation, err)
		}
		var out []*x509.Certificate
		for _, alias := range ks.Aliases() {
			if !ks.IsTrustedCertificateEntry(alias) {
				continue
			}
			e, err := ks.GetTrustedCertificateEntry(alias)
			if err != nil {
				return nil, fmt.Errorf("%w: JKS trust store %s: %w", ErrInvalid, c.TruststoreLocation, err)
			}
			cert, err := x509.ParseCertificate(e.Certificate.Content)
			if err != nil {
				return nil, fmt.Errorf("%w: JKS trust store %s, entry %s: %w", ErrInvalid, c.TruststoreLocation, alias, err)
			}
			out = append(out, cert)
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%w: JKS trust store %s has no trusted certificate", ErrInvalid, c.TruststoreLocation)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: ssl.truststore.type %q", ErrInvalid, c.TruststoreType)
}

// versions maps Java's protocol names to Go's.
var versions = map[string]uint16{"TLSv1": tls.VersionTLS10, "TLSv1.1": tls.VersionTLS11, "TLSv1.2": tls.VersionTLS12,
	"TLSv1.3": tls.VersionTLS13, "TLS": tls.VersionTLS13}

// tlsVersions returns the version range of ssl.enabled.protocols, bounded
// above by ssl.protocol.
func tlsVersions(c Config) (min, max uint16, err error) {
	for _, p := range c.EnabledProtocols {
		v, ok := versions[p]
		if !ok || p == "TLS" {
			return 0, 0, fmt.Errorf("%w: ssl.enabled.protocols: unknown protocol %q", ErrInvalid, p)
		}
		if min == 0 || v < min {
			min = v
		}
		if v > max {
			max = v
		}
	}
	if min == 0 {
		min, max = tls.VersionTLS12, tls.VersionTLS13
	}
	if c.Protocol != "" {
		top, ok := versions[c.Protocol]
		if !ok {
			return 0, 0, fmt.Errorf("%w: ssl.protocol: unknown protocol %q", ErrInvalid, c.Protocol)
		}
		if top < max {
			max = top
		}
	}
	if min > max {
		return 0, 0, fmt.Errorf("%w: ssl.enabled.protocols %v allow no version of ssl.protocol %s", ErrInvalid, c.EnabledProtocols, c.Protocol)
	}
	return min, max, nil
}

// cipherSuites maps ssl.cipher.suites (IANA names, which Java uses too) to
// Go's TLS 1.2 suites. TLS 1.3 suites are accepted by name but Go always
// offers its own; a name Go does not implement is refused.
func cipherSuites(names []string) ([]uint16, error) {
	if len(names) == 0 {
		return nil, nil
	}
	byName := map[string]*tls.CipherSuite{}
	for _, s := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		byName[s.Name] = s
	}
	var out []uint16
	for _, n := range names {
		s, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("%w: ssl.cipher.suites: %s is not a cipher suite Cascade implements", ErrInvalid, n)
		}
		if len(s.SupportedVersions) == 1 && s.SupportedVersions[0] == tls.VersionTLS13 {
			continue
		}
		out = append(out, s.ID)
	}
	if len(out) == 0 {
		// Only TLS 1.3 suites named: TLS 1.2 gets none, as Java would
		// negotiate none below 1.3.
		return []uint16{}, nil
	}
	return out, nil
}

// clientAuth maps ssl.client.auth. required is Go's VerifyClientCertIfGiven
// plus requireCert: Go's own RequireAndVerifyClientCert refuses a TLS 1.3
// client without a certificate with the certificate_required alert, after
// the client has finished its handshake, which Kafka's Java client then
// reports as a failed post-handshake message rather than an
// SslAuthenticationException; Java's SSLEngine, as Kafka's broker, sends
// bad_certificate, which is what a failing VerifyConnection makes Go send.
func clientAuth(s string) (tls.ClientAuthType, bool, error) {
	switch s {
	case "", "none":
		return tls.NoClientCert, false, nil
	case "requested":
		return tls.VerifyClientCertIfGiven, false, nil
	case "required":
		return tls.VerifyClientCertIfGiven, true, nil
	}
	return 0, false, fmt.Errorf("%w: ssl.client.auth %q", ErrInvalid, s)
}

// errNoClientCert fails the handshake of a client without a certificate
// on a listener with ssl.client.auth=required.
var errNoClientCert = errors.New("tlsconf: ssl.client.auth=required and the client sent no certificate")

func requireCert(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errNoClientCert
	}
	return nil
}

// oidPBES2 is PKCS#5's id-PBES2, the one encryption scheme decryptPKCS8
// reads.
var oidPBES2 = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}

// decryptPKCS8 decrypts a PKCS#8 EncryptedPrivateKeyInfo with the key
// password.
func decryptPKCS8(der []byte, password string) (crypto.PrivateKey, error) {
	if password == "" {
		return nil, errors.New("the key is encrypted and ssl.key.password is not set")
	}
	var info struct {
		Algo          pkix.AlgorithmIdentifier
		EncryptedData []byte
	}
	if _, err := asn1.Unmarshal(der, &info); err != nil {
		return nil, fmt.Errorf("not a PKCS#8 EncryptedPrivateKeyInfo: %w", err)
	}
	if !info.Algo.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("the key is encrypted with %v, a PBES1 or PKCS#12 scheme; Cascade reads PBES2 keys "+
			"(openssl pkcs8 -topk8 -v2 aes-256-cbc)", info.Algo.Algorithm)
	}
	key, err := pkcs8.ParsePKCS8PrivateKey(der, []byte(password))
	if err != nil {
		return nil, fmt.Errorf("decrypting with ssl.key.password: %w", err)
	}
	return key, nil
}

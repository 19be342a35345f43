package driver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
)

// Security is how a driver's clients authenticate to a secured listener,
// in the terms of Kafka's client configs: security.protocol, sasl.mechanism
// with sasl.username and sasl.password (PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512), and PEM material for TLS (ssl.ca.location,
// ssl.certificate.location and ssl.key.location in librdkafka's terms).
// The zero Security is PLAINTEXT.
type Security struct {
	// Protocol is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
	Protocol  string `json:"protocol,omitempty"`
	Mechanism string `json:"mechanism,omitempty"`
	Username  string `json:"username,omitempty"`
	Password  string `json:"password,omitempty"`
	// CAPEM is the trusted CA certificate; CertPEM and KeyPEM (PKCS#8)
	// the client's certificate and key, for SSL client authentication.
	CAPEM   string `json:"ca_pem,omitempty"`
	CertPEM string `json:"cert_pem,omitempty"`
	KeyPEM  string `json:"key_pem,omitempty"`
	// CAFile, CertFile and KeyFile are the same PEM material as files,
	// for clients that take paths (librdkafka, Python).
	CAFile   string `json:"ca_file,omitempty"`
	CertFile string `json:"cert_file,omitempty"`
	KeyFile  string `json:"key_file,omitempty"`
}

// TLS reports whether the protocol runs over TLS.
func (s Security) TLS() bool { return s.Protocol == "SSL" || s.Protocol == "SASL_SSL" }

// SASL reports whether the protocol authenticates with SASL.
func (s Security) SASL() bool { return s.Protocol == "SASL_PLAINTEXT" || s.Protocol == "SASL_SSL" }

// TLSConfig returns the client TLS configuration: the CA as the only root,
// and the client certificate when one is set. Host names are verified
// (ssl.endpoint.identification.algorithm=https, Kafka's default).
func (s Security) TLSConfig() (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(s.CAPEM)) {
		return nil, errors.New("driver: security: no CA certificate in CAPEM")
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if s.CertPEM != "" {
		cert, err := tls.X509KeyPair([]byte(s.CertPEM), []byte(s.KeyPEM))
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

type securityKey struct{}

// WithSecurity returns a context whose drivers opened with it connect with
// s: a driver's Opener reads it (SecurityFrom), and a process driver sends
// it in hello.
func WithSecurity(ctx context.Context, s Security) context.Context {
	return context.WithValue(ctx, securityKey{}, s)
}

// SecurityFrom returns the Security of ctx, the zero Security when none.
func SecurityFrom(ctx context.Context) Security {
	s, _ := ctx.Value(securityKey{}).(Security)
	return s
}

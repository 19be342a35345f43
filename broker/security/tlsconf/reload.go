package tlsconf

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"
)

// checkEvery is how often a handshake looks at the store files for a
// change.
const checkEvery = time.Second

// Reloader serves a listener's TLS configuration and reloads its key and
// trust stores when their files change: each handshake, at most once a
// second, compares the files' modification times and sizes with those last
// loaded. As Kafka's SslFactory.validateReconfiguration, a new key store
// must keep the certificate's subject and subject alternative names, and
// a store that fails to load or to validate is logged and the old one kept.
type Reloader struct {
	cfg    Config
	logger *slog.Logger
	base   *tls.Config

	mu      sync.Mutex
	cur     *tls.Config
	mat     *Material
	stamps  []stamp
	checked time.Time
	closed  bool
}

type stamp struct {
	path string
	mod  time.Time
	size int64
}

// NewReloader loads c and checks its TLS settings.
func NewReloader(c Config, logger *slog.Logger) (*Reloader, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	min, max, err := tlsVersions(c)
	if err != nil {
		return nil, err
	}
	suites, err := cipherSuites(c.CipherSuites)
	if err != nil {
		return nil, err
	}
	auth, required, err := clientAuth(c.ClientAuth)
	if err != nil {
		return nil, err
	}
	r := &Reloader{cfg: c, logger: logger, base: &tls.Config{MinVersion: min, MaxVersion: max, CipherSuites: suites, ClientAuth: auth}}
	if required {
		r.base.VerifyConnection = requireCert
	}
	mat, err := Load(c)
	if err != nil {
		return nil, err
	}
	if auth != tls.NoClientCert && mat.Trust == nil {
		// Go would accept any client certificate's chain against the
		// system roots; Kafka's trust manager needs a trust store.
		return nil, fmt.Errorf("%w: ssl.client.auth=%s needs a trust store (ssl.truststore.location or ssl.truststore.certificates)",
			ErrInvalid, c.ClientAuth)
	}
	r.install(mat)
	r.stamps = r.stat()
	r.checked = time.Now()
	return r, nil
}

// install makes mat the material of new handshakes.
func (r *Reloader) install(mat *Material) {
	cfg := r.base.Clone()
	cfg.Certificates = []tls.Certificate{mat.Cert}
	cfg.ClientCAs = mat.Trust
	r.cur, r.mat = cfg, mat
}

func (r *Reloader) stat() []stamp {
	var out []stamp
	for _, p := range []string{r.cfg.KeystoreLocation, r.cfg.TruststoreLocation} {
		if p == "" {
			continue
		}
		s := stamp{path: p}
		if st, err := os.Stat(p); err == nil {
			s.mod, s.size = st.ModTime(), st.Size()
		}
		out = append(out, s)
	}
	return out
}

// ServerConfig returns the configuration to give tls.Server: each
// handshake takes the current material.
func (r *Reloader) ServerConfig() *tls.Config {
	return &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return r.current(), nil
	}}
}

// current returns the configuration new handshakes use now, reloading
// changed stores first.
func (r *Reloader) current() *tls.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed && time.Since(r.checked) >= checkEvery {
		r.checked = time.Now()
		r.maybeReloadLocked()
	}
	return r.cur
}

// Reload reloads the stores now if their files changed, and reports
// whether the material was replaced.
func (r *Reloader) Reload() (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reloadLocked()
}

func (r *Reloader) maybeReloadLocked() {
	if _, err := r.reloadLocked(); err != nil {
		r.logger.Error("TLS stores changed but cannot be used; keeping the loaded ones", "err", err)
	}
}

func (r *Reloader) reloadLocked() (bool, error) {
	now := r.stat()
	if slices.Equal(now, r.stamps) {
		return false, nil
	}
	mat, err := Load(r.cfg)
	if err != nil {
		return false, err
	}
	old, next := r.mat.Cert.Leaf, mat.Cert.Leaf
	if old.Subject.String() != next.Subject.String() || !slices.Equal(old.DNSNames, next.DNSNames) ||
		fmt.Sprint(old.IPAddresses) != fmt.Sprint(next.IPAddresses) {
		// As SslFactory.CertificateEntries.ensureCompatible.
		return false, fmt.Errorf("%w: Keystore DistinguishedName or SubjectAltNames do not match: %s %v, new %s %v",
			ErrInvalid, old.Subject, old.DNSNames, next.Subject, next.DNSNames)
	}
	if r.base.ClientAuth != tls.NoClientCert && mat.Trust == nil {
		return false, fmt.Errorf("%w: the new trust store holds no certificate", ErrInvalid)
	}
	r.stamps = now
	r.install(mat)
	r.logger.Info("TLS stores reloaded", "keystore", r.cfg.KeystoreLocation, "truststore", r.cfg.TruststoreLocation,
		"subject", next.Subject.String(), "not_after", next.NotAfter)
	return true, nil
}

// Close stops reloading.
func (r *Reloader) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
}

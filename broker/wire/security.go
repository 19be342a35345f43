package wire

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/cascade-kafka/cascade/broker/security/principal"
)

// Listener is how the connections of one listener are secured, as Kafka's
// ChannelBuilders builds a channel for the listener's security protocol:
// PLAINTEXT is the zero Listener with a name, SSL sets TLS, SASL_PLAINTEXT
// sets SASL, SASL_SSL sets both.
type Listener struct {
	// Name is the listener's name, as Request.Listener reports it.
	Name string
	// TLS, when set, makes each connection a TLS server connection; the
	// handshake completes before the first request is read.
	TLS *tls.Config
	// CertPrincipal names the principal of a client certificate on a TLS
	// listener without SASL (ssl.principal.mapping.rules applied to the
	// subject's distinguished name, Kafka's SslPrincipalMapper); nil names
	// the distinguished name itself. An error fails the connection.
	CertPrincipal func(dn string) (string, error)
	// SASL, when set, requires each connection to authenticate before it
	// sends any request but ApiVersions and SaslHandshake.
	SASL *SASL
	// Dispatcher answers the listener's requests; nil uses the server's.
	Dispatcher Dispatcher
}

// SASL is a listener's SASL configuration, as Kafka's
// SaslServerAuthenticator reads it.
type SASL struct {
	// Mechanisms are sasl.enabled.mechanisms, in the order SaslHandshake
	// lists them.
	Mechanisms []string
	// NewServer starts one exchange of an enabled mechanism.
	NewServer func(mechanism string) (SASLServer, error)
	// SessionLifetime is connections.max.reauth.ms of a mechanism
	// (KIP-368); 0 leaves a session unlimited.
	SessionLifetime func(mechanism string) time.Duration
	// FailedDelay is connection.failed.authentication.delay.ms: a failed
	// exchange is answered and closed after it.
	FailedDelay time.Duration
	// MaxReceiveBytes is sasl.server.max.receive.size, the largest frame
	// read before authentication; 0 means 524288.
	MaxReceiveBytes int32
	// Now is the clock of session lifetimes; nil is time.Now.
	Now func() time.Time
}

// SASLServer is one mechanism's side of one exchange (javax.security.sasl's
// SaslServer). An error whose ClientMessage method returns a message is
// shown to the client; any other failure is reported as invalid
// credentials, as Kafka does not leak why.
type SASLServer interface {
	Evaluate(token []byte) ([]byte, error)
	Complete() bool
	AuthorizationID() string
}

// Errors that close a connection of a secured listener.
var (
	// ErrAuthentication closes a connection whose authentication failed.
	ErrAuthentication = errors.New("wire: authentication failed")
	// ErrSessionExpired closes a connection that sends a request after
	// its SASL session expired without re-authenticating (KIP-368), as
	// Kafka's SocketServer closes an expired channel.
	ErrSessionExpired = errors.New("wire: SASL session expired (connections.max.reauth.ms) without re-authentication")
	// ErrUnauthenticatedRequest closes a connection that sends a request
	// other than ApiVersions, SaslHandshake and SaslAuthenticate before
	// it has authenticated.
	ErrUnauthenticatedRequest = errors.New("wire: request before SASL authentication")
)

// defaultMaxSASLReceive is Kafka's sasl.server.max.receive.size default.
const defaultMaxSASLReceive = 524288

// secure completes the TLS handshake of a TLS listener's connection and
// names its principal from the client certificate. It returns the
// connection to serve.
func (s *Server) secure(c net.Conn, l *Listener, id *Identity) (net.Conn, error) {
	if l.TLS == nil {
		return c, nil
	}
	tc := tls.Server(c, l.TLS)
	ctx := s.ctx
	if s.IdleTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.IdleTimeout)
		defer cancel()
	}
	if err := tc.HandshakeContext(ctx); err != nil {
		s.connClosed("tls_handshake")
		return nil, fmt.Errorf("%w: TLS handshake: %w", ErrAuthentication, err)
	}
	if l.SASL != nil {
		return tc, nil
	}
	if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
		p, err := certPrincipal(certs[0], l.CertPrincipal)
		if err != nil {
			s.connClosed("authentication")
			return nil, fmt.Errorf("%w: %w", ErrAuthentication, err)
		}
		id.Principal = p
	}
	return tc, nil
}

// certPrincipal names the principal of a client certificate as Kafka's
// DefaultKafkaPrincipalBuilder: User:<mapped distinguished name>.
func certPrincipal(cert *x509.Certificate, mapDN func(string) (string, error)) (string, error) {
	dn := cert.Subject.String()
	if mapDN == nil {
		return principal.User(dn), nil
	}
	name, err := mapDN(dn)
	if err != nil {
		return "", err
	}
	return principal.User(name), nil
}

// session is a SASL connection's authentication state after its first
// exchange: what re-authentication (KIP-368) must keep, and when the
// session ends.
type session struct {
	cfg       *SASL
	mechanism string
	// expires is the session's end; zero is never.
	expires time.Time
	// reauthOK is set once the client has used SaslAuthenticate v1 or
	// later, which is how Kafka knows it can re-authenticate.
	reauthOK bool
	// reauth is the exchange of a re-authentication under way.
	reauth SASLServer
}

func (cfg *SASL) now() time.Time {
	if cfg.Now != nil {
		return cfg.Now()
	}
	return time.Now()
}

// lifetime starts a session's lifetime at the end of an exchange and
// returns it in milliseconds, as SaslAuthenticate reports it.
func (ss *session) lifetime() int64 {
	var d time.Duration
	if ss.cfg.SessionLifetime != nil {
		d = ss.cfg.SessionLifetime(ss.mechanism)
	}
	if d <= 0 {
		ss.expires = time.Time{}
		return 0
	}
	ss.expires = ss.cfg.now().Add(d)
	return d.Milliseconds()
}

func (ss *session) expired() bool {
	return !ss.expires.IsZero() && !ss.cfg.now().Before(ss.expires)
}

func (cfg *SASL) enabled(mechanism string) bool { return slices.Contains(cfg.Mechanisms, mechanism) }

// failureMessage is what a client is told of a failed exchange, as
// SaslServerAuthenticator.handleSaslToken words it.
func failureMessage(err error, mechanism string, reauth bool) string {
	var cm interface{ ClientMessage() string }
	if errors.As(err, &cm) {
		return cm.ClientMessage()
	}
	what := "authentication"
	if reauth {
		what = "re-authentication"
	}
	return "Authentication failed during " + what + " due to invalid credentials with SASL mechanism " + mechanism
}

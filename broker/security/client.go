package security

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/security/sasl"
	"github.com/cascade-kafka/cascade/broker/security/tlsconf"
	"github.com/cascade-kafka/cascade/broker/wire"
)

// ErrPeerAuthentication is wrapped by the error of a connection to another
// node whose TLS handshake or SASL exchange failed: the peer refused this
// node's certificate or credentials, or this node refused the peer's
// certificate.
var ErrPeerAuthentication = errors.New("security: authentication to a peer failed")

// Client is the client side of one listener's security, as Kafka's
// ChannelBuilders builds the channel a broker opens to another node's
// listener: the inter-broker listener for replica fetching and the other
// broker-to-broker requests, the controller listener for the quorum and
// the broker lifecycle. The zero Client (PLAINTEXT) leaves a connection
// as it is.
type Client struct {
	// Listener names the listener, for errors.
	Listener string
	// TLS, when set, makes each connection a TLS client; its ServerName
	// is set per dial from the address (endpoint identification).
	TLS *tls.Config
	// Mechanism is the SASL mechanism; empty without SASL.
	Mechanism string
	// sasl is Mechanism's client, with the JAAS config's credentials.
	sasl kgosasl.Mechanism
	// verifyHost is ssl.endpoint.identification.algorithm=https.
	verifyHost bool
}

// NewClient builds the client side of listener name with protocol, as a
// Kafka broker configures its inter-broker and controller channels: TLS
// from the listener's ssl.truststore.* keys (and ssl.keystore.*, which it
// presents for mutual TLS), each read as listener.name.<name>.<key> first;
// SASL with mechanism and the username and password of the listener's
// listener.name.<name>.<mechanism>.sasl.jaas.config (PlainLoginModule or
// ScramLoginModule).
func NewClient(bc *config.Broker, name, protocol, mechanism string) (*Client, error) {
	c := &Client{Listener: name}
	get := func(key string) string {
		v, _ := bc.ListenerValue(name, key)
		return v
	}
	switch protocol {
	case config.ProtocolPlaintext, config.ProtocolSASLPlaintext:
	case config.ProtocolSSL, config.ProtocolSASLSSL:
		tc, err := clientTLS(tlsconf.FromConfig(get))
		if err != nil {
			return nil, fmt.Errorf("security: listener %s client: %w", name, err)
		}
		c.TLS = tc
		c.verifyHost = strings.EqualFold(get("ssl.endpoint.identification.algorithm"), "https")
	default:
		return nil, fmt.Errorf("security: listener %s: unknown security protocol %q", name, protocol)
	}
	if protocol != config.ProtocolSASLPlaintext && protocol != config.ProtocolSASLSSL {
		return c, nil
	}
	jaas, _ := bc.MechanismValue(name, mechanism, "sasl.jaas.config")
	if jaas == "" {
		return nil, fmt.Errorf("security: listener %s: no listener.name.%s.%s.sasl.jaas.config with this node's username and password for %s",
			name, strings.ToLower(name), strings.ToLower(mechanism), mechanism)
	}
	m, err := sasl.ParseJAAS(jaas)
	if err != nil {
		return nil, fmt.Errorf("security: listener %s: %s: %w", name, mechanism, err)
	}
	user, pass := m.Options["username"], m.Options["password"]
	if user == "" {
		return nil, fmt.Errorf("security: listener %s: %s: the JAAS config names no username for this node", name, mechanism)
	}
	switch mechanism {
	case sasl.Plain:
		c.sasl = plain.Auth{User: user, Pass: pass}.AsMechanism()
	case sasl.ScramSHA256:
		c.sasl = scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
	case sasl.ScramSHA512:
		c.sasl = scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
	default:
		return nil, fmt.Errorf("security: listener %s: SASL mechanism %q is not one Cascade's nodes speak to each other (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", name, mechanism)
	}
	c.Mechanism = mechanism
	return c, nil
}

// clientTLS is the TLS client configuration of a listener's stores: the
// trust store verifies the peer (the system roots without one) and the key
// store, when there is one, is presented to a peer that asks.
func clientTLS(tc tlsconf.Config) (*tls.Config, error) {
	out := &tls.Config{MinVersion: tls.VersionTLS12}
	if tc.KeystoreLocation != "" || tc.KeystoreChain != "" {
		mat, err := tlsconf.Load(tc)
		if err != nil {
			return nil, err
		}
		out.Certificates = []tls.Certificate{mat.Cert}
		out.RootCAs = mat.Trust
		return out, nil
	}
	// A node's TLS listener always has a key store; Kafka's client side
	// could do without one, Cascade's reads the trust store with it.
	return nil, errors.New("a TLS client of another node needs the listener's ssl.keystore.* (Cascade reads its trust store with it)")
}

// Secure runs the TLS handshake and the SASL exchange on conn, a
// connection just dialled to address, and returns the connection to use:
// the peer has authenticated this node when it returns. ctx bounds the
// handshakes.
func (c *Client) Secure(ctx context.Context, conn net.Conn, address string) (net.Conn, error) {
	if c == nil || c.TLS == nil && c.sasl == nil {
		return conn, nil
	}
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	} else {
		conn.SetDeadline(time.Now().Add(10 * time.Second))
	}
	out := conn
	host, _, _ := net.SplitHostPort(address)
	if c.TLS != nil {
		tc := c.TLS.Clone()
		tc.ServerName = host
		if !c.verifyHost {
			// As ssl.endpoint.identification.algorithm="": the chain is
			// verified, the host name is not.
			tc.InsecureSkipVerify = true
			tc.VerifyPeerCertificate = verifyChain(c.TLS.RootCAs)
		}
		tlsConn := tls.Client(conn, tc)
		if err := tlsConn.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("%w: listener %s at %s: TLS handshake: %w", ErrPeerAuthentication, c.Listener, address, err)
		}
		out = tlsConn
	}
	if c.sasl != nil {
		if err := c.authenticate(ctx, out, host); err != nil {
			out.Close()
			return nil, fmt.Errorf("%w: listener %s at %s: %w", ErrPeerAuthentication, c.Listener, address, err)
		}
	}
	conn.SetDeadline(time.Time{})
	return out, nil
}

// verifyChain verifies a peer's chain against roots without its host name.
func verifyChain(roots *x509.CertPool) func([][]byte, [][]*x509.Certificate) error {
	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("the peer sent no certificate")
		}
		certs := make([]*x509.Certificate, len(raw))
		for i, r := range raw {
			cert, err := x509.ParseCertificate(r)
			if err != nil {
				return err
			}
			certs[i] = cert
		}
		inter := x509.NewCertPool()
		for _, cert := range certs[1:] {
			inter.AddCert(cert)
		}
		_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
		return err
	}
}

// authenticate runs SaslHandshake v1 and SaslAuthenticate v1 on conn, as
// Kafka's SaslClientAuthenticator does.
func (c *Client) authenticate(ctx context.Context, conn net.Conn, host string) error {
	r := bufio.NewReader(conn)
	corr := int32(0)
	roundTrip := func(req kmsg.Request) (kmsg.Response, error) {
		corr++
		id := "cascade-" + strings.ToLower(c.Listener)
		out, at := wire.AppendFrameLength(nil)
		out = wire.AppendRequestHeader(out, wire.RequestHeader{Key: req.Key(), Version: req.GetVersion(),
			CorrelationID: corr, ClientID: &id, Flexible: req.IsFlexible()})
		out = req.AppendTo(out)
		wire.FinishFrame(out, at, 0)
		if _, err := conn.Write(out); err != nil {
			return nil, err
		}
		frame, err := wire.ReadFrame(r, 1<<20)
		if err != nil {
			return nil, err
		}
		hdr := 4
		if wire.ResponseHeaderFlexible(req.Key(), req.GetVersion()) {
			hdr = 5
		}
		if len(frame) < hdr {
			return nil, errors.New("short SASL response")
		}
		resp := req.ResponseKind()
		resp.SetVersion(req.GetVersion())
		if err := resp.ReadFrom(frame[hdr:]); err != nil {
			return nil, err
		}
		return resp, nil
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = c.Mechanism
	resp, err := roundTrip(hs)
	if err != nil {
		return fmt.Errorf("SaslHandshake: %w", err)
	}
	if code := resp.(*kmsg.SASLHandshakeResponse).ErrorCode; code != 0 {
		return fmt.Errorf("SaslHandshake for %s: %w (the peer enables %v)", c.Mechanism, kerr.ErrorForCode(code),
			resp.(*kmsg.SASLHandshakeResponse).SupportedMechanisms)
	}
	session, token, err := c.sasl.Authenticate(ctx, host)
	if err != nil {
		return err
	}
	for range 8 {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SetVersion(1)
		req.SASLAuthBytes = token
		resp, err := roundTrip(req)
		if err != nil {
			return fmt.Errorf("SaslAuthenticate: %w", err)
		}
		ar := resp.(*kmsg.SASLAuthenticateResponse)
		if ar.ErrorCode != 0 {
			msg := ""
			if ar.ErrorMessage != nil {
				msg = ": " + *ar.ErrorMessage
			}
			return fmt.Errorf("%s as this node's inter-node user: %w%s", c.Mechanism, kerr.ErrorForCode(ar.ErrorCode), msg)
		}
		done, next, err := session.Challenge(ar.SASLAuthBytes)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		token = next
	}
	return fmt.Errorf("%s: the exchange did not end", c.Mechanism)
}

// Dial returns dial (nil: a net.Dialer) followed by Secure.
func (c *Client) Dial(dial func(ctx context.Context, network, address string) (net.Conn, error)) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		var conn net.Conn
		var err error
		if dial == nil {
			conn, err = (&net.Dialer{}).DialContext(ctx, network, address)
		} else {
			conn, err = dial(ctx, network, address)
		}
		if err != nil {
			return nil, err
		}
		return c.Secure(ctx, conn, address)
	}
}

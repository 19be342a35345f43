package wire

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/security/principal"
)

// API keys of the SASL exchange.
const (
	SaslHandshakeKey    int16 = 17
	SaslAuthenticateKey int16 = 36
)

// Versions of the SASL exchange Cascade serves, as Kafka 4.4.
const (
	maxSaslHandshakeVersion    = 1
	maxSaslAuthenticateVersion = 2
)

// authenticate runs the SASL exchange of a new connection on a SASL
// listener before any other request is read, as Kafka's
// SaslServerAuthenticator: ApiVersions may come first, then SaslHandshake
// names the mechanism; after a v1 handshake the client's tokens come in
// SaslAuthenticate requests, after a v0 handshake as bare size-prefixed
// tokens (the pre-KIP-152 flow, which Kafka 4.4 still accepts). Frames are
// bounded by sasl.server.max.receive.size. A request of another kind
// closes the connection; a failed exchange is answered (for v1) after
// connection.failed.authentication.delay.ms and closed. It returns nil
// once the connection is authenticated.
func (cn *conn) authenticate(c net.Conn, cfg *SASL) error {
	max := cfg.MaxReceiveBytes
	if max <= 0 {
		max = defaultMaxSASLReceive
	}
	var (
		srv  SASLServer
		mech string
		v0   bool
	)
	for {
		frame, err := cn.readAuthFrame(max)
		if err != nil {
			return err
		}
		if srv != nil && v0 {
			out, err := srv.Evaluate(frame)
			if err != nil {
				cn.failedAuthentication(cfg)
				return fmt.Errorf("%w: %s: %w", ErrAuthentication, mech, err)
			}
			if err := cn.writeToken(c, out); err != nil {
				return err
			}
			if srv.Complete() {
				cn.established(cfg, mech, srv)
				cn.session.lifetime()
				return nil
			}
			continue
		}
		h, body, err := ParseRequestHeader(frame)
		if err != nil {
			cn.s.refused("bad_header")
			return err
		}
		switch {
		case h.Key == ApiVersionsKey && srv == nil:
			if err := cn.serveAPIVersions(c, h, body); err != nil {
				return err
			}
		case h.Key == SaslHandshakeKey && srv == nil:
			mech, err = cn.handshake(c, cfg, h, body)
			if err != nil {
				return err
			}
			if srv, err = cfg.NewServer(mech); err != nil {
				return fmt.Errorf("%w: %s: %w", ErrAuthentication, mech, err)
			}
			v0 = h.Version == 0
		case h.Key == SaslAuthenticateKey && srv != nil:
			done, err := cn.saslAuthenticate(c, cfg, h, body, srv, mech, false)
			if err != nil {
				return err
			}
			if done {
				cn.established(cfg, mech, srv)
				return nil
			}
		default:
			// As SaslServerAuthenticator.handleKafkaRequest's
			// InvalidRequestException before a handshake, and
			// handleSaslToken's IllegalSaslStateException after
			// one, answered with ILLEGAL_SASL_STATE where Cascade
			// builds the request's error response.
			if resp, ok := illegalSaslState(h, body); ok && srv != nil {
				cn.failedAuthentication(cfg)
				if err := cn.writeDirect(c, h, Response{Msg: resp}); err != nil {
					return err
				}
			} else {
				cn.s.connClosed("unauthenticated_request")
			}
			return fmt.Errorf("%w: %s v%d", ErrUnauthenticatedRequest, kmsg.NameForKey(h.Key), h.Version)
		}
	}
}

// established records a completed first exchange.
func (cn *conn) established(cfg *SASL, mech string, srv SASLServer) {
	cn.id.Principal = principal.User(srv.AuthorizationID())
	if cn.session == nil {
		cn.session = &session{cfg: cfg, mechanism: mech}
	}
}

// readAuthFrame reads one frame of at most max bytes.
func (cn *conn) readAuthFrame(max int32) ([]byte, error) {
	if t := cn.s.IdleTimeout; t > 0 {
		if err := cn.ic.SetReadDeadline(time.Now().Add(t)); err != nil {
			return nil, err
		}
	}
	var hdr [4]byte
	if _, err := io.ReadFull(cn.r, hdr[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(hdr[:]))
	if n < 0 || n > max {
		// As NetworkReceive's InvalidReceiveException, which the
		// authenticator turns into a failed authentication.
		cn.s.refused("sasl_too_large")
		return nil, fmt.Errorf("%w: frame of %d bytes, sasl.server.max.receive.size is %d", ErrAuthentication, n, max)
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(cn.r, frame); err != nil {
		return nil, noEOF(err)
	}
	if cn.s.Observer != nil {
		cn.s.Observer.BytesIn(int(n) + 4)
	}
	return frame, nil
}

// writeDirect writes one response on c while no writer goroutine runs.
func (cn *conn) writeDirect(c net.Conn, h RequestHeader, resp Response) error {
	w := &progressWriter{c: c, idle: cn.s.IdleTimeout, act: cn.act}
	w.begin()
	_, n, err := cn.s.writeOne(w, nil, outgoing{key: h.Key, version: h.Version, correlationID: h.CorrelationID, resp: resp})
	if err == nil && cn.s.Observer != nil {
		cn.s.Observer.BytesOut(n)
	}
	return err
}

// writeToken writes a bare size-prefixed token (the v0 flow).
func (cn *conn) writeToken(c net.Conn, token []byte) error {
	buf := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(token)), uint32(len(token)))
	_, err := c.Write(append(buf, token...))
	return err
}

// serveAPIVersions answers an ApiVersions request before authentication
// through the dispatcher, as the authenticator answers it itself.
func (cn *conn) serveAPIVersions(c net.Conn, h RequestHeader, body []byte) error {
	req := &Request{Header: h, Body: body, Remote: cn.remote}
	cn.id.stamp(req)
	req.Principal = principal.Anonymous
	resp, err := cn.disp.Dispatch(cn.ctx, req)
	if err != nil {
		resp.release()
		return err
	}
	return cn.writeDirect(c, h, resp)
}

// handshake answers a SaslHandshake and returns the mechanism it chose, as
// SaslServerAuthenticator.handleHandshakeRequest: an enabled mechanism is
// answered NONE with the enabled list; any other is answered
// UNSUPPORTED_SASL_MECHANISM and the connection fails.
func (cn *conn) handshake(c net.Conn, cfg *SASL, h RequestHeader, body []byte) (string, error) {
	req, resp, err := decodeHandshake(cfg, h, body)
	if err != nil {
		return "", err
	}
	if !cfg.enabled(req.Mechanism) {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		cn.failedAuthentication(cfg)
		if err := cn.writeDirect(c, h, Response{Msg: resp}); err != nil {
			return "", err
		}
		return "", fmt.Errorf("%w: unsupported SASL mechanism %q", ErrAuthentication, req.Mechanism)
	}
	return req.Mechanism, cn.writeDirect(c, h, Response{Msg: resp})
}

// decodeHandshake decodes a SaslHandshake and starts its response, which
// lists the enabled mechanisms.
func decodeHandshake(cfg *SASL, h RequestHeader, body []byte) (*kmsg.SASLHandshakeRequest, *kmsg.SASLHandshakeResponse, error) {
	if h.Version > maxSaslHandshakeVersion {
		return nil, nil, fmt.Errorf("%w: SaslHandshake v%d", ErrUnauthenticatedRequest, h.Version)
	}
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.SetVersion(h.Version)
	if err := req.ReadFrom(body); err != nil {
		return nil, nil, fmt.Errorf("%w: decoding SaslHandshake: %w", ErrAuthentication, err)
	}
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.SetVersion(h.Version)
	resp.SupportedMechanisms = cfg.Mechanisms
	return req, resp, nil
}

// saslAuthenticate feeds one SaslAuthenticate token to srv and answers it,
// as SaslServerAuthenticator.handleSaslToken: the challenge, and once the
// exchange completes the session lifetime (v1+); a failure is answered
// SASL_AUTHENTICATION_FAILED after the failed-authentication delay, and
// closes the connection. done reports a completed exchange.
func (cn *conn) saslAuthenticate(c net.Conn, cfg *SASL, h RequestHeader, body []byte, srv SASLServer, mech string,
	reauth bool) (done bool, err error) {
	resp, done, err := cn.evaluate(cfg, h, body, srv, mech, reauth)
	if resp.Msg == nil {
		return false, err
	}
	if werr := cn.writeDirect(c, h, resp); werr != nil && err == nil {
		err = werr
	}
	return done, err
}

// evaluate runs one SaslAuthenticate and returns its response; a non-nil
// error with a response means "send it, then close".
func (cn *conn) evaluate(cfg *SASL, h RequestHeader, body []byte, srv SASLServer, mech string,
	reauth bool) (Response, bool, error) {
	if h.Version > maxSaslAuthenticateVersion {
		// As the authenticator: no error response can be built.
		return Response{}, false, fmt.Errorf("%w: SaslAuthenticate v%d", ErrUnauthenticatedRequest, h.Version)
	}
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SetVersion(h.Version)
	if err := req.ReadFrom(body); err != nil {
		return Response{}, false, fmt.Errorf("%w: decoding SaslAuthenticate: %w", ErrAuthentication, err)
	}
	if cn.session == nil {
		cn.session = &session{cfg: cfg, mechanism: mech}
	}
	if h.Version > 0 {
		cn.session.reauthOK = true
	}
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.SetVersion(h.Version)
	out, err := srv.Evaluate(req.SASLAuthBytes)
	if err == nil && reauth && srv.Complete() && principal.User(srv.AuthorizationID()) != cn.id.Principal {
		err = &clientError{fmt.Sprintf("Cannot change principals during re-authentication from %s: %s",
			cn.id.Principal, principal.User(srv.AuthorizationID()))}
	}
	if err != nil {
		cn.failedAuthentication(cfg)
		msg := failureMessage(err, mech, reauth)
		resp.ErrorCode, resp.ErrorMessage = kerr.SaslAuthenticationFailed.Code, &msg
		return Response{Msg: resp}, false, fmt.Errorf("%w: %s: %w", ErrAuthentication, mech, err)
	}
	resp.SASLAuthBytes = out
	if out == nil {
		resp.SASLAuthBytes = []byte{}
	}
	if srv.Complete() {
		resp.SessionLifetimeMillis = cn.session.lifetime()
	}
	return Response{Msg: resp}, srv.Complete(), nil
}

// clientError is a failure whose message the client is shown.
type clientError struct{ msg string }

func (e *clientError) Error() string         { return e.msg }
func (e *clientError) ClientMessage() string { return e.msg }

// failedAuthentication counts a failed exchange and waits out
// connection.failed.authentication.delay.ms (or until the server closes),
// as Kafka delays the close of a connection whose authentication failed so
// that a client cannot retry in a tight loop.
func (cn *conn) failedAuthentication(cfg *SASL) {
	cn.s.connClosed("authentication")
	if cfg.FailedDelay <= 0 {
		return
	}
	t := time.NewTimer(cfg.FailedDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-cn.ctx.Done():
	}
}

// reauthenticate serves a SaslHandshake or SaslAuthenticate that arrives on
// an authenticated connection (KIP-368 re-authentication), in the
// executor. handled is false when the request is not part of a
// re-authentication and goes to the dispatcher (which answers
// ILLEGAL_SASL_STATE, as KafkaApis does).
func (cn *conn) reauthenticate(h RequestHeader, body []byte) (resp Response, handled bool, err error) {
	ss := cn.session
	switch {
	case ss == nil:
		return Response{}, false, nil
	case h.Key == SaslHandshakeKey && ss.reauthOK && ss.reauth == nil:
		req, out, err := decodeHandshake(ss.cfg, h, body)
		if err != nil {
			return Response{}, true, err
		}
		if !ss.cfg.enabled(req.Mechanism) {
			out.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			cn.failedAuthentication(ss.cfg)
			return Response{Msg: out}, true, fmt.Errorf("%w: unsupported SASL mechanism %q", ErrAuthentication, req.Mechanism)
		}
		if req.Mechanism != ss.mechanism {
			// As ReauthInfo.saslMechanismUnchanged.
			cn.failedAuthentication(ss.cfg)
			return Response{}, true, fmt.Errorf("%w: SASL mechanism '%s' requested by client is not supported for "+
				"re-authentication of mechanism '%s'", ErrAuthentication, req.Mechanism, ss.mechanism)
		}
		srv, err := ss.cfg.NewServer(req.Mechanism)
		if err != nil {
			return Response{}, true, fmt.Errorf("%w: %w", ErrAuthentication, err)
		}
		ss.reauth = srv
		return Response{Msg: out}, true, nil
	case h.Key == SaslAuthenticateKey && ss.reauth != nil:
		resp, done, err := cn.evaluate(ss.cfg, h, body, ss.reauth, ss.mechanism, true)
		if done || err != nil {
			ss.reauth = nil
		}
		return resp, true, err
	}
	return Response{}, false, nil
}

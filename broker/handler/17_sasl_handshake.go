package handler

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslHandshake: v0-1
//
//   - v1: the exchange's tokens travel in SaslAuthenticate requests (KIP-152)
//
// A SASL listener's connections exchange SaslHandshake and
// SaslAuthenticate in the wire layer before any request reaches the
// dispatcher (as Kafka's SaslServerAuthenticator), and re-authenticate
// there too (KIP-368). One that reaches the handler came on a listener
// without SASL, or after the connection authenticated: it is answered
// ILLEGAL_SASL_STATE, as Kafka's KafkaApis.handleSaslHandshakeRequest.
func init() { register(17, 0, 1, saslHandshake) }

func saslHandshake(_ context.Context, _ *Env, req *Request) (kmsg.Response, error) {
	resp := req.Msg.(*kmsg.SASLHandshakeRequest).ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	return resp, nil
}

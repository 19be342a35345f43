package handler

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslAuthenticate: v0-2
//
//   - v1: SessionLifetimeMillis (KIP-368)
//   - v2: flexible
//
// As SaslHandshake: the exchange is served by the wire layer; a request
// that reaches the handler is answered ILLEGAL_SASL_STATE, as Kafka's
// KafkaApis.handleSaslAuthenticateRequest.
func init() { register(36, 0, 2, saslAuthenticate) }

func saslAuthenticate(_ context.Context, _ *Env, req *Request) (kmsg.Response, error) {
	resp := req.Msg.(*kmsg.SASLAuthenticateRequest).ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	msg := "SaslAuthenticate request received after successful authentication"
	resp.ErrorMessage = &msg
	return resp, nil
}

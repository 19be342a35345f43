package handler

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/wire"
)

// wireBody is implemented by responses that carry a pre-encoded body (Fetch
// with file regions); the dispatcher sends the body instead of encoding the
// message.
type wireBody interface {
	wireBody() wire.Body
}

// Dispatch implements wire.Dispatcher: it looks the API up in the registry,
// decodes the body with kmsg at the request's version, runs the handler and
// records metrics. A panic in a handler is contained to its connection by
// the wire server. An unknown version closes the connection, except
// ApiVersions, which is answered with UNSUPPORTED_VERSION in v0 format
// (KIP-511).
func (env *Env) Dispatch(ctx context.Context, wr *wire.Request) (wire.Response, error) {
	h := wr.Header
	start := env.now()
	api, ok := Lookup(h.Key, h.Version)
	if !ok {
		if h.Key == wire.ApiVersionsKey {
			env.Metrics.Request(h.Key, h.Version, 0)
			env.Metrics.Error(h.Key, kerr.UnsupportedVersion.Code)
			return wire.Response{Msg: unsupportedApiVersions()}, nil
		}
		return wire.Response{}, fmt.Errorf("handler: unsupported api key %d version %d", h.Key, h.Version)
	}
	msg := kmsg.RequestForKey(h.Key)
	msg.SetVersion(h.Version)
	if err := msg.ReadFrom(wr.Body); err != nil {
		return wire.Response{}, fmt.Errorf("handler: decoding %s v%d: %w", kmsg.NameForKey(h.Key), h.Version, err)
	}
	// The decode reservation goes back now, so that a request that waits
	// (a long-poll Fetch) holds at most its frame, as Kafka frees a
	// request's buffer once it is parsed.
	wr.Decoded()
	req := &Request{Key: h.Key, Version: h.Version, Conn: wr.Remote, Msg: msg, consumed: wr.Consumed,
		Principal: wr.Principal, Host: wr.ClientHost}
	if h.ClientID != nil {
		req.ClientID = *h.ClientID
	}
	resp, err := api.Fn(ctx, env, req)
	env.Metrics.Request(h.Key, h.Version, env.now().Sub(start))
	if err != nil {
		if b, ok := resp.(wireBody); ok {
			b.wireBody().Release()
		}
		return wire.Response{}, err
	}
	if resp == nil {
		return wire.Response{}, nil
	}
	if b, ok := resp.(wireBody); ok {
		return wire.Response{Body: b.wireBody()}, nil
	}
	resp.SetVersion(h.Version)
	return wire.Response{Msg: resp}, nil
}

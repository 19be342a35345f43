package wire

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// illegalSaslState returns the answer to a request other than
// SaslAuthenticate that arrives while a v1 SASL exchange is under way, as
// SaslServerAuthenticator.handleSaslToken: the request's error response
// (AbstractRequest.getErrorResponse) with ILLEGAL_SASL_STATE, after which
// the connection is closed. Cascade builds it for the requests a client
// sends around authentication (ApiVersions, SaslHandshake, Metadata); for
// another request, or one that does not decode, ok is false and the
// connection closes unanswered.
func illegalSaslState(h RequestHeader, body []byte) (resp kmsg.Response, ok bool) {
	code := kerr.IllegalSaslState.Code
	switch h.Key {
	case ApiVersionsKey:
		if h.Version > kmsg.NewPtrApiVersionsRequest().MaxVersion() {
			return nil, false
		}
		r := kmsg.NewPtrApiVersionsResponse()
		r.SetVersion(h.Version)
		r.ErrorCode = code
		return r, true
	case SaslHandshakeKey:
		if h.Version > maxSaslHandshakeVersion {
			return nil, false
		}
		r := kmsg.NewPtrSASLHandshakeResponse()
		r.SetVersion(h.Version)
		r.ErrorCode = code
		r.SupportedMechanisms = []string{}
		return r, true
	case metadataKey:
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(h.Version)
		if h.Version > req.MaxVersion() || req.ReadFrom(body) != nil {
			return nil, false
		}
		// As MetadataRequest.getErrorResponse: each topic named, with
		// the error and no partitions; no brokers.
		r := req.ResponseKind().(*kmsg.MetadataResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewMetadataResponseTopic()
			name := ""
			if t.Topic != nil {
				name = *t.Topic
			}
			rt.Topic, rt.TopicID, rt.ErrorCode = &name, t.TopicID, code
			rt.Partitions = []kmsg.MetadataResponseTopicPartition{}
			r.Topics = append(r.Topics, rt)
		}
		return r, true
	}
	return nil, false
}

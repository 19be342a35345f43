package handler

import (
	"context"
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions: v0-4
//
// The list is built from the registry, so what is advertised is exactly
// what is implemented.
//   - v1: ThrottleMillis
//   - v3: flexible; ClientSoftwareName and ClientSoftwareVersion (KIP-511),
//     validated as Kafka's ApiVersionsRequest.isValid
//   - v4: no change (KIP-896: v0 kept for clients that open with it)
//
// No features are advertised: Cascade implements no feature-gated protocol
// (KIP-848 groups, KIP-890 transactions v2) yet, and clients fall back
// correctly when the features are absent.
func init() { register(18, 0, 4, handleApiVersions) }

// softwareRe is ApiVersionsRequest's SOFTWARE_NAME_VERSION_PATTERN.
var softwareRe = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

func handleApiVersions(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.ApiVersionsRequest)
	resp := r.ResponseKind().(*kmsg.ApiVersionsResponse)
	if r.Version >= 3 && (!softwareRe.MatchString(r.ClientSoftwareName) || !softwareRe.MatchString(r.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		env.Metrics.Error(req.Key, resp.ErrorCode)
		return resp, nil
	}
	for _, a := range APIs() {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.Key, a.Min, a.Max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	return resp, nil
}

// unsupportedApiVersions is the answer to an ApiVersions request at a version
// Cascade does not know: v0 format, UNSUPPORTED_VERSION, and only
// ApiVersions' own range so the client can retry at a version both know (as
// Kafka's ApiVersionsRequest.getErrorResponse).
func unsupportedApiVersions() *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	if a, ok := Lookup(18, 0); ok {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.Key, a.Min, a.Max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	return resp
}

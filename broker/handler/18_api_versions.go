package handler

import (
	"context"
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions: v0-5
//
// The list is built from the registry, so what is advertised is exactly
// what is implemented.
//   - v1: ThrottleMillis
//   - v3: flexible; ClientSoftwareName and ClientSoftwareVersion (KIP-511),
//     validated as Kafka's ApiVersionsRequest.isValid
//   - v4: no change (KIP-896: v0 kept for clients that open with it)
//   - v5: ClusterID and NodeID of the broker the client means to reach
//     (KIP-1242). As Kafka's ApiVersionsRequest.isValid, setting only one
//     of them is INVALID_REQUEST; as KafkaApis.handleApiVersionsRequest, a
//     set ClusterID that is not this cluster's, or a NodeID that is not
//     this node's, is REBOOTSTRAP_REQUIRED, which tells the client its
//     metadata is stale. Both errors carry no API list.
//
// From v3 the response carries the feature levels (KIP-584) that clients
// gate protocols on; Cascade advertises only what it implements (features):
//   - group.version 1: KIP-848 consumer groups (ConsumerGroupHeartbeat and
//     ConsumerGroupDescribe are served); finalized at 1, as Kafka 4.
//   - transaction.version 0-2, finalized at 2 as Kafka 4: transactions v2
//     (KIP-890 part 2: implicit partition adds by Produce v12 and
//     TxnOffsetCommit v5, an epoch bump at every EndTxn v5); clients that
//     send the older versions keep transactions v1.
//   - kraft.version 0: a static quorum (controller.quorum.voters); Kafka
//     lists 0-1 and finalizes nothing when the quorum is static.
//
// metadata.version is not advertised: it versions the KRaft metadata log and
// inter-broker protocol, which Cascade's own metadata log does not speak,
// and no client gates a client protocol on it.
func init() { register(18, 0, 5, handleApiVersions) }

// feature is one supported feature range and its finalized level (0: not
// finalized, as Kafka omits features at level 0).
type feature struct {
	name           string
	min, max       int16
	finalizedLevel int16
}

// features are the features Cascade supports, in Kafka's order.
var features = []feature{
	{name: "group.version", min: 0, max: 1, finalizedLevel: 1},
	{name: "kraft.version", min: 0, max: 0},
	{name: "transaction.version", min: 0, max: 2, finalizedLevel: 2},
}

// finalizedFeaturesEpoch is the epoch of the finalized features. Kafka
// sends its metadata offset; Cascade's features never change while it runs,
// so one fixed epoch suffices, and it must be at least 0 for the Java
// client's ApiVersions to take the features in.
const finalizedFeaturesEpoch = 1

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
	if r.Version >= 5 {
		if (r.ClusterID == nil) != (r.NodeID == -1) {
			resp.ErrorCode = kerr.InvalidRequest.Code
			env.Metrics.Error(req.Key, resp.ErrorCode)
			return resp, nil
		}
		if r.ClusterID != nil && (*r.ClusterID != env.clusterID() || r.NodeID != env.NodeID) {
			resp.ErrorCode = kerr.RebootstrapRequired.Code
			env.Metrics.Error(req.Key, resp.ErrorCode)
			return resp, nil
		}
	}
	for _, a := range APIs() {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.Key, a.Min, a.Max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	if r.Version >= 3 {
		resp.FinalizedFeaturesEpoch = finalizedFeaturesEpoch
		for _, f := range features {
			sf := kmsg.NewApiVersionsResponseSupportedFeature()
			sf.Name, sf.MinVersion, sf.MaxVersion = f.name, f.min, f.max
			resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
			if f.finalizedLevel > 0 {
				ff := kmsg.NewApiVersionsResponseFinalizedFeature()
				ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = f.name, f.finalizedLevel, f.finalizedLevel
				resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
			}
		}
	}
	return resp, nil
}

// clusterID is the cluster id this broker serves, or "" without a metadata
// store.
func (env *Env) clusterID() string {
	if env.Meta == nil {
		return ""
	}
	return env.Meta.Image().ClusterID
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

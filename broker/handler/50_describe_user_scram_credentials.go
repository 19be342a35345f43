package handler

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/metadata"
)

// DescribeUserScramCredentials: v0 (KIP-554)
//
// Answered from the metadata image, as Kafka's ScramImage.describe: no
// users named lists every user with a credential; a user named twice is
// DUPLICATE_RESOURCE, one without a credential RESOURCE_NOT_FOUND. Only
// each mechanism and its iterations are shown, never a key or salt.
//
// It needs DESCRIBE on the cluster. Refused, the answer is
// DescribeUserScramCredentialsRequest.getErrorResponse's:
// CLUSTER_AUTHORIZATION_FAILED at the top and one result per user named,
// each with the code and neither user name nor message. Kafka 4.4 builds
// that answer from the request's user list even when it is null (all
// users), throws a NullPointerException and never answers; Cascade answers
// the error with no results.
func init() { register(50, 0, 0, describeUserScramCredentials) }

func describeUserScramCredentials(_ context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !env.authorizeCluster(req, acl.Describe) {
		// ApiError drops a message that is the code's default: no
		// messages.
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		for range r.Users {
			res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			res.ErrorCode = resp.ErrorCode
			resp.Results = append(resp.Results, res)
		}
		return resp, nil
	}
	all := env.Meta.Image().ScramUsers()
	var names []string
	dup := map[string]bool{}
	if len(r.Users) == 0 {
		names = slices.Sorted(maps.Keys(all))
	} else {
		seen := map[string]bool{}
		for _, u := range r.Users {
			if seen[u.Name] {
				dup[u.Name] = true
				continue
			}
			seen[u.Name] = true
			names = append(names, u.Name)
		}
	}
	for _, name := range names {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = name
		infos, ok := all[name]
		switch {
		case dup[name]:
			res.ErrorCode = kerr.DuplicateResource.Code
			res.ErrorMessage = kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: " + name)
		case !ok:
			res.ErrorCode = kerr.ResourceNotFound.Code
			res.ErrorMessage = kmsg.StringPtr("Attempt to describe a user credential that does not exist: " + name)
		default:
			for _, in := range infos {
				ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				ci.Mechanism, ci.Iterations = in.Mechanism, in.Iterations
				res.CredentialInfos = append(res.CredentialInfos, ci)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

// scramCodes maps the SCRAM operations' sentinels to Kafka codes.
var scramCodes = []struct {
	err  error
	code int16
}{
	{metadata.ErrDuplicateResource, kerr.DuplicateResource.Code},
	{metadata.ErrResourceNotFound, kerr.ResourceNotFound.Code},
	{metadata.ErrUnacceptableCredential, kerr.UnacceptableCredential.Code},
	{metadata.ErrUnsupportedMechanism, kerr.UnsupportedSaslMechanism.Code},
	{metadata.ErrScramUnsupported, kerr.UnsupportedVersion.Code},
}

func scramCode(err error) int16 {
	for _, c := range scramCodes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return ErrorCode(err)
}

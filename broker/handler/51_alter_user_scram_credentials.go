package handler

import (
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/metadata"
)

// AlterUserScramCredentials: v0 (KIP-554)
//
// Deletions and upsertions of SCRAM credentials, committed as one batch of
// UserScramCredentialRecord and RemoveUserScramCredentialRecord, as
// Kafka's ScramControlManager.alterCredentials; the client sends a salted
// password and the broker derives and stores StoredKey and ServerKey
// (metadata.PlanScram has the validation).
//
// It needs ALTER on the cluster (ControllerApis'
// authorizeClusterOperation). Refused, every user named, once each and
// sorted, gets CLUSTER_AUTHORIZATION_FAILED, as
// AlterUserScramCredentialsRequest.getErrorResponse.
func init() { register(51, 0, 0, alterUserScramCredentials) }

func alterUserScramCredentials(_ context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	if !env.authorizeCluster(req, acl.Alter) {
		names := slices.Sorted(maps.Keys(setOf(append(namesOfDeletions(r), namesOfUpsertions(r)...))))
		for _, name := range names {
			out := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			out.User, out.ErrorCode, out.ErrorMessage = name, kerr.ClusterAuthorizationFailed.Code, clusterDenied(req)
			resp.Results = append(resp.Results, out)
		}
		return resp, nil
	}
	dels := make([]metadata.ScramDeletion, 0, len(r.Deletions))
	for _, d := range r.Deletions {
		dels = append(dels, metadata.ScramDeletion{Name: d.Name, Mechanism: d.Mechanism})
	}
	ups := make([]metadata.ScramUpsertion, 0, len(r.Upsertions))
	for _, u := range r.Upsertions {
		ups = append(ups, metadata.ScramUpsertion{Name: u.Name, Mechanism: u.Mechanism, Iterations: u.Iterations,
			Salt: append([]byte(nil), u.Salt...), SaltedPassword: append([]byte(nil), u.SaltedPassword...)})
	}
	results, err := env.Meta.AlterUserScramCredentials(dels, ups)
	if err != nil {
		// The whole batch failed: every user named gets the error.
		seen := map[string]bool{}
		for _, name := range append(namesOfDeletions(r), namesOfUpsertions(r)...) {
			if !seen[name] {
				seen[name] = true
				results = append(results, metadata.ScramResult{User: name, Err: err})
			}
		}
	}
	for _, res := range results {
		out := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		out.User = res.User
		if res.Err != nil {
			out.ErrorCode = scramCode(res.Err)
			out.ErrorMessage = kmsg.StringPtr(res.Err.Error())
		}
		resp.Results = append(resp.Results, out)
	}
	return resp, nil
}

func namesOfDeletions(r *kmsg.AlterUserSCRAMCredentialsRequest) []string {
	var out []string
	for _, d := range r.Deletions {
		out = append(out, d.Name)
	}
	return out
}

func namesOfUpsertions(r *kmsg.AlterUserSCRAMCredentialsRequest) []string {
	var out []string
	for _, u := range r.Upsertions {
		out = append(out, u.Name)
	}
	return out
}

func setOf(names []string) map[string]bool {
	out := make(map[string]bool, len(names))
	for _, n := range names {
		out[n] = true
	}
	return out
}

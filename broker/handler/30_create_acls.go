package handler

// CreateAcls: v1-3 (Kafka 4 removed v0, KIP-896)
//   - v1: ResourcePatternType (KIP-290)
//   - v2: flexible versions
//   - v3: the USER resource type (KIP-373)
//
// As Kafka's AclApis.handleCreateAcls and AclControlManager.createAcls:
// ALTER on the cluster is required (every result
// CLUSTER_AUTHORIZATION_FAILED), a broker without an authorizer answers
// SECURITY_DISABLED, each invalid creation fails alone with INVALID_REQUEST,
// and an ACL that exists already succeeds without a change. The ACLs are
// AccessControlEntryRecords in the metadata log; in a cluster the request
// is forwarded to the active controller.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
)

func init() { register(30, 1, 3, handleCreateACLs) }

func handleCreateACLs(_ context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.CreateACLsRequest)
	resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
	bindings := make([]acl.Binding, len(r.Creations))
	for i, c := range r.Creations {
		b := acl.Binding{ResourceType: acl.ResourceType(c.ResourceType), Name: c.ResourceName,
			Pattern: acl.PatternType(c.ResourcePatternType), Principal: c.Principal, Host: c.Host,
			Operation: acl.Operation(c.Operation), Permission: acl.Permission(c.PermissionType)}
		if !acl.Known(b.ResourceType, b.Pattern, b.Operation, b.Permission) {
			return nil, errUnknownACLField
		}
		bindings[i] = b
	}
	all := func(code int16, msg *string) (kmsg.Response, error) {
		for range r.Creations {
			res := kmsg.NewCreateACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = code, msg
			resp.Results = append(resp.Results, res)
		}
		return resp, nil
	}
	if !env.authorizeCluster(req, acl.Alter) {
		return all(kerr.ClusterAuthorizationFailed.Code, clusterDenied(req))
	}
	if env.Authorizer == nil {
		return all(kerr.SecurityDisabled.Code, kmsg.StringPtr(errNoAuthorizer))
	}
	errs, err := env.Meta.CreateACLs(bindings)
	if err != nil {
		code, msg := errorCodeMessage(err)
		return all(code, msg)
	}
	for _, e := range errs {
		res := kmsg.NewCreateACLsResponseResult()
		res.ErrorMessage = kmsg.StringPtr("") // as Kafka sends a success
		if e != nil {
			res.ErrorCode, res.ErrorMessage = errorCodeMessage(e)
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

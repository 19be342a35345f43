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
	var errs []error
	code, msg := aclWrite(env, req, func() (err error) {
		errs, err = env.Meta.CreateACLs(bindings)
		return err
	})
	for i := range r.Creations {
		res := kmsg.NewCreateACLsResponseResult()
		switch {
		case code != 0:
			res.ErrorCode, res.ErrorMessage = code, msg
		case errs[i] != nil:
			res.ErrorCode, res.ErrorMessage = errorCodeMessage(errs[i])
		default:
			res.ErrorMessage = kmsg.StringPtr("") // as Kafka sends a success
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

// aclWrite runs write, a CreateAcls or DeleteAcls, unless the request
// goes no further: ALTER on the cluster denied (CLUSTER_AUTHORIZATION_FAILED)
// or no authorizer (SECURITY_DISABLED), as AclApis checks them in that
// order. It returns the code and message every result then carries (0 when
// write ran and succeeded as a whole).
func aclWrite(env *Env, req *Request, write func() error) (int16, *string) {
	switch {
	case !env.authorizeCluster(req, acl.Alter):
		return kerr.ClusterAuthorizationFailed.Code, clusterDenied(req)
	case env.Authorizer == nil:
		return kerr.SecurityDisabled.Code, kmsg.StringPtr(errNoAuthorizer)
	}
	if err := write(); err != nil {
		return errorCodeMessage(err)
	}
	return 0, nil
}

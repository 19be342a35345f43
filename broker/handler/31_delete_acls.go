package handler

// DeleteAcls: v1-3 (Kafka 4 removed v0, KIP-896)
//   - v1: ResourcePatternType (KIP-290)
//   - v2: flexible versions
//   - v3: the USER resource type (KIP-373)
//
// As Kafka's AclApis.handleDeleteAcls and AclControlManager.deleteAcls:
// ALTER on the cluster is required, a broker without an authorizer
// answers SECURITY_DISABLED, and each filter's result lists the ACLs it
// matched, which are removed with RemoveAccessControlEntryRecords (an ACL
// matched by two filters is listed under both, removed once). In a
// cluster the request is forwarded to the active controller.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/metadata"
)

func init() { register(31, 1, 3, handleDeleteACLs) }

func handleDeleteACLs(_ context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.DeleteACLsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
	filters := make([]acl.Filter, len(r.Filters))
	for i, f := range r.Filters {
		af := acl.Filter{ResourceType: acl.ResourceType(f.ResourceType), Name: f.ResourceName,
			Pattern: acl.PatternType(f.ResourcePatternType), Principal: f.Principal, Host: f.Host,
			Operation: acl.Operation(f.Operation), Permission: acl.Permission(f.PermissionType)}
		if !acl.Known(af.ResourceType, af.Pattern, af.Operation, af.Permission) {
			return nil, errUnknownACLField
		}
		filters[i] = af
	}
	var results []metadata.DeleteACLsResult
	code, msg := aclWrite(env, req, func() (err error) {
		results, err = env.Meta.DeleteACLs(filters)
		return err
	})
	for i := range r.Filters {
		res := kmsg.NewDeleteACLsResponseResult()
		if code != 0 {
			res.ErrorCode, res.ErrorMessage = code, msg
			resp.Results = append(resp.Results, res)
			continue
		}
		fr := results[i]
		if fr.Err != nil {
			res.ErrorCode, res.ErrorMessage = errorCodeMessage(fr.Err)
		}
		for _, b := range fr.Matching {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName = kmsg.ACLResourceType(b.ResourceType), b.Name
			m.ResourcePatternType = kmsg.ACLResourcePatternType(b.Pattern)
			m.Principal, m.Host = b.Principal, b.Host
			m.Operation, m.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
			res.MatchingACLs = append(res.MatchingACLs, m)
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

package handler

// DescribeAcls: v1-3 (Kafka 4 removed v0, KIP-896)
//   - v1: ResourcePatternType (KIP-290)
//   - v2: flexible versions
//   - v3: the USER resource type (KIP-373)
//
// As Kafka's AclApis.handleDescribeAcls: DESCRIBE on the cluster is
// required (CLUSTER_AUTHORIZATION_FAILED), a broker without an authorizer
// answers SECURITY_DISABLED, and the ACLs the filter matches are answered
// grouped by resource pattern. A filter with an UNKNOWN field does not
// parse in Kafka (DescribeAclsRequest.validate), which closes the
// connection; so does Cascade.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
)

func init() { register(29, 1, 3, handleDescribeACLs) }

// errNoAuthorizer is SECURITY_DISABLED's message, as Kafka's.
const errNoAuthorizer = "No Authorizer is configured."

// errUnknownACLField closes the connection of an ACL request with an
// UNKNOWN resource type, pattern type, operation or permission.
var errUnknownACLField = fmt.Errorf("handler: acl request with an UNKNOWN field")

func handleDescribeACLs(_ context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.DescribeACLsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
	f := acl.Filter{ResourceType: acl.ResourceType(r.ResourceType), Name: r.ResourceName,
		Pattern: acl.PatternType(r.ResourcePatternType), Principal: r.Principal, Host: r.Host,
		Operation: acl.Operation(r.Operation), Permission: acl.Permission(r.PermissionType)}
	if !acl.Known(f.ResourceType, f.Pattern, f.Operation, f.Permission) {
		return nil, errUnknownACLField
	}
	if !env.authorizeCluster(req, acl.Describe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.ErrorMessage = clusterDenied(req)
		return resp, nil
	}
	if env.Authorizer == nil {
		resp.ErrorCode = kerr.SecurityDisabled.Code
		resp.ErrorMessage = kmsg.StringPtr(errNoAuthorizer)
		return resp, nil
	}
	resp.ErrorMessage = kmsg.StringPtr("") // as Kafka sends a success
	idx := env.Meta.Image().ACLs()
	var cur *kmsg.DescribeACLsResponseResource
	for _, id := range idx.Matching(f) {
		b, _ := idx.Binding(id)
		if cur == nil || cur.ResourceType != kmsg.ACLResourceType(b.ResourceType) || cur.ResourceName != b.Name ||
			cur.ResourcePatternType != kmsg.ACLResourcePatternType(b.Pattern) {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName = kmsg.ACLResourceType(b.ResourceType), b.Name
			res.ResourcePatternType = kmsg.ACLResourcePatternType(b.Pattern)
			resp.Resources = append(resp.Resources, res)
			cur = &resp.Resources[len(resp.Resources)-1]
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host = b.Principal, b.Host
		a.Operation, a.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
		cur.ACLs = append(cur.ACLs, a)
	}
	return resp, nil
}

// clusterDenied is the message of a request refused for want of a cluster
// permission (AuthHelper.authorizeClusterOperation's).
func clusterDenied(req *Request) *string {
	return kmsg.StringPtr(fmt.Sprintf("Request %s is not authorized.", kmsg.NameForKey(req.Key)))
}

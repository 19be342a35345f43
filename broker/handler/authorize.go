package handler

import (
	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The authorization checks of every handler follow Kafka's KafkaApis and
// AuthHelper: which operation on which resource each API needs, which
// resources are dropped silently from an answer, and which error code a
// denial carries. Without an authorizer (Env.Authorizer nil) every check
// passes without touching the request, so the hot paths (Produce, Fetch)
// pay one nil comparison.

// session is who sent req, as the authorizer matches it.
func (req *Request) session() acl.Session {
	return acl.Session{Principal: req.Principal, Host: req.Host}
}

// authorize reports whether req may perform op on the resource, as
// AuthHelper.authorize.
func (env *Env) authorize(req *Request, op acl.Operation, typ acl.ResourceType, name string) bool {
	if env.Authorizer == nil {
		return true
	}
	return env.Authorizer.Authorize(req.session(), op, typ, name)
}

// authorizeCluster reports whether req may perform op on the cluster, as
// AuthHelper.authorizeClusterOperation.
func (env *Env) authorizeCluster(req *Request, op acl.Operation) bool {
	return env.authorize(req, op, acl.Cluster, acl.ClusterName)
}

// authorizeTopic reports whether req may perform op on topic.
func (env *Env) authorizeTopic(req *Request, op acl.Operation, topic string) bool {
	return env.authorize(req, op, acl.Topic, topic)
}

// authorizeByResourceType is AuthHelper.authorizeByResourceType: whether req
// may perform op on at least one resource of typ.
func (env *Env) authorizeByResourceType(req *Request, op acl.Operation, typ acl.ResourceType) bool {
	if env.Authorizer == nil {
		return true
	}
	return env.Authorizer.AuthorizeByResourceType(req.session(), op, typ)
}

// authorizedOperations is AuthHelper.authorizedOperations: the bit field of
// the operations req may perform on the resource; without an authorizer,
// every operation the resource type supports.
func (env *Env) authorizedOperations(req *Request, typ acl.ResourceType, name string) int32 {
	return env.Authorizer.AuthorizedOperations(req.session(), typ, name)
}

// errorCodeMessage returns err's Kafka code and message.
func errorCodeMessage(err error) (int16, *string) {
	return ErrorCode(err), errMessage(err)
}

// topicAllowed returns the check of op on a topic for req, or nil without
// an authorizer, for helpers that take a filter.
func (env *Env) topicAllowed(req *Request, op acl.Operation) func(string) bool {
	if env.Authorizer == nil {
		return nil
	}
	return func(topic string) bool { return env.authorizeTopic(req, op, topic) }
}

// authMessages are Kafka's messages of the authorization errors
// (org.apache.kafka.common.protocol.Errors), which the answers that carry a
// message send.
var authMessages = map[int16]string{
	kerr.TopicAuthorizationFailed.Code:           "Topic authorization failed.",
	kerr.GroupAuthorizationFailed.Code:           "Group authorization failed.",
	kerr.ClusterAuthorizationFailed.Code:         "Cluster authorization failed.",
	kerr.TransactionalIDAuthorizationFailed.Code: "Transactional Id authorization failed.",
}

// authMessage returns Kafka's message of an authorization error code.
func authMessage(code int16) *string {
	if m, ok := authMessages[code]; ok {
		return &m
	}
	return defaultMessage(code)
}

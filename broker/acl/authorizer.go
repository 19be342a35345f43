package acl

import (
	"sync/atomic"
)

// Session is who asks: the connection's principal as KafkaPrincipal prints
// it ("User:alice") and the client's IP address.
type Session struct {
	Principal string
	Host      string
}

// Authorizer answers checks as Kafka's StandardAuthorizer: super users are
// allowed everything, everyone else by the current Index. It is safe for
// concurrent use; SetIndex swaps the index atomically.
type Authorizer struct {
	superUsers  map[string]struct{}
	allowIfNone bool
	idx         atomic.Pointer[Index]
}

// NewAuthorizer returns an authorizer with super.users and
// allow.everyone.if.no.acl.found, and no ACLs.
func NewAuthorizer(superUsers []string, allowEveryoneIfNoACLFound bool) *Authorizer {
	a := &Authorizer{superUsers: map[string]struct{}{}, allowIfNone: allowEveryoneIfNoACLFound}
	for _, u := range superUsers {
		a.superUsers[u] = struct{}{}
	}
	a.idx.Store(NewIndex(nil))
	return a
}

// SetIndex makes idx the ACLs later checks see.
func (a *Authorizer) SetIndex(idx *Index) { a.idx.Store(idx) }

// Index returns the ACLs checks see now.
func (a *Authorizer) Index() *Index { return a.idx.Load() }

// IsSuperUser reports whether principal is in super.users.
func (a *Authorizer) IsSuperUser(principal string) bool {
	_, ok := a.superUsers[principal]
	return ok
}

// verdict accumulates a check as StandardAuthorizerData's
// MatchingRuleBuilder: whether any ACL applies to the resource, and
// whether one allows or denies.
type verdict struct {
	found, allow, deny bool
}

// scan applies entries of a matching resource pattern, as
// StandardAuthorizerData.findResult does for each.
func (v *verdict) scan(es []entry, s Session, op Operation) {
	for i := range es {
		e := &es[i]
		v.found = true
		if e.principal != s.Principal && e.principal != WildcardPrincipal {
			continue
		}
		if e.host != WildcardHost && e.host != s.Host {
			continue
		}
		if !opMatches(e.operation, e.permission, op) {
			continue
		}
		if e.permission == Deny {
			v.deny = true
			return
		}
		v.allow = true
	}
}

// opMatches reports whether an ACL of operation aclOp and permission perm
// covers op: ALL covers everything; an ALLOW also covers the operations
// its operation implies (IMPLIES_DESCRIBE, IMPLIES_DESCRIBE_CONFIGS); a
// DENY covers only its own operation.
func opMatches(aclOp Operation, perm Permission, op Operation) bool {
	if aclOp == All || aclOp == op {
		return true
	}
	if perm != Allow {
		return false
	}
	switch op {
	case Describe:
		return aclOp == Read || aclOp == Write || aclOp == Delete || aclOp == Alter
	case DescribeConfigs:
		return aclOp == AlterConfigs
	}
	return false
}

// Authorize reports whether s may perform op on the resource of type typ
// named name. It allocates nothing.
func (a *Authorizer) Authorize(s Session, op Operation, typ ResourceType, name string) bool {
	if _, ok := a.superUsers[s.Principal]; ok {
		return true
	}
	if typ <= ResourceAny || typ >= numResourceTypes {
		return false
	}
	idx := a.idx.Load()
	var v verdict
	v.scan(idx.literal[resourceKey{typ, name}], s, op)
	if !v.deny {
		ps := &idx.prefixed[typ]
		for _, l := range ps.lens {
			if l > len(name) || v.deny {
				break
			}
			v.scan(ps.byPrefix[name[:l]], s, op)
		}
	}
	if !v.deny {
		v.scan(idx.wildcard[typ], s, op)
	}
	switch {
	case v.deny:
		return false
	case v.allow:
		return true
	case !v.found:
		return a.allowIfNone
	}
	return false
}

// AuthorizeByResourceType reports whether s may perform op on at least one
// resource of type typ, as Kafka's Authorizer.authorizeByResourceType
// (KIP-679; InitProducerId without a transactional id asks it for WRITE on
// topics): a super user or an allowed hard-coded name, a wildcard ALLOW
// that no wildcard DENY overrides, or an ALLOW of a literal or a prefix that
// no DENY of the same literal or of a prefix of it overrides.
func (a *Authorizer) AuthorizeByResourceType(s Session, op Operation, typ ResourceType) bool {
	if a.Authorize(s, op, typ, "hardcode") {
		return true
	}
	idx := a.idx.Load()
	if idx.typed[typ] == 0 {
		return false
	}
	denyLiteral, denyPrefix := map[string]bool{}, map[string]bool{}
	var allows []Binding
	wildAllow := false
	for _, b := range idx.bindings {
		if b.ResourceType != typ || (b.Host != s.Host && b.Host != WildcardHost) ||
			(b.Principal != s.Principal && b.Principal != WildcardPrincipal) ||
			(b.Operation != op && b.Operation != All) {
			continue
		}
		switch {
		case b.Permission == Deny && b.Pattern == Literal && b.Name == WildcardResource:
			return false
		case b.Permission == Deny && b.Pattern == Literal:
			denyLiteral[b.Name] = true
		case b.Permission == Deny && b.Pattern == Prefixed:
			denyPrefix[b.Name] = true
		case b.Permission == Allow && b.Pattern == Literal && b.Name == WildcardResource:
			wildAllow = true
		case b.Permission == Allow:
			allows = append(allows, b)
		}
	}
	if wildAllow {
		return true
	}
	for _, b := range allows {
		if b.Pattern == Literal && denyLiteral[b.Name] {
			continue
		}
		dominated := false
		for i := 1; i <= len(b.Name) && !dominated; i++ {
			dominated = denyPrefix[b.Name[:i]]
		}
		if !dominated {
			return true
		}
	}
	return false
}

// supportedOperations are the operations each resource type has, as
// Kafka's AclEntry.supportedOperations.
var supportedOperations = [numResourceTypes][]Operation{
	Topic:           {Read, Write, Create, Describe, Delete, Alter, DescribeConfigs, AlterConfigs},
	Group:           {Read, Describe, Delete, DescribeConfigs, AlterConfigs},
	Cluster:         {Create, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, Alter, Describe},
	TransactionalID: {Describe, Write, TwoPhaseCommit},
	DelegationToken: {Describe},
	User:            {CreateTokens, DescribeTokens},
}

// AuthorizedOperations returns the bit field of the operations s may
// perform on the resource (bit n for operation code n), as KafkaApis'
// authorizedOperations answers include*AuthorizedOperations. A nil
// authorizer allows every supported operation.
func (a *Authorizer) AuthorizedOperations(s Session, typ ResourceType, name string) int32 {
	if typ <= ResourceAny || typ >= numResourceTypes {
		return 0
	}
	var bits int32
	for _, op := range supportedOperations[typ] {
		if a == nil || a.Authorize(s, op, typ, name) {
			bits |= 1 << op
		}
	}
	return bits
}

// Package acl owns Cascade's authorization: the ACL model (resource types,
// pattern types, operations and permissions numbered as Kafka's
// ResourceType, PatternType, AclOperation and AclPermissionType), binding
// filters as Kafka's AclBindingFilter matches them, an immutable Index of
// the ACLs the metadata log holds, and the Authorizer, which answers one
// check as Kafka's StandardAuthorizer (StandardAuthorizerData) does.
//
// The rules copied from StandardAuthorizerData: a super user is allowed
// everything; otherwise the ACLs that apply to a resource are the literal
// ones naming it, the literal wildcard "*" of its type and the prefixed
// ones whose prefix starts its name; a DENY that matches the principal
// (or User:*), the host (or "*") and the operation wins; else an ALLOW that
// matches allows, where an ALLOW of READ, WRITE, DELETE or ALTER also
// allows DESCRIBE and one of ALTER_CONFIGS also allows DESCRIBE_CONFIGS, and
// ALL matches every operation; else, when no ACL at all applies to the
// resource, allow.everyone.if.no.acl.found decides; else the answer is
// DENY.
//
// The Index is built once per change of the ACL set (metadata.Apply does
// it when a batch carries ACL records) and shared by every reader without
// locks; a check does map lookups on it and allocates nothing. The package
// does no I/O.
//
// Use:
//
//	idx, _ := acl.NewIndex(nil).With(id, acl.Binding{ResourceType: acl.Topic, Name: "t",
//		Pattern: acl.Literal, Principal: "User:ANONYMOUS", Host: "*", Operation: acl.Read, Permission: acl.Allow})
//	az := acl.NewAuthorizer([]string{"User:admin"}, false)
//	az.SetIndex(idx)
//	ok := az.Authorize(acl.Session{Principal: "User:ANONYMOUS", Host: "127.0.0.1"}, acl.Read, acl.Topic, "t")
package acl

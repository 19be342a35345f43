package acl

import (
	"errors"
	"fmt"
	"strings"
)

// ResourceType is a resource type, numbered as Kafka's ResourceType.
type ResourceType int8

// Resource types.
const (
	ResourceUnknown ResourceType = 0
	ResourceAny     ResourceType = 1
	Topic           ResourceType = 2
	Group           ResourceType = 3
	Cluster         ResourceType = 4
	TransactionalID ResourceType = 5
	DelegationToken ResourceType = 6
	User            ResourceType = 7

	numResourceTypes = 8
)

// PatternType is a resource pattern type, numbered as Kafka's PatternType.
type PatternType int8

// Pattern types. Match and Any appear only in filters.
const (
	PatternUnknown PatternType = 0
	PatternAny     PatternType = 1
	Match          PatternType = 2
	Literal        PatternType = 3
	Prefixed       PatternType = 4
)

// Operation is an ACL operation, numbered as Kafka's AclOperation.
type Operation int8

// Operations.
const (
	OpUnknown       Operation = 0
	OpAny           Operation = 1
	All             Operation = 2
	Read            Operation = 3
	Write           Operation = 4
	Create          Operation = 5
	Delete          Operation = 6
	Alter           Operation = 7
	Describe        Operation = 8
	ClusterAction   Operation = 9
	DescribeConfigs Operation = 10
	AlterConfigs    Operation = 11
	IdempotentWrite Operation = 12
	CreateTokens    Operation = 13
	DescribeTokens  Operation = 14
	TwoPhaseCommit  Operation = 15

	maxOperation = TwoPhaseCommit
)

// Permission is an ACL permission type, numbered as Kafka's
// AclPermissionType.
type Permission int8

// Permissions.
const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1
	Deny              Permission = 2
	Allow             Permission = 3
)

// Wildcards and names Kafka gives meaning to.
const (
	// WildcardResource is the literal resource name that matches every
	// resource of its type (ResourcePattern.WILDCARD_RESOURCE).
	WildcardResource = "*"
	// WildcardPrincipal matches every principal of type User
	// (KafkaPrincipal.WILDCARD_PRINCIPAL / "User:*").
	WildcardPrincipal = "User:*"
	// WildcardHost matches every host.
	WildcardHost = "*"
	// ClusterName is the one name of the cluster resource.
	ClusterName = "kafka-cluster"
	// Anonymous is the principal of an unauthenticated connection.
	Anonymous = "User:ANONYMOUS"
)

// Binding is one ACL: a resource pattern and an access control entry
// (Kafka's AclBinding), as AccessControlEntryRecord carries it.
type Binding struct {
	ResourceType ResourceType
	Name         string
	Pattern      PatternType
	Principal    string
	Host         string
	Operation    Operation
	Permission   Permission
}

// ErrInvalid is wrapped by the error for an ACL that cannot be created, as
// Kafka's InvalidRequestException (the handler answers INVALID_REQUEST).
var ErrInvalid = errors.New("invalid acl")

// Validate checks a binding to be created as Kafka does: first the
// broker's checks of AclApis.handleCreateAcls (the cluster resource's one
// name, a non-empty name), then AclControlManager.validateNewAcl's, with
// Kafka's messages.
func (b Binding) Validate() error {
	switch {
	case b.ResourceType == Cluster && b.Name != ClusterName:
		return fmt.Errorf("%w: The only valid name for the CLUSTER resource is %s", ErrInvalid, ClusterName)
	case b.Name == "":
		return fmt.Errorf("%w: Invalid empty resource name", ErrInvalid)
	}
	switch b.Pattern {
	case Literal, Prefixed:
	default:
		return fmt.Errorf("%w: Invalid patternType %s", ErrInvalid, b.Pattern)
	}
	switch b.ResourceType {
	case ResourceUnknown, ResourceAny:
		return fmt.Errorf("%w: Invalid resourceType %s", ErrInvalid, b.ResourceType)
	}
	switch b.Operation {
	case OpUnknown, OpAny:
		return fmt.Errorf("%w: Invalid operation %s", ErrInvalid, b.Operation)
	}
	switch b.Permission {
	case Deny, Allow:
	default:
		return fmt.Errorf("%w: Invalid permissionType %s", ErrInvalid, b.Permission)
	}
	if !strings.Contains(b.Principal, ":") {
		return fmt.Errorf("%w: Could not parse principal from `%s` (no colon is present separating the principal type from the principal name)", ErrInvalid, b.Principal)
	}
	return nil
}

// String renders the binding as Kafka's AclBinding.toString does.
func (b Binding) String() string {
	return fmt.Sprintf("(pattern=ResourcePattern(resourceType=%s, name=%s, patternType=%s), entry=(principal=%s, host=%s, operation=%s, permissionType=%s))",
		b.ResourceType, b.Name, b.Pattern, b.Principal, b.Host, b.Operation, b.Permission)
}

var resourceNames = [...]string{"UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"}

func (t ResourceType) String() string {
	if t >= 0 && int(t) < len(resourceNames) {
		return resourceNames[t]
	}
	return "UNKNOWN"
}

var patternNames = [...]string{"UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"}

func (p PatternType) String() string {
	if p >= 0 && int(p) < len(patternNames) {
		return patternNames[p]
	}
	return "UNKNOWN"
}

var operationNames = [...]string{"UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
	"CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS", "TWO_PHASE_COMMIT"}

func (o Operation) String() string {
	if o >= 0 && int(o) < len(operationNames) {
		return operationNames[o]
	}
	return "UNKNOWN"
}

var permissionNames = [...]string{"UNKNOWN", "ANY", "DENY", "ALLOW"}

func (p Permission) String() string {
	if p >= 0 && int(p) < len(permissionNames) {
		return permissionNames[p]
	}
	return "UNKNOWN"
}

// Known reports whether each code names a value Kafka knows, as its
// fromCode would not map it to UNKNOWN. Kafka's CreateAcls, DescribeAcls
// and DeleteAcls requests refuse to parse a field that is UNKNOWN.
func Known(t ResourceType, p PatternType, o Operation, perm Permission) bool {
	return t > ResourceUnknown && t < numResourceTypes && p > PatternUnknown && p <= Prefixed &&
		o > OpUnknown && o <= maxOperation && perm > PermissionUnknown && perm <= Allow
}

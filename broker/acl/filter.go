package acl

import "strings"

// Filter selects bindings, as Kafka's AclBindingFilter: ResourceAny,
// PatternAny, OpAny and PermissionAny match every value, a nil Name,
// Principal or Host every string, and the pattern type Match selects every
// binding that would apply to the resource Name names (literal equal or
// wildcard, prefixed a prefix of it).
type Filter struct {
	ResourceType ResourceType
	Name         *string
	Pattern      PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// Matches reports whether b passes the filter, as
// ResourcePatternFilter.matches and AccessControlEntryFilter.matches.
func (f Filter) Matches(b Binding) bool {
	return f.matchesPattern(b) && f.matchesEntry(b)
}

func (f Filter) matchesPattern(b Binding) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.Pattern != PatternAny && f.Pattern != Match && f.Pattern != b.Pattern {
		return false
	}
	if f.Name == nil {
		return true
	}
	name := *f.Name
	if f.Pattern == PatternAny || f.Pattern == b.Pattern {
		return name == b.Name
	}
	switch b.Pattern {
	case Literal:
		return name == b.Name || b.Name == WildcardResource
	case Prefixed:
		return strings.HasPrefix(name, b.Name)
	}
	return false
}

func (f Filter) matchesEntry(b Binding) bool {
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != OpAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == PermissionAny || f.Permission == b.Permission
}

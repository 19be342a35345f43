package acl

import (
	"bytes"
	"maps"
	"slices"
	"strings"
)

// ID is an ACL's id, the Uuid of its AccessControlEntryRecord.
type ID = [16]byte

// entry is the part of a binding a check compares once the resource
// matched.
type entry struct {
	principal  string
	host       string
	operation  Operation
	permission Permission
}

type resourceKey struct {
	typ  ResourceType
	name string
}

// prefixSet holds one resource type's prefixed ACLs by prefix, and the
// distinct prefix lengths in ascending order, so a check looks up each
// length's prefix of the name and nothing else.
type prefixSet struct {
	byPrefix map[string][]entry
	lens     []int
}

// Index is an immutable set of ACLs arranged for checks: literal ACLs by
// resource, literal wildcards and prefixed ACLs by resource type. Build one
// with NewIndex; readers share it without locks.
type Index struct {
	bindings map[ID]Binding
	literal  map[resourceKey][]entry
	wildcard [numResourceTypes][]entry
	prefixed [numResourceTypes]prefixSet
	// typed counts the ACLs of each resource type, for
	// AuthorizeByResourceType.
	typed [numResourceTypes]int
}

// NewIndex builds the index of bindings, which must be valid (Validate).
// The map is the index's from then on.
func NewIndex(bindings map[ID]Binding) *Index {
	if bindings == nil {
		bindings = map[ID]Binding{}
	}
	idx := &Index{bindings: bindings, literal: map[resourceKey][]entry{}}
	// Insert in id order so that every replica's index is the same.
	for _, id := range slices.SortedFunc(maps.Keys(bindings), func(a, b ID) int { return bytes.Compare(a[:], b[:]) }) {
		b := bindings[id]
		if b.ResourceType <= ResourceAny || b.ResourceType >= numResourceTypes {
			continue
		}
		e := entry{principal: b.Principal, host: b.Host, operation: b.Operation, permission: b.Permission}
		idx.typed[b.ResourceType]++
		switch {
		case b.Pattern == Literal && b.Name == WildcardResource:
			idx.wildcard[b.ResourceType] = append(idx.wildcard[b.ResourceType], e)
		case b.Pattern == Literal:
			k := resourceKey{b.ResourceType, b.Name}
			idx.literal[k] = append(idx.literal[k], e)
		case b.Pattern == Prefixed:
			ps := &idx.prefixed[b.ResourceType]
			if ps.byPrefix == nil {
				ps.byPrefix = map[string][]entry{}
			}
			if _, ok := ps.byPrefix[b.Name]; !ok {
				i, _ := slices.BinarySearch(ps.lens, len(b.Name))
				if i == len(ps.lens) || ps.lens[i] != len(b.Name) {
					ps.lens = slices.Insert(ps.lens, i, len(b.Name))
				}
			}
			ps.byPrefix[b.Name] = append(ps.byPrefix[b.Name], e)
		}
	}
	return idx
}

// Len returns the number of ACLs.
func (idx *Index) Len() int {
	if idx == nil {
		return 0
	}
	return len(idx.bindings)
}

// Binding returns the ACL with id.
func (idx *Index) Binding(id ID) (Binding, bool) {
	if idx == nil {
		return Binding{}, false
	}
	b, ok := idx.bindings[id]
	return b, ok
}

// Bindings returns a copy of every ACL by id.
func (idx *Index) Bindings() map[ID]Binding {
	if idx == nil {
		return map[ID]Binding{}
	}
	return maps.Clone(idx.bindings)
}

// Matching returns the ids of the ACLs f matches, in a stable order
// (resource type, name, pattern, principal, host, operation, permission,
// then id), as DescribeAcls and DeleteAcls answer them.
func (idx *Index) Matching(f Filter) []ID {
	if idx == nil {
		return nil
	}
	var ids []ID
	for id, b := range idx.bindings {
		if f.Matches(b) {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(x, y ID) int {
		if c := compareBindings(idx.bindings[x], idx.bindings[y]); c != 0 {
			return c
		}
		return bytes.Compare(x[:], y[:])
	})
	return ids
}

func compareBindings(a, b Binding) int {
	switch {
	case a.ResourceType != b.ResourceType:
		return int(a.ResourceType) - int(b.ResourceType)
	case a.Name != b.Name:
		return strings.Compare(a.Name, b.Name)
	case a.Pattern != b.Pattern:
		return int(a.Pattern) - int(b.Pattern)
	case a.Principal != b.Principal:
		return strings.Compare(a.Principal, b.Principal)
	case a.Host != b.Host:
		return strings.Compare(a.Host, b.Host)
	case a.Operation != b.Operation:
		return int(a.Operation) - int(b.Operation)
	}
	return int(a.Permission) - int(b.Permission)
}

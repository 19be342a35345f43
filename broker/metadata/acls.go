package metadata

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/cascade-kafka/cascade/broker/acl"
)

// AccessControlEntryRecord creates one ACL, as Kafka's
// AccessControlEntryRecord: its Uuid and its binding, with the codes of
// Kafka's ResourceType, PatternType, AclOperation and AclPermissionType.
type AccessControlEntryRecord struct {
	ID           UUID
	ResourceType int8
	ResourceName string
	PatternType  int8
	Principal    string
	Host         string
	Operation    int8
	Permission   int8
}

// RemoveAccessControlEntryRecord deletes the ACL with ID, as Kafka's
// RemoveAccessControlEntryRecord.
type RemoveAccessControlEntryRecord struct {
	ID UUID
}

const (
	typeAccessControlEntry       uint8 = 6 // Kafka's MetadataRecordType numbers
	typeRemoveAccessControlEntry uint8 = 7
)

func (AccessControlEntryRecord) recordType() uint8       { return typeAccessControlEntry }
func (RemoveAccessControlEntryRecord) recordType() uint8 { return typeRemoveAccessControlEntry }

// Binding returns the record's ACL.
func (r AccessControlEntryRecord) Binding() acl.Binding {
	return acl.Binding{ResourceType: acl.ResourceType(r.ResourceType), Name: r.ResourceName,
		Pattern: acl.PatternType(r.PatternType), Principal: r.Principal, Host: r.Host,
		Operation: acl.Operation(r.Operation), Permission: acl.Permission(r.Permission)}
}

func aclRecord(id UUID, b acl.Binding) AccessControlEntryRecord {
	return AccessControlEntryRecord{ID: id, ResourceType: int8(b.ResourceType), ResourceName: b.Name,
		PatternType: int8(b.Pattern), Principal: b.Principal, Host: b.Host,
		Operation: int8(b.Operation), Permission: int8(b.Permission)}
}

func encodeACL(body *writer, r Record) bool {
	switch r := r.(type) {
	case AccessControlEntryRecord:
		body.uuid(r.ID)
		body.varint(int64(r.ResourceType))
		body.str(r.ResourceName)
		body.varint(int64(r.PatternType))
		body.str(r.Principal)
		body.str(r.Host)
		body.varint(int64(r.Operation))
		body.varint(int64(r.Permission))
	case RemoveAccessControlEntryRecord:
		body.uuid(r.ID)
	default:
		return false
	}
	return true
}

func decodeACL(typ uint8, body *reader) (Record, bool) {
	switch typ {
	case typeAccessControlEntry:
		return AccessControlEntryRecord{ID: body.uuid(), ResourceType: body.int8(), ResourceName: body.str(),
			PatternType: body.int8(), Principal: body.str(), Host: body.str(), Operation: body.int8(),
			Permission: body.int8()}, true
	case typeRemoveAccessControlEntry:
		return RemoveAccessControlEntryRecord{ID: body.uuid()}, true
	}
	return nil, false
}

// applyACL replays one ACL record into acls, as AclControlManager.replay:
// an id is created once and removed only when present, and a record's
// binding must be one CreateAcls would accept.
func applyACL(acls map[acl.ID]acl.Binding, rec Record) error {
	switch r := rec.(type) {
	case AccessControlEntryRecord:
		if r.ID.IsZero() {
			return fmt.Errorf("metadata: acl with zero id")
		}
		if _, dup := acls[r.ID]; dup {
			return fmt.Errorf("metadata: acl id %s created twice", r.ID)
		}
		b := r.Binding()
		if err := b.Validate(); err != nil {
			return fmt.Errorf("metadata: acl %s: %w", r.ID, err)
		}
		acls[r.ID] = b
	case RemoveAccessControlEntryRecord:
		if _, ok := acls[r.ID]; !ok {
			return fmt.Errorf("metadata: removing unknown acl id %s", r.ID)
		}
		delete(acls, r.ID)
	}
	return nil
}

// ACLs returns the image's ACLs, indexed for checks (never nil).
func (img *Image) ACLs() *acl.Index {
	if img.acls == nil {
		return emptyACLs
	}
	return img.acls
}

var emptyACLs = acl.NewIndex(nil)

func (img *Image) aclRecords() []Record {
	bs := img.acls.Bindings()
	var recs []Record
	for _, id := range slices.SortedFunc(maps.Keys(bs), func(a, b acl.ID) int { return bytes.Compare(a[:], b[:]) }) {
		recs = append(recs, aclRecord(UUID(id), bs[id]))
	}
	return recs
}

// DeleteACLsResult is one DeleteAcls filter's outcome: the ACLs it
// deleted, or why it was refused.
type DeleteACLsResult struct {
	Err      error
	Matching []acl.Binding
}

// PlanCreateACLs returns the records that create bindings on img and each
// binding's result, as AclControlManager.createAcls: an invalid binding
// fails alone with INVALID_REQUEST; one that exists already (or earlier in
// the same request) succeeds without a record; each new one gets a fresh
// Uuid from ids (crypto/rand when nil).
func PlanCreateACLs(img *Image, bindings []acl.Binding, ids io.Reader) ([]Record, []error, error) {
	existing := map[acl.Binding]bool{}
	for _, b := range img.acls.Bindings() {
		existing[b] = true
	}
	var recs []Record
	errs := make([]error, len(bindings))
	for i, b := range bindings {
		if err := b.Validate(); err != nil {
			errs[i] = &Error{Kind: ErrInvalidRequest, Message: trimInvalid(err)}
			continue
		}
		if existing[b] {
			continue
		}
		id, err := newACLID(img, ids)
		if err != nil {
			return nil, nil, err
		}
		existing[b] = true
		recs = append(recs, aclRecord(id, b))
	}
	return recs, errs, nil
}

// newACLID returns a random Uuid no ACL of img uses.
func newACLID(img *Image, ids io.Reader) (UUID, error) {
	for {
		id, err := newUUID(ids)
		if err != nil {
			return UUID{}, err
		}
		if _, used := img.acls.Binding(id); !used {
			return id, nil
		}
	}
}

// trimInvalid returns an acl.ErrInvalid error's message without the
// sentinel's prefix: Kafka's message alone.
func trimInvalid(err error) string {
	msg := err.Error()
	if p := acl.ErrInvalid.Error() + ": "; len(msg) > len(p) && msg[:len(p)] == p {
		return msg[len(p):]
	}
	return msg
}

// PlanDeleteACLs returns the records that delete what filters match on img
// and each filter's result, as AclControlManager.deleteAcls: a filter with
// an UNKNOWN field fails alone with INVALID_REQUEST; an ACL matched by
// several filters is listed under each and removed once.
func PlanDeleteACLs(img *Image, filters []acl.Filter) ([]Record, []DeleteACLsResult) {
	idx := img.ACLs()
	removed := map[acl.ID]bool{}
	var recs []Record
	out := make([]DeleteACLsResult, len(filters))
	for i, f := range filters {
		switch {
		case f.ResourceType == acl.ResourceUnknown || f.Pattern == acl.PatternUnknown:
			out[i].Err = &Error{Kind: ErrInvalidRequest, Message: "Unknown patternFilter."}
			continue
		case f.Operation == acl.OpUnknown || f.Permission == acl.PermissionUnknown:
			out[i].Err = &Error{Kind: ErrInvalidRequest, Message: "Unknown entryFilter."}
			continue
		}
		for _, id := range idx.Matching(f) {
			b, _ := idx.Binding(id)
			out[i].Matching = append(out[i].Matching, b)
			if !removed[id] {
				removed[id] = true
				recs = append(recs, RemoveAccessControlEntryRecord{ID: UUID(id)})
			}
		}
	}
	return recs, out
}

// CreateACLs creates bindings durably and returns each one's result
// (PlanCreateACLs); the error is the whole request's (storage, a replica's
// controller).
func (s *Store) CreateACLs(bindings []acl.Binding) ([]error, error) {
	if s.writer != nil {
		return s.writer.CreateACLs(bindings)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	recs, errs, err := PlanCreateACLs(s.img.Load(), bindings, s.opts.Rand)
	if err != nil {
		return nil, err
	}
	if len(recs) > 0 {
		if err := s.commit(recs); err != nil {
			return nil, err
		}
	}
	return errs, nil
}

// DeleteACLs deletes what filters match durably and returns each filter's
// result (PlanDeleteACLs); the error is the whole request's.
func (s *Store) DeleteACLs(filters []acl.Filter) ([]DeleteACLsResult, error) {
	if s.writer != nil {
		return s.writer.DeleteACLs(filters)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	recs, out := PlanDeleteACLs(s.img.Load(), filters)
	if len(recs) > 0 {
		if err := s.commit(recs); err != nil {
			return nil, err
		}
	}
	return out, nil
}

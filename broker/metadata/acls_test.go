package metadata

import (
	"errors"
	"reflect"
	"testing"

	"github.com/cascade-kafka/cascade/broker/acl"
)

func aclAll() acl.Filter {
	return acl.Filter{ResourceType: acl.ResourceAny, Pattern: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}
}

func TestACLRecordsRoundTrip(t *testing.T) {
	recs := []Record{
		AccessControlEntryRecord{ID: UUID{9}, ResourceType: 2, ResourceName: "t", PatternType: 4, Principal: "User:a", Host: "*", Operation: 3, Permission: 3},
		RemoveAccessControlEntryRecord{ID: UUID{9}},
	}
	got, err := DecodeBatch(EncodeBatch(recs))
	if err != nil || !reflect.DeepEqual(got, recs) {
		t.Fatalf("got %+v %v", got, err)
	}
}

// TestACLStore creates and deletes ACLs through the store, and checks they
// survive a reopen and a snapshot (Records).
func TestACLStore(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir, nil)
	read := acl.Binding{ResourceType: acl.Topic, Name: "t", Pattern: acl.Literal, Principal: acl.Anonymous, Host: "*", Operation: acl.Read, Permission: acl.Allow}
	deny := read
	deny.Pattern, deny.Name, deny.Permission = acl.Prefixed, "secret", acl.Deny
	bad := read
	bad.ResourceType = acl.ResourceAny
	errs, err := st.CreateACLs([]acl.Binding{read, deny, bad, read})
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || errs[1] != nil || errs[3] != nil || !errors.Is(errs[2], ErrInvalidRequest) || errs[2].Error() != "Invalid resourceType ANY" {
		t.Fatalf("results %v", errs)
	}
	if n := st.Image().ACLs().Len(); n != 2 {
		t.Fatalf("%d acls, want 2 (a duplicate adds none)", n)
	}
	// Creating an existing ACL again writes nothing.
	off := st.Image().Offset
	if errs, err := st.CreateACLs([]acl.Binding{read}); err != nil || errs[0] != nil || st.Image().Offset != off {
		t.Fatalf("recreate: %v %v, offset %d -> %d", errs, err, off, st.Image().Offset)
	}
	st.Close()

	st = openStore(t, dir, nil)
	img := st.Image()
	if img.ACLs().Len() != 2 {
		t.Fatalf("reopened with %d acls", img.ACLs().Len())
	}
	snap, err := Apply(Empty(), img.Records())
	if err != nil || !reflect.DeepEqual(snap.ACLs().Bindings(), img.ACLs().Bindings()) {
		t.Fatalf("snapshot: %v", err)
	}

	prefixed := aclAll()
	prefixed.Pattern = acl.Prefixed
	unknown := aclAll()
	unknown.Operation = acl.OpUnknown
	res, err := st.DeleteACLs([]acl.Filter{prefixed, aclAll(), unknown})
	if err != nil {
		t.Fatal(err)
	}
	if len(res[0].Matching) != 1 || res[0].Matching[0] != deny || len(res[1].Matching) != 2 ||
		res[2].Err == nil || res[2].Err.Error() != "Unknown entryFilter." {
		t.Fatalf("delete results %+v", res)
	}
	if st.Image().ACLs().Len() != 0 {
		t.Fatal("acls left after delete")
	}
}

func TestApplyACLRefusesBadRecords(t *testing.T) {
	add := AccessControlEntryRecord{ID: UUID{1}, ResourceType: 2, ResourceName: "t", PatternType: 3, Principal: "User:a", Host: "*", Operation: 3, Permission: 3}
	img, err := Apply(Empty(), []Record{add})
	if err != nil {
		t.Fatal(err)
	}
	for name, recs := range map[string][]Record{
		"duplicate id":   {add},
		"unknown remove": {RemoveAccessControlEntryRecord{ID: UUID{2}}},
		"pattern any":    {AccessControlEntryRecord{ID: UUID{3}, ResourceType: 2, ResourceName: "t", PatternType: 1, Principal: "User:a", Host: "*", Operation: 3, Permission: 3}},
	} {
		if _, err := Apply(img, recs); err == nil {
			t.Errorf("%s: applied", name)
		}
	}
}

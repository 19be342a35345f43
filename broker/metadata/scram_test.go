package metadata

import (
	"errors"
	"reflect"
	"testing"
)

func TestScramRecordsRoundTrip(t *testing.T) {
	recs := []Record{
		UserScramCredentialRecord{Name: "alice", Mechanism: ScramSHA512, Salt: []byte("s"), StoredKey: []byte{1, 2},
			ServerKey: []byte{3}, Iterations: 8192},
		RemoveUserScramCredentialRecord{Name: "alice", Mechanism: ScramSHA512},
	}
	got, err := DecodeBatch(EncodeBatch(recs))
	if err != nil || !reflect.DeepEqual(got, recs) {
		t.Fatalf("got %#v, %v", got, err)
	}
}

func TestPlanScram(t *testing.T) {
	img := Empty()
	ups := []ScramUpsertion{
		{Name: "alice", Mechanism: ScramSHA256, Iterations: 4096, Salt: []byte("salt"), SaltedPassword: []byte("x")},
		{Name: "bob", Mechanism: ScramSHA512, Iterations: 4095, Salt: []byte("salt"), SaltedPassword: []byte("x")},
		{Name: "carol", Mechanism: ScramSHA512, Iterations: 16385},
		{Name: "", Mechanism: ScramSHA512, Iterations: 4096},
		{Name: "dave", Mechanism: 7, Iterations: 4096},
		{Name: "erin", Mechanism: ScramSHA256, Iterations: 4096},
		{Name: "erin", Mechanism: ScramSHA512, Iterations: 4096},
	}
	dels := []ScramDeletion{{Name: "frank", Mechanism: ScramSHA256}}
	recs, results := PlanScram(img, dels, ups)
	want := map[string]error{"alice": nil, "bob": ErrUnacceptableCredential, "carol": ErrUnacceptableCredential,
		"": ErrUnacceptableCredential, "dave": ErrUnsupportedMechanism, "erin": ErrDuplicateResource,
		"frank": ErrResourceNotFound}
	if len(results) != len(want) {
		t.Fatalf("results %v", results)
	}
	for _, r := range results {
		if w := want[r.User]; (w == nil) != (r.Err == nil) || w != nil && !errors.Is(r.Err, w) {
			t.Errorf("%q: %v, want %v", r.User, r.Err, w)
		}
	}
	if len(recs) != 1 {
		t.Fatalf("records %v", recs)
	}
	next, err := Apply(img, recs)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := next.ScramCredential("SCRAM-SHA-256", "alice")
	if !ok || c.Iterations != 4096 || string(c.Salt) != "salt" || len(c.StoredKey) != 32 {
		t.Fatalf("credential %+v %v", c, ok)
	}
	if _, ok := next.ScramCredential("SCRAM-SHA-512", "alice"); ok {
		t.Fatal("a credential of the other mechanism")
	}
	// The snapshot records rebuild the credentials.
	again, err := Apply(Empty(), next.Records())
	if err != nil || !reflect.DeepEqual(again.ScramUsers(), next.ScramUsers()) {
		t.Fatalf("snapshot: %v %v", again.ScramUsers(), err)
	}
	recs, results = PlanScram(next, []ScramDeletion{{Name: "alice", Mechanism: ScramSHA256}}, nil)
	if len(recs) != 1 || results[0].Err != nil {
		t.Fatalf("delete: %v %v", recs, results)
	}
	gone, _ := Apply(next, recs)
	if len(gone.ScramUsers()) != 0 {
		t.Fatalf("after delete %v", gone.ScramUsers())
	}
	if _, err := Apply(gone, recs); err == nil {
		t.Fatal("deleting a missing credential applied")
	}
}

func TestScramSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.AlterUserScramCredentials(nil, []ScramUpsertion{{Name: "alice", Mechanism: ScramSHA512,
		Iterations: 4096, Salt: []byte("salt"), SaltedPassword: []byte("pw")}})
	if err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	s.Close()
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.Image().ScramCredential("SCRAM-SHA-512", "alice"); !ok {
		t.Fatal("credential lost on reopen")
	}
}

package metadata

import (
	"bytes"
	"errors"
	"maps"
	"slices"

	"github.com/cascade-kafka/cascade/broker/security/sasl"
)

// SCRAM mechanisms as UserScramCredentialRecord numbers them (Kafka's
// clients.admin.ScramMechanism type).
const (
	ScramUnknown int8 = 0
	ScramSHA256  int8 = 1
	ScramSHA512  int8 = 2
)

// ScramMechanismName returns the SASL name of a mechanism number, "" for
// an unknown one.
func ScramMechanismName(m int8) string {
	switch m {
	case ScramSHA256:
		return sasl.ScramSHA256
	case ScramSHA512:
		return sasl.ScramSHA512
	}
	return ""
}

// ScramMechanismNumber returns the number of a SASL mechanism name,
// ScramUnknown for any other.
func ScramMechanismNumber(name string) int8 {
	switch name {
	case sasl.ScramSHA256:
		return ScramSHA256
	case sasl.ScramSHA512:
		return ScramSHA512
	}
	return ScramUnknown
}

// Sentinel errors of AlterUserScramCredentials and
// DescribeUserScramCredentials, named for their Kafka codes.
var (
	ErrDuplicateResource      = errors.New("DUPLICATE_RESOURCE")
	ErrResourceNotFound       = errors.New("RESOURCE_NOT_FOUND")
	ErrUnacceptableCredential = errors.New("UNACCEPTABLE_CREDENTIAL")
	ErrUnsupportedMechanism   = errors.New("UNSUPPORTED_SASL_MECHANISM")
	// ErrScramUnsupported is the failure of a SCRAM write on a store that
	// cannot make it (a cluster whose controller does not take them yet).
	ErrScramUnsupported = errors.New("UNSUPPORTED_VERSION")
)

// UserScramCredentialRecord sets one user's credential for one mechanism,
// as Kafka's UserScramCredentialRecord (metadata record type 11).
type UserScramCredentialRecord struct {
	Name       string
	Mechanism  int8
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// RemoveUserScramCredentialRecord deletes one user's credential for one
// mechanism, as Kafka's RemoveUserScramCredentialRecord (type 22).
type RemoveUserScramCredentialRecord struct {
	Name      string
	Mechanism int8
}

const (
	typeUserScramCredential       uint8 = 11
	typeRemoveUserScramCredential uint8 = 22
)

func (UserScramCredentialRecord) recordType() uint8       { return typeUserScramCredential }
func (RemoveUserScramCredentialRecord) recordType() uint8 { return typeRemoveUserScramCredential }

func encodeScram(body *writer, r Record) bool {
	switch r := r.(type) {
	case UserScramCredentialRecord:
		body.str(r.Name)
		body.varint(int64(r.Mechanism))
		body.str(string(r.Salt))
		body.str(string(r.StoredKey))
		body.str(string(r.ServerKey))
		body.varint(int64(r.Iterations))
	case RemoveUserScramCredentialRecord:
		body.str(r.Name)
		body.varint(int64(r.Mechanism))
	default:
		return false
	}
	return true
}

func decodeScram(typ uint8, body *reader) (Record, bool) {
	switch typ {
	case typeUserScramCredential:
		return UserScramCredentialRecord{Name: body.str(), Mechanism: body.int8(), Salt: []byte(body.str()),
			StoredKey: []byte(body.str()), ServerKey: []byte(body.str()), Iterations: body.int32()}, true
	case typeRemoveUserScramCredential:
		return RemoveUserScramCredentialRecord{Name: body.str(), Mechanism: body.int8()}, true
	}
	return nil, false
}

// scramKey names one stored credential.
type scramKey struct {
	user      string
	mechanism int8
}

// applyScram applies a SCRAM record to next, cloning its credentials once
// per batch; handled is false for another record type.
func applyScram(next *Image, rec Record, cloned *bool) (handled bool, err error) {
	clone := func() {
		if !*cloned {
			next.scram = maps.Clone(next.scram)
			if next.scram == nil {
				next.scram = map[scramKey]sasl.ScramCredential{}
			}
			*cloned = true
		}
	}
	switch r := rec.(type) {
	case UserScramCredentialRecord:
		if r.Name == "" || ScramMechanismName(r.Mechanism) == "" {
			return true, newErr(ErrInvalidRequest, "metadata: SCRAM credential of %q with mechanism %d", r.Name, r.Mechanism)
		}
		clone()
		next.scram[scramKey{r.Name, r.Mechanism}] = sasl.ScramCredential{Salt: r.Salt, StoredKey: r.StoredKey,
			ServerKey: r.ServerKey, Iterations: int(r.Iterations)}
		return true, nil
	case RemoveUserScramCredentialRecord:
		k := scramKey{r.Name, r.Mechanism}
		if _, ok := next.scram[k]; !ok {
			// As ScramControlManager.replay.
			return true, newErr(ErrInvalidRequest, "metadata: Unable to find credential to delete: %s %d", r.Name, r.Mechanism)
		}
		clone()
		delete(next.scram, k)
		return true, nil
	}
	return false, nil
}

// ScramCredential returns a user's stored credential for a SASL mechanism
// name.
func (img *Image) ScramCredential(mechanism, user string) (sasl.ScramCredential, bool) {
	c, ok := img.scram[scramKey{user, ScramMechanismNumber(mechanism)}]
	return c, ok
}

// ScramInfo is one mechanism of a user's credentials, as
// DescribeUserScramCredentials shows it.
type ScramInfo struct {
	Mechanism  int8
	Iterations int32
}

// ScramUsers returns every user with a SCRAM credential, with the
// mechanisms of each in mechanism order.
func (img *Image) ScramUsers() map[string][]ScramInfo {
	out := map[string][]ScramInfo{}
	for k, c := range img.scram {
		out[k.user] = append(out[k.user], ScramInfo{Mechanism: k.mechanism, Iterations: int32(c.Iterations)})
	}
	for _, infos := range out {
		slices.SortFunc(infos, func(a, b ScramInfo) int { return int(a.Mechanism) - int(b.Mechanism) })
	}
	return out
}

// scramRecords returns the records that rebuild the image's credentials.
func (img *Image) scramRecords() []Record {
	keys := slices.SortedFunc(maps.Keys(img.scram), func(a, b scramKey) int {
		if a.user != b.user {
			return bytes.Compare([]byte(a.user), []byte(b.user))
		}
		return int(a.mechanism) - int(b.mechanism)
	})
	var recs []Record
	for _, k := range keys {
		c := img.scram[k]
		recs = append(recs, UserScramCredentialRecord{Name: k.user, Mechanism: k.mechanism, Salt: c.Salt,
			StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: int32(c.Iterations)})
	}
	return recs
}

// ScramDeletion and ScramUpsertion are AlterUserScramCredentials' entries.
type ScramDeletion struct {
	Name      string
	Mechanism int8
}

// ScramUpsertion sets a credential from a salted password, as the client
// computed it.
type ScramUpsertion struct {
	Name           string
	Mechanism      int8
	Iterations     int32
	Salt           []byte
	SaltedPassword []byte
}

// ScramResult is the outcome for one user.
type ScramResult struct {
	User string
	Err  error
}

// PlanScram validates an AlterUserScramCredentials request against img and
// returns its records and per-user results, as Kafka's
// ScramControlManager.alterCredentials: a user named twice fails with
// DUPLICATE_RESOURCE, an empty name or too few or too many iterations with
// UNACCEPTABLE_CREDENTIAL, an unknown mechanism with
// UNSUPPORTED_SASL_MECHANISM, deleting a missing credential with
// RESOURCE_NOT_FOUND. The stored keys are derived from the salted password
// (ScramFormatter); the password itself never reaches the broker.
func PlanScram(img *Image, dels []ScramDeletion, ups []ScramUpsertion) ([]Record, []ScramResult) {
	failed := map[string]error{}
	var order []string
	seen := map[string]bool{}
	note := func(u string) {
		if !seen[u] {
			seen[u] = true
			order = append(order, u)
		}
	}
	delOf := map[string]ScramDeletion{}
	upOf := map[string]ScramUpsertion{}
	dup := newErr(ErrDuplicateResource, "A user credential cannot be altered twice in the same request")
	for _, d := range dels {
		note(d.Name)
		if failed[d.Name] != nil {
			continue
		}
		if _, ok := delOf[d.Name]; ok {
			delete(delOf, d.Name)
			failed[d.Name] = dup
			continue
		}
		if err := validateScramName(d.Name, d.Mechanism); err != nil {
			failed[d.Name] = err
		} else if _, ok := img.scram[scramKey{d.Name, d.Mechanism}]; !ok {
			failed[d.Name] = newErr(ErrResourceNotFound, "Attempt to delete a user credential that does not exist")
		} else {
			delOf[d.Name] = d
		}
	}
	for _, u := range ups {
		note(u.Name)
		if failed[u.Name] != nil {
			continue
		}
		_, isDel := delOf[u.Name]
		_, isUp := upOf[u.Name]
		if isDel || isUp {
			delete(delOf, u.Name)
			delete(upOf, u.Name)
			failed[u.Name] = dup
			continue
		}
		switch err := validateScramName(u.Name, u.Mechanism); {
		case err != nil:
			failed[u.Name] = err
		case u.Iterations < sasl.MinIterations:
			failed[u.Name] = newErr(ErrUnacceptableCredential, "Too few iterations")
		case u.Iterations > sasl.MaxIterations:
			failed[u.Name] = newErr(ErrUnacceptableCredential, "Too many iterations")
		default:
			upOf[u.Name] = u
		}
	}
	var recs []Record
	var results []ScramResult
	for _, name := range order {
		if err := failed[name]; err != nil {
			results = append(results, ScramResult{User: name, Err: err})
			continue
		}
		if d, ok := delOf[name]; ok {
			recs = append(recs, RemoveUserScramCredentialRecord{Name: d.Name, Mechanism: d.Mechanism})
		}
		if u, ok := upOf[name]; ok {
			c := sasl.DeriveScram(ScramMechanismName(u.Mechanism), u.Salt, u.SaltedPassword, int(u.Iterations))
			recs = append(recs, UserScramCredentialRecord{Name: u.Name, Mechanism: u.Mechanism, Salt: c.Salt,
				StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: u.Iterations})
		}
		results = append(results, ScramResult{User: name})
	}
	return recs, results
}

func validateScramName(name string, mechanism int8) error {
	if name == "" {
		return newErr(ErrUnacceptableCredential, "Username must not be empty")
	}
	if ScramMechanismName(mechanism) == "" {
		return newErr(ErrUnsupportedMechanism, "Unknown SCRAM mechanism")
	}
	return nil
}

// ScramWriter is implemented by a replica store's Writer that can commit
// SCRAM credential changes through the metadata quorum.
type ScramWriter interface {
	AlterUserScramCredentials(dels []ScramDeletion, ups []ScramUpsertion) ([]ScramResult, error)
}

// AlterUserScramCredentials validates and commits a credential change as
// one batch (Kafka's ControllerResult.atomicOf). On a replica store the
// change goes to its writer, when that takes SCRAM changes.
func (s *Store) AlterUserScramCredentials(dels []ScramDeletion, ups []ScramUpsertion) ([]ScramResult, error) {
	if s.writer != nil {
		w, ok := s.writer.(ScramWriter)
		if !ok {
			return nil, newErr(ErrScramUnsupported, "SCRAM credentials cannot be altered on this cluster's controller yet")
		}
		return w.AlterUserScramCredentials(dels, ups)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	recs, results := PlanScram(s.img.Load(), dels, ups)
	if len(recs) == 0 {
		return results, nil
	}
	if err := s.commit(recs); err != nil {
		return nil, asError(err)
	}
	return results, nil
}

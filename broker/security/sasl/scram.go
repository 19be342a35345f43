package sasl

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"

	"github.com/xdg-go/scram"
)

// scramServer is Kafka's ScramSaslServer: the RFC 5802 exchange of
// github.com/xdg-go/scram (client-first, server-first, client-final,
// server-final), with credentials from Credentials.Scram. As Kafka, an
// authorization id other than the user name is refused, and a failure
// tells the client nothing about why.
type scramServer struct {
	mechanism string
	conv      *scram.ServerConversation
	failed    bool
	first     bool
}

func newScramServer(mechanism string, lookup func(mechanism, user string) (ScramCredential, bool)) (Server, error) {
	hash := scram.SHA256
	if mechanism == ScramSHA512 {
		hash = scram.SHA512
	}
	srv, err := hash.NewServer(func(user string) (scram.StoredCredentials, error) {
		if lookup == nil {
			return scram.StoredCredentials{}, ErrInvalidCredentials
		}
		c, ok := lookup(mechanism, user)
		if !ok {
			return scram.StoredCredentials{}, ErrInvalidCredentials
		}
		return scram.StoredCredentials{
			KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: c.Iterations},
			StoredKey:  c.StoredKey, ServerKey: c.ServerKey,
		}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("sasl: %s: %w", mechanism, err)
	}
	return &scramServer{mechanism: mechanism, conv: srv.NewConversation()}, nil
}

func (s *scramServer) Mechanism() string { return s.mechanism }
func (s *scramServer) Complete() bool    { return !s.failed && s.conv.Done() && s.conv.Valid() }

func (s *scramServer) AuthorizationID() string {
	if !s.Complete() {
		return ""
	}
	return s.conv.Username()
}

func (s *scramServer) Evaluate(token []byte) ([]byte, error) {
	if s.failed || s.conv.Done() {
		return nil, ErrIllegalState
	}
	resp, err := s.conv.Step(string(token))
	if err != nil {
		s.failed = true
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidCredentials, s.mechanism, err)
	}
	if !s.first {
		s.first = true
		if a := s.conv.AuthzID(); a != "" && a != s.conv.Username() {
			s.failed = true
			return nil, &ClientError{Message: "Authentication failed: Client requested an authorization id that is different from username"}
		}
	}
	if s.conv.Done() && !s.conv.Valid() {
		s.failed = true
		return nil, fmt.Errorf("%w: %s: invalid proof", ErrInvalidCredentials, s.mechanism)
	}
	return []byte(resp), nil
}

// Iteration bounds of a stored SCRAM credential, as Kafka's
// ScramMechanism.minIterations and maxIterations.
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// IsScram reports whether mechanism is a SCRAM mechanism Cascade serves.
func IsScram(mechanism string) bool { return mechanism == ScramSHA256 || mechanism == ScramSHA512 }

func scramHash(mechanism string) func() hash.Hash {
	if mechanism == ScramSHA512 {
		return sha512.New
	}
	return sha256.New
}

// DeriveScram returns the credential stored for a salted password (RFC
// 5802's SaltedPassword, what AlterUserScramCredentials carries), as
// Kafka's ScramFormatter.generateCredential: StoredKey is H(HMAC(salted,
// "Client Key")) and ServerKey is HMAC(salted, "Server Key").
func DeriveScram(mechanism string, salt, saltedPassword []byte, iterations int) ScramCredential {
	h := scramHash(mechanism)
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(h, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	d := h()
	d.Write(mac(saltedPassword, "Client Key"))
	return ScramCredential{Salt: append([]byte(nil), salt...), StoredKey: d.Sum(nil),
		ServerKey: mac(saltedPassword, "Server Key"), Iterations: iterations}
}

// SaltedPassword is RFC 5802's Hi(password, salt, iterations), PBKDF2
// with the mechanism's HMAC, on the password's UTF-8 bytes as Kafka's
// ScramFormatter.normalize.
func SaltedPassword(mechanism, password string, salt []byte, iterations int) ([]byte, error) {
	return pbkdf2.Key(scramHash(mechanism), password, salt, iterations, scramHash(mechanism)().Size())
}

package sasl

import (
	"bytes"
	"crypto/subtle"
	"fmt"
	"strings"
)

// plainServer is Kafka's PlainSaslServer (RFC 4616) with
// PlainServerCallbackHandler: the single client message is
// authzid NUL authcid NUL passwd, checked against the JAAS user_<name>
// options.
type plainServer struct {
	users    map[string]string
	complete bool
	done     bool
	user     string
}

func (s *plainServer) Mechanism() string       { return Plain }
func (s *plainServer) Complete() bool          { return s.complete }
func (s *plainServer) AuthorizationID() string { return s.user }

func (s *plainServer) Evaluate(token []byte) ([]byte, error) {
	if s.done {
		return nil, ErrIllegalState
	}
	s.done = true
	// As PlainSaslServer: the token is decoded as UTF-8, malformed bytes
	// becoming U+FFFD, never refused for that alone.
	token = []byte(strings.ToValidUTF8(string(token), "\uFFFD"))
	parts := bytes.Split(token, []byte{0})
	if len(parts) != 3 {
		// As PlainSaslServer.extractTokens.
		return nil, &ClientError{Message: fmt.Sprintf("Invalid SASL/PLAIN response: expected 3 tokens, got %d", len(parts))}
	}
	authzid, user, password := string(parts[0]), string(parts[1]), parts[2]
	if user == "" {
		return nil, &ClientError{Message: "Authentication failed: username not specified"}
	}
	if len(password) == 0 {
		return nil, &ClientError{Message: "Authentication failed: password not specified"}
	}
	want, ok := s.users[user]
	// Compare even for an unknown user, so that the time taken does not
	// tell which users exist.
	if subtle.ConstantTimeCompare([]byte(want), password) != 1 || !ok {
		return nil, &ClientError{Message: "Authentication failed: Invalid username or password"}
	}
	if authzid != "" && authzid != user {
		return nil, &ClientError{Message: "Authentication failed: Client requested an authorization id that is different from username"}
	}
	s.user, s.complete = user, true
	return []byte{}, nil
}

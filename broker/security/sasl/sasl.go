package sasl

import (
	"errors"
	"fmt"
)

// Mechanism names, as Kafka spells them in sasl.enabled.mechanisms.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

var (
	// ErrAuthentication is wrapped by every failed exchange.
	ErrAuthentication = errors.New("sasl: authentication failed")
	// ErrInvalidCredentials is wrapped when the client's credentials are
	// wrong or unknown; the client is told only that the credentials
	// were invalid.
	ErrInvalidCredentials = fmt.Errorf("%w: invalid credentials", ErrAuthentication)
	// ErrUnsupportedMechanism is returned by NewServer for a mechanism
	// this package does not serve.
	ErrUnsupportedMechanism = errors.New("sasl: unsupported mechanism")
	// ErrIllegalState is returned by Evaluate after the exchange has
	// completed or failed.
	ErrIllegalState = errors.New("sasl: exchange already completed or failed")
)

// ClientError is a failure whose message the client is shown, as Kafka's
// SaslAuthenticationException.
type ClientError struct {
	Message string
}

func (e *ClientError) Error() string { return e.Message }

// Unwrap makes every ClientError an ErrAuthentication.
func (e *ClientError) Unwrap() error { return ErrAuthentication }

// ClientMessage returns what the client is told.
func (e *ClientError) ClientMessage() string { return e.Message }

// Server is one mechanism's side of one exchange, as
// javax.security.sasl.SaslServer.
type Server interface {
	// Mechanism is the mechanism's name.
	Mechanism() string
	// Evaluate takes the client's next token and returns the server's
	// next challenge (empty when there is none).
	Evaluate(token []byte) ([]byte, error)
	// Complete reports whether the exchange succeeded.
	Complete() bool
	// AuthorizationID is the authenticated user name once Complete.
	AuthorizationID() string
}

// Credentials are what the servers check a client's credentials against.
type Credentials struct {
	// Plain maps a PLAIN user name to its password (the JAAS user_<name>
	// options).
	Plain map[string]string
	// Scram looks up a user's SCRAM credential for a mechanism; ok is
	// false for an unknown user.
	Scram func(mechanism, user string) (ScramCredential, bool)
}

// ScramCredential is one user's stored SCRAM credential, as Kafka's
// ScramCredential and UserScramCredentialRecord.
type ScramCredential struct {
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int
}

// NewServer starts one exchange of mechanism.
func NewServer(mechanism string, creds Credentials) (Server, error) {
	switch mechanism {
	case Plain:
		return &plainServer{users: creds.Plain}, nil
	case ScramSHA256, ScramSHA512:
		return newScramServer(mechanism, creds.Scram)
	}
	return nil, fmt.Errorf("%w: %s", ErrUnsupportedMechanism, mechanism)
}

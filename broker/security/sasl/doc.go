// Package sasl holds the server side of the SASL mechanisms Cascade's SASL
// listeners accept: PLAIN (Kafka's PlainSaslServer, users from the
// PlainLoginModule's JAAS options) and SCRAM-SHA-256 and SCRAM-SHA-512
// (Kafka's ScramSaslServer, RFC 5802, on github.com/xdg-go/scram, with
// credentials the caller looks up, from the metadata log's
// UserScramCredentialRecords). It does no I/O: the connection hands it each
// client token and sends back what it returns.
//
//	users, err := sasl.ParsePlainJAAS(`org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="pw";`)
//	srv, err := sasl.NewServer("PLAIN", sasl.Credentials{Plain: users})
//	challenge, err := srv.Evaluate([]byte("\x00alice\x00pw"))
//	srv.Complete(), srv.AuthorizationID() // true, "alice"
//
// Errors: an error wrapping ErrAuthentication whose ClientMessage is
// meant for the client (Kafka's SaslAuthenticationException), or
// ErrInvalidCredentials, whose detail the client is never shown (Kafka's
// SaslException: the existence of a user must not leak).
package sasl

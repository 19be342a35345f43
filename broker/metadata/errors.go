package metadata

import (
	"errors"
	"fmt"
)

// Sentinel errors of the store's operations. Each names the Kafka error
// code the handler edge answers; errors.Is matches them, and Error() is the
// message Kafka would send.
var (
	ErrTopicExists              = errors.New("TOPIC_ALREADY_EXISTS")
	ErrInvalidTopic             = errors.New("INVALID_TOPIC_EXCEPTION")
	ErrInvalidPartitions        = errors.New("INVALID_PARTITIONS")
	ErrInvalidReplicationFactor = errors.New("INVALID_REPLICATION_FACTOR")
	ErrInvalidReplicaAssignment = errors.New("INVALID_REPLICA_ASSIGNMENT")
	ErrInvalidRequest           = errors.New("INVALID_REQUEST")
	ErrInvalidConfig            = errors.New("INVALID_CONFIG")
	ErrUnknownTopic             = errors.New("UNKNOWN_TOPIC_OR_PARTITION")
	ErrUnknownTopicID           = errors.New("UNKNOWN_TOPIC_ID")
	ErrPolicyViolation          = errors.New("POLICY_VIOLATION")
	ErrStorage                  = errors.New("KAFKA_STORAGE_ERROR")
	ErrTopicAuthorization       = errors.New("TOPIC_AUTHORIZATION_FAILED")
)

// Error is an operation's failure: a sentinel kind and Kafka's message
// (empty where Kafka sends none).
type Error struct {
	Kind    error
	Message string
}

// Error returns the Kafka-style message, or the kind's name when Kafka
// sends no message for this error.
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Kind.Error()
	}
	return e.Message
}

// Unwrap returns the kind, so errors.Is(err, ErrTopicExists) works.
func (e *Error) Unwrap() error { return e.Kind }

func newErr(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

package controller

import (
	"errors"
	"fmt"

	"github.com/cascade-kafka/cascade/broker/metadata"
)

// Sentinel errors of the controller's operations. Each names the Kafka
// error code the handler edge answers. Failures are *metadata.Error values
// whose Kind is one of these (or one of package metadata's, which the topic
// operations share, re-exported here where the controller returns them
// itself), so errors.Is works and Error() is Kafka's message.
var (
	ErrStaleBrokerEpoch            = errors.New("STALE_BROKER_EPOCH")
	ErrInconsistentClusterID       = errors.New("INCONSISTENT_CLUSTER_ID")
	ErrDuplicateBrokerRegistration = errors.New("DUPLICATE_BROKER_REGISTRATION")
	ErrInvalidRegistration         = errors.New("INVALID_REGISTRATION")
	ErrUnsupportedVersion          = errors.New("UNSUPPORTED_VERSION")
	ErrBrokerIDNotRegistered       = errors.New("BROKER_ID_NOT_REGISTERED")
	ErrNotController               = errors.New("NOT_CONTROLLER")
	ErrFencedLeaderEpoch           = errors.New("FENCED_LEADER_EPOCH")
	ErrInvalidUpdateVersion        = errors.New("INVALID_UPDATE_VERSION")
	ErrIneligibleReplica           = errors.New("INELIGIBLE_REPLICA")
	ErrNewLeaderElected            = errors.New("NEW_LEADER_ELECTED")
	ErrElectionNotNeeded           = errors.New("ELECTION_NOT_NEEDED")
	ErrPreferredLeaderNotAvailable = errors.New("PREFERRED_LEADER_NOT_AVAILABLE")
	ErrEligibleLeadersNotAvailable = errors.New("ELIGIBLE_LEADERS_NOT_AVAILABLE")
	ErrUnknownServerError          = errors.New("UNKNOWN_SERVER_ERROR")
	ErrInvalidRequest              = metadata.ErrInvalidRequest
	ErrUnknownTopicOrPartition     = metadata.ErrUnknownTopic
	ErrUnknownTopicID              = metadata.ErrUnknownTopicID
)

func newErr(kind error, format string, args ...any) error {
	return &metadata.Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// codeErr is an error Kafka sends without a message.
func codeErr(kind error) error { return &metadata.Error{Kind: kind} }

func isKind(err, kind error) bool { return errors.Is(err, kind) }

package replica

import "errors"

// Errors of the replica state machine, named for the Kafka error code the
// handler edge answers with. The AlterPartition errors are the
// controller's answers as the I/O shell hands them to AlterPartitionResult.
var (
	ErrNotLeaderOrFollower          = errors.New("NOT_LEADER_OR_FOLLOWER")
	ErrFencedLeaderEpoch            = errors.New("FENCED_LEADER_EPOCH")
	ErrUnknownLeaderEpoch           = errors.New("UNKNOWN_LEADER_EPOCH")
	ErrOffsetOutOfRange             = errors.New("OFFSET_OUT_OF_RANGE")
	ErrNotEnoughReplicas            = errors.New("NOT_ENOUGH_REPLICAS")
	ErrNotEnoughReplicasAfterAppend = errors.New("NOT_ENOUGH_REPLICAS_AFTER_APPEND")
	ErrInvalidUpdateVersion         = errors.New("INVALID_UPDATE_VERSION")
	ErrIneligibleReplica            = errors.New("INELIGIBLE_REPLICA")
	ErrOperationNotAttempted        = errors.New("OPERATION_NOT_ATTEMPTED")
	ErrUnknownTopicOrPartition      = errors.New("UNKNOWN_TOPIC_OR_PARTITION")
	ErrUnknownTopicID               = errors.New("UNKNOWN_TOPIC_ID")
	ErrInvalidRequest               = errors.New("INVALID_REQUEST")
	ErrNewLeaderElected             = errors.New("NEW_LEADER_ELECTED")
)

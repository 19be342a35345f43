package handler

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/metadata"
	"github.com/cascade-kafka/cascade/broker/partition"
)

// errorCodes maps the sentinel errors of the packages below the handlers to
// Kafka error codes. Errors stay Go errors inside the broker; this table is
// the only place they become codes. The first match wins, so more specific
// sentinels come first. Other handler files may append their packages'
// sentinels from init.
var errorCodes = []struct {
	err  error
	code int16
}{
	{log.ErrCorrupt, kerr.CorruptMessage.Code},
	{log.ErrInvalidRecord, kerr.InvalidRecord.Code},
	{log.ErrMessageTooLarge, kerr.MessageTooLarge.Code},
	{log.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber.Code},
	{log.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch.Code},
	{log.ErrInvalidTxnState, kerr.InvalidTxnState.Code},
	{log.ErrUnknownProducerID, kerr.UnknownProducerID.Code},
	{log.ErrOffsetOutOfRange, kerr.OffsetOutOfRange.Code},
	{log.ErrInvalidTimestamp, kerr.InvalidTimestamp.Code},
	{log.ErrStorage, kerr.KafkaStorageError.Code},
	// A closed log or a removed partition is no longer led here: the
	// client refreshes metadata, as after a leader move in Kafka.
	{log.ErrClosed, kerr.NotLeaderForPartition.Code},
	{partition.ErrDeleted, kerr.NotLeaderForPartition.Code},
	{metadata.ErrTopicExists, kerr.TopicAlreadyExists.Code},
	{metadata.ErrInvalidTopic, kerr.InvalidTopicException.Code},
	{metadata.ErrInvalidPartitions, kerr.InvalidPartitions.Code},
	{metadata.ErrInvalidReplicationFactor, kerr.InvalidReplicationFactor.Code},
	{metadata.ErrInvalidReplicaAssignment, kerr.InvalidReplicaAssignment.Code},
	{metadata.ErrInvalidRequest, kerr.InvalidRequest.Code},
	{metadata.ErrInvalidConfig, kerr.InvalidConfig.Code},
	{metadata.ErrUnknownTopic, kerr.UnknownTopicOrPartition.Code},
	{metadata.ErrUnknownTopicID, kerr.UnknownTopicID.Code},
	{metadata.ErrPolicyViolation, kerr.PolicyViolation.Code},
	{metadata.ErrStorage, kerr.KafkaStorageError.Code},
	{metadata.ErrClosed, kerr.KafkaStorageError.Code},
	{config.ErrUnknown, kerr.InvalidConfig.Code},
	{config.ErrInvalid, kerr.InvalidConfig.Code},
}

// registerErrorCode adds a sentinel to the table; call it from init.
func registerErrorCode(err error, code int16) {
	errorCodes = append(errorCodes, struct {
		err  error
		code int16
	}{err, code})
}

// ErrorCode returns the Kafka error code for err: 0 for nil, the mapped code
// for a known sentinel (wrapped or not), UNKNOWN_SERVER_ERROR otherwise, as
// Kafka's Errors.forException does for an unexpected exception.
func ErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	for _, e := range errorCodes {
		if errors.Is(err, e.err) {
			return e.code
		}
	}
	return kerr.UnknownServerError.Code
}

// defaultMessage returns the default message of a Kafka error code, which
// Kafka sends where an ApiError is built from the code alone (ApiError(Errors)
// takes Errors.message()); nil for no error or an unknown code. franz-go's
// kerr descriptions are Kafka's default messages.
func defaultMessage(code int16) *string {
	var ke *kerr.Error
	if code == 0 || !errors.As(kerr.ErrorForCode(code), &ke) || ke.Description == "" {
		return nil
	}
	s := ke.Description
	return &s
}

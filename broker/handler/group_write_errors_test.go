package handler

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/partition"
)

// errorCodeCase is one row of a table of append errors and the Kafka
// error code a client is answered for each.
type errorCodeCase struct {
	err  error
	want int16
}

// checkErrorCodes runs code on every row of cases and reports the rows
// whose answer differs from the expected code.
func checkErrorCodes(t *testing.T, cases []errorCodeCase, code func(error) int16) {
	t.Helper()
	for _, tc := range cases {
		if got := code(tc.err); got != tc.want {
			t.Errorf("%v: got %s, want %s", tc.err, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
		}
	}
}

// TestCoordinatorWriteErrorCode holds the mapping of Kafka's
// CoordinatorOperationExceptionHelper.handleOperationException, for Kafka
// errors and for the log's sentinels that reach the group coordinator.
func TestCoordinatorWriteErrorCode(t *testing.T) {
	checkErrorCodes(t, []errorCodeCase{
		{kerr.UnknownTopicOrPartition, kerr.CoordinatorNotAvailable.Code},
		{kerr.NotEnoughReplicas, kerr.CoordinatorNotAvailable.Code},
		{kerr.RequestTimedOut, kerr.CoordinatorNotAvailable.Code},
		{kerr.NotLeaderForPartition, kerr.NotCoordinator.Code},
		{kerr.KafkaStorageError, kerr.NotCoordinator.Code},
		{kerr.MessageTooLarge, kerr.UnknownServerError.Code},
		{kerr.RecordListTooLarge, kerr.UnknownServerError.Code},
		{kerr.InvalidFetchSize, kerr.UnknownServerError.Code},
		{kerr.NetworkException, kerr.CoordinatorLoadInProgress.Code},
		{kerr.InvalidProducerEpoch, kerr.InvalidProducerEpoch.Code},
		{kerr.CorruptMessage, kerr.CorruptMessage.Code},
		{fmt.Errorf("append: %w: batch of 2000000 bytes", log.ErrMessageTooLarge), kerr.UnknownServerError.Code},
		{fmt.Errorf("append: %w", log.ErrStorage), kerr.NotCoordinator.Code},
		{fmt.Errorf("append: %w", log.ErrClosed), kerr.NotCoordinator.Code},
		{fmt.Errorf("%w: __consumer_offsets-3 not hosted", partition.ErrDeleted), kerr.NotCoordinator.Code},
		{fmt.Errorf("append: %w", log.ErrOutOfOrderSequence), kerr.OutOfOrderSequenceNumber.Code},
		{errors.New("unexpected"), kerr.UnknownServerError.Code},
	}, coordinatorWriteErrorCode)
}

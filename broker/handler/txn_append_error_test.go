package handler

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/partition"
)

// TestTxnAppendErrorCodes checks the codes a failed __transaction_state
// append gives the client, as TransactionStateManager.appendTransactionToLog
// maps them.
func TestTxnAppendErrorCodes(t *testing.T) {
	checkErrorCodes(t, []errorCodeCase{
		{partition.ErrDeleted, kerr.NotCoordinator.Code},
		{fmt.Errorf("append: %w", log.ErrClosed), kerr.NotCoordinator.Code},
		{fmt.Errorf("append: %w", log.ErrStorage), kerr.NotCoordinator.Code},
		{fmt.Errorf("append: %w", log.ErrMessageTooLarge), kerr.UnknownServerError.Code},
	}, func(err error) int16 { return txnErrorCode(txnAppendError(err), false) })
	other := errors.New("disk on fire")
	if got := txnAppendError(other); got != other {
		t.Errorf("unmapped error changed: %v", got)
	}
}

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
	for _, tc := range []struct {
		err  error
		want int16
	}{
		{partition.ErrDeleted, kerr.NotCoordinator.Code},
		{fmt.Errorf("append: %w", log.ErrClosed), kerr.NotCoordinator.Code},
		{fmt.Errorf("append: %w", log.ErrStorage), kerr.NotCoordinator.Code},
		{fmt.Errorf("append: %w", log.ErrMessageTooLarge), kerr.UnknownServerError.Code},
	} {
		if got := txnErrorCode(txnAppendError(tc.err), false); got != tc.want {
			t.Errorf("%v: code %d, want %d", tc.err, got, tc.want)
		}
	}
	other := errors.New("disk on fire")
	if got := txnAppendError(other); got != other {
		t.Errorf("unmapped error changed: %v", got)
	}
}

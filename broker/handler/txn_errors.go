package handler

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/record"
	"github.com/cascade-kafka/cascade/broker/txn"
)

// The transaction coordinator's errors as Kafka codes.
func init() {
	for _, e := range []struct {
		err  error
		code int16
	}{
		{txn.ErrInvalidRequest, kerr.InvalidRequest.Code},
		{txn.ErrInvalidTimeout, kerr.InvalidTransactionTimeout.Code},
		{txn.ErrConcurrentTransactions, kerr.ConcurrentTransactions.Code},
		{txn.ErrProducerFenced, kerr.ProducerFenced.Code},
		{txn.ErrInvalidProducerIDMapping, kerr.InvalidProducerIDMapping.Code},
		{txn.ErrInvalidTxnState, kerr.InvalidTxnState.Code},
		{txn.ErrTransactionAbortable, kerr.TransactionAbortable.Code},
		{txn.ErrTransactionalIDNotFound, kerr.TransactionalIDNotFound.Code},
		{txn.ErrNotCoordinator, kerr.NotCoordinator.Code},
		{txn.ErrCoordinatorNotAvailable, kerr.CoordinatorNotAvailable.Code},
		{txn.ErrCoordinatorLoading, kerr.CoordinatorLoadInProgress.Code},
		{txn.ErrUnknown, kerr.UnknownServerError.Code},
		// A marker with an older coordinator epoch than the partition
		// has seen (WriteTxnMarkers from a stale coordinator or tool).
		{log.ErrCoordinatorFenced, kerr.TransactionCoordinatorFenced.Code},
		// A transactional batch older than the partition's epoch for
		// its producer (UnifiedLog.maybeStartTransactionVerification).
		{errStaleEpoch, kerr.InvalidProducerEpoch.Code},
	} {
		registerErrorCode(e.err, e.code)
	}
}

// txnErrorCode maps a coordinator error to the code a request of an API
// version expects: before KIP-588 (fencedIsEpoch) PRODUCER_FENCED is
// answered INVALID_PRODUCER_EPOCH, as KafkaApis does per API version. A
// context ended by the connection closing is COORDINATOR_NOT_AVAILABLE
// (nobody reads it).
func txnErrorCode(err error, fencedIsEpoch bool) int16 {
	switch {
	case err == nil:
		return 0
	case fencedIsEpoch && errors.Is(err, txn.ErrProducerFenced):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return kerr.CoordinatorNotAvailable.Code
	}
	return ErrorCode(err)
}

// InitTransactionalProducerID answers InitProducerId for a transactional
// id: 22_init_producer_id.go calls it when TransactionalID is set. It
// returns the producer id, epoch and error code; PRODUCER_FENCED is
// INVALID_PRODUCER_EPOCH before v4 (KIP-588).
func InitTransactionalProducerID(ctx context.Context, env *Env, r *kmsg.InitProducerIDRequest) (int64, int16, int16) {
	if env.Txn == nil {
		return -1, -1, kerr.CoordinatorNotAvailable.Code
	}
	id := ""
	if r.TransactionalID != nil {
		id = *r.TransactionalID
	}
	pid, epoch := int64(-1), int16(-1)
	if r.Version >= 3 {
		pid, epoch = r.ProducerID, r.ProducerEpoch
	}
	p, e, err := env.Txn.InitProducerID(ctx, id, r.TransactionTimeoutMillis, pid, epoch)
	if err != nil {
		return -1, -1, txnErrorCode(err, r.Version < 4)
	}
	return p, e, 0
}

// txnAppendGuard is called by Produce before appending records to a
// partition. For a transactional batch it makes sure the partition is part
// of the producer's ongoing transaction (BeginTransactionalAppend: Kafka's
// transaction.partition.verification.enable, KIP-890 part 1, and from
// Produce v12 the implicit add of transactions v2, KIP-890 part 2; only a
// producer's first batch of a transaction in the partition asks the
// coordinator) and returns a release to call after the append: until then
// the producer's markers wait, so no record of a transaction lands after
// the marker ending it.
// As Kafka's AddPartitionsToTxnManager, a coordinator that is busy or
// moving answers NOT_ENOUGH_REPLICAS so that the producer retries, and a
// partition outside the transaction is TRANSACTION_ABORTABLE (before
// Produce v11, INVALID_TXN_STATE).
func txnAppendGuard(env *Env, transactionalID *string, timeoutMs int32, version int16, topic string, part int32, records []byte) (func(), int16) {
	noop := func() {}
	b, _, err := record.Next(records)
	if err != nil || len(b) < record.HeaderSize || !b.Transactional() {
		// Malformed sets are refused by the append itself.
		return noop, 0
	}
	if transactionalID == nil {
		// As KafkaApis.handleProduceRequest: transactional records need
		// the request's transactional id.
		return nil, kerr.TransactionalIDAuthorizationFailed.Code
	}
	if env.Txn == nil {
		return noop, kerr.NotEnoughReplicas.Code
	}
	pid, epoch := b.ProducerID(), b.ProducerEpoch()
	if timeoutMs <= 0 {
		timeoutMs = 30000
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(timeoutMs)*time.Millisecond)
	defer cancel()
	// Produce v12 comes from transactions v2 producers, which add partitions
	// implicitly (AddPartitionsToTxnManager.produceRequestVersionToTransactionSupportedOperation).
	release, err := env.Txn.BeginTransactionalAppend(ctx, *transactionalID, pid, epoch, txn.TopicPartition{Topic: topic, Partition: part}, version >= 12)
	switch {
	case err == nil:
		return release, 0
	case errors.Is(err, txn.ErrConcurrentTransactions), errors.Is(err, txn.ErrNotCoordinator),
		errors.Is(err, txn.ErrCoordinatorNotAvailable), errors.Is(err, txn.ErrCoordinatorLoading),
		errors.Is(err, context.DeadlineExceeded):
		return nil, kerr.NotEnoughReplicas.Code
	case errors.Is(err, txn.ErrTransactionAbortable) && version < 11:
		return nil, kerr.InvalidTxnState.Code
	case errors.Is(err, txn.ErrProducerFenced):
		// Produce has no PRODUCER_FENCED; Kafka answers the epoch error.
		return nil, kerr.InvalidProducerEpoch.Code
	}
	return nil, ErrorCode(err)
}

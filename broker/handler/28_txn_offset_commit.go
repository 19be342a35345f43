package handler

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/group"
	"github.com/cascade-kafka/cascade/broker/txn"
)

// TxnOffsetCommit: v0-5
//
//   - v1: no change (throttle after response)
//   - v2: LeaderEpoch per partition
//   - v3: flexible; Generation, MemberID, InstanceID (KIP-447), and
//     PRODUCER_FENCED replaces INVALID_PRODUCER_EPOCH (KIP-588)
//   - v4: the TRANSACTION_ABORTABLE error (KIP-890)
//   - v5: transactions v2 (KIP-890 part 2): the request also does what
//     AddOffsetsToTxn did, adding the group's __consumer_offsets partition
//     to the transaction (Kafka's
//     txnOffsetCommitRequestVersionToTransactionSupportedOperation)
//
// v6 (topic ids, KIP-1319) is not advertised yet.
//
// Below v5, as Kafka with transaction.partition.verification.enable
// (KIP-890 part 1), the group's __consumer_offsets partition must already
// be part of the producer's transaction (AddOffsetsToTxn). The producer's
// gate is held while the group coordinator writes the offsets, so that they
// land before the transaction's marker; the group coordinator keeps them
// pending until that marker.
func init() { register(28, 0, 5, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.TxnOffsetCommitRequest)
	if env.Txn == nil || env.Groups == nil {
		return group.ErrorResponse(r, kerr.CoordinatorNotAvailable.Code), nil
	}
	tp := txn.TopicPartition{Topic: consumerOffsetsTopic, Partition: offsetsPartitionFor(env, r.Group)}
	release, err := env.Txn.BeginTransactionalAppend(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch, tp, r.Version >= 5)
	if err != nil {
		// As AddPartitionsToTxnManager, a fenced producer is
		// INVALID_PRODUCER_EPOCH at every version (checked against Kafka 4
		// by TestTxnV2SequenceMatchesKafka).
		code := txnErrorCode(err, true)
		if errors.Is(err, txn.ErrTransactionAbortable) && r.Version < 4 {
			code = kerr.InvalidTxnState.Code
		}
		env.Metrics.Error(req.Key, code)
		return group.ErrorResponse(r, code), nil
	}
	defer release()
	return groupRequest(ctx, env, req)
}

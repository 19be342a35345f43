package handler

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/group"
	"github.com/cascade-kafka/cascade/broker/txn"
)

// TxnOffsetCommit: v0-4
//
//   - v1: no change (throttle after response)
//   - v2: LeaderEpoch per partition
//   - v3: flexible; Generation, MemberID, InstanceID (KIP-447), and
//     PRODUCER_FENCED replaces INVALID_PRODUCER_EPOCH (KIP-588)
//   - v4: the TRANSACTION_ABORTABLE error (KIP-890)
//
// v5 (transactions v2: the offsets partition joins the transaction
// implicitly) is not implemented; clients use it only when the broker
// finalizes transaction.version 2.
//
// As Kafka with transaction.partition.verification.enable (KIP-890 part 1),
// the group's __consumer_offsets partition must already be part of the
// producer's transaction (AddOffsetsToTxn). The producer's gate is held
// while the group coordinator writes the offsets, so that they land before
// the transaction's marker; the group coordinator keeps them pending until
// that marker.
func init() { register(28, 0, 4, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.TxnOffsetCommitRequest)
	if env.Txn == nil || env.Groups == nil {
		return group.ErrorResponse(r, kerr.CoordinatorNotAvailable.Code), nil
	}
	tp := txn.TopicPartition{Topic: consumerOffsetsTopic, Partition: offsetsPartitionFor(env, r.Group)}
	release, err := env.Txn.BeginTransactionalAppend(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch, tp)
	if err != nil {
		code := txnErrorCode(err, r.Version < 3)
		if errors.Is(err, txn.ErrTransactionAbortable) && r.Version < 4 {
			code = kerr.InvalidTxnState.Code
		}
		env.Metrics.Error(req.Key, code)
		return group.ErrorResponse(r, code), nil
	}
	defer release()
	return groupRequest(ctx, env, req)
}

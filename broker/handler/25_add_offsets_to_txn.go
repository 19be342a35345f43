package handler

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/txn"
)

// AddOffsetsToTxn: v0-4
//
//   - v1: no change (throttle after response)
//   - v2: PRODUCER_FENCED replaces INVALID_PRODUCER_EPOCH (KIP-588)
//   - v3: flexible
//   - v4: no change (the TRANSACTION_ABORTABLE error, KIP-890)
//
// As KafkaApis.handleAddOffsetsToTxnRequest, the group's partition of
// __consumer_offsets joins the transaction, so that the transaction's
// markers also settle the offsets committed with TxnOffsetCommit.
func init() { register(25, 0, 4, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.AddOffsetsToTxnRequest)
	resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	resp.SetVersion(r.Version)
	// As KafkaApis.handleAddOffsetsToTxnRequest: WRITE on the
	// transactional id, then READ on the group.
	switch {
	case !env.authorize(req, acl.Write, acl.TransactionalID, r.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case !env.authorize(req, acl.Read, acl.Group, r.Group):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
	case env.Txn == nil:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	default:
		tp := txn.TopicPartition{Topic: consumerOffsetsTopic, Partition: offsetsPartitionFor(env, r.Group)}
		err := env.Txn.AddPartitions(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch, []txn.TopicPartition{tp}, 0)
		resp.ErrorCode = txnErrorCode(err, r.Version < 2)
	}
	env.Metrics.Error(req.Key, resp.ErrorCode)
	return resp, nil
}

// offsetsPartitionFor returns the __consumer_offsets partition of a group,
// as Kafka's GroupCoordinator.partitionFor.
func offsetsPartitionFor(env *Env, groupID string) int32 {
	n := env.Config.OffsetsTopicNumPartitions
	if t, ok := env.Meta.Image().Topic(consumerOffsetsTopic); ok && len(t.Partitions) > 0 {
		n = int32(len(t.Partitions))
	}
	return txn.PartitionFor(groupID, n)
}

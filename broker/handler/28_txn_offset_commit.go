package handler

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/group"
	"github.com/cascade-kafka/cascade/broker/metadata"
	"github.com/cascade-kafka/cascade/broker/txn"
)

// TxnOffsetCommit: v0-6
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
//   - v6: topics by id instead of name (KIP-1319); UNKNOWN_TOPIC_ID for an
//     id this broker does not know, and the group coordinator answers
//     GROUP_ID_NOT_FOUND and STALE_MEMBER_EPOCH where older versions get
//     ILLEGAL_GENERATION (Kafka's TxnOffsetCommitRequest
//     supportsGroupIdNotFoundError and supportsStaleMemberEpochError)
//
// A consumer group member's epoch is checked as for OffsetCommit (Kafka
// 4.4's ConsumerGroup.validateOffsetCommit): an older epoch passes for the
// partitions assigned to the member at or before it.
//
// As KafkaApis.handleTxnOffsetCommitRequest, the topics are checked here
// first, at every version: an unknown topic id answers UNKNOWN_TOPIC_ID for
// each of its partitions, a topic or partition that does not exist
// UNKNOWN_TOPIC_OR_PARTITION. Only the rest goes on, and only if anything
// is left, so a commit for unknown topics alone checks neither the
// transaction nor the group. The answers for the rest follow the refused
// topics (TxnOffsetCommitResponse's Builder.merge).
//
// Below v5, as Kafka with transaction.partition.verification.enable
// (KIP-890 part 1), the group's __consumer_offsets partition must already
// be part of the producer's transaction (AddOffsetsToTxn). The producer's
// gate is held while the group coordinator writes the offsets, so that they
// land before the transaction's marker; the group coordinator keeps them
// pending until that marker.
func init() { register(28, 0, 6, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.TxnOffsetCommitRequest)
	// As KafkaApis.handleTxnOffsetCommitRequest: WRITE on the
	// transactional id, then READ on the group, before any topic.
	switch {
	case !env.authorize(req, acl.Write, acl.TransactionalID, r.TransactionalID):
		return group.ErrorResponse(r, kerr.TransactionalIDAuthorizationFailed.Code), nil
	case !env.authorize(req, acl.Read, acl.Group, r.Group):
		return group.ErrorResponse(r, kerr.GroupAuthorizationFailed.Code), nil
	}
	resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	resp.SetVersion(r.Version)
	useIDs := r.Version >= 6
	answer := newCommitAnswer(&resp.Topics, useIDs,
		func(name string, id [16]byte) kmsg.TxnOffsetCommitResponseTopic {
			return kmsg.TxnOffsetCommitResponseTopic{Topic: name, TopicID: id}
		},
		func(t *kmsg.TxnOffsetCommitResponseTopic) (string, [16]byte, *[]kmsg.TxnOffsetCommitResponseTopicPartition) {
			return t.Topic, t.TopicID, &t.Partitions
		})
	var img *metadata.Image
	if env.Meta != nil {
		img = env.Meta.Image()
	}
	valid := *r
	valid.Topics = filterCommitTopics(img, useIDs, r.Topics,
		func(t *kmsg.TxnOffsetCommitRequestTopic) (*string, [16]byte, *[]kmsg.TxnOffsetCommitRequestTopicPartition) {
			return &t.Topic, t.TopicID, &t.Partitions
		},
		func(p *kmsg.TxnOffsetCommitRequestTopicPartition) int32 { return p.Partition },
		func(name string, id [16]byte, part int32, code int16) {
			answer.add(name, id, kmsg.TxnOffsetCommitResponseTopicPartition{Partition: part, ErrorCode: code})
			env.Metrics.Error(req.Key, code)
		}, env.topicAllowed(req, acl.Read))
	if len(valid.Topics) == 0 {
		return resp, nil
	}
	gr, err := txnOffsetCommitValid(ctx, env, req, &valid)
	if err != nil {
		return nil, err
	}
	cr := gr.(*kmsg.TxnOffsetCommitResponse)
	return answer.finish(r.Version, resp, cr, cr.Topics), nil
}

// txnOffsetCommitValid checks the producer's transaction and hands the
// commit of existing partitions r to the group coordinator.
func txnOffsetCommitValid(ctx context.Context, env *Env, req *Request, r *kmsg.TxnOffsetCommitRequest) (kmsg.Response, error) {
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
	fwd := *req
	fwd.Msg = r
	return groupRequest(ctx, env, &fwd)
}

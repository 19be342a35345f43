package handler

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

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
	resp, valid := filterTxnOffsetCommit(env, req, r)
	if len(valid.Topics) == 0 {
		return resp, nil
	}
	answer, err := txnOffsetCommitValid(ctx, env, req, valid)
	if err != nil {
		return nil, err
	}
	cr := answer.(*kmsg.TxnOffsetCommitResponse)
	if len(resp.Topics) == 0 {
		cr.SetVersion(r.Version)
		return cr, nil
	}
	resp.ThrottleMillis = cr.ThrottleMillis
	for _, ct := range cr.Topics {
		t := txnResponseTopic(resp, r.Version >= 6, ct.Topic, ct.TopicID)
		t.Partitions = append(t.Partitions, ct.Partitions...)
	}
	return resp, nil
}

// filterTxnOffsetCommit answers the partitions of r that name no existing
// topic partition in resp and returns the request of the rest, each topic
// carrying its name (resolved from its id at v6).
func filterTxnOffsetCommit(env *Env, req *Request, r *kmsg.TxnOffsetCommitRequest) (*kmsg.TxnOffsetCommitResponse, *kmsg.TxnOffsetCommitRequest) {
	resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	resp.SetVersion(r.Version)
	useIDs := r.Version >= 6
	refuse := func(name string, id [16]byte, part int32, code int16) {
		t := txnResponseTopic(resp, useIDs, name, id)
		t.Partitions = append(t.Partitions, kmsg.TxnOffsetCommitResponseTopicPartition{Partition: part, ErrorCode: code})
		env.Metrics.Error(req.Key, code)
	}
	valid := *r
	valid.Topics = nil
	var img *metadata.Image
	if env.Meta != nil {
		img = env.Meta.Image()
	}
	for _, rt := range r.Topics {
		var t *metadata.Topic
		ok := false
		name := rt.Topic
		switch {
		case img == nil:
		case useIDs:
			if t, ok = img.TopicByID(metadata.UUID(rt.TopicID)); ok {
				name = t.Name
			}
		default:
			t, ok = img.Topic(name)
		}
		if !ok {
			code := kerr.UnknownTopicOrPartition.Code
			if useIDs {
				code = kerr.UnknownTopicID.Code
			}
			for _, p := range rt.Partitions {
				refuse(name, rt.TopicID, p.Partition, code)
			}
			continue
		}
		kept := rt
		kept.Topic, kept.Partitions = name, nil
		for _, p := range rt.Partitions {
			if p.Partition < 0 || int(p.Partition) >= len(t.Partitions) {
				refuse(name, rt.TopicID, p.Partition, kerr.UnknownTopicOrPartition.Code)
				continue
			}
			kept.Partitions = append(kept.Partitions, p)
		}
		if len(kept.Partitions) > 0 {
			valid.Topics = append(valid.Topics, kept)
		}
	}
	return resp, &valid
}

// txnResponseTopic returns resp's topic of name (of id from v6), appending
// it when it is not there yet.
func txnResponseTopic(resp *kmsg.TxnOffsetCommitResponse, useIDs bool, name string, id [16]byte) *kmsg.TxnOffsetCommitResponseTopic {
	for i := range resp.Topics {
		if useIDs && resp.Topics[i].TopicID == id || !useIDs && resp.Topics[i].Topic == name {
			return &resp.Topics[i]
		}
	}
	resp.Topics = append(resp.Topics, kmsg.TxnOffsetCommitResponseTopic{Topic: name, TopicID: id})
	return &resp.Topics[len(resp.Topics)-1]
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

package handler

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/txn"
)

// AddPartitionsToTxn: v0-5
//
//   - v1: no change (throttle after response)
//   - v2: PRODUCER_FENCED replaces INVALID_PRODUCER_EPOCH (KIP-588)
//   - v3: flexible
//   - v4: the batched broker form: many transactions, VerifyOnly, a
//     top-level error code (KIP-890 part 1); clients use v3 and below.
//     Without VerifyOnly a v4+ request adds the partitions for a
//     transactions v2 producer (KIP-890 part 2), as Kafka's
//     TransactionVersion.transactionVersionForAddPartitionsToTxn: Cascade
//     does this in-process for Produce v12 and TxnOffsetCommit v5 when the
//     transactional id's coordinator is on the same node, sends this
//     request to it otherwise (txn_peers.go), and answers it for other
//     brokers and tools alike.
//   - v5: the TRANSACTION_ABORTABLE error (KIP-890); before it a partition
//     outside the transaction is INVALID_TXN_STATE
//
// As KafkaApis.handleAddPartitionsToTxnRequest, a partition of an unknown
// topic (on a cluster: one the metadata image does not have; its leader
// may be another node) fails with UNKNOWN_TOPIC_OR_PARTITION and the rest of its
// transaction with OPERATION_NOT_ATTEMPTED; otherwise every partition gets
// the coordinator's answer.
func init() { register(24, 0, 5, handleAddPartitionsToTxn) }

func handleAddPartitionsToTxn(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.AddPartitionsToTxnRequest)
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	resp.SetVersion(r.Version)
	if r.Version >= 4 && !env.authorizeCluster(req, acl.ClusterAction) {
		// As KafkaApis: v4+ comes from brokers only.
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	if r.Version < 4 {
		t := kmsg.NewAddPartitionsToTxnRequestTransaction()
		t.TransactionalID, t.ProducerID, t.ProducerEpoch = r.TransactionalID, r.ProducerID, r.ProducerEpoch
		for _, rt := range r.Topics {
			tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			tt.Topic, tt.Partitions = rt.Topic, rt.Partitions
			t.Topics = append(t.Topics, tt)
		}
		var codes map[txn.TopicPartition]int16
		if env.authorize(req, acl.Write, acl.TransactionalID, r.TransactionalID) {
			codes = addPartitionsOne(ctx, env, r.Version, t, env.topicAllowed(req, acl.Write))
		}
		for _, rt := range r.Topics {
			st := kmsg.NewAddPartitionsToTxnResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p, codes[txn.TopicPartition{Topic: rt.Topic, Partition: p}]
				if codes == nil {
					sp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
				}
				env.Metrics.Error(req.Key, sp.ErrorCode)
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	}
	for _, t := range r.Transactions {
		codes := addPartitionsOne(ctx, env, r.Version, t, nil)
		st := kmsg.NewAddPartitionsToTxnResponseTransaction()
		st.TransactionalID = t.TransactionalID
		for _, rt := range t.Topics {
			tt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			tt.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				sp.Partition, sp.ErrorCode = p, codes[txn.TopicPartition{Topic: rt.Topic, Partition: p}]
				env.Metrics.Error(req.Key, sp.ErrorCode)
				tt.Partitions = append(tt.Partitions, sp)
			}
			st.Topics = append(st.Topics, tt)
		}
		resp.Transactions = append(resp.Transactions, st)
	}
	return resp, nil
}

// addPartitionsOne handles one transaction of the request and returns a code
// per partition.
// allowed, when not nil, is the client's WRITE check of a topic (versions
// below 4, from clients); internal topics are never allowed, as
// KafkaApis.handleAddPartitionsToTxnRequest filters them out.
func addPartitionsOne(ctx context.Context, env *Env, version int16, t kmsg.AddPartitionsToTxnRequestTransaction,
	allowed func(string) bool) map[txn.TopicPartition]int16 {
	fencedIsEpoch := version < 2
	codes := map[txn.TopicPartition]int16{}
	var tps []txn.TopicPartition
	unknown := false
	for _, rt := range t.Topics {
		for _, p := range rt.Partitions {
			tp := txn.TopicPartition{Topic: rt.Topic, Partition: p}
			tps = append(tps, tp)
			if allowed != nil && (isInternalTopic(rt.Topic) || !allowed(rt.Topic)) {
				codes[tp] = kerr.TopicAuthorizationFailed.Code
				unknown = true
			} else if !env.partitionKnown(rt.Topic, p) {
				codes[tp] = kerr.UnknownTopicOrPartition.Code
				unknown = true
			}
		}
	}
	setAll := func(code int16) {
		for _, tp := range tps {
			if _, set := codes[tp]; !set {
				codes[tp] = code
			}
		}
	}
	switch {
	case unknown:
		setAll(kerr.OperationNotAttempted.Code)
	case env.Txn == nil:
		setAll(kerr.CoordinatorNotAvailable.Code)
	case t.VerifyOnly:
		res, err := env.Txn.Verify(ctx, t.TransactionalID, t.ProducerID, t.ProducerEpoch, tps)
		if err != nil {
			setAll(txnErrorCode(err, fencedIsEpoch))
			break
		}
		for tp, e := range res {
			codes[tp] = txnErrorCode(e, fencedIsEpoch)
			if codes[tp] == kerr.TransactionAbortable.Code && version < 5 {
				codes[tp] = kerr.InvalidTxnState.Code
			}
		}
	default:
		tv := int16(0)
		if version >= 4 {
			tv = 2
		}
		err := env.Txn.AddPartitions(ctx, t.TransactionalID, t.ProducerID, t.ProducerEpoch, tps, tv)
		setAll(txnErrorCode(err, fencedIsEpoch))
	}
	return codes
}

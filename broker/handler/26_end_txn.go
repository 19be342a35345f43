package handler

import (
	"context"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EndTxn: v0-5
//
//   - v1: no change (throttle after response)
//   - v2: PRODUCER_FENCED replaces INVALID_PRODUCER_EPOCH (KIP-588)
//   - v3: flexible
//   - v4: no change (the TRANSACTION_ABORTABLE error, KIP-890)
//   - v5: transactions v2 (KIP-890 part 2): the coordinator bumps the epoch
//     at every commit and abort and answers with the producer id and epoch
//     to use next (a new producer id at epoch 0 when the epoch is
//     exhausted), as Kafka's TransactionVersion.transactionVersionForEndTxn
//
// The response comes once the decision is logged in __transaction_state;
// markers are written after, as Kafka.
func init() { register(26, 0, 5, handleEndTxn) }

func handleEndTxn(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.EndTxnRequest)
	resp := r.ResponseKind().(*kmsg.EndTxnResponse)
	resp.SetVersion(r.Version)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	switch {
	case !env.authorize(req, acl.Write, acl.TransactionalID, r.TransactionalID):
		// As KafkaApis.handleEndTxnRequest.
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case env.Txn == nil:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	default:
		tv := int16(0)
		if r.Version >= 5 {
			tv = 2
		}
		pid, epoch, err := env.Txn.EndTxn(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit, tv)
		resp.ErrorCode = txnErrorCode(err, r.Version < 2)
		if err == nil {
			resp.ProducerID, resp.ProducerEpoch = pid, epoch
		}
	}
	env.Metrics.Error(req.Key, resp.ErrorCode)
	return resp, nil
}

package handler

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EndTxn: v0-4
//
//   - v1: no change (throttle after response)
//   - v2: PRODUCER_FENCED replaces INVALID_PRODUCER_EPOCH (KIP-588)
//   - v3: flexible
//   - v4: no change (the TRANSACTION_ABORTABLE error, KIP-890)
//
// v5 (transactions v2, an epoch bump at every commit) is not implemented:
// clients use it only when the broker finalizes transaction.version 2,
// which Cascade does not advertise. The response comes once the decision
// is logged in __transaction_state; markers are written after, as Kafka.
func init() { register(26, 0, 4, handleEndTxn) }

func handleEndTxn(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.EndTxnRequest)
	resp := r.ResponseKind().(*kmsg.EndTxnResponse)
	resp.SetVersion(r.Version)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if env.Txn == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	} else {
		err := env.Txn.EndTxn(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit)
		resp.ErrorCode = txnErrorCode(err, r.Version < 2)
	}
	env.Metrics.Error(req.Key, resp.ErrorCode)
	return resp, nil
}

package handler

import (
	"context"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerId: v0-5
//
//   - v1: no change (throttle after response)
//   - v2: flexible
//   - v3: ProducerID and ProducerEpoch for epoch bumps (KIP-360)
//   - v4: PRODUCER_FENCED replaces INVALID_PRODUCER_EPOCH (KIP-588)
//   - v5: transactions v2 (KIP-890)
//
// v6 (KIP-939 two-phase commit: Enable2Pc, KeepPreparedTxn) is not
// advertised: Kafka 4 marks it unstable, so its clients send v5, also with
// transactions v2.
//
// Idempotent producers (no transactional id) get a fresh durable producer
// id with epoch 0, as Kafka's TransactionCoordinator.handleInitProducerId
// does for a null transactional id. A transactional id goes to the
// transaction coordinator (InitTransactionalProducerID in txn_errors.go).
func init() { register(22, 0, 5, handleInitProducerID) }

func handleInitProducerID(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.InitProducerIDRequest)
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.SetVersion(r.Version)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	// As KafkaApis.handleInitProducerIdRequest: WRITE on the transactional
	// id; without one, IDEMPOTENT_WRITE on the cluster or WRITE on some
	// topic (KIP-679).
	switch {
	case r.TransactionalID != nil && !env.authorize(req, acl.Write, acl.TransactionalID, *r.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case r.TransactionalID == nil && !env.authorizeCluster(req, acl.IdempotentWrite) &&
		!env.authorizeByResourceType(req, acl.Write, acl.Topic):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	case r.TransactionalID == nil:
		id, err := env.Meta.NextProducerID()
		if err != nil {
			env.logger().Error("allocating producer id", "err", err)
			resp.ErrorCode = ErrorCode(err)
			if resp.ErrorCode == kerr.UnknownServerError.Code {
				resp.ErrorCode = kerr.KafkaStorageError.Code
			}
			break
		}
		resp.ProducerID, resp.ProducerEpoch = id, 0
	case *r.TransactionalID == "":
		resp.ErrorCode = kerr.InvalidRequest.Code
	default:
		resp.ProducerID, resp.ProducerEpoch, resp.ErrorCode = InitTransactionalProducerID(ctx, env, r)
	}
	env.Metrics.Error(req.Key, resp.ErrorCode)
	return resp, nil
}

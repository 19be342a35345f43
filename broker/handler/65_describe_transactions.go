package handler

import (
	"context"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeTransactions: v0 (KIP-664)
//
// As Kafka's TransactionCoordinator.handleDescribeTransactions: an unknown
// or expired id is TRANSACTIONAL_ID_NOT_FOUND; the partitions are those of
// the transaction in progress.
func init() { register(65, 0, 0, handleDescribeTransactions) }

func handleDescribeTransactions(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.DescribeTransactionsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	resp.SetVersion(r.Version)
	for _, id := range r.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		// An error leaves the other fields zero, as Kafka's
		// TransactionState() it sets only an error code on.
		if !env.authorize(req, acl.Describe, acl.TransactionalID, id) {
			// As KafkaApis.handleDescribeTransactionsRequest.
			st.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			env.Metrics.Error(req.Key, st.ErrorCode)
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		if env.Txn == nil {
			st.ErrorCode = kerr.CoordinatorNotAvailable.Code
		} else if d, err := env.Txn.DescribeTransaction(ctx, id); err != nil {
			st.ErrorCode = txnErrorCode(err, false)
		} else {
			st.State = d.State.String()
			st.TimeoutMillis = d.TimeoutMs
			st.StartTimestamp = d.StartMs
			st.ProducerID, st.ProducerEpoch = d.ProducerID, d.ProducerEpoch
			for _, tp := range d.Partitions {
				// Only the topics the client may describe are listed.
				if !env.authorizeTopic(req, acl.Describe, tp.Topic) {
					continue
				}
				if n := len(st.Topics); n == 0 || st.Topics[n-1].Topic != tp.Topic {
					t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
					t.Topic = tp.Topic
					st.Topics = append(st.Topics, t)
				}
				t := &st.Topics[len(st.Topics)-1]
				t.Partitions = append(t.Partitions, tp.Partition)
			}
		}
		env.Metrics.Error(req.Key, st.ErrorCode)
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}

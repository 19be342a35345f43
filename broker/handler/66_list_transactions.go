package handler

import (
	"context"
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/txn"
)

// ListTransactions: v0-2 (KIP-664)
//
//   - v1: DurationFilterMillis, transactions running longer than it (KIP-994)
//   - v2: TransactionalIDPattern, a regular expression the whole id must
//     match (KIP-1152)
//
// As Kafka's TransactionStateManager.listTransactionStates, filter states
// that are not states are echoed in UnknownStateFilters.
func init() { register(66, 0, 2, handleListTransactions) }

func handleListTransactions(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.ListTransactionsRequest)
	resp := r.ResponseKind().(*kmsg.ListTransactionsResponse)
	resp.SetVersion(r.Version)
	f := txn.ListFilter{States: r.StateFilters, ProducerIDs: r.ProducerIDFilters, DurationMs: -1}
	if r.Version >= 1 {
		f.DurationMs = r.DurationFilterMillis
	}
	var pattern *regexp.Regexp
	if r.Version >= 2 && r.TransactionalIDPattern != nil && *r.TransactionalIDPattern != "" {
		re, err := regexp.Compile(`^(?:` + *r.TransactionalIDPattern + `)$`)
		if err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			env.Metrics.Error(req.Key, resp.ErrorCode)
			return resp, nil
		}
		pattern = re
	}
	if env.Txn == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		env.Metrics.Error(req.Key, resp.ErrorCode)
		return resp, nil
	}
	ds, unknown, err := env.Txn.ListTransactions(ctx, f)
	if err != nil {
		resp.ErrorCode = txnErrorCode(err, false)
		env.Metrics.Error(req.Key, resp.ErrorCode)
		return resp, nil
	}
	resp.UnknownStateFilters = unknown
	for _, d := range ds {
		if pattern != nil && !pattern.MatchString(d.TransactionalID) {
			continue
		}
		// As KafkaApis.handleListTransactionsRequest: only the ids the
		// client may describe, the others dropped silently.
		if !env.authorize(req, acl.Describe, acl.TransactionalID, d.TransactionalID) {
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = d.TransactionalID, d.ProducerID, d.State.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}

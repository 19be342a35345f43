package handler

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator: v0-6
//
//   - v1: CoordinatorType (0 group, 1 transaction), ThrottleMillis, ErrorMessage
//   - v3: flexible
//   - v4: batched CoordinatorKeys (KIP-699)
//   - v5: no change (TRANSACTION_ABORTABLE, KIP-890)
//   - v6: share coordinator keys (KIP-932), answered INVALID_REQUEST
//
// On a single node this broker leads every partition of the internal
// topics, so it is every coordinator; on a cluster the coordinator node
// (Cluster.CoordinatorID) is, while it is live. As Kafka, a group key makes sure
// __consumer_offsets exists first; while it cannot be created the answer is
// COORDINATOR_NOT_AVAILABLE.
func init() { register(10, 0, 6, handleFindCoordinator) }

func handleFindCoordinator(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.FindCoordinatorRequest)
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	coord, live := env.coordinator()
	find := func(key string) (int16, *string) {
		if r.CoordinatorType == 0 || r.CoordinatorType == 1 {
			if !live {
				return kerr.CoordinatorNotAvailable.Code, nil
			}
			if env.notCoordinator() {
				// The coordinator node loads its state on the
				// group and transaction requests it receives.
				return 0, nil
			}
		}
		switch r.CoordinatorType {
		case 0:
			if env.Groups == nil || env.Groups.EnsureLoaded(ctx) != nil {
				return kerr.CoordinatorNotAvailable.Code, nil
			}
		case 1:
			if env.Txn == nil {
				return kerr.CoordinatorNotAvailable.Code, nil
			}
		default:
			msg := "Unsupported coordinator type"
			return kerr.InvalidRequest.Code, &msg
		}
		return 0, nil
	}
	if r.Version < 4 {
		resp.ErrorCode, resp.ErrorMessage = find(r.CoordinatorKey)
		resp.NodeID, resp.Host, resp.Port = -1, "", -1
		if resp.ErrorCode == 0 {
			resp.NodeID, resp.Host, resp.Port = coord.ID, coord.Host, coord.Port
		}
		return resp, nil
	}
	for _, key := range r.CoordinatorKeys {
		c := kmsg.FindCoordinatorResponseCoordinator{Key: key, NodeID: -1, Port: -1}
		c.ErrorCode, c.ErrorMessage = find(key)
		if c.ErrorCode == 0 {
			c.NodeID, c.Host, c.Port = coord.ID, coord.Host, coord.Port
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp, nil
}

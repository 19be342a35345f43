package handler

import (
	"context"

	"github.com/cascade-kafka/cascade/broker/acl"
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
// topics, so it is every coordinator; as Kafka, a group key makes sure
// __consumer_offsets exists first. On a cluster the coordinator of a key
// is the leader of its internal topic's partition (clusterCoordinator),
// the topic created on first use for either kind of key; without a live
// leader the answer is COORDINATOR_NOT_AVAILABLE, as it is while the topic
// cannot be created.
func init() { register(10, 0, 6, handleFindCoordinator) }

func handleFindCoordinator(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.FindCoordinatorRequest)
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	find := func(key string) (BrokerAddr, int16, *string) {
		self := BrokerAddr{ID: env.NodeID, Host: env.Host, Port: env.Port}
		// As KafkaApis.getCoordinator: DESCRIBE on the group or the
		// transactional id.
		switch {
		case r.CoordinatorType == 0 && !env.authorize(req, acl.Describe, acl.Group, key):
			return self, kerr.GroupAuthorizationFailed.Code, deniedMessage(r.Version, kerr.GroupAuthorizationFailed.Code)
		case r.CoordinatorType == 1 && !env.authorize(req, acl.Describe, acl.TransactionalID, key):
			return self, kerr.TransactionalIDAuthorizationFailed.Code, deniedMessage(r.Version, kerr.TransactionalIDAuthorizationFailed.Code)
		}
		switch r.CoordinatorType {
		case 0:
			if env.Groups == nil {
				return self, kerr.CoordinatorNotAvailable.Code, nil
			}
			if env.Cluster != nil {
				b, code := env.clusterCoordinator(r.CoordinatorType, key)
				return b, code, nil
			}
			if env.Groups.EnsureLoaded(ctx) != nil {
				return self, kerr.CoordinatorNotAvailable.Code, nil
			}
		case 1:
			if env.Txn == nil {
				return self, kerr.CoordinatorNotAvailable.Code, nil
			}
			if env.Cluster != nil {
				b, code := env.clusterCoordinator(r.CoordinatorType, key)
				return b, code, nil
			}
		default:
			msg := "Unsupported coordinator type"
			return self, kerr.InvalidRequest.Code, &msg
		}
		return self, 0, nil
	}
	if r.Version < 4 {
		var coord BrokerAddr
		coord, resp.ErrorCode, resp.ErrorMessage = find(r.CoordinatorKey)
		resp.NodeID, resp.Host, resp.Port = -1, "", -1
		if resp.ErrorCode == 0 {
			resp.NodeID, resp.Host, resp.Port = coord.ID, coord.Host, coord.Port
		}
		return resp, nil
	}
	for _, key := range r.CoordinatorKeys {
		c := kmsg.FindCoordinatorResponseCoordinator{Key: key, NodeID: -1, Port: -1}
		var coord BrokerAddr
		coord, c.ErrorCode, c.ErrorMessage = find(key)
		if c.ErrorCode == 0 {
			c.NodeID, c.Host, c.Port = coord.ID, coord.Host, coord.Port
			c.ErrorMessage = kmsg.StringPtr("") // as Kafka 4.4 answers a found coordinator
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp, nil
}

// deniedMessage is the message of a FindCoordinator denial: the code's
// default for one key (v1-3), an empty one per coordinator from v4, as
// Kafka answers them.
func deniedMessage(version, code int16) *string {
	if version >= 4 {
		return kmsg.StringPtr("")
	}
	return authMessage(code)
}

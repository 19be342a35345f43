package handler

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/log"
)

// OffsetForLeaderEpoch: v2-4
//
// Kafka 4's floor is v2 (KIP-896).
//   - v2: CurrentLeaderEpoch (KIP-320)
//   - v3: ReplicaID (consumers send -1)
//   - v4: flexible
func init() { register(23, 2, 4, handleOffsetForLeaderEpoch) }

func handleOffsetForLeaderEpoch(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.OffsetForLeaderEpochRequest)
	resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	resp.SetVersion(r.Version)
	// As KafkaApis.handleOffsetForLeaderEpochRequest: CLUSTER_ACTION (a
	// follower) or DESCRIBE on each topic (a consumer, KIP-320); denied
	// topics are answered after the others.
	replica := env.authorizeCluster(req, acl.ClusterAction)
	var denied []kmsg.OffsetForLeaderEpochResponseTopic
	for _, rt := range r.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		allowed := replica || env.authorizeTopic(req, acl.Describe, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			p := env.Partitions.Get(log.TopicPartition{Topic: rt.Topic, Partition: rp.Partition})
			switch {
			case !allowed:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case p == nil:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				sp.ErrorCode = checkLeaderEpoch(rp.CurrentLeaderEpoch, p.LeaderEpoch())
				if sp.ErrorCode == 0 {
					sp.LeaderEpoch, sp.EndOffset = p.EndOffsetForEpoch(rp.LeaderEpoch)
				}
			}
			env.Metrics.Error(req.Key, sp.ErrorCode)
			st.Partitions = append(st.Partitions, sp)
		}
		if !allowed {
			denied = append(denied, st)
			continue
		}
		resp.Topics = append(resp.Topics, st)
	}
	resp.Topics = append(resp.Topics, denied...)
	return resp, nil
}

package handler

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

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
	for _, rt := range r.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			p := env.Partitions.Get(log.TopicPartition{Topic: rt.Topic, Partition: rp.Partition})
			switch {
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
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

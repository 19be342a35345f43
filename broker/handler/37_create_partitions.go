package handler

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/metadata"
)

// CreatePartitions: v0-3
//
//   - v1: no change (throttling on quota violation)
//   - v2: flexible
//   - v3: no change (quota violations, KIP-599; Cascade has no quotas)
//
// A count may only grow (INVALID_PARTITIONS otherwise); a manual assignment
// must name one replica list per new partition, on this node. A topic named
// twice fails with INVALID_REQUEST, as ControllerApis.createPartitions.
// A new partition whose log cannot be opened here fails the topic with
// KAFKA_STORAGE_ERROR.
func init() { register(37, 0, 3, handleCreatePartitions) }

func handleCreatePartitions(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.CreatePartitionsRequest)
	resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
	resp.SetVersion(req.Version)

	count := map[string]int{}
	for _, t := range r.Topics {
		count[t.Topic]++
	}
	var reqs []metadata.CreatePartitions
	var denied []string
	for _, t := range r.Topics {
		if count[t.Topic] > 1 {
			continue
		}
		// As ControllerApis.createPartitions: ALTER on the topic.
		if !env.authorizeTopic(req, acl.Alter, t.Topic) {
			denied = append(denied, t.Topic)
			continue
		}
		cp := metadata.CreatePartitions{Name: t.Topic, Count: t.Count}
		if t.Assignment != nil {
			cp.Assignments = make([][]int32, 0, len(t.Assignment))
			for _, a := range t.Assignment {
				cp.Assignments = append(cp.Assignments, a.Replicas)
			}
		}
		reqs = append(reqs, cp)
	}
	dupReported := map[string]bool{}
	for _, t := range r.Topics {
		if count[t.Topic] > 1 && !dupReported[t.Topic] {
			dupReported[t.Topic] = true
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic = t.Topic
			rt.ErrorCode = kerr.InvalidRequest.Code
			msg := "Duplicate topic in request."
			rt.ErrorMessage = &msg
			env.Metrics.Error(req.Key, rt.ErrorCode)
			resp.Topics = append(resp.Topics, rt)
		}
	}
	for _, name := range denied {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = name
		rt.ErrorCode = kerr.TopicAuthorizationFailed.Code // Kafka sends no message
		env.Metrics.Error(req.Key, rt.ErrorCode)
		resp.Topics = append(resp.Topics, rt)
	}
	for _, res := range env.Meta.CreatePartitions(reqs, r.ValidateOnly) {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = res.Name
		if res.Err != nil {
			rt.ErrorCode = ErrorCode(res.Err)
			rt.ErrorMessage = errMessage(res.Err)
			env.Metrics.Error(req.Key, rt.ErrorCode)
		} else if t, ok := env.Meta.Image().Topic(res.Name); ok && !r.ValidateOnly {
			// The new partitions stay in the metadata (a partition count
			// never shrinks, and there is no record to take one back), as
			// Kafka keeps an offline replica's partition: each metadata
			// commit retries opening them, and a restart does. The
			// client is told KAFKA_STORAGE_ERROR rather than success
			// (see rollBackUnopened).
			if err := unopenedPartition(env, t); err != nil {
				rt.ErrorCode = kerr.KafkaStorageError.Code
				msg := err.Error()
				rt.ErrorMessage = &msg
				env.Metrics.Error(req.Key, rt.ErrorCode)
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

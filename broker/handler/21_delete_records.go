package handler

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/log"
)

// DeleteRecords: v0-2
//
//   - v1: no change (throttling on quota violation)
//   - v2: flexible
//
// Each partition's log start offset advances to the requested offset (-1:
// the high watermark), as Kafka's ReplicaManager.deleteRecords; an offset
// above the high watermark answers OFFSET_OUT_OF_RANGE, a topic whose
// cleanup.policy lacks delete answers POLICY_VIOLATION, and LowWatermark is
// the new log start offset. On a single node the high watermark is the log
// end, so no waiting on followers is needed and TimeoutMillis is not used.
func init() { register(21, 0, 2, handleDeleteRecords) }

func handleDeleteRecords(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.DeleteRecordsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteRecordsResponse)
	resp.SetVersion(req.Version)
	img := env.Meta.Image()
	for _, t := range r.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		// As KafkaApis.handleDeleteRecordsRequest: DELETE on the topic.
		allowed := env.authorizeTopic(req, acl.Delete, t.Topic)
		compactOnly := false
		if topic, ok := img.Topic(t.Topic); ok {
			if tc, err := resolveTopic(env, topic.Configs); err == nil {
				compactOnly = tc.Log.CleanupPolicy&log.PolicyDelete == 0
			}
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.LowWatermark = -1
			part := env.Partitions.Get(log.TopicPartition{Topic: t.Topic, Partition: p.Partition})
			switch {
			case !allowed:
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case part == nil:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case compactOnly:
				rp.ErrorCode = kerr.PolicyViolation.Code
			default:
				start, err := part.DeleteRecordsBefore(p.Offset)
				if err != nil {
					rp.ErrorCode = ErrorCode(err)
					if rp.ErrorCode == kerr.UnknownServerError.Code {
						env.logger().Error("delete records", "topic", t.Topic, "partition", p.Partition, "err", err)
					}
				} else {
					rp.LowWatermark = start
				}
			}
			if rp.ErrorCode != 0 {
				env.Metrics.Error(req.Key, rp.ErrorCode)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

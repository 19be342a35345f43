package handler

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/log"
)

// DescribeProducers: v0
//
//   - v0: KIP-664; flexible from the start
//
// The active producers of each partition come from the log's producer state
// (Kafka's ProducerStateManager.activeProducers): id, epoch, last sequence,
// last timestamp, coordinator epoch and the first offset of an open
// transaction (-1 when none). An unknown partition answers
// UNKNOWN_TOPIC_OR_PARTITION.
func init() { register(61, 0, 0, handleDescribeProducers) }

// producerLog is implemented by a partition log that reports its producer
// state.
type producerLog interface {
	ActiveProducers() []log.ProducerInfo
}

func handleDescribeProducers(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.DescribeProducersRequest)
	resp := r.ResponseKind().(*kmsg.DescribeProducersResponse)
	resp.SetVersion(req.Version)
	for _, t := range r.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		// As KafkaApis.handleDescribeProducersRequest: READ on the topic.
		allowed := env.authorizeTopic(req, acl.Read, t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = p
			part := env.Partitions.Get(log.TopicPartition{Topic: t.Topic, Partition: p})
			if !allowed {
				rp.ErrorCode, rp.ErrorMessage = kerr.TopicAuthorizationFailed.Code, authMessage(kerr.TopicAuthorizationFailed.Code)
			} else if part == nil {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else if pl, ok := part.Log().(producerLog); !ok {
				rp.ErrorCode = kerr.UnknownServerError.Code
				msg := "the partition's log does not report producer state"
				rp.ErrorMessage = &msg
			} else {
				for _, info := range pl.ActiveProducers() {
					ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
					ap.ProducerID = info.ProducerID
					ap.ProducerEpoch = int32(info.ProducerEpoch)
					ap.LastSequence = info.LastSequence
					ap.LastTimestamp = info.LastTimestamp
					ap.CoordinatorEpoch = info.CoordinatorEpoch
					ap.CurrentTxnStartOffset = info.CurrentTxnStartOffset
					rp.ActiveProducers = append(rp.ActiveProducers, ap)
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

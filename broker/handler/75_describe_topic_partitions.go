package handler

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/metadata"
)

// DescribeTopicPartitions: v0
//
// KIP-966's paged topic description, which Kafka 4's Admin.describeTopics
// (and so kafka-topics.sh --describe) uses instead of Metadata. Served as
// Kafka's DescribeTopicPartitionsRequestHandler and
// KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse:
//   - no topics lists every topic (internal ones too) and leaves out names
//     that do not exist; named topics that do not exist are answered
//     UNKNOWN_TOPIC_OR_PARTITION, or INVALID_TOPIC_EXCEPTION for a name no
//     topic could have, with a zero topic id;
//   - topics are answered once each, in name order, from the cursor's
//     topic (and from its partition within that topic) on;
//   - at most min(ResponsePartitionLimit, max.request.partition.size.limit)
//     partitions, at least 1; when a topic's partitions do not all fit, or
//     the limit is used up before the next topic, NextCursor names where
//     the next request starts;
//   - a cursor whose topic is not among the named topics, or whose
//     partition is negative, is INVALID_REQUEST for every named topic;
//   - each partition carries its leader (-1 for none), leader epoch,
//     replicas, ISR, offline replicas, and the eligible leader replicas and
//     last known ELR of KIP-966 from the metadata image;
//   - authorized operations are always sent: what the client may do on the
//     topic (every topic operation without an authorizer).
//
// Kafka's controllers do not serve it, so only broker listeners list it.
func init() { register(75, 0, 0, handleDescribeTopicPartitions) }

// maxRequestPartitionSizeLimit is Kafka's max.request.partition.size.limit
// default, used when the Env has no broker configuration.
const maxRequestPartitionSizeLimit = 2000

func handleDescribeTopicPartitions(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.DescribeTopicPartitionsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	img := env.Meta.Image()

	all := len(r.Topics) == 0
	from := ""
	if r.Cursor != nil {
		from = r.Cursor.Topic
	}
	var names []string
	if all {
		for _, t := range img.Topics() {
			names = append(names, t.Name)
		}
	} else {
		for _, t := range r.Topics {
			names = append(names, t.Topic)
		}
	}
	names = slices.DeleteFunc(names, func(n string) bool { return n < from })
	slices.Sort(names)
	names = slices.Compact(names)
	if c := r.Cursor; c != nil && (c.Partition < 0 || !all && !slices.Contains(names, c.Topic)) {
		// As DescribeTopicPartitionsRequest.getErrorResponse.
		for _, t := range r.Topics {
			rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
			name := t.Topic
			rt.Topic, rt.ErrorCode, rt.Partitions = &name, kerr.InvalidRequest.Code, []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
			resp.Topics = append(resp.Topics, rt)
		}
		env.Metrics.Error(req.Key, kerr.InvalidRequest.Code)
		return resp, nil
	}

	// As DescribeTopicPartitionsRequestHandler: topics the client may not
	// DESCRIBE are dropped (all topics) or answered last,
	// TOPIC_AUTHORIZATION_FAILED without an id (named).
	var denied []kmsg.DescribeTopicPartitionsResponseTopic
	names = slices.DeleteFunc(names, func(n string) bool {
		if env.authorizeTopic(req, acl.Describe, n) {
			return false
		}
		if !all {
			rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
			name := n
			rt.Topic, rt.ErrorCode, rt.Partitions = &name, kerr.TopicAuthorizationFailed.Code, []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
			env.Metrics.Error(req.Key, rt.ErrorCode)
			denied = append(denied, rt)
		}
		return true
	})
	defer func() { resp.Topics = append(resp.Topics, denied...) }()

	limit := int32(maxRequestPartitionSizeLimit)
	if env.Config != nil && env.Config.MaxRequestPartitionSizeLimit > 0 {
		limit = env.Config.MaxRequestPartitionSizeLimit
	}
	remaining := int(max(min(limit, r.ResponsePartitionLimit), 1))
	for _, name := range names {
		if remaining == 0 {
			// The cursor points at the start of the next topic, which
			// need not exist.
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name}
			break
		}
		t, ok := img.Topic(name)
		if !ok {
			if !all {
				resp.Topics = append(resp.Topics, unknownDescribedTopic(env, req, name))
			}
			continue
		}
		start := 0
		if r.Cursor != nil && name == r.Cursor.Topic {
			start = int(r.Cursor.Partition)
		}
		upper := min(len(t.Partitions), start+remaining)
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		rt.Topic, rt.TopicID, rt.IsInternal = &t.Name, t.ID, isInternalTopic(name)
		rt.AuthorizedOperations = env.authorizedOperations(req, acl.Topic, name)
		rt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
		for i := start; i < upper; i++ {
			rt.Partitions = append(rt.Partitions, describedPartition(env, img, t.Partitions[i]))
		}
		resp.Topics = append(resp.Topics, rt)
		if upper < len(t.Partitions) {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: int32(upper)}
			break
		}
		remaining -= len(rt.Partitions)
	}
	return resp, nil
}

// unknownDescribedTopic is a named topic the image does not have.
func unknownDescribedTopic(env *Env, req *Request, name string) kmsg.DescribeTopicPartitionsResponseTopic {
	rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
	rt.Topic, rt.IsInternal = &name, isInternalTopic(name)
	rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
	if metadata.ValidateTopicName(name) != nil {
		rt.ErrorCode = kerr.InvalidTopicException.Code
	}
	rt.AuthorizedOperations = env.authorizedOperations(req, acl.Topic, name)
	env.Metrics.Error(req.Key, rt.ErrorCode)
	return rt
}

// describedPartition is one partition as KRaftMetadataCache describes it:
// every replica and ISR member is listed whatever its broker's state, and
// the leader is -1 when its broker is not registered.
func describedPartition(env *Env, img *metadata.Image, p metadata.Partition) kmsg.DescribeTopicPartitionsResponseTopicPartition {
	dp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
	dp.Partition, dp.LeaderID, dp.LeaderEpoch = p.Partition, p.Leader, p.LeaderEpoch
	if env.Cluster != nil && p.Leader >= 0 {
		if _, ok := img.Broker(p.Leader); !ok {
			dp.LeaderID = -1
		}
	}
	dp.Replicas = append([]int32{}, p.Replicas...)
	dp.ISR = append([]int32{}, p.ISR...)
	dp.EligibleLeaderReplicas = append([]int32{}, p.ELR...)
	dp.LastKnownELR = append([]int32{}, p.LastKnownELR...)
	dp.OfflineReplicas = offlineReplicas(env, p.Replicas)
	return dp
}

package handler

import (
	"context"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/group"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit: v2-10
//
//   - v2-4: RetentionTimeMillis; a retention other than -1 sets the offset's
//     expire timestamp (OffsetCommitValue v1)
//   - v3: ThrottleMillis
//   - v6: LeaderEpoch (KIP-320)
//   - v7: InstanceID (KIP-345)
//   - v8: flexible
//   - v9: KIP-848 member epochs: STALE_MEMBER_EPOCH, GROUP_ID_NOT_FOUND; a
//     consumer-protocol member must use v9 or later (UNSUPPORTED_VERSION),
//     and, as Kafka 4.4's ConsumerGroup.validateOffsetCommit, may commit
//     with an older member epoch the partitions it was assigned at or
//     before that epoch and still owns
//   - v10: topics by id instead of name (KIP-848); UNKNOWN_TOPIC_ID
//
// v0-1 are gone since Kafka 4.0 (KIP-896). As
// KafkaApis.handleOffsetCommitRequest, the topics are checked here before
// the group coordinator sees them: from v10 an id this broker does not know
// answers UNKNOWN_TOPIC_ID for each of its partitions, and a topic or
// partition that does not exist answers UNKNOWN_TOPIC_OR_PARTITION. Only
// the rest goes to the coordinator, and only if anything is left, so a
// commit for unknown topics alone neither checks nor creates the group. The
// coordinator's answers follow the refused topics (OffsetCommitResponse's
// Builder.merge). A commit is answered only once its records are appended to
// __consumer_offsets; when the append fails, every partition is answered
// with the error as Kafka's CoordinatorOperationExceptionHelper maps it:
// UNKNOWN_SERVER_ERROR for records larger than max.message.bytes of
// __consumer_offsets, which a client must not retry.
func init() { register(8, 2, 10, handleOffsetCommit) }

func handleOffsetCommit(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.OffsetCommitRequest)
	if !env.authorize(req, acl.Read, acl.Group, r.Group) {
		// As KafkaApis.handleOffsetCommitRequest, before any topic.
		return group.ErrorResponse(r, kerr.GroupAuthorizationFailed.Code), nil
	}
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	resp.SetVersion(r.Version)
	useIDs := r.Version >= 10
	answer := newCommitAnswer(&resp.Topics, useIDs,
		func(name string, id [16]byte) kmsg.OffsetCommitResponseTopic {
			return kmsg.OffsetCommitResponseTopic{Topic: name, TopicID: id}
		},
		func(t *kmsg.OffsetCommitResponseTopic) (string, [16]byte, *[]kmsg.OffsetCommitResponseTopicPartition) {
			return t.Topic, t.TopicID, &t.Partitions
		})
	valid := *r
	valid.Topics = filterCommitTopics(env.Meta.Image(), useIDs, r.Topics,
		func(t *kmsg.OffsetCommitRequestTopic) (*string, [16]byte, *[]kmsg.OffsetCommitRequestTopicPartition) {
			return &t.Topic, t.TopicID, &t.Partitions
		},
		func(p *kmsg.OffsetCommitRequestTopicPartition) int32 { return p.Partition },
		func(name string, id [16]byte, part int32, code int16) {
			answer.add(name, id, kmsg.OffsetCommitResponseTopicPartition{Partition: part, ErrorCode: code})
			env.Metrics.Error(req.Key, code)
		}, env.topicAllowed(req, acl.Read))
	if len(valid.Topics) == 0 {
		return resp, nil
	}
	fwd := *req
	fwd.Msg = &valid
	gr, err := groupRequest(ctx, env, &fwd)
	if err != nil {
		return nil, err
	}
	cr := gr.(*kmsg.OffsetCommitResponse)
	return answer.finish(r.Version, resp, cr, cr.Topics), nil
}

package handler

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/metadata"
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
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	resp.SetVersion(r.Version)
	useIDs := r.Version >= 10
	img := env.Meta.Image()

	type topicKey struct {
		name string
		id   [16]byte
	}
	keyOf := func(name string, id [16]byte) topicKey {
		if useIDs {
			return topicKey{id: id}
		}
		return topicKey{name: name}
	}
	byKey := map[topicKey]int{} // index into resp.Topics
	topicOf := func(name string, id [16]byte) *kmsg.OffsetCommitResponseTopic {
		k := keyOf(name, id)
		i, ok := byKey[k]
		if !ok {
			i = len(resp.Topics)
			byKey[k] = i
			resp.Topics = append(resp.Topics, kmsg.OffsetCommitResponseTopic{Topic: name, TopicID: id})
		}
		return &resp.Topics[i]
	}
	refuse := func(name string, id [16]byte, part int32, code int16) {
		t := topicOf(name, id)
		t.Partitions = append(t.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: part, ErrorCode: code})
		env.Metrics.Error(req.Key, code)
	}

	valid := *r
	valid.Topics = nil
	for _, rt := range r.Topics {
		var t *metadata.Topic
		var ok bool
		name := rt.Topic
		if useIDs {
			if t, ok = img.TopicByID(metadata.UUID(rt.TopicID)); ok {
				name = t.Name
			}
		} else {
			t, ok = img.Topic(name)
		}
		switch {
		case useIDs && !ok:
			for _, p := range rt.Partitions {
				refuse(name, rt.TopicID, p.Partition, kerr.UnknownTopicID.Code)
			}
			continue
		case !ok:
			for _, p := range rt.Partitions {
				refuse(name, rt.TopicID, p.Partition, kerr.UnknownTopicOrPartition.Code)
			}
			continue
		}
		kept := rt
		kept.Topic, kept.Partitions = name, nil
		for _, p := range rt.Partitions {
			if p.Partition < 0 || int(p.Partition) >= len(t.Partitions) {
				refuse(name, rt.TopicID, p.Partition, kerr.UnknownTopicOrPartition.Code)
				continue
			}
			kept.Partitions = append(kept.Partitions, p)
		}
		if len(kept.Partitions) > 0 {
			valid.Topics = append(valid.Topics, kept)
		}
	}
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
	if len(resp.Topics) == 0 {
		cr.SetVersion(r.Version)
		return cr, nil
	}
	resp.ThrottleMillis = cr.ThrottleMillis
	for _, ct := range cr.Topics {
		t := topicOf(ct.Topic, ct.TopicID)
		t.Partitions = append(t.Partitions, ct.Partitions...)
	}
	return resp, nil
}

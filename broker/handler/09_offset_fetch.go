package handler

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/metadata"
)

// OffsetFetch: v1-10
//
//   - v2: null Topics fetches every committed offset; top-level ErrorCode
//   - v3: ThrottleMillis
//   - v5: LeaderEpoch
//   - v6: flexible
//   - v7: RequireStable (KIP-447); no pending transactional offsets exist yet
//   - v8: batched Groups (KIP-709)
//   - v9: MemberID and MemberEpoch, checked for KIP-848 groups
//   - v10: topics by id instead of name (KIP-848); UNKNOWN_TOPIC_ID
//
// From v10, as KafkaApis.fetchOffsetsForGroup, the ids are resolved here:
// a topic whose id this broker does not know is kept from the coordinator
// and answered after the coordinator's topics, each partition
// UNKNOWN_TOPIC_ID with offset -1, unless the group itself failed. When a
// group's every offset is asked for (null Topics), topics without an id,
// such as deleted ones, are left out, since the answer names topics only by
// id (KafkaApis.fetchAllOffsetsForGroup).
func init() { register(9, 1, 10, handleOffsetFetch) }

func handleOffsetFetch(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.OffsetFetchRequest)
	if r.Version < 10 {
		return groupRequest(ctx, env, req)
	}
	img := env.Meta.Image()
	fwdReq := *r
	fwdReq.Groups = make([]kmsg.OffsetFetchRequestGroup, len(r.Groups))
	unknown := make([][]kmsg.OffsetFetchResponseGroupTopic, len(r.Groups))
	for i, g := range r.Groups {
		fwdReq.Groups[i] = g
		if g.Topics == nil {
			continue
		}
		known := make([]kmsg.OffsetFetchRequestGroupTopic, 0, len(g.Topics))
		for _, t := range g.Topics {
			mt, ok := img.TopicByID(metadata.UUID(t.TopicID))
			if !ok {
				ut := kmsg.OffsetFetchResponseGroupTopic{TopicID: t.TopicID}
				for _, p := range t.Partitions {
					ut.Partitions = append(ut.Partitions, kmsg.OffsetFetchResponseGroupTopicPartition{
						Partition: p, Offset: -1, LeaderEpoch: -1, Metadata: kmsg.StringPtr(""),
						ErrorCode: kerr.UnknownTopicID.Code,
					})
				}
				unknown[i] = append(unknown[i], ut)
				continue
			}
			t.Topic = mt.Name
			known = append(known, t)
		}
		fwdReq.Groups[i].Topics = known
	}
	fwd := *req
	fwd.Msg = &fwdReq
	gr, err := groupRequest(ctx, env, &fwd)
	if err != nil {
		return nil, err
	}
	resp := gr.(*kmsg.OffsetFetchResponse)
	resp.SetVersion(r.Version)
	for i := range resp.Groups {
		g := &resp.Groups[i]
		if i >= len(r.Groups) || g.Group != r.Groups[i].Group || g.ErrorCode != 0 {
			continue
		}
		if r.Groups[i].Topics == nil {
			kept := g.Topics[:0]
			for _, t := range g.Topics {
				if t.TopicID != ([16]byte{}) {
					kept = append(kept, t)
				}
			}
			g.Topics = kept
			continue
		}
		for _, ut := range unknown[i] {
			for range ut.Partitions {
				env.Metrics.Error(req.Key, kerr.UnknownTopicID.Code)
			}
		}
		g.Topics = append(g.Topics, unknown[i]...)
	}
	return resp, nil
}

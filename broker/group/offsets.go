package group

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type tp struct {
	topic string
	part  int32
}

type offsetEntry struct {
	offset   int64
	epoch    int32
	meta     string
	commitTs int64
	expireTs int64 // -1: none
}

func (c *Coordinator) setOffset(group string, t tp, e offsetEntry) {
	m := c.offsets[group]
	if m == nil {
		m = map[tp]offsetEntry{}
		c.offsets[group] = m
	}
	m[t] = e
}

func (c *Coordinator) deleteOffset(group string, t tp) {
	if m := c.offsets[group]; m != nil {
		delete(m, t)
		if len(m) == 0 {
			delete(c.offsets, group)
		}
	}
}

// partitionValidator checks one partition of an offset commit whose group
// checks passed: Kafka's CommitPartitionValidator. A nil partitionValidator
// accepts every partition (Kafka's CommitPartitionValidator.NO_OP).
type partitionValidator func(topicID [16]byte, partition int32) *kerr.Error

// validateConsumerCommit is Kafka 4.4's ConsumerGroup.validateOffsetCommit
// for an OffsetCommit (txn false) or a TxnOffsetCommit (txn true) of version
// version. A commit with the member's epoch is accepted whole; a newer epoch
// is STALE_MEMBER_EPOCH (ILLEGAL_GENERATION for a member still on the
// classic protocol); an older epoch is checked partition by partition by the
// returned validator, which accepts a partition only when the member owns it
// or has it pending revocation and it was assigned at or before that epoch
// (Kafka's createAssignmentEpochValidator), so a commit that raced with an
// epoch bump still lands for the partitions the member kept.
func (g *consumerGroup) validateConsumerCommit(memberID string, instanceID *string, epoch int32, txn bool, version int16) (partitionValidator, *kerr.Error) {
	if epoch < 0 && len(g.members) == 0 {
		return nil, nil
	}
	// Producers older than KIP-447 send no group metadata.
	if txn && epoch == -1 && memberID == "" && instanceID == nil {
		return nil, nil
	}
	m := g.members[memberID]
	if m == nil {
		return nil, kerr.UnknownMemberID
	}
	if !txn && m.classic == nil && version < 9 {
		// OffsetCommit version 9 or above must be used by members using
		// the consumer group protocol.
		return nil, kerr.UnsupportedVersion
	}
	stale := kerr.StaleMemberEpoch
	if m.classic != nil {
		stale = kerr.IllegalGeneration
	}
	switch {
	case epoch == m.epoch:
		return nil, nil
	case epoch > m.epoch:
		return nil, stale
	}
	return func(id [16]byte, p int32) *kerr.Error {
		assignedAt, ok := m.assignmentEpoch(id, p)
		if !ok || epoch < assignedAt {
			return stale
		}
		return nil
	}, nil
}

// validateCommit is Kafka's OffsetMetadataManager.validateOffsetCommit with
// ClassicGroup/ConsumerGroup.validateOffsetCommit: a group-level error, or
// the validator of each partition.
func (c *Coordinator) validateCommit(req *kmsg.OffsetCommitRequest) (partitionValidator, *kerr.Error) {
	if req.Group == "" {
		return nil, kerr.InvalidGroupID
	}
	if cg := c.consumer[req.Group]; cg != nil {
		return cg.validateConsumerCommit(req.MemberID, req.InstanceID, req.Generation, false, req.Version)
	}
	return nil, c.validateClassicCommit(req)
}

// validateClassicCommit is ClassicGroup.validateOffsetCommit, creating the
// simple group a commit outside group management names.
func (c *Coordinator) validateClassicCommit(req *kmsg.OffsetCommitRequest) *kerr.Error {
	g := c.classic[req.Group]
	if g == nil {
		if req.Generation < 0 {
			// A commit from the admin client or a consumer outside group
			// management creates a "simple" group.
			c.classic[req.Group] = newClassicGroup(req.Group, c.nowMs())
			return nil
		}
		if req.Version >= 9 {
			return kerr.GroupIDNotFound
		}
		return kerr.IllegalGeneration
	}
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable
	}
	if req.Generation < 0 && g.state == stateEmpty {
		return nil
	}
	if req.Generation >= 0 || req.MemberID != "" || req.InstanceID != nil {
		if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
			return err
		}
		if req.Generation != g.generation {
			return kerr.IllegalGeneration
		}
	} else if g.state != stateEmpty {
		return kerr.UnknownMemberID
	}
	if g.state == stateCompletingRebalance {
		return kerr.RebalanceInProgress
	}
	if m := g.members[req.MemberID]; m != nil {
		c.scheduleClassicHeartbeat(g, m)
	}
	return nil
}

// commitTopic names the topic of an offset commit: by its id where the
// request version carries ids (OffsetCommit v10, TxnOffsetCommit v6),
// UNKNOWN_TOPIC_ID when the id is unknown; a group-level error
// wins over both.
func (c *Coordinator) commitTopic(byID bool, id [16]byte, name string, groupErr *kerr.Error) (string, *kerr.Error) {
	if !byID || groupErr != nil {
		return name, groupErr
	}
	n, ok := c.topicIDs[id]
	if !ok {
		return n, kerr.UnknownTopicID
	}
	return n, nil
}

// checkPartitions runs validate over every partition a commit names whose
// topic is known and whose metadata fits, in request order, and returns the
// first error. As Kafka's OffsetMetadataManager.commitOffset, which lets the
// validator's exception abort the whole request, that error then answers
// every partition. Partitions of an unknown topic id never reach Kafka's
// coordinator (KafkaApis answers them), and an oversized metadata is
// answered before the validator runs.
func (c *Coordinator) checkPartitions(validate partitionValidator, byID bool, n int, topic func(i int) ([16]byte, string, []partitionMeta)) *kerr.Error {
	if validate == nil {
		return nil
	}
	for i := 0; i < n; i++ {
		id, name, parts := topic(i)
		if byID {
			if _, ok := c.topicIDs[id]; !ok {
				continue
			}
		} else {
			id = c.topics[name].ID
		}
		for _, p := range parts {
			if p.metadata != nil && len(*p.metadata) > c.cfg.OffsetMetadataMaxBytes {
				continue
			}
			if err := validate(id, p.partition); err != nil {
				return err
			}
		}
	}
	return nil
}

// partitionMeta is the part of a committed partition checkPartitions reads.
type partitionMeta struct {
	partition int32
	metadata  *string
}

func (c *Coordinator) offsetCommit(r Request, req *kmsg.OffsetCommitRequest) {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	validate, groupErr := c.validateCommit(req)
	if groupErr == nil {
		groupErr = c.checkPartitions(validate, req.Version >= 10, len(req.Topics), func(i int) ([16]byte, string, []partitionMeta) {
			t := req.Topics[i]
			ps := make([]partitionMeta, len(t.Partitions))
			for j, p := range t.Partitions {
				ps[j] = partitionMeta{p.Partition, p.Metadata}
			}
			return t.TopicID, t.Topic, ps
		})
	}
	nowMs := c.nowMs()
	for _, t := range req.Topics {
		rt := kmsg.OffsetCommitResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
		name, topicErr := c.commitTopic(req.Version >= 10, t.TopicID, t.Topic, groupErr)
		for _, p := range t.Partitions {
			rp := kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition}
			switch {
			case topicErr != nil:
				rp.ErrorCode = topicErr.Code
			case p.Metadata != nil && len(*p.Metadata) > c.cfg.OffsetMetadataMaxBytes:
				rp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			default:
				e := offsetEntry{offset: p.Offset, epoch: -1, meta: deref(p.Metadata), commitTs: nowMs, expireTs: -1}
				if req.Version >= 6 {
					e.epoch = p.LeaderEpoch
				}
				if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis >= 0 {
					e.expireTs = nowMs + req.RetentionTimeMillis
				}
				c.setOffset(req.Group, tp{name, p.Partition}, e)
				c.record(req.Group, EncodeOffsetCommitKey(OffsetCommitKey{req.Group, name, p.Partition}), EncodeOffsetCommitValue(OffsetCommitValue{
					Offset: e.offset, LeaderEpoch: e.epoch, Metadata: e.meta, CommitTimestamp: e.commitTs, ExpireTimestamp: e.expireTs,
				}))
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	c.reply(r.ID, resp)
}

// fetchGroup answers OffsetFetch for one group. topics nil means all.
func (c *Coordinator) fetchGroup(group string, memberID *string, memberEpoch int32, version int16, requireStable bool, topics []kmsg.OffsetFetchRequestGroupTopic) (kmsg.OffsetFetchResponseGroup, *kerr.Error) {
	out := kmsg.OffsetFetchResponseGroup{Group: group}
	if memberID != nil && version >= 9 {
		if cg := c.consumer[group]; cg != nil {
			m := cg.members[*memberID]
			if m == nil {
				return out, kerr.UnknownMemberID
			}
			if m.epoch != memberEpoch {
				return out, kerr.StaleMemberEpoch
			}
		}
	}
	offs := c.offsets[group]
	part := func(t string, p int32) kmsg.OffsetFetchResponseGroupTopicPartition {
		if requireStable && c.hasPending(group, tp{t, p}) {
			// KIP-447: a transaction may still commit an offset here.
			return kmsg.OffsetFetchResponseGroupTopicPartition{Partition: p, Offset: -1, LeaderEpoch: -1, Metadata: strp(""), ErrorCode: kerr.UnstableOffsetCommit.Code}
		}
		e, ok := offs[tp{t, p}]
		if !ok {
			return kmsg.OffsetFetchResponseGroupTopicPartition{Partition: p, Offset: -1, LeaderEpoch: -1, Metadata: strp("")}
		}
		return kmsg.OffsetFetchResponseGroupTopicPartition{Partition: p, Offset: e.offset, LeaderEpoch: e.epoch, Metadata: strp(e.meta)}
	}
	if topics == nil {
		byTopic := map[string][]int32{}
		for k := range offs {
			byTopic[k.topic] = append(byTopic[k.topic], k.part)
		}
		for _, t := range sortedKeys(byTopic) {
			ps := byTopic[t]
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			ot := kmsg.OffsetFetchResponseGroupTopic{Topic: t, TopicID: c.topics[t].ID}
			for _, p := range ps {
				ot.Partitions = append(ot.Partitions, part(t, p))
			}
			out.Topics = append(out.Topics, ot)
		}
		return out, nil
	}
	for _, t := range topics {
		ot := kmsg.OffsetFetchResponseGroupTopic{Topic: t.Topic, TopicID: t.TopicID}
		name, known := t.Topic, true
		if version >= 10 {
			name, known = c.topicIDs[t.TopicID]
		}
		for _, p := range t.Partitions {
			rp := part(name, p)
			if !known {
				rp = kmsg.OffsetFetchResponseGroupTopicPartition{Partition: p, Offset: -1, LeaderEpoch: -1, Metadata: strp(""), ErrorCode: kerr.UnknownTopicID.Code}
			}
			ot.Partitions = append(ot.Partitions, rp)
		}
		out.Topics = append(out.Topics, ot)
	}
	return out, nil
}

func (c *Coordinator) offsetFetch(r Request, req *kmsg.OffsetFetchRequest) {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	defer c.reply(r.ID, resp)
	if req.Version >= 8 {
		for _, g := range req.Groups {
			out, err := c.fetchGroup(g.Group, g.MemberID, g.MemberEpoch, req.Version, req.RequireStable, g.Topics)
			if err != nil {
				out = kmsg.OffsetFetchResponseGroup{Group: g.Group, ErrorCode: err.Code}
			}
			resp.Groups = append(resp.Groups, out)
		}
		return
	}
	var topics []kmsg.OffsetFetchRequestGroupTopic
	if req.Topics != nil || req.Version < 2 {
		topics = []kmsg.OffsetFetchRequestGroupTopic{}
		for _, t := range req.Topics {
			topics = append(topics, kmsg.OffsetFetchRequestGroupTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
	}
	out, _ := c.fetchGroup(req.Group, nil, -1, req.Version, req.RequireStable, topics)
	for _, t := range out.Topics {
		rt := kmsg.OffsetFetchResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetFetchResponseTopicPartition{
				Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata, ErrorCode: p.ErrorCode,
			})
		}
		resp.Topics = append(resp.Topics, rt)
	}
}

// subscribedTo reports whether the group's members consume topic; for a
// classic group it reads the consumer protocol subscriptions, and an
// unreadable subscription counts as subscribed to everything, as Kafka's
// ClassicGroup.isSubscribedToTopic.
func (c *Coordinator) subscribedTo(group, topic string) bool {
	if cg := c.consumer[group]; cg != nil {
		return cg.subscribedTopics(c)[topic]
	}
	g := c.classic[group]
	if g == nil || len(g.members) == 0 {
		return false
	}
	if deref(g.protocolType) != "consumer" {
		return true
	}
	for _, m := range g.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadata(deref(g.protocol))); err != nil {
			return true
		}
		for _, t := range meta.Topics {
			if t == topic {
				return true
			}
		}
	}
	return false
}

func (c *Coordinator) offsetDelete(r Request, req *kmsg.OffsetDeleteRequest) {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	defer c.reply(r.ID, resp)
	g := c.classic[req.Group]
	if g == nil && c.consumer[req.Group] == nil {
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return
	}
	if g != nil && g.state != stateEmpty && deref(g.protocolType) != "consumer" {
		resp.ErrorCode = kerr.NonEmptyGroup.Code
		return
	}
	for _, t := range req.Topics {
		rt := kmsg.OffsetDeleteResponseTopic{Topic: t.Topic}
		subscribed := c.subscribedTo(req.Group, t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.OffsetDeleteResponseTopicPartition{Partition: p.Partition}
			if subscribed {
				rp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			} else if _, ok := c.offsets[req.Group][tp{t.Topic, p.Partition}]; ok {
				c.deleteOffset(req.Group, tp{t.Topic, p.Partition})
				c.record(req.Group, EncodeOffsetCommitKey(OffsetCommitKey{req.Group, t.Topic, p.Partition}), nil)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
}

// expireOffsets deletes the group's expired offsets, as Kafka's
// OffsetMetadataManager.cleanupExpiredOffsets, and reports whether none is
// left.
func (c *Coordinator) expireOffsets(group string) bool {
	offs := c.offsets[group]
	if len(offs) == 0 {
		return true
	}
	nowMs := c.nowMs()
	retention := c.cfg.OffsetsRetention.Milliseconds()
	var base func(e offsetEntry) int64
	var keep func(t string) bool
	if cg := c.consumer[group]; cg != nil {
		subs := cg.subscribedTopics(c)
		base = func(e offsetEntry) int64 { return e.commitTs }
		keep = func(t string) bool { return subs[t] }
	} else if g := c.classic[group]; g != nil {
		switch {
		case g.protocolType == nil:
			base = func(e offsetEntry) int64 { return e.commitTs }
		case g.state == stateEmpty:
			stateTs := g.stateTs
			base = func(e offsetEntry) int64 {
				if stateTs >= 0 {
					return stateTs
				}
				return e.commitTs
			}
		case g.state == stateStable && deref(g.protocolType) == "consumer":
			base = func(e offsetEntry) int64 { return e.commitTs }
			keep = func(t string) bool { return c.subscribedTo(group, t) }
		default:
			return false
		}
	} else {
		base = func(e offsetEntry) int64 { return e.commitTs }
	}
	keys := make([]tp, 0, len(offs))
	for k := range offs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].topic != keys[j].topic {
			return keys[i].topic < keys[j].topic
		}
		return keys[i].part < keys[j].part
	})
	for _, k := range keys {
		e := offs[k]
		if (keep != nil && keep(k.topic)) || c.hasPending(group, k) {
			continue
		}
		expired := nowMs-base(e) >= retention
		if e.expireTs >= 0 {
			expired = nowMs >= e.expireTs
		}
		if expired {
			c.deleteOffset(group, k)
			c.record(group, EncodeOffsetCommitKey(OffsetCommitKey{group, k.topic, k.part}), nil)
		}
	}
	return len(c.offsets[group]) == 0
}

// cleanupGroups is Kafka's GroupMetadataManager.cleanupGroupMetadata: expire
// offsets, then delete empty groups left with none.
func (c *Coordinator) cleanupGroups() {
	ids := map[string]bool{}
	for id := range c.offsets {
		ids[id] = true
	}
	for id := range c.classic {
		ids[id] = true
	}
	for id := range c.consumer {
		ids[id] = true
	}
	for _, id := range sortedKeys(ids) {
		if !c.expireOffsets(id) {
			continue
		}
		if g := c.classic[id]; g != nil && g.state == stateEmpty && len(g.pending) == 0 {
			delete(c.classic, id)
			c.record(id, encodeGroupKey(RecordGroupMetadata, id), nil)
		}
		if cg := c.consumer[id]; cg != nil && len(cg.members) == 0 {
			c.deleteConsumerGroup(cg)
		}
	}
}

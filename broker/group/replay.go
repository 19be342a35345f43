package group

import (
	"errors"
	"fmt"
	"sort"
)

// Replay applies one __consumer_offsets record read back from the log, in
// log order, as Kafka's GroupCoordinatorShard.replay. A nil value is a
// tombstone. Records of types Cascade does not interpret (share and streams
// groups) are skipped; a malformed record returns an error wrapping
// ErrBadRecord and changes nothing.
func (c *Coordinator) Replay(key, value []byte) error {
	k, err := DecodeKey(key)
	if errors.Is(err, ErrUnknownRecordType) {
		return nil
	}
	if err != nil {
		return err
	}
	switch k.Type {
	case RecordLegacyOffsetCommit, RecordOffsetCommit:
		return c.replayOffset(k, value)
	case RecordGroupMetadata:
		return c.replayGroup(k.Group, value)
	case RecordConsumerGroupMetadata:
		if value == nil {
			delete(c.consumer, k.Group)
			return nil
		}
		ep, err := decodeEpochValue(value)
		if err != nil {
			return err
		}
		c.replayConsumerGroup(k.Group).epoch = ep
	case RecordConsumerGroupTargetMetadata:
		if value == nil {
			return nil
		}
		ep, err := decodeEpochValue(value)
		if err != nil {
			return err
		}
		c.replayConsumerGroup(k.Group).assignmentEpoch = ep
	case RecordConsumerGroupMemberMetadata:
		g := c.consumer[k.Group]
		if value == nil {
			if g != nil {
				delete(g.members, k.Member)
			}
			return nil
		}
		v, err := DecodeConsumerMemberValue(value)
		if err != nil {
			return err
		}
		g = c.replayConsumerGroup(k.Group)
		m := g.replayMember(k.Member)
		m.instanceID, m.rackID, m.clientID, m.clientHost = v.InstanceID, v.RackID, v.ClientID, v.ClientHost
		m.topics = append([]string(nil), v.SubscribedTopics...)
		sort.Strings(m.topics)
		m.regex, m.rebalanceTimeout, m.assignor = v.SubscribedRegex, v.RebalanceTimeoutMs, v.ServerAssignor
		m.classic = classicFromRecord(v.Classic)
	case RecordConsumerGroupTargetMember:
		g := c.consumer[k.Group]
		if value == nil {
			if g != nil {
				delete(g.target, k.Member)
			}
			return nil
		}
		tps, err := DecodeTargetMemberValue(value)
		if err != nil {
			return err
		}
		c.replayConsumerGroup(k.Group).target[k.Member] = fromTopicPartitions(tps)
	case RecordConsumerGroupRegexResolution:
		return c.replayRegex(k, value)
	case RecordConsumerGroupCurrentMember:
		if value == nil {
			return nil
		}
		v, err := DecodeCurrentAssignmentValue(value)
		if err != nil {
			return err
		}
		m := c.replayConsumerGroup(k.Group).replayMember(k.Member)
		m.epoch, m.prevEpoch, m.state = v.MemberEpoch, v.PreviousMemberEpoch, v.State
		m.assigned, m.revoking = fromTopicPartitions(v.Assigned), fromTopicPartitions(v.PendingRevocation)
		m.assignEpochs = map[partKey]int32{}
		m.replayEpochs(v.Assigned)
		m.replayEpochs(v.PendingRevocation)
	}
	return nil
}

func (c *Coordinator) replayOffset(k Key, value []byte) error {
	t := tp{k.Topic, k.Partition}
	if value == nil {
		c.removeOffset(k.Group, t)
		return nil
	}
	v, err := DecodeOffsetCommitValue(value)
	if err != nil {
		return err
	}
	if !c.groupExists(k.Group) {
		c.classic[k.Group] = newClassicGroup(k.Group, -1)
	}
	c.setOffset(k.Group, t, offsetEntry{offset: v.Offset, epoch: v.LeaderEpoch, meta: v.Metadata, commitTs: v.CommitTimestamp, expireTs: v.ExpireTimestamp})
	return nil
}

func (c *Coordinator) replayGroup(id string, value []byte) error {
	if value == nil {
		delete(c.classic, id)
		return nil
	}
	v, err := DecodeGroupMetadataValue(value)
	if err != nil {
		return err
	}
	if cg := c.consumer[id]; cg != nil {
		return fmt.Errorf("%w: classic group record for consumer group %q", ErrBadRecord, id)
	}
	g := newClassicGroup(id, v.CurrentStateTimestamp)
	g.generation = v.Generation
	g.protocolType = strp(v.ProtocolType)
	g.protocol, g.leader = v.Protocol, v.Leader
	for _, mm := range v.Members {
		m := &classicMember{
			id: mm.MemberID, instanceID: mm.GroupInstanceID, clientID: mm.ClientID, clientHost: mm.ClientHost,
			rebalanceTimeout: mm.RebalanceTimeout, sessionTimeout: mm.SessionTimeout, protocolType: v.ProtocolType,
			protocols:  []protocol{{name: deref(v.Protocol), meta: mm.Subscription}},
			assignment: mm.Assignment,
		}
		if m.rebalanceTimeout < 0 {
			m.rebalanceTimeout = m.sessionTimeout
		}
		g.members[m.id] = m
		g.order = append(g.order, m.id)
		if m.instanceID != nil {
			g.static[*m.instanceID] = m.id
		}
	}
	if len(g.members) > 0 {
		g.state = stateStable
	}
	c.classic[id] = g
	return nil
}

// replayConsumerGroup returns the consumer group id, creating it; an empty
// classic group of that id (created by replayed offsets) gives way to it.
func (c *Coordinator) replayConsumerGroup(id string) *consumerGroup {
	if g := c.consumer[id]; g != nil {
		return g
	}
	delete(c.classic, id)
	g := newConsumerGroup(id)
	c.consumer[id] = g
	return g
}

func (g *consumerGroup) replayMember(id string) *consumerMember {
	m := g.members[id]
	if m == nil {
		m = newConsumerMember(id)
		g.members[id] = m
	}
	return m
}

package cluster

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// WaitInEveryISR waits until every live broker's Metadata shows node id
// in the ISR of every partition, of every topic, that it is a replica of:
// a restarted node has caught up everywhere.
func WaitInEveryISR(ctx context.Context, c Cluster, id int) error {
	return Poll(ctx, PollInterval, func() error {
		for _, b := range LiveBrokers(c) {
			resp, err := c.Request(ctx, b, MetadataRequest(nil))
			if err != nil {
				return fmt.Errorf("node %d: %w", b, err)
			}
			for _, tp := range resp.(*kmsg.MetadataResponse).Topics {
				for _, p := range tp.Partitions {
					if slices.Contains(p.Replicas, int32(id)) && !slices.Contains(p.ISR, int32(id)) {
						return fmt.Errorf("node %d: %s/%d ISR %v lacks %d", b, *tp.Topic, p.Partition, p.ISR, id)
					}
				}
			}
		}
		return nil
	})
}

// Leader returns the leader of topic's partition p as every live broker's
// Metadata names it, waiting until they all name the same live leader.
func Leader(ctx context.Context, c Cluster, topic string, p int32) (int, error) {
	return WaitLeader(ctx, c, topic, p, -1)
}

// WaitLeader waits until every live broker's Metadata names one live
// leader of topic's partition p other than not (-1: any), and returns it.
func WaitLeader(ctx context.Context, c Cluster, topic string, p int32, not int) (int, error) {
	leader := -1
	err := Poll(ctx, PollInterval, func() error {
		leader = -1
		for _, b := range LiveBrokers(c) {
			resp, err := c.Request(ctx, b, MetadataRequest([]string{topic}))
			if err != nil {
				return fmt.Errorf("node %d: %w", b, err)
			}
			l, err := partitionLeader(resp.(*kmsg.MetadataResponse), topic, p)
			if err != nil {
				return fmt.Errorf("node %d: %w", b, err)
			}
			switch {
			case l < 0 || !c.Live(l):
				return fmt.Errorf("node %d names leader %d of %s/%d, not a live broker", b, l, topic, p)
			case l == not:
				return fmt.Errorf("node %d still names leader %d of %s/%d", b, l, topic, p)
			case leader >= 0 && l != leader:
				return fmt.Errorf("brokers name leaders %d and %d of %s/%d", leader, l, topic, p)
			}
			leader = l
		}
		if leader < 0 {
			return fmt.Errorf("no live broker")
		}
		return nil
	})
	return leader, err
}

func partitionLeader(md *kmsg.MetadataResponse, topic string, p int32) (int, error) {
	for _, t := range md.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return -1, fmt.Errorf("%s: %w", topic, err)
		}
		for _, tp := range t.Partitions {
			if tp.Partition == p {
				if err := kerr.ErrorForCode(tp.ErrorCode); err != nil && tp.Leader >= 0 {
					return -1, fmt.Errorf("%s/%d: %w", topic, p, err)
				}
				return int(tp.Leader), nil
			}
		}
	}
	return -1, fmt.Errorf("%s/%d is not in Metadata", topic, p)
}

// Coordinator key types of FindCoordinator.
const (
	GroupCoordinator       int8 = 0
	TransactionCoordinator int8 = 1
)

// WaitCoordinator waits until every live broker's FindCoordinator names
// one live coordinator of key (of the given key type) other than not (-1:
// any), and returns it.
func WaitCoordinator(ctx context.Context, c Cluster, key string, typ int8, not int) (int, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType, req.CoordinatorKey, req.CoordinatorKeys = typ, key, []string{key}
	coord := -1
	err := Poll(ctx, PollInterval, func() error {
		coord = -1
		for _, b := range LiveBrokers(c) {
			resp, err := c.Request(ctx, b, req)
			if err != nil {
				return fmt.Errorf("node %d: %w", b, err)
			}
			r := resp.(*kmsg.FindCoordinatorResponse)
			code, id := r.ErrorCode, r.NodeID
			if len(r.Coordinators) == 1 {
				code, id = r.Coordinators[0].ErrorCode, r.Coordinators[0].NodeID
			}
			if err := kerr.ErrorForCode(code); err != nil {
				return fmt.Errorf("node %d: coordinator of %q: %w", b, key, err)
			}
			switch l := int(id); {
			case !c.Live(l):
				return fmt.Errorf("node %d names coordinator %d of %q, not a live broker", b, l, key)
			case l == not:
				return fmt.Errorf("node %d still names coordinator %d of %q", b, l, key)
			case coord >= 0 && l != coord:
				return fmt.Errorf("brokers name coordinators %d and %d of %q", coord, l, key)
			default:
				coord = l
			}
		}
		if coord < 0 {
			return fmt.Errorf("no live broker")
		}
		return nil
	})
	return coord, err
}

// WaitTopic waits until every live broker's Metadata lists topic with
// partitions partitions, each led by a live broker: Kafka propagates a new
// topic to each broker asynchronously, and a client that asks a broker
// too early sees UNKNOWN_TOPIC_OR_PARTITION or fewer partitions.
func WaitTopic(ctx context.Context, c Cluster, topic string, partitions int) error {
	return Poll(ctx, PollInterval, func() error {
		for _, b := range LiveBrokers(c) {
			resp, err := c.Request(ctx, b, MetadataRequest([]string{topic}))
			if err != nil {
				return fmt.Errorf("node %d: %w", b, err)
			}
			md := resp.(*kmsg.MetadataResponse)
			for p := 0; p < partitions; p++ {
				l, err := partitionLeader(md, topic, int32(p))
				if err != nil {
					return fmt.Errorf("node %d: %w", b, err)
				}
				if l < 0 || !c.Live(l) {
					return fmt.Errorf("node %d names leader %d of %s/%d", b, l, topic, p)
				}
			}
		}
		return nil
	})
}

// CommittedOffset asks node id (the group's coordinator) for group's
// committed offset of topic's partition p (OffsetFetch), -1 when none.
func CommittedOffset(ctx context.Context, c Cluster, id int, group, topic string, p int32) (int64, error) {
	// From v10 on (KIP-848), OffsetFetch names topics by id.
	md, err := c.Request(ctx, id, MetadataRequest([]string{topic}))
	if err != nil {
		return 0, fmt.Errorf("node %d: %w", id, err)
	}
	var topicID [16]byte
	for _, t := range md.(*kmsg.MetadataResponse).Topics {
		if t.Topic != nil && *t.Topic == topic {
			topicID = t.TopicID
		}
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{p}
	req.Topics = append(req.Topics, rt)
	// From v8 on, the groups are a list.
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	gt := kmsg.NewOffsetFetchRequestGroupTopic()
	gt.Topic, gt.TopicID, gt.Partitions = topic, topicID, []int32{p}
	rg.Topics = append(rg.Topics, gt)
	req.Groups = append(req.Groups, rg)
	resp, err := c.Request(ctx, id, req)
	if err != nil {
		return 0, fmt.Errorf("node %d: %w", id, err)
	}
	r := resp.(*kmsg.OffsetFetchResponse)
	code := r.ErrorCode
	offset := int64(-1)
	for _, t := range r.Topics {
		for _, tp := range t.Partitions {
			if t.Topic == topic && tp.Partition == p {
				offset = tp.Offset
				if tp.ErrorCode != 0 {
					code = tp.ErrorCode
				}
			}
		}
	}
	for _, g := range r.Groups {
		if g.ErrorCode != 0 {
			code = g.ErrorCode
		}
		for _, t := range g.Topics {
			for _, tp := range t.Partitions {
				if (t.Topic == topic || t.TopicID == topicID) && tp.Partition == p {
					offset = tp.Offset
					if tp.ErrorCode != 0 {
						code = tp.ErrorCode
					}
				}
			}
		}
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return 0, fmt.Errorf("node %d: offsets of %s: %w", id, group, err)
	}
	return offset, nil
}

// WaitPreferredLeaders waits until every partition of every topic, as
// every live broker's Metadata shows it, is led by its preferred replica
// (the first of its replicas) wherever that replica is live and in the
// ISR: after a restart, the controller's automatic preferred-leader
// election (auto.leader.rebalance.enable, every
// leader.imbalance.check.interval.seconds) has handed the restarted node
// its leaderships back.
func WaitPreferredLeaders(ctx context.Context, c Cluster) error {
	return Poll(ctx, PollInterval, func() error {
		for _, b := range LiveBrokers(c) {
			resp, err := c.Request(ctx, b, MetadataRequest(nil))
			if err != nil {
				return fmt.Errorf("node %d: %w", b, err)
			}
			for _, tp := range resp.(*kmsg.MetadataResponse).Topics {
				for _, p := range tp.Partitions {
					if len(p.Replicas) == 0 {
						continue
					}
					pref := p.Replicas[0]
					if p.Leader != pref && c.Live(int(pref)) && slices.Contains(p.ISR, pref) {
						return fmt.Errorf("node %d: %s/%d led by %d, not its preferred replica %d", b, *tp.Topic, p.Partition, p.Leader, pref)
					}
				}
			}
		}
		return nil
	})
}

// LogEnd returns the log end offset of topic's partition p (ListOffsets
// latest, read_uncommitted: the high watermark) as its leader answers.
func LogEnd(ctx context.Context, c Cluster, topic string, p int32) (int64, error) {
	leader, err := Leader(ctx, c, topic, p)
	if err != nil {
		return 0, err
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = p, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := c.Request(ctx, leader, req)
	if err != nil {
		return 0, fmt.Errorf("node %d: %w", leader, err)
	}
	for _, t := range resp.(*kmsg.ListOffsetsResponse).Topics {
		for _, tp := range t.Partitions {
			if err := kerr.ErrorForCode(tp.ErrorCode); err != nil {
				return 0, fmt.Errorf("node %d: %s/%d: %w", leader, topic, p, err)
			}
			return tp.Offset, nil
		}
	}
	return 0, fmt.Errorf("node %d: no %s/%d in the ListOffsets answer", leader, topic, p)
}

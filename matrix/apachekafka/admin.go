package apachekafka

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// This file asks a Cluster about itself over the wire, each request sent to
// one named node so that a dead or paused node is never waited on.

// metadataTopic and metadataPartition name the KRaft metadata log, the
// partition DescribeQuorum describes.
const (
	metadataTopic     = "__cluster_metadata"
	metadataPartition = 0
)

// ErrNoActiveController reports that no live controller claims the
// leadership of the metadata quorum.
var ErrNoActiveController = errors.New("apachekafka: no active controller")

func (c *Cluster) send(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	return c.conns.Send(ctx, addr, req)
}

// dropClients closes the cached clients of a node's listeners, whose
// connections a kill or restart has ended.
func (c *Cluster) dropClients(n *Node) { c.conns.Drop(n.Addr, n.ControllerAddr) }

// Request sends req to the broker listener of node id and returns its
// response, without retries or routing: Kafka answers, forwards (as a
// broker forwards CreateTopics to the active controller) or refuses.
func (c *Cluster) Request(ctx context.Context, id int, req kmsg.Request) (kmsg.Response, error) {
	n, err := c.node(id)
	if err != nil {
		return nil, err
	}
	if !n.IsBroker() {
		return nil, fmt.Errorf("apachekafka: node %d runs no broker", id)
	}
	return c.send(ctx, n.Addr, req)
}

// ControllerRequest sends req to the controller listener of node id.
func (c *Cluster) ControllerRequest(ctx context.Context, id int, req kmsg.Request) (kmsg.Response, error) {
	n, err := c.node(id)
	if err != nil {
		return nil, err
	}
	if !n.IsController() {
		return nil, fmt.Errorf("apachekafka: node %d is not a controller", id)
	}
	return c.send(ctx, n.ControllerAddr, req)
}

// Live reports whether node id is running and not paused.
func (c *Cluster) Live(id int) bool {
	n := c.Node(id)
	return n != nil && n.Running() && !c.isPaused(n)
}

// brokerRegistered succeeds once node id's broker lists itself in Metadata:
// registered with the controller and unfenced.
func (c *Cluster) brokerRegistered(ctx context.Context, id int) error {
	return cluster.Registered(ctx, c, id)
}

// controllerAnswers succeeds once node id's controller listener answers
// DescribeQuorum, with the quorum or with NOT_LEADER_OR_FOLLOWER (a
// follower's answer, as Kafka's KafkaRaftClient gives it).
func (c *Cluster) controllerAnswers(ctx context.Context, id int) error {
	_, err := c.describeQuorum(ctx, id)
	if err == nil || errors.Is(err, kerr.NotLeaderForPartition) {
		return nil
	}
	return err
}

// Quorum is the metadata quorum as its leader describes it (DescribeQuorum,
// API 55).
type Quorum struct {
	// LeaderID is the active controller's node id.
	LeaderID int
	// LeaderEpoch is the leader's epoch; each election raises it.
	LeaderEpoch int32
	// HighWatermark is the committed end of the metadata log.
	HighWatermark int64
	// Voters maps each voter's id to its log end offset as the leader saw it.
	Voters map[int]int64
}

// ActiveController asks every live controller for the metadata quorum
// (DescribeQuorum, answered by the quorum's leader only, as Kafka's
// KafkaRaftClient refuses it on a follower) and returns the description
// from the controller that reports itself leader at the highest epoch.
func (c *Cluster) ActiveController(ctx context.Context) (Quorum, error) {
	var best Quorum
	found := false
	var errs []error
	for _, n := range c.nodes {
		if !n.IsController() || !c.Live(n.ID) {
			continue
		}
		q, err := c.describeQuorum(ctx, n.ID)
		if err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", n.ID, err))
			continue
		}
		if q.LeaderID != n.ID {
			continue
		}
		if !found || q.LeaderEpoch > best.LeaderEpoch {
			best, found = q, true
		}
	}
	if !found {
		return Quorum{}, fmt.Errorf("%w: %w", ErrNoActiveController, errors.Join(errs...))
	}
	return best, nil
}

func (c *Cluster) describeQuorum(ctx context.Context, id int) (Quorum, error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = metadataTopic
	p := kmsg.NewDescribeQuorumRequestTopicPartition()
	p.Partition = metadataPartition
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp, err := c.ControllerRequest(ctx, id, req)
	if err != nil {
		return Quorum{}, err
	}
	r := resp.(*kmsg.DescribeQuorumResponse)
	if r.ErrorCode != 0 {
		return Quorum{}, kerr.ErrorForCode(r.ErrorCode)
	}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			if t.Topic != metadataTopic || p.Partition != metadataPartition {
				continue
			}
			if p.ErrorCode != 0 {
				return Quorum{}, kerr.ErrorForCode(p.ErrorCode)
			}
			q := Quorum{LeaderID: int(p.LeaderID), LeaderEpoch: p.LeaderEpoch, HighWatermark: p.HighWatermark,
				Voters: map[int]int64{}}
			for _, v := range p.CurrentVoters {
				q.Voters[int(v.ReplicaID)] = v.LogEndOffset
			}
			return q, nil
		}
	}
	return Quorum{}, errors.New("DescribeQuorum response lacks the metadata partition")
}

// WaitForControllerChange waits until a live controller other than old
// claims the quorum's leadership, and returns its description.
func (c *Cluster) WaitForControllerChange(ctx context.Context, old int) (Quorum, error) {
	var q Quorum
	err := poll(ctx, func() error {
		var err error
		q, err = c.ActiveController(ctx)
		if err == nil && q.LeaderID == old {
			err = fmt.Errorf("node %d still leads the quorum at epoch %d", old, q.LeaderEpoch)
		}
		return err
	})
	return q, err
}

// PartitionState is one partition as a broker's Metadata reports it.
type PartitionState struct {
	Topic     string
	Partition int32
	// Leader is the leader's node id, or -1 when the partition has none.
	Leader      int
	LeaderEpoch int32
	Replicas    []int
	ISR         []int
}

// metadata asks the live brokers in id order, except avoid when another is
// live, and returns the first answer. Nil topics asks for every topic.
func (c *Cluster) metadata(ctx context.Context, topics []string, avoid int) (*kmsg.MetadataResponse, error) {
	return cluster.Metadata(ctx, c, topics, avoid)
}

// Partition returns the leader, replicas and ISR of topic's partition p.
func (c *Cluster) Partition(ctx context.Context, topic string, p int32) (PartitionState, error) {
	md, err := c.metadata(ctx, []string{topic}, 0)
	if err != nil {
		return PartitionState{}, err
	}
	for _, t := range md.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if t.ErrorCode != 0 {
			return PartitionState{}, fmt.Errorf("apachekafka: topic %s: %w", topic, kerr.ErrorForCode(t.ErrorCode))
		}
		for _, mp := range t.Partitions {
			if mp.Partition == p {
				return partitionState(topic, mp), nil
			}
		}
	}
	return PartitionState{}, fmt.Errorf("apachekafka: Metadata lacks %s/%d", topic, p)
}

func partitionState(topic string, mp kmsg.MetadataResponseTopicPartition) PartitionState {
	ints := func(s []int32) []int {
		out := make([]int, len(s))
		for i, v := range s {
			out[i] = int(v)
		}
		return out
	}
	// A partition without a leader is reported with LEADER_NOT_AVAILABLE
	// and leader -1; its replicas and ISR are still meaningful.
	return PartitionState{Topic: topic, Partition: mp.Partition, Leader: int(mp.Leader), LeaderEpoch: mp.LeaderEpoch,
		Replicas: ints(mp.Replicas), ISR: ints(mp.ISR)}
}

// PartitionLeader returns the node id leading topic's partition p, or -1
// when it has none.
func (c *Cluster) PartitionLeader(ctx context.Context, topic string, p int32) (int, error) {
	ps, err := c.Partition(ctx, topic, p)
	return ps.Leader, err
}

// WaitForLeaderChange waits until topic's partition p has a leader other
// than old, and returns the partition then.
func (c *Cluster) WaitForLeaderChange(ctx context.Context, topic string, p int32, old int) (PartitionState, error) {
	var ps PartitionState
	err := poll(ctx, func() error {
		var err error
		ps, err = c.Partition(ctx, topic, p)
		if err == nil && (ps.Leader < 0 || ps.Leader == old) {
			err = fmt.Errorf("%s/%d leader is %d", topic, p, ps.Leader)
		}
		return err
	})
	return ps, err
}

// WaitForISR waits until topic's partition p has a leader and exactly n
// replicas in its ISR.
func (c *Cluster) WaitForISR(ctx context.Context, topic string, p int32, n int) (PartitionState, error) {
	var ps PartitionState
	err := poll(ctx, func() error {
		var err error
		ps, err = c.Partition(ctx, topic, p)
		if err == nil && (ps.Leader < 0 || len(ps.ISR) != n) {
			err = fmt.Errorf("%s/%d leader %d ISR %v", topic, p, ps.Leader, ps.ISR)
		}
		return err
	})
	return ps, err
}

// WaitForNodeInISRs waits until node id is in the ISR of every partition,
// of every topic including the internal ones, that it is a replica of, as
// the other brokers' Metadata reports it.
func (c *Cluster) WaitForNodeInISRs(ctx context.Context, id int) error {
	return poll(ctx, func() error {
		md, err := c.metadata(ctx, nil, id)
		if err != nil {
			return err
		}
		missing := 0
		var first string
		for _, t := range md.Topics {
			for _, mp := range t.Partitions {
				if slices.Contains(mp.Replicas, int32(id)) && !slices.Contains(mp.ISR, int32(id)) {
					if missing == 0 && t.Topic != nil {
						first = fmt.Sprintf("%s/%d ISR %v", *t.Topic, mp.Partition, mp.ISR)
					}
					missing++
				}
			}
		}
		if missing > 0 {
			return fmt.Errorf("node %d is outside %d ISRs, first %s", id, missing, first)
		}
		return nil
	})
}

// WaitForBrokers waits until every live broker's Metadata lists exactly the
// given broker ids (registered and unfenced), so that a crashed broker's
// fencing is seen (cluster.WaitForBrokers).
func (c *Cluster) WaitForBrokers(ctx context.Context, ids ...int) error {
	return cluster.WaitForBrokers(ctx, c, ids...)
}

// poll calls f every cluster.PollInterval until it returns nil or ctx
// ends.
func poll(ctx context.Context, f func() error) error {
	return cluster.Poll(ctx, cluster.PollInterval, f)
}

package clusterctl

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// Isolator is a cluster that can cut a node off from its peers while
// clients still reach it (brokertest's Isolate).
type Isolator interface {
	// Isolated reports whether node id is cut off from its peers now.
	Isolated(id int) bool
}

// ErrNotReplica reports a MoveLeader to a node that holds no replica of
// the partition.
var ErrNotReplica = errors.New("clusterctl: not a replica of the partition")

// ErrNoReachableNode reports that every node is down, paused or cut off.
var ErrNoReachableNode = errors.New("clusterctl: no live node that is not cut off")

// Reachable reports whether node id is live (running, not paused) and not
// cut off from its peers.
func Reachable(c cluster.Cluster, id int) bool {
	if !c.Live(id) {
		return false
	}
	if iso, ok := c.(Isolator); ok && iso.Isolated(id) {
		return false
	}
	return true
}

// Partition returns topic's partition as the Metadata of the first
// reachable node in id order names it.
func Partition(ctx context.Context, c cluster.Cluster, topic string, partition int32) (kmsg.MetadataResponseTopicPartition, error) {
	var none kmsg.MetadataResponseTopicPartition
	var errs []error
	req := cluster.MetadataRequest([]string{topic})
	for _, id := range c.BrokerIDs() {
		if !Reachable(c, id) {
			continue
		}
		resp, err := c.Request(ctx, id, req)
		if err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", id, err))
			continue
		}
		for _, mt := range resp.(*kmsg.MetadataResponse).Topics {
			if mt.Topic == nil || *mt.Topic != topic {
				continue
			}
			if err := kerr.ErrorForCode(mt.ErrorCode); err != nil {
				return none, fmt.Errorf("topic %s: %w", topic, err)
			}
			for _, mp := range mt.Partitions {
				if mp.Partition == partition {
					return mp, kerr.ErrorForCode(mp.ErrorCode)
				}
			}
		}
		return none, fmt.Errorf("%s-%d is not in node %d's Metadata", topic, partition, id)
	}
	if len(errs) == 0 {
		return none, ErrNoReachableNode
	}
	return none, errors.Join(errs...)
}

// Leader waits until a reachable node leads topic's partition, as a
// reachable node's Metadata names it, and returns its id.
func Leader(ctx context.Context, c cluster.Cluster, topic string, partition int32) (int, error) {
	leader := -1
	err := cluster.Poll(ctx, cluster.PollInterval, func() error {
		mp, err := Partition(ctx, c, topic, partition)
		if err != nil {
			return err
		}
		if !Reachable(c, int(mp.Leader)) {
			return fmt.Errorf("%s-%d's leader is %d, not a reachable node", topic, partition, mp.Leader)
		}
		leader = int(mp.Leader)
		return nil
	})
	if err != nil {
		return -1, fmt.Errorf("clusterctl: leader of %s-%d: %w", topic, partition, err)
	}
	return leader, nil
}

// WaitISR waits until topic's partition has a reachable leader and exactly
// n in-sync replicas, as a reachable node's Metadata says.
func WaitISR(ctx context.Context, c cluster.Cluster, topic string, partition int32, n int) error {
	err := cluster.Poll(ctx, cluster.PollInterval, func() error {
		mp, err := Partition(ctx, c, topic, partition)
		if err != nil {
			return err
		}
		if !Reachable(c, int(mp.Leader)) || len(mp.ISR) != n {
			return fmt.Errorf("%s-%d: leader %d, ISR %v", topic, partition, mp.Leader, mp.ISR)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("clusterctl: ISR of %s-%d not %d: %w", topic, partition, n, err)
	}
	return nil
}

// Replicas returns topic's partition's replicas, as Metadata lists them.
func Replicas(ctx context.Context, c cluster.Cluster, topic string, partition int32) ([]int, error) {
	mp, err := Partition(ctx, c, topic, partition)
	if err != nil {
		return nil, fmt.Errorf("clusterctl: replicas of %s-%d: %w", topic, partition, err)
	}
	ids := make([]int, len(mp.Replicas))
	for i, r := range mp.Replicas {
		ids[i] = int(r)
	}
	return ids, nil
}

// Controller waits until a reachable voter leads the metadata quorum
// (DescribeQuorum on the controller listeners, KIP-595) and returns it:
// the active controller. A voter cut off from the others may still report
// itself leader of an older epoch; the highest epoch wins, and a cut-off
// voter is never named.
func Controller(ctx context.Context, c cluster.Cluster) (int, error) {
	id := -1
	err := cluster.Poll(ctx, cluster.PollInterval, func() error {
		var err error
		id, _, err = cluster.QuorumLeader(ctx, c)
		if err == nil && !Reachable(c, id) {
			return fmt.Errorf("the quorum's leader is node %d, which is cut off", id)
		}
		return err
	})
	if err != nil {
		return -1, fmt.Errorf("clusterctl: %w", err)
	}
	return id, nil
}

// MoveLeader makes node the leader of topic's partition and waits until
// Metadata names it, as an operator does with kafka-reassign-partitions
// and kafka-leader-election.sh: a node that is not the partition's first
// (preferred) replica is made first by a reassignment that only reorders
// the replicas (AlterPartitionReassignments, KIP-455, complete at once),
// then a preferred leader election (ElectLeaders, KIP-460) moves the
// leadership. node must be a replica in the ISR; a node with no replica
// is ErrNotReplica.
func MoveLeader(ctx context.Context, c cluster.Cluster, topic string, partition int32, node int) error {
	mp, err := Partition(ctx, c, topic, partition)
	if err != nil {
		return fmt.Errorf("clusterctl: move leader of %s-%d: %w", topic, partition, err)
	}
	order := []int32{int32(node)}
	for _, r := range mp.Replicas {
		if int(r) != node {
			order = append(order, r)
		}
	}
	if len(order) != len(mp.Replicas) {
		return fmt.Errorf("%w: %s-%d's replicas are %v, not node %d", ErrNotReplica, topic, partition, mp.Replicas, node)
	}
	if int(mp.Leader) == node {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(ReachableSeeds(c)...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if int(mp.Replicas[0]) != node {
		req := kadm.AlterPartitionAssignmentsReq{}
		req.Assign(topic, partition, order)
		res, err := adm.AlterPartitionAssignments(ctx, req)
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			return fmt.Errorf("clusterctl: reorder the replicas of %s-%d to %v: %w", topic, partition, order, err)
		}
		err = cluster.Poll(ctx, cluster.PollInterval, func() error {
			mp, err := Partition(ctx, c, topic, partition)
			if err != nil {
				return err
			}
			if int(mp.Replicas[0]) != node {
				return fmt.Errorf("Metadata names replicas %v", mp.Replicas)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("clusterctl: reorder the replicas of %s-%d: %w", topic, partition, err)
		}
	}
	set := kadm.TopicsSet{}
	set.Add(topic, partition)
	err = cluster.Poll(ctx, cluster.PollInterval, func() error {
		res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
		if err != nil {
			return err
		}
		r := res[topic][partition]
		// ELECTION_NOT_NEEDED: it leads already (Metadata was behind).
		if r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded) {
			return r.Err
		}
		mp, err := Partition(ctx, c, topic, partition)
		if err != nil {
			return err
		}
		if int(mp.Leader) != node {
			return fmt.Errorf("Metadata names leader %d", mp.Leader)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("clusterctl: move leader of %s-%d to node %d: %w", topic, partition, node, err)
	}
	return nil
}

// ReachableSeeds returns the client addresses (Seeds) of the reachable
// nodes.
func ReachableSeeds(c cluster.Cluster) []string {
	seeds := c.Seeds()
	var as []string
	for i, id := range c.BrokerIDs() {
		if i < len(seeds) && Reachable(c, id) {
			as = append(as, seeds[i])
		}
	}
	return slices.Clip(as)
}

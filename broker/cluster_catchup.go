package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// voterCatchUp is a combined node's initial metadata catch-up, before its
// client listener serves: its quorum member replays its own log first,
// which may end well before what the quorum committed while the node was
// away, and the broker store would meanwhile show the node live and
// leading its partitions at their old epochs. The node asks the active
// controller for its high watermark (DescribeQuorum on its controller
// listener) and waits until it has applied that far; leading the quorum
// itself, it waits for its activation barrier, whose commit covers every
// earlier entry. It returns the applied index it waited for.
func (n *clusterNode) voterCatchUp(ctx context.Context) (uint64, error) {
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		id, addr, ok := n.leader()
		switch {
		case !ok:
		case id == n.self:
			if n.active.isActive() {
				applied, _ := n.raft.Applied()
				return applied, nil
			}
		default:
			if hw, err := n.leaderHighWatermark(ctx, addr); err == nil {
				if err := n.awaitApplied(ctx, hw); err != nil {
					return 0, err
				}
				return hw, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-n.raft.Done():
			return 0, fmt.Errorf("broker: the metadata quorum stopped: %w", n.raft.Err())
		case <-n.raft.LeaderChanged():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// leaderHighWatermark asks the controller at addr for the metadata log's
// high watermark.
func (n *clusterNode) leaderHighWatermark(ctx context.Context, addr string) (uint64, error) {
	r := kmsg.NewPtrDescribeQuorumRequest()
	r.SetVersion(0)
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = metadataTopic
	t.Partitions = append(t.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	r.Topics = append(r.Topics, t)
	resp, err := n.heartbeats.do(ctx, addr, r)
	if err != nil {
		return 0, err
	}
	dq := resp.(*kmsg.DescribeQuorumResponse)
	if dq.ErrorCode != 0 || len(dq.Topics) != 1 || len(dq.Topics[0].Partitions) != 1 || dq.Topics[0].Partitions[0].ErrorCode != 0 {
		return 0, fmt.Errorf("broker: DescribeQuorum of %s refused", addr)
	}
	return uint64(max(0, dq.Topics[0].Partitions[0].HighWatermark)), nil
}

// awaitApplied waits until the quorum member applied index.
func (n *clusterNode) awaitApplied(ctx context.Context, index uint64) error {
	for {
		applied, moved := n.raft.Applied()
		if applied >= index {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-n.raft.Done():
			return fmt.Errorf("broker: the metadata quorum stopped: %w", n.raft.Err())
		case <-moved:
		}
	}
}

package matrix_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// quorumAnswer is DescribeQuorum (KIP-595, KIP-853) as the voters answer
// it on their controller listeners: the leader's description, and what the
// others answered.
type quorumAnswer struct {
	Leader    *quorumLeaderAnswer
	Followers []string
}

type quorumLeaderAnswer struct {
	LeaderEpochAboveZero bool
	HighWatermarkSet     bool
	Voters               []string
	VotersWithOffsets    bool
	Observers            int
	// Nodes are the voters' controller endpoints (v2): a name, and whether
	// it is the voter's controller listener.
	Nodes []string
}

// stepDescribeQuorum asks every voter's controller listener for the
// metadata quorum.
func stepDescribeQuorum(ctx context.Context, t *testing.T, r *clusterRun) (any, error) {
	var a quorumAnswer
	for _, id := range cluster.LiveBrokers(r.c) {
		resp, err := r.c.ControllerRequest(ctx, id, cluster.DescribeQuorumRequest())
		if err != nil {
			t.Logf("DescribeQuorum on node %d's controller listener: %v", id, err)
			a.Followers = append(a.Followers, "no answer")
			continue
		}
		qr := resp.(*kmsg.DescribeQuorumResponse)
		if qr.ErrorCode != 0 || len(qr.Topics) != 1 || len(qr.Topics[0].Partitions) != 1 {
			a.Followers = append(a.Followers, fmt.Sprintf("%s, %d topics", codeName(qr.ErrorCode), len(qr.Topics)))
			continue
		}
		p := qr.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || int(p.LeaderID) != id {
			a.Followers = append(a.Followers, fmt.Sprintf("error %s, leader is a live voter: %v", codeName(p.ErrorCode),
				controllerLabel(r.c, p.LeaderID) == "live voter"))
			continue
		}
		if a.Leader != nil {
			return nil, errors.New("two voters claim the leadership")
		}
		l := &quorumLeaderAnswer{LeaderEpochAboveZero: p.LeaderEpoch > 0, HighWatermarkSet: p.HighWatermark > 0,
			VotersWithOffsets: true, Observers: len(p.Observers)}
		for _, v := range p.CurrentVoters {
			l.Voters = append(l.Voters, strconv.Itoa(int(v.ReplicaID)))
			l.VotersWithOffsets = l.VotersWithOffsets && v.LogEndOffset >= 0
		}
		slices.Sort(l.Voters)
		for _, n := range qr.Nodes {
			for _, ln := range n.Listeners {
				own := r.c.ControllerAddr(int(n.NodeID)) == fmt.Sprintf("%s:%d", ln.Host, ln.Port)
				l.Nodes = append(l.Nodes, fmt.Sprintf("%d %s own listener %v", n.NodeID, ln.Name, own))
			}
		}
		slices.Sort(l.Nodes)
		a.Leader = l
	}
	slices.Sort(a.Followers)
	if a.Leader == nil && !slices.Contains(a.Followers, "no answer") {
		return nil, fmt.Errorf("no voter leads the quorum: %v", a.Followers)
	}
	return a, nil
}

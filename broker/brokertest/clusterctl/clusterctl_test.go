package clusterctl

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// fake is a three-node cluster whose nodes answer Metadata from a
// fixed view each, some of them down or cut off.
type fake struct {
	cluster.Cluster // unused methods panic
	live, cut       map[int]bool
	leaderSeen      map[int]int32 // node -> the leader its Metadata names
	asked           []int
}

func (f *fake) BrokerIDs() []int     { return []int{1, 2, 3} }
func (f *fake) Seeds() []string      { return []string{"a:1", "b:2", "c:3"} }
func (f *fake) Live(id int) bool     { return f.live[id] }
func (f *fake) Isolated(id int) bool { return f.cut[id] }
func (f *fake) Request(_ context.Context, id int, _ kmsg.Request) (kmsg.Response, error) {
	f.asked = append(f.asked, id)
	resp := kmsg.NewPtrMetadataResponse()
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr("t")
	mp := kmsg.NewMetadataResponseTopicPartition()
	mp.Leader, mp.Replicas, mp.ISR = f.leaderSeen[id], []int32{1, 2, 3}, []int32{1, 2, 3}
	mt.Partitions = append(mt.Partitions, mp)
	resp.Topics = append(resp.Topics, mt)
	return resp, nil
}

// TestCutOffNodeIsNeitherAskedNorNamed checks that an isolated node, which
// still names itself leader, is not asked and not returned, and that the
// reachable nodes' view wins.
func TestCutOffNodeIsNeitherAskedNorNamed(t *testing.T) {
	f := &fake{live: map[int]bool{1: true, 2: true, 3: true}, cut: map[int]bool{1: true},
		leaderSeen: map[int]int32{1: 1, 2: 2, 3: 2}}
	if Reachable(f, 1) || !Reachable(f, 2) {
		t.Fatalf("Reachable: 1 %v, 2 %v", Reachable(f, 1), Reachable(f, 2))
	}
	if got := ReachableSeeds(f); !slices.Equal(got, []string{"b:2", "c:3"}) {
		t.Fatalf("ReachableSeeds %v", got)
	}
	l, err := Leader(context.Background(), f, "t", 0)
	if err != nil || l != 2 {
		t.Fatalf("Leader %d (%v), want 2", l, err)
	}
	if slices.Contains(f.asked, 1) {
		t.Fatalf("the isolated node was asked: %v", f.asked)
	}
	// While the others still name the isolated node, Leader waits.
	f.leaderSeen[2], f.leaderSeen[3] = 1, 1
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if l, err := Leader(ctx, f, "t", 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Leader while only the isolated node is named: %d (%v), want a timeout", l, err)
	}
	f.live[2], f.live[3] = false, false
	if _, err := Partition(context.Background(), f, "t", 0); !errors.Is(err, ErrNoReachableNode) {
		t.Fatalf("with only the isolated node live: %v, want ErrNoReachableNode", err)
	}
	f.live[2] = true
	if err := MoveLeader(context.Background(), f, "t", 0, 4); !errors.Is(err, ErrNotReplica) {
		t.Fatalf("MoveLeader to node 4: %v, want ErrNotReplica", err)
	}
}

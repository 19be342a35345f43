package matrix_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// The conformance steps that crash a broker and bring it back. Node ids are
// named by their part ("C" the controller, "V" the victim, "O" the third),
// since the two clusters' controllers differ.

// afterFailureAnswer is the cluster as its live brokers agree on it.
type afterFailureAnswer struct {
	Topic           any
	Brokers         any
	DescribeCluster any
}

// answerAfterFailure waits until every live broker reports assignedTopic as
// ready says, and returns it with the brokers and DescribeCluster.
func answerAfterFailure(ctx context.Context, r *clusterRun, ready func(topicAnswer) error) (afterFailureAnswer, error) {
	l := roleLabels(r.controller, r.victim)
	topic, err := settled(ctx, r.c, l, assignedTopic, ready)
	if err != nil {
		return afterFailureAnswer{}, err
	}
	topic = byRole(topic.(topicAnswer))
	brokers, err := eachBroker(ctx, r.c, func(id int) (any, error) {
		md, err := metadataOn(ctx, r.c, id, []string{})
		if err != nil {
			return nil, err
		}
		return metadataOf(r.c, l, md).Brokers, nil
	})
	if err != nil {
		return afterFailureAnswer{}, err
	}
	dc, err := eachBroker(ctx, r.c, func(id int) (any, error) { return describeCluster(ctx, r.c, l, id) })
	if err != nil {
		return afterFailureAnswer{}, err
	}
	return afterFailureAnswer{topic, brokers, dc}, nil
}

// byRole drops the partition numbers of a topic and sorts its partitions
// by their replicas' parts: which partitions the victim led depends on its
// id, which the two clusters may choose differently, but with two
// partitions on each broker the states by part must be the same.
func byRole(ta topicAnswer) topicAnswer {
	ps := slices.Clone(ta.Partitions)
	for i := range ps {
		ps[i].Partition = -1
	}
	slices.SortStableFunc(ps, func(a, b partitionAnswer) int {
		return cmpString(fmt.Sprint(a.Replicas, a.Leader, a.LeaderEpoch), fmt.Sprint(b.Replicas, b.Leader, b.LeaderEpoch))
	})
	ta.Partitions = ps
	return ta
}

// stepKill crashes (kill -9) the lowest-numbered broker that is not the
// active controller, waits until the cluster fenced it (gone from
// Metadata) and its RF=1 partitions of assignedTopic have no leader, and
// reports the cluster then.
func stepKill(ctx context.Context, t *testing.T, r *clusterRun) (any, error) {
	ctl, err := r.active(ctx, r.c)
	if err != nil {
		return nil, err
	}
	r.controller, r.victim = ctl, 0
	for _, id := range r.c.BrokerIDs() {
		if id != ctl {
			r.victim = id
			break
		}
	}
	killed := time.Now()
	if err := r.c.Kill(r.victim); err != nil {
		return nil, err
	}
	others := slices.DeleteFunc(r.c.BrokerIDs(), func(id int) bool { return id == r.victim })
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := cluster.WaitForBrokers(wctx, r.c, others...); err != nil {
		return nil, fmt.Errorf("killed node %d never fenced: %w", r.victim, err)
	}
	t.Logf("kill -9 of node %d (controller %d): fenced after %v", r.victim, ctl, time.Since(killed).Round(time.Millisecond))
	return answerAfterFailure(wctx, r, func(ta topicAnswer) error {
		for _, p := range ta.Partitions {
			if led := slices.Equal(p.Replicas, []string{"V"}); led != (p.Leader == "-1") {
				return fmt.Errorf("%s/%d replicas %v leader %s", assignedTopic, p.Partition, p.Replicas, p.Leader)
			}
		}
		return nil
	})
}

// stepRestart restarts the victim on its directory and waits until it is
// registered again and leads its partitions.
func stepRestart(ctx context.Context, t *testing.T, r *clusterRun) (any, error) {
	if r.victim == 0 {
		return nil, fmt.Errorf("no node was killed")
	}
	start := time.Now()
	if err := r.c.Restart(ctx, r.victim); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := cluster.WaitForBrokers(wctx, r.c, r.c.BrokerIDs()...); err != nil {
		return nil, err
	}
	t.Logf("node %d restarted and in Metadata after %v", r.victim, time.Since(start).Round(time.Millisecond))
	return answerAfterFailure(wctx, r, func(ta topicAnswer) error {
		for _, p := range ta.Partitions {
			if p.Leader == "-1" {
				return fmt.Errorf("%s/%d has no leader yet", assignedTopic, p.Partition)
			}
		}
		return nil
	})
}

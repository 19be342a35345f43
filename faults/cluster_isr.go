package faults

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// replicaLagTimeMax is the suites' replica.lag.time.max.ms: a follower
// that has not caught up for this long leaves the ISR (Kafka's
// Partition.maybeShrinkIsr). Short enough that a follower cut off from
// its leader is out within a fault.
const replicaLagTimeMax = 5 * time.Second

// An isolated follower must leave its partitions' ISR within isrShrinkBound
// of the cut: replica.lag.time.max.ms, or the broker session when the
// controller fences it first, plus the time to see it on a loaded
// machine; after the heal it must be back within isrGrowBound.
const (
	isrShrinkBound = replicaLagTimeMax + 15*time.Second
	isrGrowBound   = 45 * time.Second
)

// isolateFollowerFault cuts a follower of the watched partition from both
// other nodes, clients still reaching it, as Kafka's
// replication_replica_failure_test: the ISR must shrink without it and
// grow back after the heal. Either not happening within its bound fails
// the fault.
func (t *ClusterTarget) isolateFollowerFault(w Watch) Fault {
	var id int
	var note string
	return Fault{
		Name: "isolate:" + string(RoleFollower),
		Apply: func(ctx context.Context) error {
			var err error
			if id, err = t.holderWithin(ctx, RoleFollower, w, holderBound); err != nil {
				return err
			}
			// A follower still catching up from an earlier fault would
			// leave no ISR to shrink.
			if err := t.waitInISR(ctx, w, id, true, isrGrowBound); err != nil {
				return fmt.Errorf("before the cut: %w", err)
			}
			start := time.Now()
			if err := t.Net.Isolate(id); err != nil {
				return err
			}
			if err := t.waitInISR(ctx, w, id, false, isrShrinkBound); err != nil {
				return fmt.Errorf("the ISR did not shrink: %w", err)
			}
			note = fmt.Sprintf("node %d, out of the ISR after %.1f s", id, time.Since(start).Seconds())
			return nil
		},
		Heal: func(context.Context) error { return t.Net.Heal() },
		Recovered: func(ctx context.Context) error {
			if err := t.waitInISR(ctx, w, id, true, isrGrowBound); err != nil {
				return fmt.Errorf("the ISR did not grow back: %w", err)
			}
			return nil
		},
		Note: func() string { return note },
	}
}

// waitInISR waits until node id is (in true) or is not (in false) in the
// watched partition's ISR, as the other nodes see it, or bound passes.
func (t *ClusterTarget) waitInISR(ctx context.Context, w Watch, id int, in bool, bound time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var last []int
	err := cluster.Poll(wctx, 200*time.Millisecond, func() error {
		isr, err := t.isrWithout(wctx, w, id)
		if err != nil {
			return err
		}
		last = isr
		if slices.Contains(isr, id) != in {
			return fmt.Errorf("ISR %v", isr)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("node %d in %s-%d's ISR %v after %v (want in: %v): %w", id, w.Topic, w.Partition, last, bound, in, err)
	}
	return nil
}

// isrWithout returns the watched partition's ISR as the live nodes other
// than skip show it, taking the view of the latest leader epoch.
func (t *ClusterTarget) isrWithout(ctx context.Context, w Watch, skip int) ([]int, error) {
	views, err := latestViews(ctx, t, w.Topic, skip)
	if err != nil {
		return nil, err
	}
	mp, ok := views[w.Partition]
	if !ok {
		return nil, fmt.Errorf("no node showed %s-%d", w.Topic, w.Partition)
	}
	return isrOf(mp), nil
}

package clienttest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

// The staggered join: three franz-go members of one classic group join a
// few hundred milliseconds apart under Kafka's default
// group.initial.rebalance.delay.ms (3000). As Kafka's InitialDelayedJoin,
// the first generation should hold all three, so the group reads the
// topic with no member expired by its own session timeout while it waits.
const (
	staggerRuns     = 30                     // runs of the story in one test
	staggerParallel = 6                      // groups joining at once on the broker
	staggerRecords  = 6000                   // records of the topic
	staggerParts    = 6                      // partitions of the topic
	staggerGap      = 300 * time.Millisecond // between two members' starts
	staggerBound    = 25 * time.Second       // Apache Kafka 4.4 runs it in about 6 s
	staggerSession  = 6 * time.Second        // the members' session timeout
	staggerHB       = 500 * time.Millisecond // the members' heartbeat interval
)

// TestStaggeredJoin runs the staggered join staggerRuns times, in groups
// of staggerParallel on one broker with the default initial rebalance
// delay, and asserts that every run reads all records and commits exactly
// the partitions' ends within staggerBound.
func TestStaggeredJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("30 runs of real rebalances, about 40 s")
	}
	b := brokertest.Start(t) // group.initial.rebalance.delay.ms=3000
	const topic = "staggered"
	adm := b.Admin(t)
	if _, err := adm.CreateTopic(ctxFor(t, 10*time.Second), staggerParts, 1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	produce(t, b, topic, 0, staggerRecords)
	ends, err := adm.ListEndOffsets(ctxFor(t, 5*time.Second), topic)
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	end := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { end[o.Partition] = o.Offset })
	staggeredRuns(t, b.Addr(), adm, topic, end)
}

// staggeredRuns runs the staggered join staggerRuns times on the broker at
// addr, each in a group of its own, staggerParallel at once, over topic
// whose partitions end at end, and logs the times of the runs.
func staggeredRuns(t *testing.T, addr string, adm *kadm.Client, topic string, end map[int32]int64) {
	times := make([]time.Duration, staggerRuns)
	errs := make([]error, staggerRuns)
	sem := make(chan struct{}, staggerParallel)
	var wg sync.WaitGroup
	for i := range staggerRuns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			times[i], errs[i] = staggeredRun(addr, adm, fmt.Sprintf("staggered-%d", i), topic, end)
		}()
	}
	wg.Wait()
	sorted := slices.Clone(times)
	slices.Sort(sorted)
	t.Logf("%d runs: min %v, median %v, max %v", staggerRuns,
		sorted[0].Round(100*time.Millisecond), sorted[len(sorted)/2].Round(100*time.Millisecond),
		sorted[len(sorted)-1].Round(100*time.Millisecond))
	for i, err := range errs {
		if err != nil {
			t.Errorf("run %d: %v", i, err)
		}
	}
}

// staggeredRun starts three members of group on the broker at addr,
// staggerGap apart, and returns how long after the first start every
// record was read and the committed offsets stood exactly at end.
func staggeredRun(addr string, adm *kadm.Client, group, topic string, end map[int32]int64) (time.Duration, error) {
	s := newSeen()
	start := time.Now()
	var members []*staggerMember
	defer func() {
		for _, m := range members {
			m.close()
		}
	}()
	for i := range 3 {
		if i > 0 {
			time.Sleep(staggerGap)
		}
		m, err := startStaggerMember(addr, group, topic, s)
		if err != nil {
			return 0, err
		}
		members = append(members, m)
	}
	deadline := start.Add(staggerBound)
	for {
		if s.has(0, staggerRecords) && committedEquals(adm, group, topic, end) {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			var errs []error
			for _, m := range members {
				errs = append(errs, m.failure())
			}
			return time.Since(start), fmt.Errorf("after %v: %d of %d records read; commit errors: %v",
				staggerBound, s.distinct(), staggerRecords, errors.Join(errs...))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// committedEquals reports whether group's committed offsets of topic are
// exactly end.
func committedEquals(adm *kadm.Client, group, topic string, end map[int32]int64) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	os, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return false
	}
	n := 0
	ok := true
	os.Each(func(o kadm.OffsetResponse) {
		if o.Topic != topic {
			return
		}
		n++
		if o.Err != nil || o.At != end[o.Partition] {
			ok = false
		}
	})
	return ok && n == len(end)
}

// staggerMember is a franz-go member as the staggered join's: range
// balancer, manual commits after each poll, a 6 s session timeout and
// 500 ms heartbeats.
type staggerMember struct {
	cl   *kgo.Client
	stop chan struct{}
	done chan struct{}
	once sync.Once

	mu      sync.Mutex
	lastErr error
}

func startStaggerMember(addr, group, topic string, s *seen) (*staggerMember, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.Balancers(kgo.RangeBalancer()),
		kgo.SessionTimeout(staggerSession), kgo.HeartbeatInterval(staggerHB),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	m := &staggerMember{cl: cl, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		pollAndCommit(cl, s, m.stop, func(err error) {
			m.mu.Lock()
			m.lastErr = err
			m.mu.Unlock()
		})
	}()
	return m, nil
}

func (m *staggerMember) failure() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastErr
}

func (m *staggerMember) close() {
	m.once.Do(func() {
		close(m.stop)
		<-m.done
		m.cl.Close()
	})
}

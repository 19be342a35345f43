package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	lin "github.com/cascade-kafka/cascade/linearizability"
)

// groupSessionTimeout is the group members' session.timeout.ms: Kafka's
// smallest allowed (group.min.session.timeout.ms, 6 s), so a member lost to
// a fault is noticed within the run, yet longer than a pause (maxPause).
const groupSessionTimeout = 6 * time.Second

// groupRejoinEvery bounds how long the odd-numbered member stays in the
// group before it leaves and joins again (its stay is drawn between half
// this and this), so every run has several generations.
const groupRejoinEvery = 8 * time.Second

// ownership is one assignment a group member holds: recorded as an
// assignment op when it ends.
type ownership struct {
	member string
	gen    int32
	parts  []int32
	call   lin.Call
}

// groupMember is the recording state of one franz-go group consumer.
type groupMember struct {
	w    *Workload
	name string
	mu   sync.Mutex
	cur  *ownership
	err  error // the first recorder error
}

// assigned is kgo's OnPartitionsAssigned hook. With the eager range
// balancer every generation's assignment arrives whole, and the member id
// and generation come from Client.GroupMetadata, which the client set
// from the JoinGroup answer of this generation before the hook runs.
func (m *groupMember) assigned(_ context.Context, cl *kgo.Client, a map[string][]int32) {
	member, gen := cl.GroupMetadata()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.endLocked()
	m.cur = &ownership{member: member, gen: gen, parts: append([]int32(nil), a[m.w.Topic]...), call: m.w.Rec.Begin()}
	m.w.logf("%s: generation %d member %s assigned %v", m.name, gen, member, a[m.w.Topic])
}

// released is kgo's OnPartitionsRevoked and OnPartitionsLost hook: the
// member gives up what it held.
func (m *groupMember) released(context.Context, *kgo.Client, map[string][]int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.endLocked()
}

// endLocked records the current ownership, if any, as ended now.
func (m *groupMember) endLocked() {
	if m.cur == nil {
		return
	}
	o := m.cur
	m.cur = nil
	err := m.w.Rec.End(o.call, lin.Op{Client: m.name, Op: lin.OpAssignment, Group: m.w.MemberGroup, Topic: m.w.Topic,
		Member: o.member, Generation: lin.Int32(o.gen), Partitions: o.parts, Outcome: lin.OutcomeOK})
	if err != nil && m.err == nil {
		m.err = err
	}
}

// consumeGroup runs member i of MemberGroup: a franz-go group consumer of
// the topic with the eager range balancer (Kafka's RangeAssignor), which
// polls and records each generation's assignment. The odd-numbered
// members leave and join again after a seeded stay, so generations turn
// over besides those the faults cause.
func (w *Workload) consumeGroup(ctx context.Context, i int) error {
	m := &groupMember{w: w, name: fmt.Sprintf("member-%d", i)}
	rng := rand.New(rand.NewPCG(w.Seed, uint64(i)+2000))
	for ctx.Err() == nil {
		cl, err := kgo.NewClient(w.clientOpts(
			kgo.ClientID(m.name),
			kgo.ConsumerGroup(w.MemberGroup),
			kgo.ConsumeTopics(w.Topic),
			kgo.Balancers(kgo.RangeBalancer()),
			kgo.SessionTimeout(groupSessionTimeout),
			kgo.HeartbeatInterval(500*time.Millisecond),
			kgo.RebalanceTimeout(10*time.Second),
			kgo.DisableAutoCommit(),
			kgo.OnPartitionsAssigned(m.assigned),
			kgo.OnPartitionsRevoked(m.released),
			kgo.OnPartitionsLost(m.released),
		)...)
		if err != nil {
			return err
		}
		stay := ctx
		var cancel context.CancelFunc = func() {}
		if i%2 == 1 {
			d := groupRejoinEvery/2 + time.Duration(rng.Int64N(int64(groupRejoinEvery/2)))
			stay, cancel = context.WithTimeout(ctx, d)
		}
		for stay.Err() == nil {
			pctx, pcancel := context.WithTimeout(stay, time.Second)
			fs := cl.PollFetches(pctx)
			pcancel()
			fs.EachError(func(t string, p int32, err error) {
				if pctx.Err() == nil {
					w.logf("%s: poll %s-%d: %v", m.name, t, p, err)
				}
			})
		}
		cancel()
		cl.Close() // leaves the group; kgo revokes the eager assignment first
		m.mu.Lock()
		m.endLocked()
		err = m.err
		m.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

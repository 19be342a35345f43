package handler_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

// groupProps makes group tests fast: no initial rebalance delay and short
// session timeouts allowed.
var groupProps = map[string]string{
	"group.initial.rebalance.delay.ms":     "0",
	"group.min.session.timeout.ms":         "500",
	"group.consumer.heartbeat.interval.ms": "200",
	"group.consumer.session.timeout.ms":    "2000",
}

func groupCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// setupTopic creates topic with parts partitions and produces n records
// keyed so that every partition gets some.
func setupTopic(t *testing.T, b *brokertest.Broker, topic string, parts int32, n int) {
	t.Helper()
	adm := b.Admin(t)
	ctx := groupCtx(t, 10*time.Second)
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	produce(t, b, topic, 0, n)
}

func produce(t *testing.T, b *brokertest.Broker, topic string, from, n int) {
	t.Helper()
	cl := b.Client(t, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.MetadataMinAge(50*time.Millisecond))
	ctx := groupCtx(t, 10*time.Second)
	var rs []*kgo.Record
	for i := from; i < from+n; i++ {
		rs = append(rs, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// seen records which values every member consumed.
type seen struct {
	mu sync.Mutex
	m  map[string]int
}

func (s *seen) add(r *kgo.Record) {
	s.mu.Lock()
	s.m[string(r.Value)]++
	s.mu.Unlock()
}

func (s *seen) has(from, n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := from; i < from+n; i++ {
		if s.m[fmt.Sprint(i)] == 0 {
			return false
		}
	}
	return true
}

// member is one polling consumer that commits what it has processed after
// every poll.
type member struct {
	cl   *kgo.Client
	stop chan struct{}
	done chan struct{}
}

func startMember(t *testing.T, b *brokertest.Broker, s *seen, opts ...kgo.Opt) *member {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(fmt.Sprintf("127.0.0.1:%d", b.Port())),
		kgo.MetadataMinAge(50 * time.Millisecond),
		kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.SessionTimeout(2 * time.Second),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	m := &member{cl: cl, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			fs := cl.PollFetches(ctx)
			cancel()
			select {
			case <-m.stop:
				return
			default:
			}
			fs.EachRecord(s.add)
			if len(fs.Records()) > 0 {
				cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
				if err := cl.CommitUncommittedOffsets(cctx); err != nil && !errors.Is(err, context.Canceled) {
					t.Logf("commit: %v", err)
				}
				ccancel()
			}
		}
	}()
	t.Cleanup(m.close)
	return m
}

func (m *member) close() {
	select {
	case <-m.stop:
		return
	default:
	}
	close(m.stop)
	<-m.done
	m.cl.Close()
}

func waitGroup(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// committedEqualsEnd checks that the group's committed offsets are exactly
// the partitions' end offsets.
func committedEqualsEnd(t *testing.T, adm *kadm.Client, groupID, topic string) bool {
	t.Helper()
	ctx := groupCtx(t, 5*time.Second)
	committed, err := adm.FetchOffsets(ctx, groupID)
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ok := true
	ends.Each(func(o kadm.ListedOffset) {
		c, found := committed.Lookup(topic, o.Partition)
		if !found || c.At != o.Offset {
			ok = false
		}
	})
	return ok
}

// TestGroupFranzGoBalancers runs three franz-go members of a classic group
// with each client-side balancer: every record is read, a member leaving
// hands its partitions over, and the committed offsets end exactly at the
// log end offsets.
func TestGroupFranzGoBalancers(t *testing.T) {
	for _, bal := range []struct {
		name string
		b    kgo.GroupBalancer
	}{
		{"range", kgo.RangeBalancer()},
		{"roundrobin", kgo.RoundRobinBalancer()},
		{"sticky", kgo.StickyBalancer()},
		{"cooperative-sticky", kgo.CooperativeStickyBalancer()},
	} {
		t.Run(bal.name, func(t *testing.T) {
			if testing.Short() && bal.name != "cooperative-sticky" {
				t.Skip("short")
			}
			b := brokertest.Start(t, groupProps)
			const topic, groupID = "events", "g"
			setupTopic(t, b, topic, 6, 120)
			s := &seen{m: map[string]int{}}
			opts := []kgo.Opt{kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic), kgo.Balancers(bal.b)}
			ms := []*member{startMember(t, b, s, opts...), startMember(t, b, s, opts...), startMember(t, b, s, opts...)}
			waitGroup(t, 15*time.Second, "first records", func() bool { return s.has(0, 120) })
			ms[0].close()
			produce(t, b, topic, 120, 60)
			waitGroup(t, 15*time.Second, "records after a leave", func() bool { return s.has(120, 60) })
			adm := b.Admin(t)
			waitGroup(t, 10*time.Second, "committed == end", func() bool { return committedEqualsEnd(t, adm, groupID, topic) })
		})
	}
}

// crashDialer lets a test cut every connection of a client at once and
// refuse new ones, as a process crash does: the member neither heartbeats
// nor leaves.
type crashDialer struct {
	mu      sync.Mutex
	conns   []net.Conn
	crashed bool
}

func (d *crashDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.crashed {
		return nil, errors.New("crashed")
	}
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, host)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *crashDialer) crash() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.crashed = true
	for _, c := range d.conns {
		c.Close()
	}
}

// TestGroupMemberCrash: a member that stops heartbeating is removed at its
// session timeout and its partitions are consumed by the others; committed
// offsets survive a broker restart and a new member resumes from them.
func TestGroupMemberCrashAndRestart(t *testing.T) {
	b := brokertest.Start(t, groupProps)
	const topic, groupID = "events", "crash"
	setupTopic(t, b, topic, 4, 80)
	s := &seen{m: map[string]int{}}
	opts := []kgo.Opt{kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic), kgo.Balancers(kgo.RangeBalancer())}
	d := &crashDialer{}
	crashing := startMember(t, b, s, append(opts, kgo.Dialer(d.dial))...)
	other := startMember(t, b, s, opts...)
	waitGroup(t, 15*time.Second, "first records", func() bool { return s.has(0, 80) })
	adm := b.Admin(t)
	waitGroup(t, 10*time.Second, "two members", func() bool {
		dg, err := adm.DescribeGroups(groupCtx(t, time.Second), groupID)
		return err == nil && len(dg[groupID].Members) == 2 && dg[groupID].State == "Stable"
	})
	d.crash()
	close(crashing.stop)
	produce(t, b, topic, 80, 40)
	waitGroup(t, 15*time.Second, "records after the crash", func() bool { return s.has(80, 40) })
	dg, err := adm.DescribeGroups(groupCtx(t, time.Second), groupID)
	if err != nil || len(dg[groupID].Members) != 1 {
		t.Fatalf("after crash: %+v %v", dg[groupID], err)
	}
	waitGroup(t, 10*time.Second, "committed == end", func() bool { return committedEqualsEnd(t, adm, groupID, topic) })
	before, err := adm.FetchOffsets(groupCtx(t, 5*time.Second), groupID)
	if err != nil {
		t.Fatal(err)
	}
	other.close()

	b.Restart(t)
	adm = b.Admin(t)
	after, err := adm.FetchOffsets(groupCtx(t, 5*time.Second), groupID)
	if err != nil {
		t.Fatal(err)
	}
	before.Each(func(o kadm.OffsetResponse) {
		a, ok := after.Lookup(o.Topic, o.Partition)
		if !ok || a.At != o.At {
			t.Errorf("%s-%d: committed %d before restart, %+v after", o.Topic, o.Partition, o.At, a)
		}
	})
	// A new member resumes at the committed offsets: it sees only new records.
	s2 := &seen{m: map[string]int{}}
	produce(t, b, topic, 120, 20)
	startMember(t, b, s2, opts...)
	waitGroup(t, 15*time.Second, "records after restart", func() bool { return s2.has(120, 20) })
	time.Sleep(300 * time.Millisecond)
	s2.mu.Lock()
	defer s2.mu.Unlock()
	if len(s2.m) != 20 {
		t.Fatalf("resumed member read %d distinct records, want the 20 new ones", len(s2.m))
	}
}

// TestGroupStaticMember: a static member (group.instance.id) restarting
// within its session timeout gets its partitions back without a new
// generation.
func TestGroupStaticMember(t *testing.T) {
	b := brokertest.Start(t, groupProps)
	const topic, groupID = "events", "static"
	setupTopic(t, b, topic, 4, 40)
	s := &seen{m: map[string]int{}}
	opts := []kgo.Opt{kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic), kgo.Balancers(kgo.RangeBalancer()), kgo.SessionTimeout(5 * time.Second)}
	a := startMember(t, b, s, append(opts, kgo.InstanceID("a"))...)
	startMember(t, b, s, append(opts, kgo.InstanceID("b"))...)
	waitGroup(t, 15*time.Second, "records", func() bool { return s.has(0, 40) })
	adm := b.Admin(t)
	var gen int32
	waitGroup(t, 10*time.Second, "stable with two members", func() bool {
		dg, err := adm.DescribeGroups(groupCtx(t, time.Second), groupID)
		if err != nil || dg[groupID].State != "Stable" || len(dg[groupID].Members) != 2 {
			return false
		}
		_, g := groupGeneration(t, b, groupID)
		gen = g
		return true
	})
	a.close() // static members do not leave on close
	startMember(t, b, s, append(opts, kgo.InstanceID("a"))...)
	produce(t, b, topic, 40, 40)
	waitGroup(t, 15*time.Second, "records after the restart", func() bool { return s.has(40, 40) })
	if state, g := groupGeneration(t, b, groupID); g != gen || state != "Stable" {
		t.Fatalf("generation %d state %s after a static restart, want %d Stable", g, state, gen)
	}
}

// groupGeneration returns the group's state and generation. The generation
// is not in DescribeGroups, so it is probed with heartbeats on behalf of a
// member: only the current generation is answered without error.
func groupGeneration(t *testing.T, b *brokertest.Broker, groupID string) (string, int32) {
	t.Helper()
	cl := b.Client(t)
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{groupID}
	resp, err := req.RequestWith(groupCtx(t, 5*time.Second), cl)
	if err != nil || len(resp.Groups) != 1 {
		t.Fatalf("describe: %v", err)
	}
	// A heartbeat with generation g succeeds only for the current
	// generation: probe the generation of a known member.
	g := resp.Groups[0]
	if len(g.Members) == 0 {
		return g.State, -1
	}
	for gen := int32(1); gen < 50; gen++ {
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Group, hb.Generation, hb.MemberID, hb.InstanceID = groupID, gen, g.Members[0].MemberID, g.Members[0].InstanceID
		hr, err := hb.RequestWith(groupCtx(t, 5*time.Second), cl)
		if err != nil {
			t.Fatal(err)
		}
		if hr.ErrorCode == 0 {
			return g.State, gen
		}
	}
	return g.State, -1
}

// TestGroupKIP848 runs franz-go's next-gen (KIP-848) consumer group: two
// members share a topic through the server-side assignor.
func TestGroupKIP848(t *testing.T) {
	b := brokertest.Start(t, groupProps)
	const topic, groupID = "events", "ng"
	setupTopic(t, b, topic, 4, 60)
	s := &seen{m: map[string]int{}}
	opts := []kgo.Opt{kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic), kgo.Balancers(kgo.RangeBalancer()), kgo.ServerSideBalancer()}
	m1 := startMember(t, b, s, opts...)
	startMember(t, b, s, opts...)
	waitGroup(t, 15*time.Second, "records", func() bool { return s.has(0, 60) })
	cl := b.Client(t)
	describe := func() *kmsg.ConsumerGroupDescribeResponseGroup {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{groupID}
		resp, err := req.RequestWith(groupCtx(t, 5*time.Second), cl)
		if err != nil || len(resp.Groups) != 1 {
			t.Fatalf("describe: %v", err)
		}
		return &resp.Groups[0]
	}
	waitGroup(t, 10*time.Second, "stable consumer group of two", func() bool {
		g := describe()
		n := 0
		for _, m := range g.Members {
			for _, tp := range m.Assignment.TopicPartitions {
				n += len(tp.Partitions)
			}
		}
		return g.State == "Stable" && len(g.Members) == 2 && n == 4
	})
	m1.close()
	produce(t, b, topic, 60, 40)
	waitGroup(t, 15*time.Second, "records after a leave", func() bool { return s.has(60, 40) })
	adm := b.Admin(t)
	waitGroup(t, 10*time.Second, "committed == end", func() bool { return committedEqualsEnd(t, adm, groupID, topic) })
	lg, err := adm.ListGroups(groupCtx(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := lg[groupID]; !ok || l.ProtocolType != "consumer" {
		t.Fatalf("list groups: %+v", lg)
	}
}

// TestGroupAdmin: list, describe, delete offsets, delete groups, lag.
func TestGroupAdmin(t *testing.T) {
	b := brokertest.Start(t, groupProps)
	const topic, groupID = "events", "adm"
	setupTopic(t, b, topic, 2, 10)
	adm := b.Admin(t)
	ctx := groupCtx(t, 10*time.Second)
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 3, LeaderEpoch: -1})
	os.Add(kadm.Offset{Topic: topic, Partition: 1, At: 4, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, groupID, os); err != nil {
		t.Fatalf("commit: %v", err)
	}
	lag, err := adm.Lag(ctx, groupID)
	if err != nil {
		t.Fatal(err)
	}
	if tot := lag[groupID].Lag.Total(); tot != 3 {
		t.Fatalf("lag total %d, want 3 (10 records, 7 committed)", tot)
	}
	lg, err := adm.ListGroups(ctx)
	if err != nil || len(lg) != 1 || lg[groupID].State != "Empty" {
		t.Fatalf("list: %+v %v", lg, err)
	}
	dr, err := adm.DeleteOffsets(ctx, groupID, kadm.TopicsSet{topic: {0: {}}})
	if err != nil || dr.Error() != nil {
		t.Fatalf("delete offsets: %+v %v", dr, err)
	}
	fo, err := adm.FetchOffsets(ctx, groupID)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fo.Lookup(topic, 0); ok {
		t.Fatalf("offset of partition 0 still present: %+v", fo)
	}
	dg, err := adm.DeleteGroups(ctx, groupID)
	if err != nil || dg.Error() != nil {
		t.Fatalf("delete group: %+v %v", dg, err)
	}
	lg, err = adm.ListGroups(ctx)
	if err != nil || len(lg) != 0 {
		t.Fatalf("list after delete: %+v %v", lg, err)
	}
}

package clienttest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

// groupProps makes group tests fast: no initial rebalance delay and
// session timeouts down to 500 ms.
var groupProps = map[string]string{
	"group.initial.rebalance.delay.ms": "0",
	"group.min.session.timeout.ms":     "500",
}

// sessionTimeout is the members' session timeout: how long a crashed
// member stays in the group.
const sessionTimeout = 1500 * time.Millisecond

// childMain, when set by a test file, runs this test binary as a member
// process (see confluent_test.go) instead of the tests.
var childMain func() int

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" && childMain != nil {
		os.Exit(childMain())
	}
	os.Exit(m.Run())
}

// childEnv carries a member process's arguments.
const childEnv = "CASCADE_GROUP_CLIENTTEST_MEMBER"

// seen counts how often every value was consumed.
type seen struct {
	mu sync.Mutex
	m  map[string]int
}

func newSeen() *seen { return &seen{m: map[string]int{}} }

func (s *seen) add(v string) {
	s.mu.Lock()
	s.m[v]++
	s.mu.Unlock()
}

// has reports whether the values of records from..from+n-1 were all read.
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

func (s *seen) distinct() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// member is one consumer-group member of any client library.
type member interface {
	// leave closes the member cleanly: it sends LeaveGroup.
	leave()
	// crash makes the member vanish without LeaveGroup: its connections
	// are cut (or its process killed) and it never heartbeats again.
	crash()
}

// starter starts a member of group on topic that adds what it consumes to
// s and commits after processing.
type starter func(t *testing.T, b *brokertest.Broker, group, topic string, s *seen) member

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// produce writes values from..from+n-1 round-robin over the partitions.
func produce(t *testing.T, b *brokertest.Broker, topic string, from, n int) {
	t.Helper()
	cl := b.Client(t, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.MetadataMinAge(50*time.Millisecond))
	var rs []*kgo.Record
	for i := from; i < from+n; i++ {
		rs = append(rs, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(ctxFor(t, 10*time.Second), rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stableWith reports whether the group is Stable with n members.
func stableWith(t *testing.T, adm *kadm.Client, group string, n int) bool {
	dg, err := adm.DescribeGroups(ctxFor(t, 2*time.Second), group)
	if err != nil {
		return false
	}
	g := dg[group]
	return g.Err == nil && g.State == "Stable" && len(g.Members) == n
}

// committed returns the group's committed offsets of topic by partition.
func committed(t *testing.T, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	os, err := adm.FetchOffsets(ctxFor(t, 5*time.Second), group)
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	out := map[int32]int64{}
	os.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	return out
}

// committedAtEnd reports whether every partition's committed offset is
// exactly its end offset.
func committedAtEnd(t *testing.T, adm *kadm.Client, group, topic string) bool {
	c := committed(t, adm, group, topic)
	ends, err := adm.ListEndOffsets(ctxFor(t, 5*time.Second), topic)
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	ok := true
	ends.Each(func(o kadm.ListedOffset) {
		if c[o.Partition] != o.Offset {
			ok = false
		}
	})
	return ok
}

// runGroupStory is the story of the package doc, for one client library.
func runGroupStory(t *testing.T, start starter) {
	b := brokertest.Start(t, groupProps)
	const topic, group, parts, step = "events", "story", 6, 60
	adm := b.Admin(t)
	if _, err := adm.CreateTopic(ctxFor(t, 10*time.Second), parts, 1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	s := newSeen()
	produce(t, b, topic, 0, step)
	m1 := start(t, b, group, topic, s)
	m2 := start(t, b, group, topic, s)
	waitFor(t, 10*time.Second, "two members stable", func() bool { return stableWith(t, adm, group, 2) })
	waitFor(t, 10*time.Second, "the first records", func() bool { return s.has(0, step) })

	m3 := start(t, b, group, topic, s) // Joins: the group rebalances to three.
	waitFor(t, 10*time.Second, "three members stable", func() bool { return stableWith(t, adm, group, 3) })
	produce(t, b, topic, step, step)
	waitFor(t, 10*time.Second, "records with three members", func() bool { return s.has(step, step) })

	m1.leave() // LeaveGroup: the group rebalances at once.
	waitFor(t, 5*time.Second, "two members after a leave", func() bool { return stableWith(t, adm, group, 2) })
	produce(t, b, topic, 2*step, step)
	waitFor(t, 10*time.Second, "records after the leave", func() bool { return s.has(2*step, step) })

	crashed := time.Now()
	m2.crash() // No LeaveGroup: expired at its session timeout.
	produce(t, b, topic, 3*step, step)
	waitFor(t, 10*time.Second, "one member after the crash", func() bool { return stableWith(t, adm, group, 1) })
	if d := time.Since(crashed); d < sessionTimeout/2 {
		t.Errorf("the crashed member was gone after %v, before its session timeout %v", d, sessionTimeout)
	}
	waitFor(t, 10*time.Second, "records after the crash", func() bool { return s.has(3*step, step) })
	waitFor(t, 10*time.Second, "committed offsets at the ends", func() bool { return committedAtEnd(t, adm, group, topic) })
	m3.leave()
	before := committed(t, adm, group, topic)

	b.Restart(t)
	adm = b.Admin(t)
	if after := committed(t, adm, group, topic); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("committed offsets %v before the restart, %v after", before, after)
	}
	// A new member resumes at the committed offsets: it reads exactly
	// the records written after them.
	s2 := newSeen()
	produce(t, b, topic, 4*step, step/2)
	m4 := start(t, b, group, topic, s2)
	waitFor(t, 10*time.Second, "records after the restart", func() bool { return s2.has(4*step, step/2) })
	waitFor(t, 10*time.Second, "committed offsets at the ends after the restart", func() bool { return committedAtEnd(t, adm, group, topic) })
	m4.leave()
	if n := s2.distinct(); n != step/2 {
		t.Fatalf("the resumed member read %d distinct records, want the %d new ones", n, step/2)
	}
	if !s.has(0, 4*step) {
		t.Fatal("some record was never read")
	}
}

// crashDialer lets a test cut every connection of a client at once and
// refuse new ones, as a process crash does: the member neither
// heartbeats nor leaves.
type crashDialer struct {
	mu      sync.Mutex
	conns   []net.Conn
	crashed bool
}

func (d *crashDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.crashed {
		return nil, errors.New("crashed")
	}
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

// Dial is proxy.Dialer's method, for sarama's Net.Proxy.Dialer.
func (d *crashDialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

func (d *crashDialer) crash() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.crashed = true
	for _, c := range d.conns {
		c.Close()
	}
}

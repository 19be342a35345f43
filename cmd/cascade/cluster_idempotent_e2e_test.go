package main

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// answerGate withholds one broker's answers to a producer: while it holds
// an address, whatever a connection to it that carried a Produce request
// reads is swallowed, and opening the gate closes those connections. The
// broker handles the requests in flight (appends, replicates, commits)
// but the producer never learns it, so it sends them again elsewhere.
type answerGate struct {
	mu      sync.Mutex
	addr    string
	release chan struct{}
}

func (g *answerGate) dial(ctx context.Context, network, host string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return &gatedConn{Conn: c, g: g, addr: host}, nil
}

func (g *answerGate) hold(addr string) {
	g.mu.Lock()
	g.addr, g.release = addr, make(chan struct{})
	g.mu.Unlock()
}

func (g *answerGate) open() {
	g.mu.Lock()
	if g.release != nil {
		close(g.release)
	}
	g.addr, g.release = "", nil
	g.mu.Unlock()
}

// held returns the channel closed when the gate opens if addr is held.
func (g *answerGate) held(addr string) <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.addr == addr {
		return g.release
	}
	return nil
}

type gatedConn struct {
	net.Conn
	g       *answerGate
	addr    string
	produce atomic.Bool
}

var errWithheld = errors.New("answer withheld by the test")

func (c *gatedConn) Write(b []byte) (int, error) {
	// A request opens with its length (int32) and API key (int16); a
	// client writes each request whole.
	if len(b) >= 6 && binary.BigEndian.Uint16(b[4:]) == 0 {
		c.produce.Store(true)
	}
	return c.Conn.Write(b)
}

func (c *gatedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if c.produce.Load() {
		if rel := c.g.held(c.addr); rel != nil {
			<-rel
			c.Conn.Close()
			return 0, errWithheld
		}
	}
	return n, err
}

// TestClusterIdempotentRetryAfterFailover is the path on which Jepsen
// found duplicates in Redpanda: an idempotent acks=all franz-go producer
// writes an RF=3, min.insync.replicas=2 topic
// under load; the leader's answers are withheld while it appends,
// replicates and commits the producer's batches in flight, then the leader
// is SIGKILLed. The producer retries those batches on the new leader,
// which must answer each as a duplicate at the offset the old leader gave
// it, from the producer state it built from the replicated batches, as
// Kafka's ProducerStateManager. The killed node restarts and it happens
// again to the next leader. Every acknowledged record is read back once,
// in order, at the offset its acknowledgement named.
func TestClusterIdempotentRetryAfterFailover(t *testing.T) {
	c := startTestCluster(t, fastReplication...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic = "idem"
	c.createReplicated(ctx, topic, 1, 2)

	gate := &answerGate{}
	defer gate.open()
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds...), kgo.DefaultProduceTopic(topic), kgo.Dialer(gate.dial),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(90*time.Second), kgo.ProduceRequestTimeout(10*time.Second),
		kgo.RequestTimeoutOverhead(20*time.Second), kgo.MetadataMinAge(50*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }), kgo.MaxBufferedRecords(500))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	acks := &ackLog{errs: map[string]int{}, offsets: map[string]int64{}}
	finish := produceNumbers(ctx, prod, acks, time.Millisecond)
	waitFor(t, 30*time.Second, "acknowledgements before the failover", func() bool { return len(acks.snapshot()) >= 300 })

	// Twice: the second failover may move the partition to the node the
	// first killed, whose producer state was rebuilt from its log and
	// snapshots after the SIGKILL and followed the new leader since.
	type failover struct {
		leader        int32
		lastAcked, hw int64
		killed        time.Time
	}
	var rounds []failover
	for round := range 2 {
		waitFor(t, 60*time.Second, "three replicas in the ISR", func() bool {
			l, isr := c.partitionOn(1, topic)
			return l >= 0 && len(isr) == 3
		})
		leader, _ := c.partitionOn(1, topic)
		if leader < 0 {
			t.Fatal("no leader")
		}
		gate.hold(c.seeds[leader-1])
		// The producer's request in flight is handled: its records are
		// committed (the high watermark passes them) and no more come
		// while it waits for an answer that does not come (an idempotent
		// franz-go producer has one request in flight per broker).
		var hw int64 = -1
		stable := 0
		waitFor(t, 30*time.Second, "the withheld batch committed on the leader", func() bool {
			lctx, lcancel := context.WithTimeout(ctx, 2*time.Second)
			next := latestOffset(lctx, c.cl.Broker(int(leader)), topic)
			lcancel()
			if next >= 0 && next == hw {
				stable++
			} else {
				stable = 0
			}
			hw = next
			_, lastAcked := acks.ackedSince(time.Time{})
			return stable >= 3 && hw > lastAcked+1
		})
		f := failover{leader: leader, hw: hw, killed: time.Now()}
		_, f.lastAcked = acks.ackedSince(time.Time{})
		c.procs[leader-1].kill()
		gate.open()
		rounds = append(rounds, f)
		t.Logf("round %d: leader %d killed with offsets %d..%d committed but unacknowledged", round, leader, f.lastAcked+1, hw-1)
		waitFor(t, 60*time.Second, "a new leader from the ISR", func() bool {
			l, isr := c.partitionOn(1+int(leader)%3, topic)
			return l >= 0 && l != leader && len(isr) >= 2
		})
		waitFor(t, 60*time.Second, "acknowledgements after the failover", func() bool {
			n, _ := acks.ackedSince(f.killed)
			return n >= 300
		})
		c.procs[leader-1].start(t, c.bin, c.logs[leader-1])
	}
	finish(t, 60*time.Second)
	// A record whose Produce the stop interrupted was never sent.
	delete(acks.errs, context.Canceled.Error())
	if len(acks.errs) > 0 {
		t.Fatalf("records failed: %v", acks.errs)
	}

	got := readAll(t, c.seeds[rounds[0].leader-1], topic)
	at := map[string]int{}
	prev := -1
	for i, v := range got {
		if j, dup := at[v]; dup {
			t.Fatalf("record %s at offsets %d and %d", v, j, i)
		}
		at[v] = i
		n, err := strconv.Atoi(v)
		if err != nil || n <= prev {
			t.Fatalf("record %q at offset %d after %d: out of order", v, i, prev)
		}
		prev = n
	}
	acks.mu.Lock()
	defer acks.mu.Unlock()
	retried := make([]int64, len(rounds))
	for i, v := range acks.acked {
		off := acks.offsets[v]
		if pos, ok := at[v]; !ok || int64(pos) != off {
			t.Fatalf("record %s acknowledged at offset %d, read at %d (present %v)", v, off, pos, ok)
		}
		for r, f := range rounds {
			if off > f.lastAcked && off < f.hw && acks.times[i].After(f.killed) {
				retried[r]++
			}
		}
	}
	for r, f := range rounds {
		if want := f.hw - f.lastAcked - 1; retried[r] != want {
			t.Fatalf("round %d: %d of the %d records leader %d committed unacknowledged were acknowledged after it died",
				r, retried[r], want, f.leader)
		}
	}
	t.Logf("%d records acknowledged and read back once, in order, at their offsets; retried after each failover and answered as duplicates at the old leader's offsets: %v",
		len(acks.acked), retried)
}

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
// Kafka's ProducerStateManager. Every acknowledged record is read back
// once, in order, at the offset its acknowledgement named.
func TestClusterIdempotentRetryAfterFailover(t *testing.T) {
	c := startTestCluster(t, "replica.lag.time.max.ms=4000", "replica.fetch.wait.max.ms=200",
		"replica.fetch.backoff.ms=100")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic = "idem"
	c.createReplicated(ctx, topic, 2)

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
	pctx, stopProducing := context.WithCancel(ctx)
	produced := produceNumbers(pctx, prod, acks, time.Millisecond)
	defer stopProducing()
	waitFor(t, 30*time.Second, "acknowledgements before the failover", func() bool { return len(acks.snapshot()) >= 300 })

	leader, _ := c.partitionOn(1, topic)
	if leader < 0 {
		t.Fatal("no leader")
	}
	gate.hold(c.seeds[leader-1])
	// The producer's request in flight is handled: its records are
	// committed (the high watermark passes them) and no more come while
	// it waits for an answer that does not come (an idempotent franz-go
	// producer has one request in flight per broker).
	var hw int64 = -1
	stable := 0
	waitFor(t, 30*time.Second, "the withheld batches committed on the leader", func() bool {
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
	_, lastAcked := acks.ackedSince(time.Time{})
	killed := time.Now()
	c.procs[leader-1].kill()
	gate.open()
	t.Logf("leader %d killed with offsets %d..%d committed but unacknowledged", leader, lastAcked+1, hw-1)

	waitFor(t, 60*time.Second, "a new leader from the ISR", func() bool {
		l, isr := c.partitionOn(1+int(leader)%3, topic)
		return l >= 0 && l != leader && len(isr) >= 2
	})
	waitFor(t, 60*time.Second, "acknowledgements after the failover", func() bool {
		n, _ := acks.ackedSince(killed)
		return n >= 300
	})
	stopProducing()
	produced.Wait()
	fctx, fcancel := context.WithTimeout(ctx, 60*time.Second)
	if err := prod.Flush(fctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	fcancel()
	if len(acks.errs) > 0 {
		t.Fatalf("records failed: %v", acks.errs)
	}

	newLeader, _ := c.partitionOn(1+int(leader)%3, topic)
	got := readAll(t, c.seeds[newLeader-1], topic)
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
	retried := 0
	for i, v := range acks.acked {
		off := acks.offsets[v]
		if pos, ok := at[v]; !ok || int64(pos) != off {
			t.Fatalf("record %s acknowledged at offset %d, read at %d (present %v)", v, off, pos, ok)
		}
		if off > lastAcked && off < hw && acks.times[i].After(killed) {
			retried++
		}
	}
	if want := hw - lastAcked - 1; int64(retried) != want {
		t.Fatalf("%d of the %d records the old leader committed unacknowledged were acknowledged by the new leader", retried, want)
	}
	t.Logf("%d records acknowledged and read back once, in order, at their offsets; %d retried after the failover were answered as duplicates at the old leader's offsets",
		len(acks.acked), retried)
}

package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// replicaBytes is the bytes of node id's log of partition 0 of topic: its
// segments' batches in offset order, as the broker wrote them.
func (c *testCluster) replicaBytes(id int32, topic string) ([]byte, error) {
	dir := c.replicaDir(id, topic)
	segs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, err
	}
	slices.Sort(segs) // 20-digit base offsets sort as numbers
	var out []byte
	for _, s := range segs {
		b, err := os.ReadFile(s)
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return out, nil
}

// batchAt describes the batch of a log's bytes that starts at pos (Kafka's
// DefaultRecordBatch header): base offset, leader epoch, producer id,
// producer epoch and base sequence.
func batchAt(b []byte, pos int) string {
	if pos+61 > len(b) {
		return fmt.Sprintf("no whole batch at byte %d of %d", pos, len(b))
	}
	h := b[pos:]
	return fmt.Sprintf("base offset %d, leader epoch %d, producer %d epoch %d, base sequence %d",
		int64(binary.BigEndian.Uint64(h)), int32(binary.BigEndian.Uint32(h[12:])),
		int64(binary.BigEndian.Uint64(h[43:])), int16(binary.BigEndian.Uint16(h[51:])), int32(binary.BigEndian.Uint32(h[53:])))
}

// describeBatches describes each whole batch of a log's bytes (batchAt).
func describeBatches(b []byte) []string {
	var out []string
	for pos := 0; pos+61 <= len(b); pos += 12 + int(binary.BigEndian.Uint32(b[pos+8:])) {
		out = append(out, batchAt(b, pos))
	}
	return out
}

// firstDifference returns the position of the first batch at which a and
// b differ, -1 if one is a prefix of the other.
func firstDifference(a, b []byte) int {
	pos := 0
	for pos+12 <= len(a) && pos+12 <= len(b) {
		n := 12 + int(binary.BigEndian.Uint32(a[pos+8:]))
		if pos+n > len(a) || pos+n > len(b) {
			break
		}
		if !bytes.Equal(a[pos:pos+n], b[pos:pos+n]) {
			return pos
		}
		pos += n
	}
	if pos < len(a) && pos < len(b) && !bytes.HasPrefix(a[pos:], b[pos:]) && !bytes.HasPrefix(b[pos:], a[pos:]) {
		return pos
	}
	return -1
}

// TestClusterIdempotentAcrossControlledShutdown moves a partition's
// leadership with controlled shutdowns (SIGTERM) of its leader, three
// times, while idempotent acks=all franz-go producers (each with up to five
// requests in flight) write it: the requests the leader is handling when
// the controller moves the leadership away either finish in the epoch it
// led or are refused (NOT_LEADER_OR_FOLLOWER, as Kafka's
// Partition.appendRecordsToLeader under leaderIsrUpdateLock), and the
// producers retry them on the new leader. Every acknowledged record is
// read back once, at the offset its acknowledgement named, and the three
// replicas' logs end up the same bytes, batch for batch: a batch the old
// leader appended with the new leader's epoch would have stayed in its
// log, where the follower's epoch check cannot see it, and beside the
// producer's retry.
func TestClusterIdempotentAcrossControlledShutdown(t *testing.T) {
	c := startTestCluster(t, append(fastReplication, "broker.session.timeout.ms=6000")...)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const topic, producers = "idem-shutdown", 4
	c.createReplicated(ctx, topic, 1, 2)

	acks := &ackLog{errs: map[string]int{}, offsets: map[string]int64{}}
	var finishes []func(*testing.T, time.Duration)
	for i := range producers {
		prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds...), kgo.DefaultProduceTopic(topic),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
			kgo.RecordDeliveryTimeout(90*time.Second), kgo.ProduceRequestTimeout(10*time.Second),
			kgo.RequestTimeoutOverhead(20*time.Second), kgo.MetadataMinAge(50*time.Millisecond),
			kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }), kgo.MaxBufferedRecords(200))
		if err != nil {
			t.Fatal(err)
		}
		defer prod.Close()
		prefix := fmt.Sprintf("p%d-", i)
		finishes = append(finishes, produceValues(ctx, prod, acks, prefix, 200*time.Microsecond))
	}
	waitFor(t, 30*time.Second, "acknowledgements before the first shutdown", func() bool { return len(acks.snapshot()) >= 500 })

	for round := range 3 {
		waitFor(t, 60*time.Second, "three replicas in the ISR", func() bool {
			l, isr := c.partitionOn(1+round%3, topic)
			return l >= 0 && len(isr) == 3
		})
		leader, _ := c.partitionOn(1+round%3, topic)
		took, _ := c.stop(int(leader), 30*time.Second)
		stopped := time.Now()
		t.Logf("round %d: leader %d stopped by SIGTERM in %v", round, leader, took)
		waitFor(t, 60*time.Second, "acknowledgements after the shutdown", func() bool {
			n, _ := acks.ackedSince(stopped)
			return n >= 300
		})
		c.procs[leader-1].start(t, c.bin, c.logs[leader-1])
	}
	for _, finish := range finishes {
		finish(t, 90*time.Second)
	}
	delete(acks.errs, context.Canceled.Error()) // never sent: the stop interrupted them
	if len(acks.errs) > 0 {
		t.Fatalf("records failed: %v", acks.errs)
	}

	// The replicas converge on one log.
	var logs [3][]byte
	converged := func() bool {
		for i := range logs {
			b, err := c.replicaBytes(int32(i+1), topic)
			if err != nil {
				t.Fatal(err)
			}
			logs[i] = b
		}
		return bytes.Equal(logs[0], logs[1]) && bytes.Equal(logs[1], logs[2])
	}
	deadline := time.Now().Add(60 * time.Second)
	for !converged() {
		for i := 1; i < 3; i++ {
			if pos := firstDifference(logs[0], logs[i]); pos >= 0 {
				t.Fatalf("node 1's and node %d's logs differ from byte %d: %s on node 1, %s on node %d",
					i+1, pos, batchAt(logs[0], pos), batchAt(logs[i], pos), i+1)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica logs of %d, %d and %d bytes, one a prefix of another, not the same within 60 s",
				len(logs[0]), len(logs[1]), len(logs[2]))
		}
		time.Sleep(200 * time.Millisecond)
	}

	var leader int32 = -1
	waitFor(t, 30*time.Second, "a leader to read from", func() bool {
		leader, _ = c.partitionOn(1, topic)
		return leader > 0
	})
	at := positions(t, readAll(t, c.seeds[leader-1], topic))
	acks.mu.Lock()
	defer acks.mu.Unlock()
	for _, v := range acks.acked {
		if pos, ok := at[v]; !ok || int64(pos) != acks.offsets[v] {
			t.Fatalf("record %s acknowledged at offset %d, read at %d (present %v)", v, acks.offsets[v], pos, ok)
		}
	}
	t.Logf("%d records acknowledged by %d producers across 3 controlled shutdowns of the leader, read back once at their offsets; replica logs the same %d bytes",
		len(acks.acked), producers, len(logs[0]))
}

// produceGate holds a client's Produce requests to one broker: while held,
// a connection's write of a Produce request waits until release.
type produceGate struct {
	addr    string
	mu      sync.Mutex
	release chan struct{}
	caught  chan struct{} // closed by the first Produce held
}

func newProduceGate(addr string) *produceGate {
	return &produceGate{addr: addr, release: make(chan struct{}), caught: make(chan struct{})}
}

func (g *produceGate) dial(ctx context.Context, network, host string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err != nil || host != g.addr {
		return c, err
	}
	return &heldConn{Conn: c, g: g}, nil
}

// open lets every held and later Produce through.
func (g *produceGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.release:
	default:
		close(g.release)
	}
}

type heldConn struct {
	net.Conn
	g *produceGate
}

func (c *heldConn) Write(b []byte) (int, error) {
	// A request opens with its length (int32) and API key (int16).
	if len(b) >= 6 && binary.BigEndian.Uint16(b[4:]) == 0 {
		c.g.mu.Lock()
		select {
		case <-c.g.caught:
		default:
			close(c.g.caught)
		}
		c.g.mu.Unlock()
		<-c.g.release
	}
	return c.Conn.Write(b)
}

// TestClusterTxnProduceAcrossLeaderMove holds a transactional produce
// inside its leader while the leadership moves: the leader verifies the
// transaction with its coordinator on another node (KIP-890's
// AddPartitionsToTxn VerifyOnly, or the implicit add of transactions v2)
// before it appends, and that node is stopped (SIGSTOP) meanwhile, so the
// append comes after the controller elected another leader and this node
// applied the new image. As Kafka's ReplicaManager, whose append after the
// verification runs Partition.appendRecordsToLeader under
// leaderIsrUpdateLock, the produce is NOT_LEADER_OR_FOLLOWER and nothing is
// appended; the franz-go producer retries on the new leader and commits.
// The new leader appends another record before it, and the replicas'
// logs end up the same bytes, each record once: appended after the move,
// the batch would be stamped with the new leader's epoch at the offset
// where that epoch starts (the other record's on the new leader), where
// the follower's epoch check cannot see it, and stay in the old leader's
// log beside the retry.
func TestClusterTxnProduceAcrossLeaderMove(t *testing.T) {
	c := startTestCluster(t, "broker.session.timeout.ms=30000")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic = "txn-move"
	// A transactional id whose coordinator is not the active controller,
	// which must stay up to move the leadership.
	var key string
	var coord int32
	for i := 0; coord <= 0; i++ {
		key = fmt.Sprintf("txn-move-%d", i)
		c.internalReplicated(ctx, 1, key, "__transaction_state")
		if n := c.coordinatorOf(ctx, 1, key, -1, []int{1, 2, 3}); n != c.controller(1) {
			coord = n
		}
	}
	mates := others(coord)
	leader, next := int32(mates[0]), int32(mates[1])
	c.createOn(topic, []int32{leader, next, coord},
		kmsg.CreateTopicsRequestTopicConfig{Name: "min.insync.replicas", Value: kmsg.StringPtr("2")})

	gate := newProduceGate(c.seeds[leader-1])
	defer gate.open()
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds...), kgo.DefaultProduceTopic(topic), kgo.TransactionalID(key),
		kgo.Dialer(gate.dial), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordDeliveryTimeout(90*time.Second),
		kgo.ProduceRequestTimeout(20*time.Second), kgo.RequestTimeoutOverhead(20*time.Second),
		kgo.MetadataMinAge(50*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	acked := make(chan error, 1)
	var offset int64
	prod.Produce(ctx, &kgo.Record{Value: []byte("moved")}, func(r *kgo.Record, err error) {
		offset = r.Offset
		acked <- err
	})
	select {
	case <-gate.caught:
	case <-time.After(30 * time.Second):
		t.Fatal("the producer sent no Produce to the leader")
	}
	// The coordinator stops; the Produce reaches the leader, which waits
	// for the coordinator's answer before it appends.
	paused := c.procs[coord-1]
	if err := paused.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer paused.cmd.Process.Signal(syscall.SIGCONT)
	gate.open()
	// Time for the Produce to pass the leadership check and wait in the
	// verification: were it later than the move, it would be refused by
	// the check and the test would prove nothing, not fail.
	time.Sleep(time.Second)

	// The controller moves the leadership to next.
	if rerr, msg := c.reassign(topic, 0, []int32{next, leader, coord}); rerr != nil {
		t.Fatalf("reordering the replicas: %v %s", rerr, msg)
	}
	waitFor(t, 30*time.Second, "the replicas reordered", func() bool {
		r, _, _ := c.replicasOn(int(leader), topic)
		return slices.Equal(r, []int32{next, leader, coord})
	})
	if codes := c.electCodes(ctx, int(leader), electRequest(0, map[string][]int32{topic: {0}})); codes[topic+"-0"] != 0 {
		t.Fatalf("preferred election: %v", codes)
	}
	waitFor(t, 30*time.Second, fmt.Sprintf("node %d's image naming %d the leader", leader, next), func() bool {
		l, _ := c.partitionOn(int(leader), topic)
		return l == next
	})
	// The new leader appends another record first (acks=1: the stopped
	// coordinator's node is still in the ISR), so that the new leader's
	// epoch starts with it.
	other, err := kgo.NewClient(kgo.SeedBrokers(c.seeds[next-1]), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.ProduceSync(ctx, &kgo.Record{Value: []byte("other")}).FirstErr(); err != nil {
		t.Fatalf("produce to the new leader: %v", err)
	}
	if err := paused.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-acked:
		if err != nil {
			t.Fatalf("the record: %v", err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("the record was not acknowledged")
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}

	var logs [3][]byte
	deadline := time.Now().Add(60 * time.Second)
	for {
		for i := range logs {
			if logs[i], err = c.replicaBytes(int32(i+1), topic); err != nil {
				t.Fatal(err)
			}
		}
		if bytes.Equal(logs[0], logs[1]) && bytes.Equal(logs[1], logs[2]) {
			break
		}
		for i := 1; i < 3; i++ {
			if pos := firstDifference(logs[0], logs[i]); pos >= 0 {
				t.Fatalf("node 1's and node %d's logs differ from byte %d: %s on node 1, %s on node %d; node 1: %s; node %d: %s",
					i+1, pos, batchAt(logs[0], pos), batchAt(logs[i], pos), i+1,
					strings.Join(describeBatches(logs[0]), "; "), i+1, strings.Join(describeBatches(logs[i]), "; "))
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica logs of %d, %d and %d bytes not the same within 60 s", len(logs[0]), len(logs[1]), len(logs[2]))
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, v := range []string{"other", "moved"} {
		if n := bytes.Count(logs[0], []byte(v)); n != 1 {
			t.Fatalf("record %s is %d times in the log: %s", v, n, strings.Join(describeBatches(logs[0]), "; "))
		}
	}
	t.Logf("produce held on leader %d across the move to %d; acknowledged at %d by the new leader, replica logs the same: %s",
		leader, next, offset, strings.Join(describeBatches(logs[0]), "; "))
}

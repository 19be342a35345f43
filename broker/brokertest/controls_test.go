package brokertest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/broker/record"
	"github.com/cascade-kafka/cascade/faults/netns"
	"github.com/cascade-kafka/cascade/matrix/cascadecluster"
	"github.com/cascade-kafka/cascade/matrix/cluster"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := cascadecluster.Cleanup(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// controlSettings are the properties of the control tests' clusters:
// min.insync.replicas=2 for their RF=3 topic, and a broker session of 4 s
// (Kafka's is 9 s) so that a paused or isolated node is fenced sooner.
var controlSettings = brokertest.WithOverrides(map[string]string{
	"min.insync.replicas":          "2",
	"broker.session.timeout.ms":    "4000",
	"broker.heartbeat.interval.ms": "500",
})

// TestControlsInProcess drives every control of an in-process cluster
// (controlsBody).
func TestControlsInProcess(t *testing.T) {
	t.Parallel()
	controlsBody(t, brokertest.StartCluster(t, 3, controlSettings))
}

// TestControlsProcesses drives every control of a cluster of cmd/cascade
// processes, each in a network namespace of its own when this machine
// allows it (root, ip and iptables, namespaces permitted); otherwise
// Isolate must say that it needs them, and the rest runs on loopback.
func TestControlsProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/cascade and starts three processes")
	}
	t.Parallel()
	controlsBody(t, brokertest.StartProcessCluster(t, 3, namespaced(t)...))
}

// TestControlsApacheKafka runs the same body against an Apache Kafka 4.4
// cluster (matrix/apachekafka, in network namespaces when root), to check
// that what it expects of each control is Kafka's behaviour. It starts
// three JVMs, so it runs only with CASCADE_TEST_KAFKA=1.
func TestControlsApacheKafka(t *testing.T) {
	if os.Getenv("CASCADE_TEST_KAFKA") == "" {
		t.Skip("set CASCADE_TEST_KAFKA=1 to run the control tests against Apache Kafka")
	}
	controlsBody(t, brokertest.StartKafkaCluster(t, 3, namespaced(t)...))
}

// namespaced returns controlSettings, and WithNetworkNamespaces when this
// machine can make them; it logs why not otherwise.
func namespaced(t *testing.T) []brokertest.ClusterOption {
	if err := netns.Available(); err != nil {
		t.Logf("nodes on loopback, Isolate not checked: %v", err)
		return []brokertest.ClusterOption{controlSettings}
	}
	return []brokertest.ClusterOption{controlSettings, brokertest.WithNetworkNamespaces()}
}

// controlsBody writes to one partition with replication factor 3 and
// min.insync.replicas=2 through a franz-go producer (acks=all,
// idempotent) while it drives every control, checks each one's effect as
// a Kafka client sees it, and reads every acknowledged record back, in
// order and nothing else, at the end:
//
//   - Kill of the leader: no clean-shutdown marker; another leader, ISR 2,
//     writes go on. Restart: ISR 3 again. MoveLeader: the preferred
//     replica leads again; ErrNotReplica for a node without a replica.
//   - Stop of the leader: the marker is written, the leadership moves.
//   - Kill of the active controller: another voter leads the quorum and a
//     topic can be created.
//   - Pause of the leader: its listener accepts and never answers; the
//     others fence it and elect a leader; writes go on; Resume: ISR 3.
//   - Isolate of the leader: it still answers clients, but cannot
//     acknowledge an acks=all write (NOT_ENOUGH_REPLICAS or a timeout,
//     never success); the others elect a leader, clients move, and after
//     Heal the ISR is 3 again and the write it took is gone.
func controlsBody(t *testing.T, c brokertest.Controls) {
	const topic = "orders"
	c.CreateTopic(t, topic, 1, 3, nil)
	replicas, err := c.Replicas(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A request to a paused node gives up after 3+3 s, not Kafka clients' 30 s.
	cl := c.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProduceRequestTimeout(3*time.Second), kgo.RequestTimeoutOverhead(3*time.Second))
	next := 0
	write := func(n int) {
		t.Helper()
		produce(t, cl, topic, next, next+n)
		next += n
	}
	write(50)
	restart := func(id int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := c.Restart(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitISR(topic, 0, 3); err != nil {
			t.Fatal(err)
		}
	}
	// newLeader waits until a node other than old leads and the ISR is 2.
	newLeader := func(old int, why string) int {
		t.Helper()
		if err := c.WaitISR(topic, 0, 2); err != nil {
			t.Fatalf("after %s of leader %d: %v", why, old, err)
		}
		l, err := c.Leader(topic, 0)
		if err != nil || l == old {
			t.Fatalf("after %s of leader %d the leader is %d (%v)", why, old, l, err)
		}
		return l
	}
	marker := func(id int) bool {
		_, err := os.Stat(filepath.Join(c.LogDir(id), ".kafka_cleanshutdown"))
		return err == nil
	}

	began := time.Now()
	step := func(name string) { t.Logf("%5.1fs %s", time.Since(began).Seconds(), name) }

	// Kill, Restart, MoveLeader.
	step("kill")
	leader := mustLeader(t, c, topic)
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	if c.Live(leader) || marker(leader) {
		t.Fatalf("after Kill of node %d: live %v, clean-shutdown marker %v", leader, c.Live(leader), marker(leader))
	}
	newLeader(leader, "Kill")
	write(50)
	step("restart")
	restart(leader)
	step("move")
	if err := c.MoveLeader(topic, 0, replicas[0]); err != nil {
		t.Fatal(err)
	}
	if l := mustLeader(t, c, topic); l != replicas[0] {
		t.Fatalf("after MoveLeader to %d the leader is %d", replicas[0], l)
	}
	minISR1 := "1"
	c.CreateTopic(t, "single", 1, 1, map[string]*string{"min.insync.replicas": &minISR1})
	one, err := c.Replicas("single", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MoveLeader("single", 0, 1+one[0]%3); !errors.Is(err, brokertest.ErrNotReplica) {
		t.Fatalf("MoveLeader to a node with no replica: %v, want ErrNotReplica", err)
	}
	// The raw write that the isolated leader must refuse below succeeds
	// on a leader that needs no follower.
	if code, err := produceRaw(c, one[0], "single", "raw"); err != nil || code != 0 {
		t.Fatalf("raw acks=all Produce to node %d of an RF=1 topic: %v (%v)", one[0], kerr.ErrorForCode(code), err)
	}

	// Stop.
	step("stop")
	leader = replicas[0]
	if err := c.Stop(leader); err != nil {
		t.Fatal(err)
	}
	if !marker(leader) {
		t.Fatalf("after Stop of node %d the clean-shutdown marker is missing", leader)
	}
	newLeader(leader, "Stop")
	write(50)
	restart(leader)

	// Controller.
	step("controller")
	ctl, err := c.Controller()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(ctl); err != nil {
		t.Fatal(err)
	}
	if now, err := c.Controller(); err != nil || now == ctl {
		t.Fatalf("after Kill of controller %d the controller is %d (%v)", ctl, now, err)
	}
	c.CreateTopic(t, "after-controller", 1, 2, nil)
	restart(ctl)
	write(50)

	// Pause and Resume.
	step("pause")
	leader = mustLeader(t, c, topic)
	if err := c.Pause(leader); err != nil {
		t.Fatal(err)
	}
	if c.Live(leader) {
		t.Fatalf("paused node %d is live", leader)
	}
	silent(t, c, leader)
	step("paused")
	newLeader(leader, "Pause")
	step("moved")
	write(50)
	step("resume")
	if err := c.Resume(leader); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitISR(topic, 0, 3); err != nil {
		t.Fatalf("after Resume of node %d: %v", leader, err)
	}
	step("resumed")
	write(50)

	// Isolate and Heal.
	step("isolate")
	leader = mustLeader(t, c, topic)
	if err := c.Isolate(leader); errors.Is(err, brokertest.ErrNoIsolation) {
		t.Logf("Isolate not checked: %v", err)
		consumeAll(t, c, topic, next)
		return
	} else if err != nil {
		t.Fatal(err)
	}
	if !c.Isolated(leader) || !c.Live(leader) {
		t.Fatalf("isolated node %d: isolated %v, live %v", leader, c.Isolated(leader), c.Live(leader))
	}
	// Its clients still reach it, and it still believes it leads, but no
	// follower fetches: an acks=all write cannot be acknowledged.
	if code, err := produceRaw(c, leader, topic, "isolated"); err == nil && code == 0 {
		t.Fatalf("isolated leader %d acknowledged an acks=all write with min.insync.replicas=2", leader)
	} else {
		t.Logf("isolated leader %d refused an acks=all write: %v (%v)", leader, kerr.ErrorForCode(code), err)
	}
	step("isolated")
	newLeader(leader, "Isolate")
	step("moved")
	write(50)
	step("heal")
	if err := c.Heal(leader); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitISR(topic, 0, 3); err != nil {
		t.Fatalf("after Heal of node %d: %v", leader, err)
	}
	write(50)
	step("consume")
	consumeAll(t, c, topic, next)
	step("done")
}

func mustLeader(t *testing.T, c brokertest.Controls, topic string) int {
	t.Helper()
	l, err := c.Leader(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// silent checks that paused node id still accepts connections (its
// listener is open, as a stopped process's is) but answers nothing.
func silent(t *testing.T, c brokertest.Controls, id int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Request(ctx, id, cluster.MetadataRequest([]string{}))
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Metadata to paused node %d: %v, want a timeout", id, err)
	}
}

// produceRaw sends one acks=all Produce of value to topic's partition 0
// straight to node id through a franz-go client, with no retry and no
// routing, and returns the partition's error code, or the request's
// error (a timeout) when none came.
func produceRaw(c brokertest.Controls, id int, topic, value string) (int16, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The node's own Metadata names the topic's id once its metadata has
	// the topic, which may come after the other nodes'.
	var topicID [16]byte
	err := cluster.Poll(ctx, cluster.PollInterval, func() error {
		md, err := c.Request(ctx, id, cluster.MetadataRequest([]string{topic}))
		if err != nil {
			return err
		}
		for _, mt := range md.(*kmsg.MetadataResponse).Topics {
			if mt.Topic != nil && *mt.Topic == topic && mt.ErrorCode == 0 && mt.TopicID != [16]byte{} {
				topicID = mt.TopicID
				return nil
			}
		}
		return fmt.Errorf("node %d's Metadata lacks %s", id, topic)
	})
	if err != nil {
		return 0, err
	}
	b, err := record.Build(record.NewSpec(record.Rec{Timestamp: time.Now().UnixMilli(), Key: []byte("k"), Value: []byte(value)}))
	if err != nil {
		return 0, err
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 3000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID // the name before v13, the id from v13
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = b
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	seeds := c.Seeds()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds[slices.Index(c.BrokerIDs(), id)]), kgo.RequestRetries(0))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return 0, err
	}
	for _, t := range resp.(*kmsg.ProduceResponse).Topics {
		for _, p := range t.Partitions {
			return p.ErrorCode, nil
		}
	}
	return 0, errors.New("a Produce response without the partition")
}

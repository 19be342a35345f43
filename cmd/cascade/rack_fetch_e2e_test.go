package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// rackSelector is Kafka's RackAwareReplicaSelector.
const rackSelector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

// rackOf is node id's broker.rack in the rack tests.
func rackOf(id int) string { return "rack-" + string(rune('a'+id-1)) }

// rackConsumer is one client reading partition 0 of a topic from its start
// with a client rack, until stopped.
type rackConsumer struct {
	name string
	// start begins reading in the background and returns a stop func;
	// every record's value goes to got.
	start func(t *testing.T, seeds []string, topic, rack string, got func(string)) (stop func())
	// ensure, when set, provisions the client (builds a driver); its
	// error leaves the client out of the test, logged, as on a machine
	// without the client's runtime.
	ensure func(ctx context.Context) error
}

// rackConsumers are the clients the rack test drives; the Java client is
// added by rack_fetch_java_e2e_test.go and, in a cgo build,
// confluent-kafka-go by rack_fetch_confluent_e2e_test.go.
var rackConsumers = []rackConsumer{{name: "franz-go", start: startFranzRackConsumer}}

// startFranzRackConsumer reads with kgo.Rack. franz-go leaves a follower
// it was sent to only when the partition's leader or leader epoch changes,
// or at RecheckPreferredReplicaInterval (30 minutes by default), whatever
// errors the follower gives, so the test rechecks every 3 seconds.
func startFranzRackConsumer(t *testing.T, seeds []string, topic, rack string, got func(string)) func() {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.Rack(rack), kgo.RecheckPreferredReplicaInterval(3*time.Second),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(500*time.Millisecond), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.MetadataMaxAge(2*time.Second), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var done sync.WaitGroup
	done.Go(func() {
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) { got(string(r.Value)) })
		}
	})
	return func() {
		cancel()
		done.Wait()
		cl.Close()
	}
}

// tally counts the values a consumer read.
type tally struct {
	mu     sync.Mutex
	counts map[string]int
}

func (y *tally) add(v string) {
	y.mu.Lock()
	y.counts[v]++
	y.mu.Unlock()
}

// check reports whether every value of want was read, and the first value
// read more than once or not produced.
func (y *tally) check(want []string) (all bool, bad string) {
	y.mu.Lock()
	defer y.mu.Unlock()
	all = true
	for _, v := range want {
		if y.counts[v] == 0 {
			all = false
		}
	}
	for v, n := range y.counts {
		if n > 1 || !slices.Contains(want, v) {
			return all, fmt.Sprintf("%q read %d times", v, n)
		}
	}
	return all, ""
}

// await waits until every value of want was read, failing at once when a
// value is read twice or was not produced.
func (y *tally) await(t *testing.T, bound time.Duration, what string, want []string) {
	t.Helper()
	waitFor(t, bound, what, func() bool {
		all, bad := y.check(want)
		if bad != "" {
			t.Fatalf("%s: %s", what, bad)
		}
		return all
	})
}

// fetchRecordBytes scrapes node id's cascade_fetch_record_bytes_total of
// topic for fetcher (consumer or follower) from its admin listener.
func fetchRecordBytes(t *testing.T, admin, topic, fetcher string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatalf("scraping %s: %v", admin, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	want := fmt.Sprintf(`cascade_fetch_record_bytes_total{fetcher=%q,topic=%q} `, fetcher, topic)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), want); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", sc.Text(), err)
			}
			return f
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return 0
}

// createAssigned creates topic with one partition on replicas 1, 2, 3 (so
// node 1 leads it) and waits until node 1 leads with all three in the ISR.
func (c *testCluster) createAssigned(topic string) {
	c.t.Helper()
	c.createOn(topic, []int32{1, 2, 3})
}

// createOn creates topic with one partition on replicas, with configs, and
// waits until the first replica leads with all of them in the ISR.
func (c *testCluster) createOn(topic string, replicas []int32, configs ...kmsg.CreateTopicsRequestTopicConfig) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor, rt.Configs = topic, -1, -1, configs
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, replicas
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 20000
	resp, err := req.RequestWith(ctx, c.cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		c.t.Fatalf("CreateTopics %s: %v", topic, err)
	}
	waitFor(c.t, 30*time.Second, fmt.Sprintf("%s led by node %d with an ISR of %d", topic, replicas[0], len(replicas)), func() bool {
		l, isr := c.partitionOn(int(replicas[0]), topic)
		return l == replicas[0] && len(isr) == len(replicas)
	})
}

// produceValues produces values to partition 0 of topic with acks=all.
func (c *testCluster) produceValues(topic string, values []string) {
	c.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(90*time.Second), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		c.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	var rs []*kgo.Record
	for _, v := range values {
		rs = append(rs, &kgo.Record{Value: []byte(v), Partition: 0})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		c.t.Fatalf("producing to %s: %v", topic, err)
	}
}

// rawFetch sends one Fetch of partition 0 of topic at offset to node id,
// as a consumer in rack, at version v (0: the newest both know), and
// returns the partition's answer.
func (c *testCluster) rawFetch(id int, topic string, offset int64, rack string, v int16) kmsg.FetchResponseTopicPartition {
	c.t.Helper()
	vs := kversion.Stable()
	if v > 0 {
		vs.SetMaxKeyVersion(1, v)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds[id-1]), kgo.MaxVersions(vs))
	if err != nil {
		c.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.Rack = -1, 1<<20, rack
	req.SessionEpoch = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	if m := c.metadataTopic(id, topic); m != nil {
		ft.TopicID = m.TopicID
	}
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes = offset, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	resp, err := req.RequestWith(ctx, cl.Broker(id))
	if err != nil {
		c.t.Fatalf("Fetch from node %d: %v", id, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		c.t.Fatalf("Fetch from node %d: error %d, %d topics", id, resp.ErrorCode, len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0]
}

// latestOffsetRequest is a ListOffsets of topic partition 0's latest
// offset as replica id.
func latestOffsetRequest(topic string, replica int32) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = replica
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// startRackCluster starts three nodes in racks rack-a, rack-b and rack-c
// with the rack-aware replica selector and extra lines, each with an admin
// listener, whose addresses it returns by node.
func startRackCluster(t *testing.T, extra ...string) (*testCluster, []string) {
	t.Helper()
	admins := make([]string, 3)
	for i := range admins {
		admins[i] = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	}
	c := startTestClusterEach(t, func(id int) []string {
		return []string{"broker.rack=" + rackOf(id), "cascade.admin.listener=" + admins[id-1]}
	}, append([]string{"replica.selector.class=" + rackSelector}, extra...)...)
	return c, admins
}

// listLatest asks node id for topic partition 0's latest offset as
// replica id, and returns the partition's error code and offset.
func (c *testCluster) listLatest(id int, topic string, replica int32) (int16, int64) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := latestOffsetRequest(topic, replica).RequestWith(ctx, c.cl.Broker(id))
	if err != nil {
		c.t.Fatalf("ListOffsets on node %d: %v", id, err)
	}
	p := resp.Topics[0].Partitions[0]
	return p.ErrorCode, p.Offset
}

// TestClusterFetchFromFollower checks KIP-392 on three processes in racks
// rack-a, rack-b and rack-c with Kafka's RackAwareReplicaSelector: Metadata
// and DescribeCluster name each broker's rack; each client (franz-go,
// confluent-kafka-go in a cgo build, and the Java client through the
// matrix's driver) consumes an RF=3 topic led by node 1
// as a consumer in rack-c, and node 3, the follower in that rack, serves
// every record while the leader and node 2 serve none (their per-topic
// consumer fetch bytes stay zero); the leader answers a rack-c Fetch with
// PreferredReadReplica 3 and no records, and others without one. A
// follower serves a consumer up to its high watermark: empty at it,
// OFFSET_OUT_OF_RANGE past its log end, NOT_LEADER_OR_FOLLOWER to a Fetch
// older than v11; ListOffsets is the leader's, except with the debugging
// replica id -2. When node 3 is SIGKILLed the consumers fall back to the
// leader and still read every record exactly once, and once node 3 is out
// of the ISR the leader stops naming it.
func TestClusterFetchFromFollower(t *testing.T) {
	// A long replica lag keeps node 3 in the ISR on a loaded machine, so
	// the leader keeps naming it; killed, it leaves the ISR when fenced.
	c, admins := startRackCluster(t, "replica.lag.time.max.ms=15000", "replica.fetch.wait.max.ms=200",
		"replica.fetch.backoff.ms=100")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, c.cl.Broker(2))
	if err != nil {
		t.Fatal(err)
	}
	dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, c.cl.Broker(2))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range md.Brokers {
		if b.Rack == nil || *b.Rack != rackOf(int(b.NodeID)) {
			t.Errorf("Metadata: broker %d rack %v, want %s", b.NodeID, b.Rack, rackOf(int(b.NodeID)))
		}
	}
	for _, b := range dc.Brokers {
		if b.Rack == nil || *b.Rack != rackOf(int(b.NodeID)) {
			t.Errorf("DescribeCluster: broker %d rack %v, want %s", b.NodeID, b.Rack, rackOf(int(b.NodeID)))
		}
	}

	const n = 100
	values := func(topic string, from int) []string {
		var out []string
		for i := from; i < from+n; i++ {
			out = append(out, fmt.Sprintf("%s-%d", topic, i))
		}
		return out
	}
	type run struct {
		rc     rackConsumer
		topic  string
		want   []string
		got    *tally
		stop   func()
		before float64 // the leader's consumer bytes before the kill
	}
	var runs []*run
	for _, rc := range rackConsumers {
		if rc.ensure != nil {
			if err := rc.ensure(ctx); err != nil {
				t.Logf("%s not run: %v", rc.name, err)
				continue
			}
		}
		r := &run{rc: rc, topic: "rack-" + rc.name, got: &tally{counts: map[string]int{}}}
		c.createAssigned(r.topic)
		r.want = values(r.topic, 0)
		c.produceValues(r.topic, r.want)
		runs = append(runs, r)
	}
	// Every replica has every record before anyone reads, so the
	// follower's log holds whatever offset the consumer asks for.
	for _, r := range runs {
		waitFor(t, 30*time.Second, r.topic+" replicated to node 3", func() bool {
			p := c.rawFetch(3, r.topic, int64(n), "", 0)
			return p.ErrorCode == 0 && p.HighWatermark == n
		})
	}
	for _, r := range runs {
		r.stop = r.rc.start(t, c.seeds, r.topic, rackOf(3), r.got.add)
		defer func() { r.stop() }()
	}
	for _, r := range runs {
		r.got.await(t, 90*time.Second, r.rc.name+" reading "+r.topic+" from rack-c", r.want)
		leader := fetchRecordBytes(t, admins[0], r.topic, "consumer")
		other := fetchRecordBytes(t, admins[1], r.topic, "consumer")
		inRack := fetchRecordBytes(t, admins[2], r.topic, "consumer")
		t.Logf("%s: consumer record bytes served by node 1 (leader) %v, node 2 %v, node 3 (rack-c) %v",
			r.rc.name, leader, other, inRack)
		if inRack == 0 || leader != 0 || other != 0 {
			t.Errorf("%s in rack-c: consumer record bytes by node 1, 2, 3 = %v, %v, %v; want only node 3's",
				r.rc.name, leader, other, inRack)
		}
		r.before = leader
	}

	// What the leader and a follower answer, as Kafka.
	topic := runs[0].topic
	if p := c.rawFetch(1, topic, 0, rackOf(3), 0); p.ErrorCode != 0 || p.PreferredReadReplica != 3 ||
		len(p.RecordBatches) != 0 || p.HighWatermark != n {
		t.Errorf("leader, rack-c consumer: code %d preferred %d, %d record bytes, hw %d; want preferred 3, none, hw %d",
			p.ErrorCode, p.PreferredReadReplica, len(p.RecordBatches), p.HighWatermark, n)
	}
	for _, rack := range []string{rackOf(1), "", "rack-z"} {
		if p := c.rawFetch(1, topic, 0, rack, 0); p.ErrorCode != 0 || p.PreferredReadReplica != -1 || len(p.RecordBatches) == 0 {
			t.Errorf("leader, consumer in rack %q: code %d preferred %d, %d record bytes; want the leader's records",
				rack, p.ErrorCode, p.PreferredReadReplica, len(p.RecordBatches))
		}
	}
	if p := c.rawFetch(2, topic, 0, rackOf(3), 0); p.ErrorCode != 0 || p.PreferredReadReplica != -1 || len(p.RecordBatches) == 0 {
		t.Errorf("follower 2, rack-c consumer: code %d preferred %d, %d record bytes; want its records",
			p.ErrorCode, p.PreferredReadReplica, len(p.RecordBatches))
	}
	if p := c.rawFetch(2, topic, n, "", 0); p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != n {
		t.Errorf("follower 2 at its high watermark: code %d, %d record bytes, hw %d; want empty", p.ErrorCode, len(p.RecordBatches), p.HighWatermark)
	}
	if p := c.rawFetch(2, topic, n+1, "", 0); p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("follower 2 past its log end: code %d, want OFFSET_OUT_OF_RANGE", p.ErrorCode)
	}
	if p := c.rawFetch(2, topic, 0, "", 10); p.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Errorf("follower 2, Fetch v10: code %d, want NOT_LEADER_OR_FOLLOWER", p.ErrorCode)
	}

	// ListOffsets stays with the leader, except for the debugging
	// replica id, which a follower answers from its log end.
	for _, tc := range []struct {
		replica int32
		code    int16
	}{{-1, kerr.NotLeaderForPartition.Code}, {-2, 0}} {
		if code, off := c.listLatest(2, topic, tc.replica); code != tc.code || code == 0 && off != n {
			t.Errorf("follower 2, ListOffsets latest as replica %d: code %d offset %d, want code %d offset %d",
				tc.replica, code, off, tc.code, n)
		}
	}

	// The rack's follower dies while the consumers read on.
	c.procs[2].kill()
	for _, r := range runs {
		more := values(r.topic, n)
		c.produceValues(r.topic, more)
		r.want = append(r.want, more...)
	}
	for _, r := range runs {
		r.got.await(t, 2*time.Minute, r.rc.name+" reading "+r.topic+" after node 3 died", r.want)
		if after := fetchRecordBytes(t, admins[0], r.topic, "consumer"); after <= r.before {
			t.Errorf("%s: the leader served no consumer records after node 3 died (%v bytes)", r.rc.name, after)
		}
	}
	waitFor(t, 60*time.Second, "node 3 out of the ISR", func() bool {
		_, isr := c.partitionOn(1, topic)
		return len(isr) > 0 && !slices.Contains(isr, 3)
	})
	if p := c.rawFetch(1, topic, 0, rackOf(3), 0); p.ErrorCode != 0 || p.PreferredReadReplica != -1 || len(p.RecordBatches) == 0 {
		t.Errorf("leader, rack-c consumer with node 3 out of the ISR: code %d preferred %d, %d record bytes; want the leader's records",
			p.ErrorCode, p.PreferredReadReplica, len(p.RecordBatches))
	}
}

package broker_test

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker"
	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/wire"
)

// syncBuffer is a log sink safe for the broker's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestKafkaStockServerProperties starts a broker from Apache Kafka's stock
// config/server.properties, changing only the client port (a free one) and
// the log dir, and checks that it serves clients, reports the file's values
// through DescribeConfigs, and logs the keys without effect and the
// controller listener it does not bind.
func TestKafkaStockServerProperties(t *testing.T) {
	cfg, err := config.Load("config/testdata/kafka-server.properties", []string{
		"listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://:9093",
		"advertised.listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://localhost:9093",
		"log.dirs=" + t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	b, err := broker.Start(ctxT(t), broker.Config{Broker: cfg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, want := range []string{
		`msg="configuration has no effect" key=num.io.threads value=8`,
		`msg="configuration has no effect" key=num.network.threads value=3`,
		`msg="configuration has no effect" key=share.coordinator.state.topic.replication.factor value=1`,
		`msg="controller listener not served" listener=CONTROLLER address=:9093`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), fastMeta, kgo.DefaultProduceTopic("stock"), kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics("stock"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxT(t)
	if err := cl.ProduceSync(ctx, kgo.StringRecord("hello")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fs := cl.PollFetches(ctx)
	if err := fs.Err(); err != nil || fs.NumRecords() != 1 || string(fs.Records()[0].Value) != "hello" {
		t.Fatalf("consumed %d records: %v", fs.NumRecords(), err)
	}
	// Metadata advertises the bound client port, never the controller's.
	adm := kadm.NewClient(cl)
	md, err := adm.BrokerMetadata(ctx)
	if err != nil || len(md.Brokers) != 1 || md.Brokers[0].Port == 9093 || md.Brokers[0].Host != "127.0.0.1" {
		t.Fatalf("%v %+v", err, md.Brokers)
	}
	rcs, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range rcs[0].Configs {
		got[c.Key] = c.MaybeValue()
	}
	for k, v := range map[string]string{"socket.send.buffer.bytes": "102400", "num.io.threads": "8",
		"controller.quorum.bootstrap.servers": "localhost:9093", "log.retention.hours": "168"} {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

// TestConnectionsMaxIdle checks that connections.max.idle.ms closes a
// connection with no traffic, as Kafka's Selector does.
func TestConnectionsMaxIdle(t *testing.T) {
	b := brokertest.Start(t, map[string]string{"connections.max.idle.ms": "300"})
	c, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "idle", "1"
	frame := req.AppendTo(wire.AppendRequestHeader(nil, wire.RequestHeader{Key: 18, Version: 3, CorrelationID: 1, Flexible: true}))
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(append([]byte{0, 0, 0, byte(len(frame))}, frame...)); err != nil {
		t.Fatal(err)
	}
	if _, err := wire.ReadFrame(c, 1<<20); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.Read(make([]byte, 1))
	if err != io.EOF {
		t.Fatalf("idle connection: %v", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 5*time.Second {
		t.Fatalf("closed after %v, want about 300ms", d)
	}
}

// fetchOnce sends one Fetch for the given partitions of topic, at the
// highest version client and broker share (kgo picks it), naming the topic
// by name and id.
func fetchOnce(t *testing.T, cl *kgo.Client, topic string, sessionID, epoch int32, parts ...int32) *kmsg.FetchResponse {
	t.Helper()
	td, err := kadm.NewClient(cl).ListTopics(ctxT(t), topic)
	if err != nil || td[topic].Err != nil {
		t.Fatalf("%v %v", err, td[topic].Err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.SessionID, req.SessionEpoch = -1, 50<<20, sessionID, epoch
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, td[topic].ID
	for _, p := range parts {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = p, 10<<20, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(t), cl.Broker(1))
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp
}

// TestFetchMaxBytes checks that fetch.max.bytes caps a response below the
// request's own max_bytes, as Kafka's KafkaApis does, while still returning
// the first batch whole.
func TestFetchMaxBytes(t *testing.T) {
	for _, tc := range []struct {
		limit   string
		batches int // batches of about 600 bytes the response may hold
	}{{"1024", 1}, {"57671680", 5}} {
		b := brokertest.Start(t, map[string]string{"fetch.max.bytes": tc.limit})
		cl := b.Client(t, fastMeta, kgo.DefaultProduceTopic("capped"), kgo.ProducerLinger(0), kgo.AllowAutoTopicCreation(),
			kgo.ProducerBatchCompression(kgo.NoCompression()))
		ctx := ctxT(t)
		for i := 0; i < 5; i++ {
			if err := cl.ProduceSync(ctx, kgo.SliceRecord(bytes.Repeat([]byte{'x'}, 500))).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		resp := fetchOnce(t, cl, "capped", 0, -1, 0)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.HighWatermark != 5 {
			t.Fatalf("partition %+v", p)
		}
		n := len(p.RecordBatches)
		if n < 500*tc.batches || n > 700*tc.batches {
			t.Errorf("fetch.max.bytes=%s: %d record bytes, want %d batches of about 600", tc.limit, n, tc.batches)
		}
	}
}

// TestFetchSessionCacheSlots checks that max.incremental.fetch.session.cache.slots
// bounds the cached fetch sessions (KIP-227): with one slot a second, smaller
// session is not created (session id 0) and a larger one evicts the first,
// as Kafka's FetchSessionCache; with none no session is created.
func TestFetchSessionCacheSlots(t *testing.T) {
	b := brokertest.Start(t, map[string]string{"max.incremental.fetch.session.cache.slots": "1"})
	cl := b.Client(t, fastMeta)
	if _, err := kadm.NewClient(cl).CreateTopic(ctxT(t), 3, 1, nil, "sessions"); err != nil {
		t.Fatal(err)
	}
	first := fetchOnce(t, cl, "sessions", 0, 0, 0, 1)
	if first.SessionID == 0 {
		t.Fatal("no session created")
	}
	if s := fetchOnce(t, cl, "sessions", 0, 0, 2); s.SessionID != 0 {
		t.Fatalf("a second session %d was cached beside %d in one slot", s.SessionID, first.SessionID)
	}
	// As Kafka's FetchSessionCache: a larger consumer session does not
	// displace one created less than the eviction threshold ago.
	if third := fetchOnce(t, cl, "sessions", 0, 0, 0, 1, 2); third.SessionID != 0 {
		t.Fatalf("larger session %d displaced the young session %d", third.SessionID, first.SessionID)
	}
	if s := fetchOnce(t, cl, "sessions", first.SessionID, 1); s.SessionID != first.SessionID {
		t.Fatalf("first session: id %d, want %d", s.SessionID, first.SessionID)
	}

	none := brokertest.Start(t, map[string]string{"max.incremental.fetch.session.cache.slots": "0"})
	ncl := none.Client(t, fastMeta)
	if _, err := kadm.NewClient(ncl).CreateTopic(ctxT(t), 1, 1, nil, "sessions"); err != nil {
		t.Fatal(err)
	}
	if s := fetchOnce(t, ncl, "sessions", 0, 0, 0); s.SessionID != 0 {
		t.Fatalf("session %d created with no slots", s.SessionID)
	}
}

// TestLargeOffsetCommit commits offsets with the largest metadata
// offset.metadata.max.bytes allows for 700 partitions through kadm: a
// 2.8 MB OffsetCommit, above the cap other APIs' frames have, which Kafka
// accepts up to socket.request.max.bytes.
func TestLargeOffsetCommit(t *testing.T) {
	// The commit is stored as one __consumer_offsets batch, as Kafka's
	// coordinator stores it, so message.max.bytes must allow it.
	b := brokertest.Start(t, map[string]string{"message.max.bytes": "8388608"})
	adm := b.Admin(t)
	ctx := ctxT(t)
	const parts = 700
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, "wide"); err != nil {
		t.Fatal(err)
	}
	meta := strings.Repeat("m", 4096)
	offsets := kadm.Offsets{}
	for p := int32(0); p < parts; p++ {
		offsets.Add(kadm.Offset{Topic: "wide", Partition: p, At: 0, LeaderEpoch: -1, Metadata: meta})
	}
	// The frame cap OffsetCommit v9 would have if it were not scanned.
	if capped := max(wire.MinAPIFrameCap, wire.DefaultMaxRequestBytes/wire.DecodeAmplification(8, 9)); parts*len(meta) <= capped {
		t.Fatalf("%d bytes of metadata would fit a capped OffsetCommit frame of %d", parts*len(meta), capped)
	}
	resp, err := adm.CommitOffsets(ctx, "wide-group", offsets)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Error(); err != nil {
		t.Fatal(err)
	}
	fetched, err := adm.FetchOffsets(ctx, "wide-group")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	fetched.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.Metadata == meta {
			n++
		}
	})
	if n != parts {
		t.Fatalf("%d of %d offsets committed with their metadata", n, parts)
	}
}

// TestLargeSyncGroup runs a classic group whose leader sends a 4 MiB
// assignment in SyncGroup (a 500-member group's worth) and gets it back.
func TestLargeSyncGroup(t *testing.T) {
	// The assignment is stored in one __consumer_offsets batch, as Kafka's
	// coordinator stores it, so message.max.bytes must allow it.
	b := brokertest.Start(t, map[string]string{"group.initial.rebalance.delay.ms": "0", "message.max.bytes": "8388608"})
	cl := b.Client(t, fastMeta)
	ctx := ctxT(t)
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = "big-sync", 30000, 30000, "consumer"
	proto := kmsg.NewJoinGroupRequestProtocol()
	proto.Name, proto.Metadata = "range", []byte{0, 0, 0, 0, 0, 0, 0, 0}
	join.Protocols = append(join.Protocols, proto)
	jr, err := join.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if jr.ErrorCode == kerr.MemberIDRequired.Code {
		join.MemberID = jr.MemberID
		if jr, err = join.RequestWith(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	if jr.ErrorCode != 0 || jr.LeaderID != jr.MemberID {
		t.Fatalf("join: %v leader %q member %q", kerr.ErrorForCode(jr.ErrorCode), jr.LeaderID, jr.MemberID)
	}
	assignment := bytes.Repeat([]byte("assignment"), 4<<20/10)
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.Generation, sync.MemberID = "big-sync", jr.Generation, jr.MemberID
	sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	a := kmsg.NewSyncGroupRequestGroupAssignment()
	a.MemberID, a.MemberAssignment = jr.MemberID, assignment
	sync.GroupAssignment = append(sync.GroupAssignment, a)
	sr, err := sync.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if sr.ErrorCode != 0 || !bytes.Equal(sr.MemberAssignment, assignment) {
		t.Fatalf("sync: %v, %d assignment bytes back", kerr.ErrorForCode(sr.ErrorCode), len(sr.MemberAssignment))
	}
}

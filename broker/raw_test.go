package broker_test

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/broker/metadata"
	"github.com/cascade-kafka/cascade/broker/record"
	"github.com/cascade-kafka/cascade/broker/wire"
)

// rawConn speaks the protocol over one TCP connection with kmsg, no client
// library in between.
type rawConn struct {
	t    *testing.T
	c    net.Conn
	corr int32
}

func dial(t *testing.T, b *brokertest.Broker) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c}
}

func (rc *rawConn) send(req kmsg.Request) int32 {
	rc.t.Helper()
	rc.corr++
	if _, err := rc.c.Write(hostileFrame(req, rc.corr)); err != nil {
		rc.t.Fatal(err)
	}
	return rc.corr
}

func (rc *rawConn) recv(req kmsg.Request, corr int32) kmsg.Response {
	rc.t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	frame, err := wire.ReadFrame(rc.c, 1<<30)
	if err != nil {
		rc.t.Fatalf("reading response: %v", err)
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
		rc.t.Fatalf("correlation id %d, want %d", got, corr)
	}
	body := frame[4:]
	if wire.ResponseHeaderFlexible(req.Key(), req.GetVersion()) {
		body = body[1:] // empty tag section
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		rc.t.Fatalf("decoding %T: %v", resp, err)
	}
	return resp
}

func (rc *rawConn) do(req kmsg.Request) kmsg.Response {
	rc.t.Helper()
	return rc.recv(req, rc.send(req))
}

// closed reports whether the broker closed the connection.
func (rc *rawConn) closed() bool {
	rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := rc.c.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return err != nil
}

func createTopic(t *testing.T, b *brokertest.Broker, name string, parts int32) *metadata.Topic {
	t.Helper()
	return createTopicB(t, b, name, parts)
}

func createTopicB(t testing.TB, b *brokertest.Broker, name string, parts int32) *metadata.Topic {
	t.Helper()
	res := b.Metadata().CreateTopics([]metadata.CreateTopic{{Name: name, NumPartitions: parts, ReplicationFactor: -1}}, false)
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	return res[0].Topic
}

func batch(t *testing.T, pid int64, epoch int16, seq int32, values ...string) []byte {
	t.Helper()
	var recs []record.Rec
	for _, v := range values {
		recs = append(recs, record.Rec{Timestamp: 1_700_000_000_000 + int64(len(recs)), Value: []byte(v)})
	}
	s := record.NewSpec(recs...)
	s.ProducerID, s.ProducerEpoch, s.BaseSequence = pid, epoch, seq
	b, err := record.Build(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func produceReq(v int16, acks int16, topic string, part int32, recs []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(v)
	req.Acks = acks
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = part, recs
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func produceResult(t *testing.T, rc *rawConn, req *kmsg.ProduceRequest) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	resp := rc.do(req).(*kmsg.ProduceResponse)
	return resp.Topics[0].Partitions[0]
}

func TestApiVersions(t *testing.T) {
	b := brokertest.Start(t)
	rc := dial(t, b)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "raw", "1.0"
	resp := rc.do(req).(*kmsg.ApiVersionsResponse)
	want := map[int16][2]int16{0: {0, 13}, 1: {4, 18}, 2: {1, 11}, 3: {0, 13}, 8: {2, 10}, 9: {1, 10}, 18: {0, 5}, 22: {0, 5}, 23: {2, 4}, 27: {1, 2}}
	got := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("api %d: advertised %v, want %v", k, got[k], v)
		}
	}
	// Bad software name: INVALID_REQUEST.
	req.ClientSoftwareName = "-bad-"
	if resp := rc.do(req).(*kmsg.ApiVersionsResponse); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("bad software name: %d", resp.ErrorCode)
	}
	// Unknown version: UNSUPPORTED_VERSION in v0 format.
	rc.corr++
	frame := wire.AppendRequestHeader(nil, wire.RequestHeader{Key: 18, Version: 99, CorrelationID: rc.corr})
	frame = append(frame, 0xde, 0xad) // a body we cannot know
	rc.c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...))
	rf, err := wire.ReadFrame(rc.c, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	v0 := kmsg.NewPtrApiVersionsResponse()
	v0.SetVersion(0)
	if err := v0.ReadFrom(rf[4:]); err != nil || v0.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("v99: %v code %d", err, v0.ErrorCode)
	}
	if len(v0.ApiKeys) != 1 || v0.ApiKeys[0].ApiKey != 18 || v0.ApiKeys[0].MaxVersion != 5 {
		t.Fatalf("v99 answer lists %+v", v0.ApiKeys)
	}
}

func TestProduceErrors(t *testing.T) {
	b := brokertest.Start(t)
	createTopic(t, b, "p", 1)
	rc := dial(t, b)
	good := batch(t, -1, -1, -1, "a", "b")

	// As Kafka 4.4: v0-2 are advertised but close the connection.
	v2 := dial(t, b)
	v2.send(produceReq(2, 1, "p", 0, good))
	if !v2.closed() {
		t.Error("produce v2 answered")
	}
	if p := produceResult(t, rc, produceReq(9, 2, "p", 0, good)); p.ErrorCode != kerr.InvalidRequiredAcks.Code {
		t.Errorf("acks=2: %d", p.ErrorCode)
	}
	if p := produceResult(t, rc, produceReq(9, 1, "missing", 0, good)); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("missing topic: %d", p.ErrorCode)
	}
	if p := produceResult(t, rc, produceReq(9, 1, "p", 7, good)); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("missing partition: %d", p.ErrorCode)
	}
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 0xff // payload no longer matches the CRC
	if p := produceResult(t, rc, produceReq(9, -1, "p", 0, bad)); p.ErrorCode != kerr.CorruptMessage.Code {
		t.Errorf("bad crc: %d", p.ErrorCode)
	}
	// As Kafka 4.4, whose KafkaApis answers ProduceRequest.validateRecords
	// failures without a message.
	two := append(append([]byte(nil), good...), good...)
	if p := produceResult(t, rc, produceReq(9, 1, "p", 0, two)); p.ErrorCode != kerr.InvalidRecord.Code || p.ErrorMessage != nil {
		t.Errorf("two batches: %d", p.ErrorCode)
	}
	// After all of that the same connection still appends.
	p := produceResult(t, rc, produceReq(9, -1, "p", 0, good))
	if p.ErrorCode != 0 || p.BaseOffset != 0 || p.LogStartOffset != 0 {
		t.Fatalf("good produce: %+v", p)
	}
	// acks=0: no response; the next request's answer comes next.
	rc.send(produceReq(9, 0, "p", 0, batch(t, -1, -1, -1, "c")))
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(12)
	if resp := rc.do(md).(*kmsg.MetadataResponse); len(resp.Topics) != 1 {
		t.Fatalf("metadata after acks=0: %d topics", len(resp.Topics))
	}
	if leo := b.Partitions().Get(tpOf("p", 0)).LogEndOffset(); leo != 3 {
		t.Fatalf("log end offset %d after acks=0 produce, want 3", leo)
	}
	// acks=0 with an error closes the connection.
	rc.send(produceReq(9, 0, "missing", 0, good))
	if !rc.closed() {
		t.Fatal("acks=0 failure did not close the connection")
	}
	rc = dial(t, b)
	// Kafka checks that the partition exists first: FindCoordinator makes
	// the group coordinator create __consumer_offsets.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(3)
	fc.CoordinatorKey = "g"
	for i := 0; rc.do(fc).(*kmsg.FindCoordinatorResponse).ErrorCode != 0 && i < 100; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if p := produceResult(t, rc, produceReq(9, 1, "__consumer_offsets", 0, good)); p.ErrorCode != kerr.InvalidTopicException.Code {
		t.Errorf("internal topic: %d", p.ErrorCode)
	}
}

func TestIdempotentProduce(t *testing.T) {
	b := brokertest.Start(t)
	createTopic(t, b, "idem", 1)
	rc := dial(t, b)
	ipid := kmsg.NewPtrInitProducerIDRequest()
	ipid.SetVersion(4)
	pidResp := rc.do(ipid).(*kmsg.InitProducerIDResponse)
	if pidResp.ErrorCode != 0 || pidResp.ProducerID < 0 {
		t.Fatalf("init producer id: %+v", pidResp)
	}
	pid := pidResp.ProducerID
	first := produceResult(t, rc, produceReq(9, -1, "idem", 0, batch(t, pid, 0, 0, "a", "b")))
	second := produceResult(t, rc, produceReq(9, -1, "idem", 0, batch(t, pid, 0, 2, "c")))
	if first.ErrorCode != 0 || second.ErrorCode != 0 || second.BaseOffset != 2 {
		t.Fatalf("appends: %+v %+v", first, second)
	}
	// A retry of the first batch is answered with its original offset.
	retry := produceResult(t, rc, produceReq(9, -1, "idem", 0, batch(t, pid, 0, 0, "a", "b")))
	if retry.ErrorCode != 0 || retry.BaseOffset != first.BaseOffset {
		t.Fatalf("duplicate: %+v, want offset %d", retry, first.BaseOffset)
	}
	if leo := b.Partitions().Get(tpOf("idem", 0)).LogEndOffset(); leo != 3 {
		t.Fatalf("duplicate was written: log end %d", leo)
	}
	gap := produceResult(t, rc, produceReq(9, -1, "idem", 0, batch(t, pid, 0, 9, "z")))
	if gap.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("sequence gap: %d", gap.ErrorCode)
	}
	// An empty transactional id is INVALID_REQUEST, as Kafka.
	txn := kmsg.NewPtrInitProducerIDRequest()
	txn.SetVersion(4)
	id := ""
	txn.TransactionalID = &id
	if r := rc.do(txn).(*kmsg.InitProducerIDResponse); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("empty transactional id: %d", r.ErrorCode)
	}
}

func TestBadInputKeepsBrokerUp(t *testing.T) {
	b := brokertest.Start(t, map[string]string{"socket.request.max.bytes": "1048576"})
	createTopic(t, b, "safe", 1)
	bystander := dial(t, b)
	absurd := wire.AppendRequestHeader(nil, wire.RequestHeader{Key: 0, Version: 7, CorrelationID: 1})
	absurd = append(absurd, 0xff, 0xff, 0, 1, 0, 0, 0x13, 0x88) // null txn id, acks 1, timeout
	absurd = append(absurd, 0x7f, 0xff, 0xff, 0xff)             // 2^31-1 topics, none present
	absurdFlex := wire.AppendRequestHeader(nil, wire.RequestHeader{Key: 3, Version: 12, CorrelationID: 1, Flexible: true})
	absurdFlex = append(absurdFlex, 0xff, 0xff, 0xff, 0xff, 0x0f) // compact array of 2^32-2 topics
	for name, in := range map[string][]byte{
		"garbage":         []byte("\x00\x00\x00\x10this is not kafka"),
		"oversize":        binary.BigEndian.AppendUint32(nil, 1<<30),
		"negative size":   binary.BigEndian.AppendUint32(nil, 0x80000000),
		"unknown key":     frameOf(wire.AppendRequestHeader(nil, wire.RequestHeader{Key: 999, CorrelationID: 1})),
		"unknown version": frameOf(wire.AppendRequestHeader(nil, wire.RequestHeader{Key: 1, Version: 99, CorrelationID: 1})),
		"absurd array":    frameOf(absurd),
		"absurd compact":  frameOf(absurdFlex),
		"truncated body":  frameOf(wire.AppendRequestHeader(nil, wire.RequestHeader{Key: 3, Version: 1, CorrelationID: 1}))[:8],
	} {
		t.Run(name, func(t *testing.T) {
			rc := dial(t, b)
			rc.c.Write(in)
			if name == "truncated body" {
				rc.c.(*net.TCPConn).CloseWrite()
			}
			if !rc.closed() {
				t.Fatal("connection stayed open")
			}
			md := kmsg.NewPtrMetadataRequest()
			md.SetVersion(4)
			if resp := bystander.do(md).(*kmsg.MetadataResponse); len(resp.Topics) != 1 {
				t.Fatalf("bystander: %d topics", len(resp.Topics))
			}
		})
	}
	// A fresh connection still produces and consumes.
	rc := dial(t, b)
	if p := produceResult(t, rc, produceReq(9, 1, "safe", 0, batch(t, -1, -1, -1, "ok"))); p.ErrorCode != 0 {
		t.Fatalf("produce after bad input: %d", p.ErrorCode)
	}
}

func frameOf(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

func TestIdempotentRetryAfterRestartAndMinISR(t *testing.T) {
	b := brokertest.Start(t)
	createTopic(t, b, "ir", 1)
	rc := dial(t, b)
	ipid := kmsg.NewPtrInitProducerIDRequest()
	ipid.SetVersion(4)
	pid := rc.do(ipid).(*kmsg.InitProducerIDResponse).ProducerID
	first := produceResult(t, rc, produceReq(9, -1, "ir", 0, batch(t, pid, 0, 0, "a")))
	b.Restart(t)
	rc = dial(t, b)
	retry := produceResult(t, rc, produceReq(9, -1, "ir", 0, batch(t, pid, 0, 0, "a")))
	if retry.ErrorCode != 0 || retry.BaseOffset != first.BaseOffset {
		t.Fatalf("retry after restart: %+v, want offset %d", retry, first.BaseOffset)
	}
	if next := rc.do(ipid).(*kmsg.InitProducerIDResponse).ProducerID; next <= pid {
		t.Fatalf("producer id %d after restart, first was %d", next, pid)
	}

	two := "2"
	res := b.Metadata().CreateTopics([]metadata.CreateTopic{{Name: "isr", NumPartitions: 1, ReplicationFactor: -1,
		Configs: map[string]*string{"min.insync.replicas": &two}}}, false)
	if res[0].Err != nil {
		t.Skipf("min.insync.replicas=2 refused at creation: %v", res[0].Err)
	}
	// Kafka's Partition.effectiveMinIsr caps min.insync.replicas at the
	// replica count: one replica in the ISR is enough for acks=all here.
	if p := produceResult(t, rc, produceReq(9, -1, "isr", 0, batch(t, -1, -1, -1, "x"))); p.ErrorCode != 0 {
		t.Fatalf("acks=all with min.insync.replicas=2 on a one-replica partition: %d, want success", p.ErrorCode)
	}
	if p := produceResult(t, rc, produceReq(9, 1, "isr", 0, batch(t, -1, -1, -1, "x"))); p.ErrorCode != 0 {
		t.Fatalf("acks=1 with min.insync.replicas=2: %d", p.ErrorCode)
	}
}

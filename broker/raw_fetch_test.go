package broker_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/broker/log"
)

func tpOf(topic string, p int32) log.TopicPartition {
	return log.TopicPartition{Topic: topic, Partition: p}
}

type fetchPos struct {
	part   int32
	offset int64
	max    int32
}

func fetchReq(v int16, topic string, id [16]byte, parts ...fetchPos) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(v)
	req.ReplicaID = -1
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	for _, p := range parts {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p.part, p.offset, p.max
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func produceN(t *testing.T, rc *rawConn, topic string, part int32, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if p := produceResult(t, rc, produceReq(9, 1, topic, part, batch(t, -1, -1, -1, "0123456789"))); p.ErrorCode != 0 {
			t.Fatalf("produce: %d", p.ErrorCode)
		}
	}
}

func recordsIn(t *testing.T, b []byte) int {
	t.Helper()
	n := 0
	for len(b) > 0 {
		var bat kmsg.RecordBatch
		if err := bat.ReadFrom(b); err != nil {
			t.Fatalf("batch: %v", err)
		}
		n += int(bat.NumRecords)
		b = b[12+bat.Length:]
	}
	return n
}

func TestFetchOffsetsAndLimits(t *testing.T) {
	b := brokertest.Start(t)
	topic := createTopic(t, b, "f", 2)
	rc := dial(t, b)
	produceN(t, rc, "f", 0, 5)
	produceN(t, rc, "f", 1, 5)

	for _, v := range []int16{4, 11, 12, 13, 17} {
		req := fetchReq(v, "f", topic.ID, fetchPos{0, 0, 1 << 20}, fetchPos{1, 2, 1 << 20})
		resp := rc.do(req).(*kmsg.FetchResponse)
		ps := resp.Topics[0].Partitions
		if len(ps) != 2 || ps[0].ErrorCode != 0 || ps[0].HighWatermark != 5 || ps[0].LastStableOffset != 5 {
			t.Fatalf("v%d: %+v", v, ps)
		}
		if n := recordsIn(t, ps[0].RecordBatches); n != 5 {
			t.Fatalf("v%d: partition 0 returned %d records", v, n)
		}
		if n := recordsIn(t, ps[1].RecordBatches); n != 3 {
			t.Fatalf("v%d: partition 1 returned %d records", v, n)
		}
	}
	// Partition limit of 1 byte still returns one batch for the first
	// partition (KIP-74), and nothing for a later one.
	resp := rc.do(fetchReq(12, "f", topic.ID, fetchPos{0, 0, 1}, fetchPos{1, 0, 1})).(*kmsg.FetchResponse)
	ps := resp.Topics[0].Partitions
	if recordsIn(t, ps[0].RecordBatches) != 1 || recordsIn(t, ps[1].RecordBatches) != 0 {
		t.Fatalf("byte limits: %d and %d records", recordsIn(t, ps[0].RecordBatches), recordsIn(t, ps[1].RecordBatches))
	}
	// Out of range.
	resp = rc.do(fetchReq(12, "f", topic.ID, fetchPos{0, 6, 1 << 20})).(*kmsg.FetchResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.HighWatermark != -1 {
		t.Fatalf("out of range: %+v", p)
	}
	// Unknown topic id (v13+) and unknown topic name.
	resp = rc.do(fetchReq(13, "", [16]byte{9, 9}, fetchPos{0, 0, 100})).(*kmsg.FetchResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown topic id: %d", p.ErrorCode)
	}
	resp = rc.do(fetchReq(12, "nope", [16]byte{}, fetchPos{0, 0, 100})).(*kmsg.FetchResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %d", p.ErrorCode)
	}
	// Fenced and unknown leader epochs (KIP-320).
	req := fetchReq(12, "f", topic.ID, fetchPos{0, 0, 100})
	req.Topics[0].Partitions[0].CurrentLeaderEpoch = 5
	if p := rc.do(req).(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("future epoch: %d", p.ErrorCode)
	}
}

func TestFetchLongPollTimesOut(t *testing.T) {
	b := brokertest.Start(t)
	topic := createTopic(t, b, "lp", 1)
	rc := dial(t, b)
	req := fetchReq(12, "lp", topic.ID, fetchPos{0, 0, 100})
	req.MaxWaitMillis, req.MinBytes = 300, 1
	start := time.Now()
	resp := rc.do(req).(*kmsg.FetchResponse)
	if el := time.Since(start); el < 250*time.Millisecond || el > 5*time.Second {
		t.Fatalf("empty long poll returned after %v", el)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("empty poll: %+v", p)
	}
}

func TestFetchSessions(t *testing.T) {
	b := brokertest.Start(t)
	topic := createTopic(t, b, "s", 2)
	rc := dial(t, b)
	produceN(t, rc, "s", 0, 2)

	full := fetchReq(12, "s", topic.ID, fetchPos{0, 0, 1 << 20}, fetchPos{1, 0, 1 << 20})
	full.SessionID, full.SessionEpoch = 0, 0
	resp := rc.do(full).(*kmsg.FetchResponse)
	if resp.SessionID == 0 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("full fetch: session %d, %d partitions", resp.SessionID, len(resp.Topics[0].Partitions))
	}
	sid := resp.SessionID

	incr := func(epoch int32, parts ...fetchPos) *kmsg.FetchResponse {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.MaxBytes = -1, 1<<20
		req.SessionID, req.SessionEpoch = sid, epoch
		if len(parts) > 0 {
			req = fetchReq(12, "s", topic.ID, parts...)
			req.SessionID, req.SessionEpoch = sid, epoch
		}
		return rc.do(req).(*kmsg.FetchResponse)
	}
	// Nothing changed for partition 1; partition 0 moved on to offset 2.
	resp = incr(1, fetchPos{0, 2, 1 << 20})
	if resp.ErrorCode != 0 || len(resp.Topics) != 0 {
		t.Fatalf("idle incremental fetch returned %+v", resp.Topics)
	}
	produceN(t, rc, "s", 1, 1)
	resp = incr(2)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].Partition != 1 {
		t.Fatalf("incremental after produce: %+v", resp.Topics)
	}
	if n := recordsIn(t, resp.Topics[0].Partitions[0].RecordBatches); n != 1 {
		t.Fatalf("incremental returned %d records", n)
	}
	if resp := incr(2); resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("stale epoch: %d", resp.ErrorCode)
	}
	bogus := fetchReq(12, "s", topic.ID)
	bogus.SessionID, bogus.SessionEpoch = sid+1, 1
	if resp := rc.do(bogus).(*kmsg.FetchResponse); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session: %d", resp.ErrorCode)
	}
}

func TestListOffsetsAndEpochs(t *testing.T) {
	b := brokertest.Start(t)
	createTopic(t, b, "lo", 1)
	rc := dial(t, b)
	produceN(t, rc, "lo", 0, 3) // timestamps 1_700_000_000_000 each

	list := func(ts int64) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(9)
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "lo"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return rc.do(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	}
	for _, tc := range []struct {
		ts   int64
		want int64
	}{{-2, 0}, {-1, 3}, {-4, 0}, {-5, -1}, {1_700_000_000_000, 0}, {1_800_000_000_000, -1}} {
		if p := list(tc.ts); p.ErrorCode != 0 || p.Offset != tc.want {
			t.Errorf("timestamp %d: offset %d code %d, want %d", tc.ts, p.Offset, p.ErrorCode, tc.want)
		}
	}
	if p := list(-3); p.ErrorCode != 0 || p.Timestamp != 1_700_000_000_000 {
		t.Errorf("max timestamp: %+v", p)
	}

	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.SetVersion(4)
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = "lo"
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.CurrentLeaderEpoch, rp.LeaderEpoch = 0, 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	p := rc.do(req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.LeaderEpoch != 0 || p.EndOffset != 3 {
		t.Fatalf("offset for leader epoch: %+v", p)
	}
}

func TestMetadataRequests(t *testing.T) {
	b := brokertest.Start(t, map[string]string{"auto.create.topics.enable": "false"})
	topic := createTopic(t, b, "m", 3)
	rc := dial(t, b)
	all := kmsg.NewPtrMetadataRequest()
	all.SetVersion(0)
	resp := rc.do(all).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 || len(resp.Brokers) != 1 || resp.Brokers[0].Port != int32(b.Port()) {
		t.Fatalf("v0 all topics: %+v", resp)
	}
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	unknownID := kmsg.NewMetadataRequestTopic()
	unknownID.TopicID = [16]byte{1}
	byID := kmsg.NewMetadataRequestTopic()
	byID.TopicID = topic.ID
	missing := kmsg.NewMetadataRequestTopic()
	name := "absent"
	missing.Topic = &name
	req.Topics = []kmsg.MetadataRequestTopic{unknownID, byID, missing}
	resp = rc.do(req).(*kmsg.MetadataResponse)
	codes := []int16{resp.Topics[0].ErrorCode, resp.Topics[1].ErrorCode, resp.Topics[2].ErrorCode}
	if codes[0] != kerr.UnknownTopicID.Code || codes[1] != 0 || codes[2] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("codes %v", codes)
	}
	if *resp.Topics[1].Topic != "m" || resp.Topics[1].TopicID != topic.ID || *resp.ClusterID == "" || resp.ControllerID != 1 {
		t.Fatalf("by id: %+v", resp.Topics[1])
	}
}

// TestFetchWokenByAnyPartition parks a fetch on two partitions and wakes it
// with an append to the second, from another connection.
func TestFetchWokenByAnyPartition(t *testing.T) {
	b := brokertest.Start(t)
	topic := createTopic(t, b, "w", 2)
	rc := dial(t, b)
	req := fetchReq(12, "w", topic.ID, fetchPos{0, 0, 1 << 20}, fetchPos{1, 0, 1 << 20})
	req.MaxWaitMillis, req.MinBytes = 10000, 1
	corr := rc.send(req)
	time.Sleep(200 * time.Millisecond)
	produceN(t, dial(t, b), "w", 1, 1)
	start := time.Now()
	resp := rc.recv(req, corr).(*kmsg.FetchResponse)
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("woken after %v", el)
	}
	ps := resp.Topics[0].Partitions
	if recordsIn(t, ps[0].RecordBatches) != 0 || recordsIn(t, ps[1].RecordBatches) != 1 {
		t.Fatalf("records: %d and %d", recordsIn(t, ps[0].RecordBatches), recordsIn(t, ps[1].RecordBatches))
	}
}

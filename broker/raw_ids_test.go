package broker_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

// These tests hold the versions of Kafka 4.2 that name topics by id
// (Produce v13, OffsetCommit v10, OffsetFetch v10) and ListOffsets v11
// without the oracle; TestConformanceProduceV13, TestConformanceOffsetsV10
// and TestConformanceListOffsetsV11 compare the same answers with Kafka's.

func TestProduceFetchByTopicID(t *testing.T) {
	b := brokertest.Start(t, nil)
	topic := createTopic(t, b, "ids", 1)
	rc := dial(t, b)
	recs := batch(t, -1, -1, -1, "a", "b")

	resp := rc.do(produceByID(13, -1, topic.ID, 0, recs)).(*kmsg.ProduceResponse)
	if st := resp.Topics[0]; st.TopicID != topic.ID || st.Partitions[0].ErrorCode != 0 || st.Partitions[0].BaseOffset != 0 {
		t.Fatalf("produce v13 by id: %+v", st)
	}
	resp = rc.do(produceByID(13, -1, [16]byte{1}, 0, recs)).(*kmsg.ProduceResponse)
	if sp := resp.Topics[0].Partitions[0]; sp.ErrorCode != kerr.UnknownTopicID.Code || sp.BaseOffset != -1 {
		t.Fatalf("produce v13 unknown id: %+v", sp)
	}
	// Unknown topics and bad records come before the acks check.
	resp = rc.do(produceByID(13, 2, [16]byte{1}, 0, recs)).(*kmsg.ProduceResponse)
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown id, bad acks: %v", kerr.ErrorForCode(c))
	}
	resp = rc.do(produceReq(12, 2, "absent", 0, recs)).(*kmsg.ProduceResponse)
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic, bad acks: %v", kerr.ErrorForCode(c))
	}

	f := rc.do(fetchOf(18, "", topic.ID, 0, fetchPos{0, 0, 1 << 20})).(*kmsg.FetchResponse)
	if fp := f.Topics[0].Partitions[0]; fp.ErrorCode != 0 || fp.HighWatermark != 2 || len(fp.RecordBatches) == 0 {
		t.Fatalf("fetch v18 by id: %+v", fp)
	}
}

func TestListOffsetsSpecialTimestamps(t *testing.T) {
	b := brokertest.Start(t, nil)
	createTopic(t, b, "lo", 1)
	rc := dial(t, b)
	rc.do(produceReq(9, -1, "lo", 0, batch(t, -1, -1, -1, "a")))
	for _, c := range []struct {
		v    int16
		ts   int64
		code int16
		off  int64
	}{
		{11, -6, 0, -1}, // EARLIEST_PENDING_UPLOAD without tiering
		{10, -6, kerr.UnsupportedVersion.Code, -1},
		{6, -3, kerr.UnsupportedVersion.Code, -1},
		{7, -3, 0, 0},
		{11, -7, kerr.UnsupportedVersion.Code, -1},
		{11, -1, 0, 1},
	} {
		sp := rc.do(listOffsetsReq(c.v, 0, "lo", 0, c.ts)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		if sp.ErrorCode != c.code || sp.Offset != c.off {
			t.Errorf("v%d timestamp %d: %v offset %d", c.v, c.ts, kerr.ErrorForCode(sp.ErrorCode), sp.Offset)
		}
	}
	dup := listOffsetsReq(11, 0, "lo", 0, -1)
	dup.Topics[0].Partitions = append(dup.Topics[0].Partitions, dup.Topics[0].Partitions[0])
	ps := rc.do(dup).(*kmsg.ListOffsetsResponse).Topics[0].Partitions
	if len(ps) != 1 || ps[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("partition twice: %+v", ps)
	}
}

func TestOffsetsByTopicID(t *testing.T) {
	b := brokertest.Start(t, map[string]string{"group.initial.rebalance.delay.ms": "0"})
	topic := createTopic(t, b, "oc", 2)
	rc := dial(t, b)
	codes := func(r kmsg.Response) (out []int16) {
		for _, st := range r.(*kmsg.OffsetCommitResponse).Topics {
			for _, sp := range st.Partitions {
				out = append(out, sp.ErrorCode)
			}
		}
		return out
	}

	// Topics and partitions are checked before the group coordinator: a
	// commit of unknown ones alone does not create its group.
	if c := codes(rc.do(offsetCommitReq(9, "none", "absent", [16]byte{}, 0))); len(c) != 1 || c[0] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %v", c)
	}
	lg := kmsg.NewPtrListGroupsRequest()
	if gs := rc.do(lg).(*kmsg.ListGroupsResponse).Groups; len(gs) != 0 {
		t.Fatalf("groups after a commit of unknown topics: %+v", gs)
	}
	if c := codes(rc.do(offsetCommitReq(9, "g", "oc", [16]byte{}, 5, 0))); len(c) != 2 || c[0] != kerr.UnknownTopicOrPartition.Code || c[1] != 0 {
		t.Fatalf("unknown partition then a known one: %v", c)
	}

	// v10 by id; an unknown id comes first in the answer as in the request.
	req := offsetCommitReq(10, "g", "", [16]byte{7}, 0)
	req.Topics = append(req.Topics, offsetCommitReq(10, "g", "", topic.ID, 1).Topics[0])
	resp := rc.do(req).(*kmsg.OffsetCommitResponse)
	if len(resp.Topics) != 2 || resp.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code ||
		resp.Topics[1].TopicID != topic.ID || resp.Topics[1].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit v10: %+v", resp.Topics)
	}

	// OffsetFetch v10: known ids from the coordinator, then unknown ids.
	fr := offsetFetchReq(10, "g", "", [16]byte{7}, []int32{0})
	fr.Groups[0].Topics = append(fr.Groups[0].Topics, offsetFetchReq(10, "g", "", topic.ID, []int32{0, 1}).Groups[0].Topics[0])
	g := rc.do(fr).(*kmsg.OffsetFetchResponse).Groups[0]
	if g.ErrorCode != 0 || len(g.Topics) != 2 || g.Topics[0].TopicID != topic.ID || g.Topics[0].Partitions[0].Offset != 2 ||
		g.Topics[0].Partitions[1].Offset != 2 || g.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code ||
		g.Topics[1].Partitions[0].Offset != -1 {
		t.Fatalf("fetch v10: %+v", g)
	}
	all := rc.do(offsetFetchReq(10, "g", "", [16]byte{}, nil)).(*kmsg.OffsetFetchResponse).Groups[0]
	if len(all.Topics) != 1 || all.Topics[0].TopicID != topic.ID || len(all.Topics[0].Partitions) != 2 {
		t.Fatalf("fetch all v10: %+v", all)
	}
}

package broker_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The conformance tests of this file hold the versions Kafka 4.2 added to
// the APIs Cascade implements (Produce v13, Fetch v18, ListOffsets v11,
// OffsetCommit v10, OffsetFetch v10, WriteTxnMarkers v2) against Apache
// Kafka 4.4. Topic ids differ between the two brokers, so a request naming
// a topic by id is built once per broker and the answers compared.

// compareByID sends kreq to Kafka and creq to Cascade and fails on any
// difference.
func (p *pair) compareByID(t *testing.T, name string, kreq, creq kmsg.Request) (kmsg.Response, kmsg.Response) {
	t.Helper()
	k, c := p.kafka.do(kreq), p.cascade.do(creq)
	for _, d := range diffResponses(k, c) {
		t.Errorf("%s (%s v%d): %s", name, kmsg.NameForKey(kreq.Key()), kreq.GetVersion(), d)
	}
	return k, c
}

func produceByID(v int16, acks int16, id [16]byte, part int32, recs []byte) *kmsg.ProduceRequest {
	r := produceReq(v, acks, "", part, recs)
	r.Topics[0].TopicID = id
	return r
}

func TestConformanceProduceV13(t *testing.T) {
	p := newPair(t)
	topic := conformanceTopic(t, "p13")
	p.createBoth(t, topic, 1)
	kid, cid := p.topicIDs(t, topic)
	ok := confBatch(t, -1, -1, -1, "a", "b")
	p.compareByID(t, "by id", produceByID(13, -1, kid, 0, ok), produceByID(13, -1, cid, 0, ok))
	p.compareByID(t, "by id, unknown partition", produceByID(13, 1, kid, 3, ok), produceByID(13, 1, cid, 3, ok))
	p.compareByID(t, "by id, invalid acks", produceByID(13, 2, kid, 0, ok), produceByID(13, 2, cid, 0, ok))
	p.check(t, "unknown topic id", produceByID(13, 1, [16]byte{4, 4, 4}, 0, ok))
	p.check(t, "zero topic id", produceByID(13, 1, [16]byte{}, 0, ok))
	// Unknown topics are answered before acks are checked.
	p.check(t, "unknown topic id, invalid acks", produceByID(13, 2, [16]byte{4, 4, 4}, 0, ok))
	p.check(t, "unknown topic, invalid acks", produceReq(12, 2, topic+"-absent", 0, ok))
	bad := append([]byte(nil), ok...)
	bad[16] = 1 // magic 1: refused before acks are checked
	p.check(t, "bad records, invalid acks", produceReq(12, 2, topic, 0, bad))
	// The data written by id is read back alike.
	for _, v := range []int16{17, 18} {
		p.compareByID(t, fmt.Sprintf("fetch v%d", v),
			fetchOf(v, "", kid, 0, fetchPos{0, 0, 1 << 20}), fetchOf(v, "", cid, 0, fetchPos{0, 0, 1 << 20}))
	}
	p.check(t, "fetch v18 unknown topic id", fetchOf(18, "", [16]byte{9, 9, 9}, 0, fetchPos{0, 0, 1 << 20}))
}

func TestConformanceListOffsetsV11(t *testing.T) {
	p := newPair(t)
	topic := conformanceTopic(t, "lo11")
	p.createBoth(t, topic, 1)
	p.both(produceReq(9, -1, topic, 0, confBatch(t, -1, -1, -1, "a", "b", "c")))
	for _, v := range []int16{1, 6, 8, 10, 11} {
		// Every special timestamp at every version: those a version
		// does not know are UNSUPPORTED_VERSION.
		for _, ts := range []int64{-1, -2, -3, -4, -5, -6, -7} {
			p.check(t, fmt.Sprintf("timestamp %d", ts), listOffsetsReq(v, 0, topic, 0, ts))
		}
		p.check(t, "unsupported timestamp, unknown partition", listOffsetsReq(v, 0, topic, 9, -6))
	}
	dup := listOffsetsReq(11, 0, topic, 0, -1)
	dup.Topics[0].Partitions = append(dup.Topics[0].Partitions, dup.Topics[0].Partitions[0])
	p.check(t, "partition twice", dup)
}

func offsetCommitReq(v int16, group, topic string, id [16]byte, parts ...int32) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.SetVersion(v)
	r.Group = group
	r.Generation, r.MemberID = -1, ""
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	for _, part := range parts {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = part, 2, -1
		rp.Metadata = kmsg.StringPtr("m")
		rt.Partitions = append(rt.Partitions, rp)
	}
	r.Topics = append(r.Topics, rt)
	return r
}

// offsetFetchReq asks for group's offsets of topic's partitions, or of
// every topic when parts is nil.
func offsetFetchReq(v int16, group, topic string, id [16]byte, parts []int32) *kmsg.OffsetFetchRequest {
	r := kmsg.NewPtrOffsetFetchRequest()
	r.SetVersion(v)
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	if parts != nil {
		gt := kmsg.NewOffsetFetchRequestGroupTopic()
		gt.Topic, gt.TopicID, gt.Partitions = topic, id, parts
		g.Topics = append(g.Topics, gt)
	}
	r.Groups = append(r.Groups, g)
	return r
}

func TestConformanceOffsetsV10(t *testing.T) {
	p := newPair(t)
	topic := conformanceTopic(t, "oc10")
	group := conformanceTopic(t, "g10")
	p.createBoth(t, topic, 2)
	p.findGroupCoordinator(t, group)
	kid, cid := p.topicIDs(t, topic)

	// By name, up to v9: unknown topics and partitions are refused before
	// the group coordinator; a commit of nothing else creates no group.
	p.check(t, "unknown topic only", offsetCommitReq(9, group+"-none", topic+"-absent", [16]byte{}, 0))
	p.check(t, "fetch after unknown topic only", offsetFetchReq(9, group+"-none", "", [16]byte{}, nil))
	p.check(t, "unknown partition and a known one", offsetCommitReq(9, group, topic, [16]byte{}, 5, 0))
	p.check(t, "commit by name", offsetCommitReq(8, group, topic, [16]byte{}, 1))

	// By id, from v10.
	p.compareByID(t, "commit by id", offsetCommitReq(10, group, "", kid, 0, 1), offsetCommitReq(10, group, "", cid, 0, 1))
	p.compareByID(t, "commit by id, unknown partition", offsetCommitReq(10, group, "", kid, 7), offsetCommitReq(10, group, "", cid, 7))
	p.check(t, "commit unknown topic id", offsetCommitReq(10, group, "", [16]byte{5, 5, 5}, 0))
	p.check(t, "commit zero topic id", offsetCommitReq(10, group, "", [16]byte{}, 0))
	unknownFirst := func(id [16]byte) *kmsg.OffsetCommitRequest {
		r := offsetCommitReq(10, group, "", [16]byte{5, 5, 5}, 0)
		r.Topics = append(r.Topics, offsetCommitReq(10, group, "", id, 1).Topics[0])
		return r
	}
	p.compareByID(t, "commit unknown and known ids", unknownFirst(kid), unknownFirst(cid))

	p.compareByID(t, "fetch by id", offsetFetchReq(10, group, "", kid, []int32{0, 1, 2}), offsetFetchReq(10, group, "", cid, []int32{0, 1, 2}))
	p.check(t, "fetch unknown topic id", offsetFetchReq(10, group, "", [16]byte{6, 6, 6}, []int32{0}))
	unknownFetch := func(id [16]byte) *kmsg.OffsetFetchRequest {
		r := offsetFetchReq(10, group, "", [16]byte{6, 6, 6}, []int32{0})
		r.Groups[0].Topics = append(r.Groups[0].Topics, offsetFetchReq(10, group, "", id, []int32{1}).Groups[0].Topics[0])
		return r
	}
	p.compareByID(t, "fetch unknown then known id", unknownFetch(kid), unknownFetch(cid))
	p.check(t, "fetch all", offsetFetchReq(10, group, "", [16]byte{}, nil))
	p.check(t, "fetch all, v9", offsetFetchReq(9, group, "", [16]byte{}, nil))
	p.check(t, "fetch unknown group by id", offsetFetchReq(10, group+"-none", "", [16]byte{6, 6, 6}, []int32{0}))
}

func writeMarkersReq(v int16, tv int8, pid int64, epoch int16, topic string, part int32) *kmsg.WriteTxnMarkersRequest {
	r := kmsg.NewPtrWriteTxnMarkersRequest()
	r.SetVersion(v)
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.TransactionVersion = pid, epoch, true, tv
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{part}
	m.Topics = append(m.Topics, mt)
	r.Markers = append(r.Markers, m)
	return r
}

func TestConformanceWriteTxnMarkersV2(t *testing.T) {
	p := newPair(t)
	topic := conformanceTopic(t, "wtm")
	p.createBoth(t, topic, 1)
	const pid = 424242
	// A producer the partition does not know: any epoch may end it.
	p.check(t, "tv2 first marker", writeMarkersReq(2, 2, pid, 5, topic, 0))
	// The same epoch again, with no transaction open: a retried marker.
	p.check(t, "tv2 retried marker", writeMarkersReq(2, 2, pid, 5, topic, 0))
	p.check(t, "tv2 older epoch", writeMarkersReq(2, 2, pid, 4, topic, 0))
	p.check(t, "tv1 same epoch", writeMarkersReq(2, 1, pid, 5, topic, 0))
	p.check(t, "v1 older epoch", writeMarkersReq(1, 0, pid, 4, topic, 0))
	p.check(t, "tv2 newer epoch", writeMarkersReq(2, 2, pid, 6, topic, 0))
	p.check(t, "unknown partition", writeMarkersReq(2, 2, pid, 7, topic, 3))
	p.check(t, "log end after the markers", listOffsetsReq(11, 0, topic, 0, -1))
}

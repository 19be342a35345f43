package handler

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/log"
)

func deleteRecordsReq(topic string, offsets map[int32]int64) *kmsg.DeleteRecordsRequest {
	r := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	for p := int32(0); int(p) < 10; p++ {
		if off, ok := offsets[p]; ok {
			rp := kmsg.NewDeleteRecordsRequestTopicPartition()
			rp.Partition, rp.Offset = p, off
			rt.Partitions = append(rt.Partitions, rp)
		}
	}
	r.Topics = append(r.Topics, rt)
	return r
}

func TestDeleteRecordsHandler(t *testing.T) {
	env, _ := newAdminEnv(t, nil)
	call(t, env, createReq(topicReq("a", 3, 1), topicReq("c", 1, 1, "cleanup.policy", "compact")), 7)
	for p := int32(0); p < 3; p++ {
		part := env.Partitions.Get(log.TopicPartition{Topic: "a", Partition: p})
		for i := 0; i < 10; i++ {
			if _, err := part.Append([]byte("batch")); err != nil {
				t.Fatal(err)
			}
		}
	}
	resp := call(t, env, deleteRecordsReq("a", map[int32]int64{0: 4, 1: -1, 2: 11, 5: 1}), 2).(*kmsg.DeleteRecordsResponse)
	ps := resp.Topics[0].Partitions
	if ps[0].ErrorCode != 0 || ps[0].LowWatermark != 4 {
		t.Fatalf("p0 %+v", ps[0])
	}
	if ps[1].ErrorCode != 0 || ps[1].LowWatermark != 10 {
		t.Fatalf("p1 (to the high watermark) %+v", ps[1])
	}
	if ps[2].ErrorCode != kerr.OffsetOutOfRange.Code || ps[2].LowWatermark != -1 {
		t.Fatalf("p2 above the high watermark %+v", ps[2])
	}
	if ps[3].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("p5 %+v", ps[3])
	}
	if got := env.Partitions.Get(log.TopicPartition{Topic: "a", Partition: 0}).LogStartOffset(); got != 4 {
		t.Fatalf("log start %d", got)
	}
	// A lower offset does not move the start back.
	resp = call(t, env, deleteRecordsReq("a", map[int32]int64{0: 2}), 0).(*kmsg.DeleteRecordsResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LowWatermark != 4 {
		t.Fatalf("%+v", p)
	}
	resp = call(t, env, deleteRecordsReq("c", map[int32]int64{0: 0}), 1).(*kmsg.DeleteRecordsResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.PolicyViolation.Code {
		t.Fatalf("compacted topic: %+v", p)
	}
}

func TestDescribeClusterHandler(t *testing.T) {
	env, _ := newAdminEnv(t, nil)
	r := kmsg.NewPtrDescribeClusterRequest()
	r.IncludeClusterAuthorizedOperations = true
	resp := call(t, env, r, 2).(*kmsg.DescribeClusterResponse)
	if resp.ErrorCode != 0 || resp.ClusterID != env.Meta.Image().ClusterID || resp.ClusterID == "" ||
		resp.ControllerID != 1 || len(resp.Brokers) != 1 || resp.Brokers[0].Host != "127.0.0.1" ||
		resp.Brokers[0].Port != 9092 || resp.ClusterAuthorizedOperations != ClusterAuthorizedOps {
		t.Fatalf("%+v", resp)
	}
	r.IncludeClusterAuthorizedOperations = false
	if resp = call(t, env, r, 0).(*kmsg.DescribeClusterResponse); resp.ClusterAuthorizedOperations != -2147483648 {
		t.Fatalf("%+v", resp)
	}
	r.EndpointType = 2
	resp = call(t, env, r, 1).(*kmsg.DescribeClusterResponse)
	if resp.ErrorCode != kerr.MismatchedEndpointType.Code || len(resp.Brokers) != 0 {
		t.Fatalf("%+v", resp)
	}
}

func TestDescribeLogDirsHandler(t *testing.T) {
	env, _ := newAdminEnv(t, nil)
	call(t, env, createReq(topicReq("a", 2, 1), topicReq("b", 1, 1)), 7)
	part := env.Partitions.Get(log.TopicPartition{Topic: "a", Partition: 1})
	part.Append(make([]byte, 100))
	part.Append(make([]byte, 50))

	r := kmsg.NewPtrDescribeLogDirsRequest()
	r.Topics = nil
	resp := call(t, env, r, 4).(*kmsg.DescribeLogDirsResponse)
	if len(resp.Dirs) != 1 {
		t.Fatalf("%+v", resp.Dirs)
	}
	d := resp.Dirs[0]
	if d.Dir != env.Config.LogDirs[0] || d.TotalBytes <= 0 || d.UsableBytes < 0 || len(d.Topics) != 2 || d.Topics[0].Topic != "a" {
		t.Fatalf("%+v", d)
	}
	if ps := d.Topics[0].Partitions; len(ps) != 2 || ps[1].Partition != 1 || ps[1].Size != 150 || ps[0].Size != 0 {
		t.Fatalf("%+v", ps)
	}
	rt := kmsg.NewDescribeLogDirsRequestTopic()
	rt.Topic, rt.Partitions = "b", []int32{0, 7}
	r.Topics = append(r.Topics, rt)
	resp = call(t, env, r, 1).(*kmsg.DescribeLogDirsResponse)
	if d := resp.Dirs[0]; len(d.Topics) != 1 || d.Topics[0].Topic != "b" || len(d.Topics[0].Partitions) != 1 {
		t.Fatalf("%+v", d)
	}
}

func TestDescribeLogDirsTwoDirs(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	env, _ := newAdminEnv(t, map[string]string{"log.dirs": a + "," + b})
	call(t, env, createReq(topicReq("t", 3, 1)), 7)
	resp := call(t, env, kmsg.NewPtrDescribeLogDirsRequest(), 4).(*kmsg.DescribeLogDirsResponse)
	if len(resp.Dirs) != 2 || resp.Dirs[0].Dir != a || resp.Dirs[1].Dir != b {
		t.Fatalf("%+v", resp.Dirs)
	}
	count := func(d kmsg.DescribeLogDirsResponseDir) int {
		n := 0
		for _, tp := range d.Topics {
			n += len(tp.Partitions)
		}
		return n
	}
	if count(resp.Dirs[0]) != 2 || count(resp.Dirs[1]) != 1 {
		t.Fatalf("partitions per dir: %d %d", count(resp.Dirs[0]), count(resp.Dirs[1]))
	}
}

func TestDescribeProducersHandler(t *testing.T) {
	env, logs := newAdminEnv(t, nil)
	call(t, env, createReq(topicReq("a", 1, 1)), 7)
	logs.get("a", 0).setProducers([]log.ProducerInfo{{ProducerID: 7, ProducerEpoch: 2, LastSequence: 9, LastTimestamp: 1234,
		CoordinatorEpoch: -1, CurrentTxnStartOffset: -1}})
	r := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = "a", []int32{0, 3}
	r.Topics = append(r.Topics, rt)
	resp := call(t, env, r, 0).(*kmsg.DescribeProducersResponse)
	ps := resp.Topics[0].Partitions
	if len(ps) != 2 || ps[0].ErrorCode != 0 || len(ps[0].ActiveProducers) != 1 || ps[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("%+v", ps)
	}
	if ap := ps[0].ActiveProducers[0]; ap.ProducerID != 7 || ap.ProducerEpoch != 2 || ap.LastSequence != 9 || ap.LastTimestamp != 1234 || ap.CurrentTxnStartOffset != -1 {
		t.Fatalf("%+v", ap)
	}
}

// TestAdminHandlersEveryVersion runs each admin API at every version it
// registers, through the codec, so no version answers with a field it
// cannot encode or drops the answer.
func TestAdminHandlersEveryVersion(t *testing.T) {
	env, _ := newAdminEnv(t, nil)
	call(t, env, createReq(topicReq("a", 1, 1)), 7)
	reqs := map[int16]func(v int16) kmsg.Request{
		19: func(v int16) kmsg.Request { return createReq(topicReq(fmt.Sprintf("v%d", v), 1, 1)) },
		20: func(v int16) kmsg.Request {
			r := kmsg.NewPtrDeleteTopicsRequest()
			r.TopicNames = []string{"missing"}
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic = ptrTo("missing")
			r.Topics = append(r.Topics, rt)
			return r
		},
		21: func(v int16) kmsg.Request { return deleteRecordsReq("a", map[int32]int64{0: 0}) },
		32: func(v int16) kmsg.Request { return describeReq(kmsg.ConfigResourceTypeTopic, "a", "retention.ms") },
		33: func(v int16) kmsg.Request {
			r := kmsg.NewPtrAlterConfigsRequest()
			res := kmsg.NewAlterConfigsRequestResource()
			res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "a"
			r.Resources = append(r.Resources, res)
			return r
		},
		35: func(v int16) kmsg.Request { return kmsg.NewPtrDescribeLogDirsRequest() },
		37: func(v int16) kmsg.Request {
			r := kmsg.NewPtrCreatePartitionsRequest()
			tp := kmsg.NewCreatePartitionsRequestTopic()
			tp.Topic, tp.Count = "a", int32(2+v)
			r.Topics = append(r.Topics, tp)
			return r
		},
		44: func(v int16) kmsg.Request {
			r := kmsg.NewPtrIncrementalAlterConfigsRequest()
			res := kmsg.NewIncrementalAlterConfigsRequestResource()
			res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "a"
			r.Resources = append(r.Resources, res)
			return r
		},
		60: func(v int16) kmsg.Request { return kmsg.NewPtrDescribeClusterRequest() },
		61: func(v int16) kmsg.Request {
			r := kmsg.NewPtrDescribeProducersRequest()
			rt := kmsg.NewDescribeProducersRequestTopic()
			rt.Topic, rt.Partitions = "a", []int32{0}
			r.Topics = append(r.Topics, rt)
			return r
		},
	}
	for key, mk := range reqs {
		api, _ := Lookup(key, 0) // the range, whether or not v0 is in it
		if api.Fn == nil {
			t.Fatalf("api %d not registered", key)
		}
		for v := api.Min; v <= api.Max; v++ {
			resp := call(t, env, mk(v), v)
			if resp == nil || resp.Key() != key {
				t.Fatalf("api %d v%d: %v", key, v, resp)
			}
		}
	}
}

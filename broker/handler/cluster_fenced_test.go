package handler

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/metadata"
)

// fixedCluster is a Cluster with fixed answers.
type fixedCluster struct {
	live       []BrokerAddr
	controller int32
}

func (c fixedCluster) LiveBrokers() []BrokerAddr { return c.live }
func (c fixedCluster) ControllerID() int32       { return c.controller }

func (c fixedCluster) WriteTxnMarkers(context.Context, int32, *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	return nil, errors.New("no peers in this test")
}

func (c fixedCluster) AddPartitionsToTxn(context.Context, int32, *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error) {
	return nil, errors.New("no peers in this test")
}

// fencedClusterEnv is node 1 of a three-broker cluster whose broker 2 is
// fenced and whose topic t has partition 0 on brokers 1 and 2 (ISR [1])
// and partition 1 on broker 2 alone, leaderless with an empty ISR and
// broker 2 eligible (KIP-966), as after broker 2's fencing.
func fencedClusterEnv(t *testing.T) *Env {
	st := metadata.NewReplica(nil, metadata.Options{})
	ep := func(id int32) []metadata.Endpoint {
		return []metadata.Endpoint{{Name: "CONTROLLER", Host: "127.0.0.1", Port: uint16(9190 + id)},
			{Name: "PLAINTEXT", Host: "127.0.0.1", Port: uint16(9090 + id)}}
	}
	recs := []metadata.Record{metadata.ClusterIDRecord{ClusterID: "c"}}
	for id := int32(1); id <= 3; id++ {
		recs = append(recs, metadata.RegisterBrokerRecord{BrokerID: id, BrokerEpoch: int64(id), Endpoints: ep(id), Fenced: id == 2})
	}
	recs = append(recs, metadata.TopicRecord{Name: "t", ID: metadata.UUID{1}},
		metadata.PartitionRecord{TopicID: metadata.UUID{1}, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1},
		metadata.PartitionRecord{TopicID: metadata.UUID{1}, Partition: 1, Replicas: []int32{2}, ISR: []int32{}, Leader: metadata.NoLeader,
			ELR: []int32{2}, LastKnownELR: []int32{2}})
	if err := st.ApplyCommitted(1, metadata.EncodeBatch(recs)); err != nil {
		t.Fatal(err)
	}
	live := []BrokerAddr{{ID: 1, Host: "127.0.0.1", Port: 9091}, {ID: 3, Host: "127.0.0.1", Port: 9093}}
	return &Env{NodeID: 1, Host: "127.0.0.1", Port: 9091, Meta: st, Cluster: fixedCluster{live: live, controller: 3}}
}

// TestMetadataOfflineReplicas checks that a fenced broker's replicas are
// offline, as KRaftMetadataCache.getOfflineReplicas, and that the ISR is
// listed as the image has it, empty for a partition whose members are
// only eligible.
func TestMetadataOfflineReplicas(t *testing.T) {
	env := fencedClusterEnv(t)
	tp, _ := env.Meta.Image().Topic("t")
	mt := topicMetadata(env, &Request{}, kmsg.NewPtrMetadataRequest(), tp)
	for i, want := range [][2][]int32{{{1}, {2}}, {{}, {2}}} {
		p := mt.Partitions[i]
		if !slices.Equal(p.ISR, want[0]) || !slices.Equal(p.OfflineReplicas, want[1]) {
			t.Errorf("partition %d: ISR %v offline %v, want %v %v", i, p.ISR, p.OfflineReplicas, want[0], want[1])
		}
	}
	single := &Env{NodeID: 1, Meta: env.Meta}
	if mt := topicMetadata(single, &Request{}, kmsg.NewPtrMetadataRequest(), tp); len(mt.Partitions[0].OfflineReplicas) != 0 {
		t.Errorf("single node lists offline replicas %v", mt.Partitions[0].OfflineReplicas)
	}
}

// TestDescribeClusterFencedBrokers checks KIP-1073: IncludeFencedBrokers
// adds the fenced broker, on the client listener, with IsFenced, in id
// order; without it (or before v2) only live brokers are listed.
func TestDescribeClusterFencedBrokers(t *testing.T) {
	env := fencedClusterEnv(t)
	describe := func(version int16, include bool) []kmsg.DescribeClusterResponseBroker {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.SetVersion(version)
		req.EndpointType, req.IncludeFencedBrokers = 1, include
		resp, err := handleDescribeCluster(context.Background(), env, &Request{Key: 60, Version: version, Msg: req})
		if err != nil {
			t.Fatal(err)
		}
		r := resp.(*kmsg.DescribeClusterResponse)
		if r.ControllerID != 3 {
			t.Errorf("controller %d", r.ControllerID)
		}
		return r.Brokers
	}
	type row struct {
		id     int32
		port   int32
		fenced bool
	}
	rows := func(bs []kmsg.DescribeClusterResponseBroker) []row {
		var out []row
		for _, b := range bs {
			out = append(out, row{b.NodeID, b.Port, b.IsFenced})
		}
		return out
	}
	live := []row{{1, 9091, false}, {3, 9093, false}}
	if got := rows(describe(2, false)); !slices.Equal(got, live) {
		t.Errorf("v2 without fenced: %v", got)
	}
	if got := rows(describe(1, true)); !slices.Equal(got, live) {
		t.Errorf("v1: %v", got)
	}
	if got, want := rows(describe(2, true)), []row{{1, 9091, false}, {2, 9092, true}, {3, 9093, false}}; !slices.Equal(got, want) {
		t.Errorf("v2 with fenced: %v, want %v", got, want)
	}
}

package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/cascade-kafka/cascade/matrix/apachekafka"
)

// describeQuorumRequest names __cluster_metadata-0 at version v.
func describeQuorumRequest(v int16) *kmsg.DescribeQuorumRequest {
	r := kmsg.NewPtrDescribeQuorumRequest()
	r.SetVersion(v)
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	return r
}

// TestClusterDescribeQuorum checks DescribeQuorum on a three-process
// cluster: each broker advertises it and forwards it to the active
// controller, whose answer names itself as leader with its raft term and
// commit index, every voter caught up with fetch times, no observers and
// (v2) the voters' controller listeners; a voter that is not the leader
// answers NOT_LEADER_OR_FOLLOWER on its controller listener; a request
// for another partition is UNKNOWN_TOPIC_OR_PARTITION. Kafka's own
// kafka-metadata-quorum tool then describes the cluster through a broker.
func TestClusterDescribeQuorum(t *testing.T) {
	c := startTestCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	avr := kmsg.NewPtrApiVersionsRequest()
	avr.SetVersion(4)
	avr.ClientSoftwareName, avr.ClientSoftwareVersion = "e2e", "1"
	av, err := avr.RequestWith(ctx, c.cl.Broker(2))
	if err != nil || av.ErrorCode != 0 {
		t.Fatalf("ApiVersions: %v %+v", err, av)
	}
	adv := map[int16][2]int16{}
	for _, k := range av.ApiKeys {
		adv[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	if adv[55] != [2]int16{0, 2} || adv[43] != [2]int16{0, 2} {
		t.Fatalf("broker ApiVersions: DescribeQuorum %v, ElectLeaders %v; want 0-2 each", adv[55], adv[43])
	}
	if _, ok := adv[56]; ok {
		t.Fatal("a broker listener advertises AlterPartition, a controller-only API")
	}

	ctl := c.controller(1)
	waitFor(t, 20*time.Second, "every voter caught up", func() bool {
		r, err := describeQuorumRequest(2).RequestWith(ctx, c.cl.Broker(1))
		if err != nil || r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			return false
		}
		p := r.Topics[0].Partitions[0]
		ok := p.ErrorCode == 0 && len(p.CurrentVoters) == 3
		for _, v := range p.CurrentVoters {
			ok = ok && v.LogEndOffset >= p.HighWatermark && v.LastFetchTimestamp > 0 && v.LastCaughtUpTimestamp > 0
		}
		return ok
	})
	for _, v := range []int16{0, 1, 2} {
		vs := kversion.Stable()
		vs.SetMaxKeyVersion(55, v)
		vc, err := kgo.NewClient(kgo.SeedBrokers(c.seeds...), kgo.MaxVersions(vs))
		if err != nil {
			t.Fatal(err)
		}
		defer vc.Close()
		for _, id := range []int{1, 2, 3} {
			r, err := describeQuorumRequest(v).RequestWith(ctx, vc.Broker(id))
			if err != nil {
				t.Fatalf("DescribeQuorum v%d through broker %d: %v", v, id, err)
			}
			p := r.Topics[0].Partitions[0]
			if r.Version != v || r.ErrorCode != 0 || r.Topics[0].Topic != "__cluster_metadata" || p.ErrorCode != 0 || p.LeaderID != ctl ||
				p.LeaderEpoch < 1 || p.HighWatermark < 1 || len(p.CurrentVoters) != 3 || len(p.Observers) != 0 {
				t.Fatalf("DescribeQuorum v%d through broker %d (controller %d): %+v", v, id, ctl, r)
			}
			for i, rv := range p.CurrentVoters {
				if rv.ReplicaID != int32(i+1) || rv.LogEndOffset < 1 {
					t.Fatalf("DescribeQuorum v%d voter %d: %+v", v, i, rv)
				}
				if v == 0 && (rv.LastFetchTimestamp != -1 || rv.LastCaughtUpTimestamp != -1) {
					t.Fatalf("v0 carries timestamps: %+v", rv)
				}
			}
			if v == 2 {
				if len(r.Nodes) != 3 {
					t.Fatalf("v2 nodes: %+v", r.Nodes)
				}
				for i, n := range r.Nodes {
					l := n.Listeners
					if n.NodeID != int32(i+1) || len(l) != 1 || l[0].Name != "CONTROLLER" || l[0].Host != "127.0.0.1" || int(l[0].Port) != c.ctlPorts[i] {
						t.Fatalf("v2 node %d: %+v", i+1, n)
					}
				}
			}
		}
	}
	for id := int32(1); id <= 3; id++ {
		r, err := describeQuorumRequest(2).RequestWith(ctx, c.ctlClient(id))
		if err != nil {
			t.Fatalf("DescribeQuorum on controller listener %d: %v", id, err)
		}
		code, want := r.Topics[0].Partitions[0].ErrorCode, int16(0)
		if id != ctl {
			want = kerr.NotLeaderForPartition.Code
		}
		if code != want {
			t.Fatalf("DescribeQuorum on controller listener %d (leader %d): code %d, want %d", id, ctl, code, want)
		}
	}
	bad := describeQuorumRequest(2)
	bad.Topics[0].Partitions[0].Partition = 1
	if r, err := bad.RequestWith(ctx, c.cl.Broker(1)); err != nil || r.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("DescribeQuorum of __cluster_metadata-1: %v %+v", err, r)
	}

	d, err := apachekafka.Ensure(ctx)
	if err != nil {
		t.Logf("kafka-metadata-quorum not run: %v", err)
		return
	}
	const tool = "org.apache.kafka.tools.MetadataQuorumCommand"
	status, err := d.Run(ctx, tool, "--bootstrap-server", c.seeds[1], "describe", "--status")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kafka-metadata-quorum describe --status:\n%s", status)
	for _, want := range []string{"LeaderId:               " + strconv.Itoa(int(ctl)), "CurrentVoters:", "CurrentObservers:       []", "HighWatermark:"} {
		if !strings.Contains(string(status), want) {
			t.Errorf("--status lacks %q", want)
		}
	}
	repl, err := d.Run(ctx, tool, "--bootstrap-server", c.seeds[1], "describe", "--replication")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kafka-metadata-quorum describe --replication:\n%s", repl)
	if n := strings.Count(string(repl), "Follower"); n != 2 || !strings.Contains(string(repl), "Leader") {
		t.Errorf("--replication lists %d followers, want 2 and a leader", n)
	}
}

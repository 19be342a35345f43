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
// for another partition is UNKNOWN_TOPIC_OR_PARTITION; a controller
// listener's DescribeCluster lists the controllers (KIP-919). Kafka's own
// kafka-metadata-quorum tool then describes the cluster through a broker
// and bootstrapped from a controller.
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

	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.EndpointType = 2
	dcResp, err := dc.RequestWith(ctx, c.ctlClient(1))
	if err != nil || dcResp.ErrorCode != 0 || dcResp.EndpointType != 2 || dcResp.ControllerID != ctl || len(dcResp.Brokers) != 3 ||
		int(dcResp.Brokers[1].Port) != c.ctlPorts[1] {
		t.Fatalf("DescribeCluster of the controllers: %v %+v", err, dcResp)
	}
	dc.EndpointType = 1
	if r, err := dc.RequestWith(ctx, c.ctlClient(2)); err != nil || r.ErrorCode != kerr.MismatchedEndpointType.Code {
		t.Fatalf("DescribeCluster of the brokers on a controller listener: %v %+v", err, r)
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
	// Bootstrapped from a controller, the tool finds the controllers with
	// DescribeCluster (KIP-919) and asks the active one.
	for _, what := range []string{"--status", "--replication"} {
		out, err := d.Run(ctx, tool, "--bootstrap-controller", "127.0.0.1:"+strconv.Itoa(c.ctlPorts[0]), "describe", what)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("kafka-metadata-quorum --bootstrap-controller describe %s:\n%s", what, out)
		if !strings.Contains(string(out), "Leader") {
			t.Errorf("--bootstrap-controller describe %s names no leader", what)
		}
	}
}

// electRequest names partitions of topics for ElectLeaders; nil topics
// means every partition.
func electRequest(typ int8, topics map[string][]int32) *kmsg.ElectLeadersRequest {
	r := kmsg.NewPtrElectLeadersRequest()
	r.ElectionType, r.TimeoutMillis = typ, 10000
	if topics == nil {
		return r
	}
	r.Topics = []kmsg.ElectLeadersRequestTopic{}
	for name, parts := range topics {
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = name, parts
		r.Topics = append(r.Topics, rt)
	}
	return r
}

// electCodes runs ElectLeaders through broker id and returns the code of
// every partition answered, as "topic-partition".
func (c *testCluster) electCodes(ctx context.Context, id int, r *kmsg.ElectLeadersRequest) map[string]int16 {
	c.t.Helper()
	resp, err := r.RequestWith(ctx, c.cl.Broker(id))
	if err != nil || resp.ErrorCode != 0 {
		c.t.Fatalf("ElectLeaders through broker %d: %v %+v", id, err, resp)
	}
	out := map[string]int16{}
	for _, t := range resp.Topics {
		out[t.Topic] = -100 // the topic is listed
		for _, p := range t.Partitions {
			out[t.Topic+"-"+strconv.Itoa(int(p.Partition))] = p.ErrorCode
			if (p.ErrorCode == 0) != (p.ErrorMessage == nil) {
				c.t.Fatalf("ElectLeaders %s-%d: code %d with message %v", t.Topic, p.Partition, p.ErrorCode, p.ErrorMessage)
			}
		}
	}
	return out
}

// TestClusterElectAndAlterPartition checks ElectLeaders forwarded by a
// broker to the active controller, with Kafka's codes for replication
// factor 1 (a led partition needs no election, an offline preferred
// replica is not available, an unclean election finds no live replica,
// unknown partitions, null topics for every partition), and AlterPartition
// on the controller listener with Kafka's codes for a stale broker epoch,
// a fenced leader epoch, an old partition epoch, an ISR without the
// leader, a sender that does not lead, an unknown topic id and a node that
// is not the active controller.
func TestClusterElectAndAlterPartition(t *testing.T) {
	c := startTestCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const topic = "elect"
	placed := c.createTopic(topic, 6)
	ctl := c.controller(1)
	asked := 1 + int(ctl)%3 // a broker that is not the controller

	got := c.electCodes(ctx, asked, electRequest(0, map[string][]int32{topic: {0, 1, 2, 3, 4, 5, 9}, "nope": {0}}))
	for p := range 6 {
		if code := got[topic+"-"+strconv.Itoa(p)]; code != kerr.ElectionNotNeeded.Code {
			t.Fatalf("preferred election of led partition %d: code %d", p, code)
		}
	}
	if got[topic+"-9"] != kerr.UnknownTopicOrPartition.Code || got["nope-0"] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown partitions: %v", got)
	}
	if got := c.electCodes(ctx, asked, electRequest(0, nil)); len(got) != 1 || got[topic] != -100 {
		t.Fatalf("preferred election of every partition, all led by their preferred replica: %v", got)
	}

	// A broker that is not the controller is killed: its partitions are
	// leaderless once it is fenced.
	var victim int32
	for id := int32(1); id <= 3; id++ {
		if id != ctl && int(id) != asked {
			victim = id
		}
	}
	var mine []int32
	for p, l := range placed {
		if l == victim {
			mine = append(mine, p)
		}
	}
	if len(mine) == 0 {
		t.Fatalf("broker %d leads nothing: %v", victim, placed)
	}
	c.procs[victim-1].kill()
	waitFor(t, 30*time.Second, "the killed broker's partitions leaderless", func() bool {
		l := c.leadersOn(asked, topic)
		return l != nil && l[mine[0]] == -1
	})
	var led int32 = -1
	for p, l := range placed {
		if l != victim {
			led = p
		}
	}
	off := topic + "-" + strconv.Itoa(int(mine[0]))
	got = c.electCodes(ctx, asked, electRequest(0, map[string][]int32{topic: {mine[0]}}))
	if got[off] != kerr.PreferredLeaderNotAvailable.Code {
		t.Fatalf("preferred election with the preferred replica offline: %v", got)
	}
	got = c.electCodes(ctx, asked, electRequest(1, map[string][]int32{topic: {mine[0], led}}))
	if got[off] != kerr.EligibleLeadersNotAvailable.Code || got[topic+"-"+strconv.Itoa(int(led))] != kerr.ElectionNotNeeded.Code {
		t.Fatalf("unclean election with no live replica, and of a led partition: %v", got)
	}
	got = c.electCodes(ctx, asked, electRequest(0, nil))
	if len(got) != 1+len(mine) || got[off] != kerr.PreferredLeaderNotAvailable.Code {
		t.Fatalf("preferred election of every partition with broker %d offline (it led %v): %v", victim, mine, got)
	}

	// Restarted, it leads its partitions again, at leader epoch 2 (one
	// change to leaderless, one back); with one replica every change is
	// a leader change, so the partition epoch is the same.
	c.procs[victim-1].start(t, c.bin, c.logs[victim-1])
	waitFor(t, 60*time.Second, "the restarted broker leading again", func() bool {
		l := c.leadersOn(asked, topic)
		return l != nil && l[mine[0]] == victim
	})
	md, err := c.adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	td := md.Topics[topic]
	le := td.Partitions[mine[0]].LeaderEpoch
	if le != 2 {
		t.Fatalf("leader epoch after the restart: %d", le)
	}
	ctl = c.controller(asked)
	epoch := c.brokerEpoch(int(victim))
	alter := func(id int32, version int16, brokerEpoch int64, topicID [16]byte, p, leaderEpoch, partitionEpoch int32, isr ...int32) *kmsg.AlterPartitionResponse {
		t.Helper()
		vs := kversion.Stable()
		vs.SetMaxKeyVersion(56, version)
		cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:"+strconv.Itoa(c.ctlPorts[id-1])), kgo.MaxVersions(vs))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		r := kmsg.NewPtrAlterPartitionRequest()
		r.BrokerID, r.BrokerEpoch = victim, brokerEpoch
		rt := kmsg.NewAlterPartitionRequestTopic()
		rt.TopicID = topicID
		rp := kmsg.NewAlterPartitionRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch = p, leaderEpoch, partitionEpoch
		for _, m := range isr {
			if version >= 3 {
				e := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
				e.BrokerID = m
				rp.NewEpochISR = append(rp.NewEpochISR, e)
			} else {
				rp.NewISR = append(rp.NewISR, m)
			}
		}
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		resp, err := r.RequestWith(ctx, cl.SeedBrokers()[0])
		if err != nil || resp.Version != version {
			t.Fatalf("AlterPartition v%d on controller %d: %v %+v", version, id, err, resp)
		}
		return resp
	}
	code := func(r *kmsg.AlterPartitionResponse) int16 {
		t.Helper()
		if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			t.Fatalf("AlterPartition answer %+v", r)
		}
		return r.Topics[0].Partitions[0].ErrorCode
	}
	p := mine[0]
	// The partition epoch is the controller's and no client API shows
	// it: a fence and an unclean restart move it past the leader epoch
	// (eligible leader replicas), so it is found as the first epoch from
	// the leader epoch on that is not INVALID_UPDATE_VERSION. That first
	// accepted request marks the uncleanly elected leader recovered, a
	// change with a new partition epoch, which its answer carries.
	pe := int32(-1)
	for try := le; try < le+8 && pe < 0; try++ {
		r := alter(ctl, 2, epoch, td.ID, p, le, try, victim)
		switch code(r) {
		case kerr.InvalidUpdateVersion.Code:
		case 0:
			pe = r.Topics[0].Partitions[0].PartitionEpoch
		default:
			t.Fatalf("AlterPartition at partition epoch %d: %+v", try, r)
		}
	}
	if pe < 0 {
		t.Fatalf("no partition epoch from %d to %d accepted", le, le+7)
	}
	for _, v := range []int16{2, 3} {
		r := alter(ctl, v, epoch, td.ID, p, le, pe, victim)
		rp := r.Topics[0].Partitions[0]
		if code(r) != 0 || rp.LeaderID != victim || rp.LeaderEpoch != le || rp.PartitionEpoch != pe || len(rp.ISR) != 1 || rp.ISR[0] != victim {
			t.Fatalf("AlterPartition v%d keeping the ISR: %+v", v, r)
		}
	}
	if r := alter(ctl, 3, epoch-1, td.ID, p, le, pe, victim); r.ErrorCode != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("stale broker epoch: %+v", r)
	}
	other := 1 + ctl%3
	if r := alter(other, 3, epoch, td.ID, p, le, pe, victim); r.ErrorCode != kerr.NotController.Code {
		t.Fatalf("AlterPartition on controller %d, not the active %d: %+v", other, ctl, r)
	}
	for _, tc := range []struct {
		what      string
		topicID   [16]byte
		p, le, pe int32
		isr       []int32
		want      int16
	}{
		{"an older leader epoch", td.ID, p, le - 1, pe, []int32{victim}, kerr.FencedLeaderEpoch.Code},
		{"an older partition epoch", td.ID, p, le, pe - 1, []int32{victim}, kerr.InvalidUpdateVersion.Code},
		{"an ISR without the leader", td.ID, p, le, pe, nil, kerr.InvalidRequest.Code},
		{"an ISR member that is not a replica", td.ID, p, le, pe, []int32{victim, other}, kerr.InvalidRequest.Code},
		{"a partition the sender does not lead", td.ID, led, 0, 0, []int32{placed[led]}, kerr.InvalidRequest.Code},
		{"an unknown topic id", [16]byte{1}, p, le, pe, []int32{victim}, kerr.UnknownTopicID.Code},
	} {
		if got := code(alter(ctl, 3, epoch, tc.topicID, tc.p, tc.le, tc.pe, tc.isr...)); got != tc.want {
			t.Errorf("AlterPartition with %s: code %d, want %d", tc.what, got, tc.want)
		}
	}
}

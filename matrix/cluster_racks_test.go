package matrix_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/cascade-kafka/cascade/matrix/apachekafka"
	"github.com/cascade-kafka/cascade/matrix/cascadecluster"
	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// The rack suite: three nodes in racks rack-a, rack-b and rack-c with
// Kafka's RackAwareReplicaSelector, topics on explicit replicas so that
// both clusters place them alike.

// rackOverrides are the rack suite's settings for every node.
func rackOverrides() map[string]string {
	o := maps.Clone(clusterOverrides)
	o["replica.selector.class"] = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
	return o
}

// nodeRacks puts node i in rack-a, rack-b, rack-c.
func nodeRacks() map[int]map[string]string {
	out := map[int]map[string]string{}
	for id := 1; id <= 3; id++ {
		out[id] = map[string]string{"broker.rack": nodeRack(id)}
	}
	return out
}

func nodeRack(id int) string { return "rack-" + string(rune('a'+id-1)) }

var rackTargets = []clusterTarget{
	{name: "apache-kafka", start: func(ctx context.Context) (cluster.Cluster, error) {
		return apachekafka.StartCluster(ctx, apachekafka.ClusterOptions{Overrides: rackOverrides(), NodeOverrides: nodeRacks()})
	}, active: quorumActive},
	{name: "cascade", start: func(ctx context.Context) (cluster.Cluster, error) {
		return cascadecluster.Start(ctx, cascadecluster.Options{Overrides: rackOverrides(), NodeOverrides: nodeRacks()})
	}, active: quorumActive},
}

// rackTopics are the suite's topics and their replicas per partition;
// describe-a has min.insync.replicas=3, so a dead follower becomes ELR.
var rackTopics = []struct {
	name   string
	assign [][]int32
}{
	{"describe-a", [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}},
	{"describe-b", [][]int32{{2, 3}}},
	{"describe-c", [][]int32{{1}, {2}, {3}, {1}, {2}}},
	{"racked", [][]int32{{1, 2, 3}}},
}

// rackedRecords is how many records the racked topic holds.
const rackedRecords = 10

// TestClusterRacks runs the same KIP-392 and DescribeTopicPartitions steps
// on a three-node Apache Kafka cluster and a three-node Cascade cluster and
// compares the answers: racks in Metadata and DescribeCluster; paged
// DescribeTopicPartitions (named topics two partitions a page, all topics
// from a cursor, a bad cursor); Kafka's own kafka-topics --describe
// (TopicCommand, through the Java Admin's DescribeTopicPartitions paged two
// partitions a response); the leader's PreferredReadReplica for consumers
// of each rack and a follower's answers to a consumer; and, after the
// rack-c follower is killed, the ISR, ELR and offline replicas and the
// leader no longer naming it.
func TestClusterRacks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node Apache Kafka cluster and a three-node Cascade cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dist, err := apachekafka.Ensure(ctx)
	if errors.Is(err, apachekafka.ErrToolMissing) {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
	steps := []conformanceStep{
		{"racks", stepRacks},
		{"racks-create-topics", stepRackTopics},
		{"racks-describe-named", func(ctx context.Context, t *testing.T, r *clusterRun) (any, error) {
			return describePages(ctx, r.c, 2, []string{"describe-c", "describe-a", "missing", "describe-b", "bad/name", "describe-a"}, 2, nil)
		}},
		{"racks-describe-all-from-cursor", func(ctx context.Context, t *testing.T, r *clusterRun) (any, error) {
			return describePages(ctx, r.c, 3, nil, 4, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "describe-b"})
		}},
		{"racks-describe-bad-cursor", func(ctx context.Context, t *testing.T, r *clusterRun) (any, error) {
			return describePages(ctx, r.c, 1, []string{"describe-a", "describe-b"}, 10, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "describe-z"})
		}},
		{"racks-kafka-topics-describe", func(ctx context.Context, t *testing.T, r *clusterRun) (any, error) {
			return topicCommandDescribe(ctx, dist, r.c)
		}},
		{"racks-fetch", stepRackFetch},
		{"racks-kill-rack-c", stepKillRackC},
		{"racks-describe-after-kill", func(ctx context.Context, t *testing.T, r *clusterRun) (any, error) {
			return describePages(ctx, r.c, 1, []string{"describe-a", "racked"}, 10, nil)
		}},
		{"racks-fetch-after-kill", func(ctx context.Context, t *testing.T, r *clusterRun) (any, error) {
			return leaderFetchAnswer(ctx, r.c, nodeRack(3))
		}},
		{"racks-kafka-topics-describe-after-kill", func(ctx context.Context, t *testing.T, r *clusterRun) (any, error) {
			return topicCommandDescribe(ctx, dist, r.c)
		}},
	}
	answers := map[string]map[string]string{}
	for _, target := range rackTargets {
		if !slices.ContainsFunc(selectedClusterTargets(), func(ct clusterTarget) bool { return ct.name == target.name }) {
			continue
		}
		t.Run(target.name, func(t *testing.T) {
			r := &clusterRun{target: target.name, c: startCluster(t, ctx, target), active: target.active}
			answers[target.name] = map[string]string{}
			for _, s := range steps {
				t.Run(s.name, func(t *testing.T) { runStep(ctx, t, r, s, answers) })
			}
		})
	}
}

// stepRacks is every broker's rack as Metadata and DescribeCluster list it.
func stepRacks(ctx context.Context, t *testing.T, r *clusterRun) (any, error) {
	var out []string
	md, err := metadataOn(ctx, r.c, 1, []string{})
	if err != nil {
		return nil, err
	}
	for _, b := range md.Brokers {
		out = append(out, fmt.Sprintf("metadata %d %v", b.NodeID, deref(b.Rack)))
	}
	resp, err := r.c.Request(ctx, 1, kmsg.NewPtrDescribeClusterRequest())
	if err != nil {
		return nil, err
	}
	for _, b := range resp.(*kmsg.DescribeClusterResponse).Brokers {
		out = append(out, fmt.Sprintf("describe-cluster %d %v", b.NodeID, deref(b.Rack)))
	}
	slices.Sort(out)
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

// stepRackTopics creates the suite's topics and waits until every
// partition has its whole assignment in the ISR on every broker, then
// writes rackedRecords records to racked.
func stepRackTopics(ctx context.Context, t *testing.T, r *clusterRun) (any, error) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	for _, rt := range rackTopics {
		ct := newTopic(rt.name, -1, -1, rt.assign...)
		if rt.name == "describe-a" {
			cfg := kmsg.NewCreateTopicsRequestTopicConfig()
			cfg.Name, cfg.Value = "min.insync.replicas", kmsg.StringPtr("3")
			ct.Configs = append(ct.Configs, cfg)
		}
		req.Topics = append(req.Topics, ct)
	}
	created, err := createTopics(ctx, t, r.c, 1, req)
	if err != nil {
		return nil, err
	}
	for _, rt := range rackTopics {
		if _, err := settled(ctx, r.c, idLabels, rt.name, func(ta topicAnswer) error {
			if len(ta.Partitions) != len(rt.assign) {
				return fmt.Errorf("%s has %d partitions", rt.name, len(ta.Partitions))
			}
			for _, p := range ta.Partitions {
				if len(p.ISR) != len(p.Replicas) || p.Leader != p.Replicas[0] {
					return fmt.Errorf("%s/%d: leader %s, ISR %v of %v", rt.name, p.Partition, p.Leader, p.ISR, p.Replicas)
				}
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.c.Seeds()...), kgo.DefaultProduceTopic("racked"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var rs []*kgo.Record
	for i := range rackedRecords {
		rs = append(rs, &kgo.Record{Value: []byte(strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return nil, err
	}
	return created, nil
}

// describePages pages DescribeTopicPartitions on node id from start to the
// page without a cursor and renders every page: per topic its error, name,
// whether it has an id, IsInternal and authorized operations; per
// partition leader, epoch, replicas, and as sets ISR, ELR, last known ELR
// and offline replicas; and the next cursor.
func describePages(ctx context.Context, c cluster.Cluster, id int, topics []string, limit int32,
	start *kmsg.DescribeTopicPartitionsRequestCursor) ([][]string, error) {
	var pages [][]string
	cursor := start
	for range 50 {
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		for _, name := range topics {
			rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
			rt.Topic = name
			req.Topics = append(req.Topics, rt)
		}
		req.ResponsePartitionLimit, req.Cursor = limit, cursor
		resp, err := c.Request(ctx, id, req)
		if err != nil {
			return nil, err
		}
		dr := resp.(*kmsg.DescribeTopicPartitionsResponse)
		var page []string
		for _, t := range dr.Topics {
			page = append(page, fmt.Sprintf("%s %s id=%v internal=%v ops=%d", deref(t.Topic), codeName(t.ErrorCode),
				t.TopicID != [16]byte{}, t.IsInternal, t.AuthorizedOperations))
			for _, p := range t.Partitions {
				page = append(page, fmt.Sprintf("  %d %s leader=%d epoch=%d replicas=%v isr=%v elr=%v lastKnownElr=%v offline=%v",
					p.Partition, codeName(p.ErrorCode), p.LeaderID, p.LeaderEpoch, p.Replicas, idSet(p.ISR),
					idSet(p.EligibleLeaderReplicas), idSet(p.LastKnownELR), idSet(p.OfflineReplicas)))
			}
		}
		cursor = nil
		if nc := dr.NextCursor; nc != nil {
			page = append(page, fmt.Sprintf("next %s/%d", nc.Topic, nc.Partition))
			cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: nc.Topic, Partition: nc.Partition}
		}
		pages = append(pages, page)
		if cursor == nil {
			return pages, nil
		}
	}
	return nil, fmt.Errorf("DescribeTopicPartitions: no last page in 50")
}

// idSet is ids sorted: the order of an ISR or ELR is not part of it.
func idSet(ids []int32) []int32 { return slices.Sorted(slices.Values(ids)) }

// topicIDRe matches kafka-topics' topic ids, which differ between clusters.
var topicIDRe = regexp.MustCompile(`TopicId: \S+`)

// isrRe matches a kafka-topics ISR or ELR list, compared as a set.
var isrRe = regexp.MustCompile(`(Isr|Elr|LastKnownElr): ([0-9,]*)`)

// topicCommandDescribe runs Kafka's kafka-topics --describe of the suite's
// topics against node 1 with two partitions a DescribeTopicPartitions
// response, and returns its lines with topic ids blanked and ISRs sorted.
func topicCommandDescribe(ctx context.Context, dist *apachekafka.Dist, c cluster.Cluster) ([]string, error) {
	out, err := dist.Run(ctx, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", c.Seeds()[0],
		"--describe", "--topic", "describe-.*|racked", "--partition-size-limit-per-response", "2")
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		l = topicIDRe.ReplaceAllString(l, "TopicId: <id>")
		l = isrRe.ReplaceAllStringFunc(l, func(m string) string {
			k, v, _ := strings.Cut(m, ": ")
			ids := strings.Split(v, ",")
			slices.Sort(ids)
			return k + ": " + strings.Join(ids, ",")
		})
		lines = append(lines, l)
	}
	return lines, nil
}

// rawFetchOn sends one consumer Fetch of racked partition 0 at offset to
// node id from rack, at Fetch version v at most, and renders the answer.
func rawFetchOn(ctx context.Context, c cluster.Cluster, id int, offset int64, rack string, v int16) (string, error) {
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(1, v)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Seeds()[id-1]), kgo.MaxVersions(vs))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	md, err := metadataOn(ctx, c, id, []string{"racked"})
	if err != nil {
		return "", err
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.Rack, req.SessionEpoch = -1, 1<<20, rack, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "racked", md.Topics[0].TopicID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes = offset, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	resp, err := req.RequestWith(ctx, cl.Broker(id))
	if err != nil {
		return "", err
	}
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Sprintf("error %s, %d topics", codeName(resp.ErrorCode), len(resp.Topics)), nil
	}
	p := resp.Topics[0].Partitions[0]
	// Whether records came back, not how they are batched.
	return fmt.Sprintf("v%d node %d offset %d rack %q: %s hw=%d preferred=%d records=%v", v, id, offset, rack,
		codeName(p.ErrorCode), p.HighWatermark, p.PreferredReadReplica, len(p.RecordBatches) > 0), nil
}

// stepRackFetch is what the leader answers consumers of each rack, and
// what a follower answers a consumer, once every replica has the records.
func stepRackFetch(ctx context.Context, t *testing.T, r *clusterRun) (any, error) {
	// Wait until both followers' high watermarks reach the log end.
	for _, id := range []int{2, 3} {
		if err := cluster.Poll(ctx, cluster.PollInterval, func() error {
			a, err := rawFetchOn(ctx, r.c, id, rackedRecords, "", 17)
			if err != nil {
				return err
			}
			if !strings.Contains(a, fmt.Sprintf(" hw=%d ", rackedRecords)) {
				return fmt.Errorf("node %d: %s", id, a)
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	var out []string
	for _, rack := range []string{nodeRack(1), nodeRack(2), nodeRack(3), "", "rack-z"} {
		a, err := leaderFetchAnswer(ctx, r.c, rack)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	for _, f := range []struct {
		offset int64
		rack   string
		v      int16
	}{{0, nodeRack(3), 17}, {rackedRecords, "", 17}, {rackedRecords + 1, "", 17}, {0, "", 10}, {0, "", 11}} {
		a, err := rawFetchOn(ctx, r.c, 2, f.offset, f.rack, f.v)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	// ListOffsets latest on the follower, as a consumer and as the
	// debugging replica id.
	for _, replica := range []int32{-1, -2} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = replica
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "racked"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := r.c.Request(ctx, 2, req)
		if err != nil {
			return nil, err
		}
		p := resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		out = append(out, fmt.Sprintf("list-offsets node 2 replica %d: %s offset=%d", replica, codeName(p.ErrorCode), p.Offset))
	}
	return out, nil
}

// leaderFetchAnswer is the leader's (node 1's) answer to a consumer Fetch
// v17 of racked from offset 0 in rack.
func leaderFetchAnswer(ctx context.Context, c cluster.Cluster, rack string) (string, error) {
	return rawFetchOn(ctx, c, 1, 0, rack, 17)
}

// stepKillRackC kills node 3 and waits until it left every ISR of
// describe-a and racked.
func stepKillRackC(ctx context.Context, t *testing.T, r *clusterRun) (any, error) {
	if err := r.c.Kill(3); err != nil {
		return nil, err
	}
	for _, topic := range []string{"describe-a", "racked"} {
		if _, err := settled(ctx, r.c, idLabels, topic, func(ta topicAnswer) error {
			for _, p := range ta.Partitions {
				if slices.Contains(p.ISR, "3") || p.Leader == "-1" {
					return fmt.Errorf("%s/%d: leader %s ISR %v", topic, p.Partition, p.Leader, p.ISR)
				}
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return "killed", nil
}

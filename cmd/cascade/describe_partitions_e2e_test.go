package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describedPage is one DescribeTopicPartitions answer as a line per topic
// and partition, and its next cursor ("" for none).
type describedPage struct {
	lines  []string
	cursor *kmsg.DescribeTopicPartitionsResponseNextCursor
}

// describePartitions sends one DescribeTopicPartitions to node id.
func (c *testCluster) describePartitions(ctx context.Context, id int, topics []string, limit int32,
	cursor *kmsg.DescribeTopicPartitionsRequestCursor) (*kmsg.DescribeTopicPartitionsResponse, error) {
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	for _, t := range topics {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = t
		req.Topics = append(req.Topics, rt)
	}
	req.ResponsePartitionLimit, req.Cursor = limit, cursor
	return req.RequestWith(ctx, c.cl.Broker(id))
}

// sorted returns a sorted copy of ids: an ISR is in the order the last
// AlterPartition left it, and ELR and offline replicas are sets.
func sorted(ids []int32) []int32 { return slices.Sorted(slices.Values(ids)) }

// pageOf renders a response: per topic its error, whether it has an id,
// IsInternal and authorized operations; per partition its leader,
// replicas, and as sets its ISR, ELR, last known ELR and offline replicas.
func pageOf(resp *kmsg.DescribeTopicPartitionsResponse) describedPage {
	var pg describedPage
	for _, t := range resp.Topics {
		name := "<nil>"
		if t.Topic != nil {
			name = *t.Topic
		}
		pg.lines = append(pg.lines, fmt.Sprintf("%s error=%d id=%v internal=%v ops=%d", name, t.ErrorCode,
			t.TopicID != [16]byte{}, t.IsInternal, t.AuthorizedOperations))
		for _, p := range t.Partitions {
			pg.lines = append(pg.lines, fmt.Sprintf("  %s/%d error=%d leader=%d replicas=%v isr=%v elr=%v lastKnownElr=%v offline=%v",
				name, p.Partition, p.ErrorCode, p.LeaderID, p.Replicas, sorted(p.ISR), sorted(p.EligibleLeaderReplicas),
				sorted(p.LastKnownELR), sorted(p.OfflineReplicas)))
		}
	}
	pg.cursor = resp.NextCursor
	return pg
}

// describeAll pages through topics (nil: all) with limit, from the first
// page to the one without a cursor, and returns every page.
func (c *testCluster) describeAll(ctx context.Context, id int, topics []string, limit int32,
	start *kmsg.DescribeTopicPartitionsRequestCursor) []describedPage {
	c.t.Helper()
	var pages []describedPage
	cursor := start
	for range 100 {
		resp, err := c.describePartitions(ctx, id, topics, limit, cursor)
		if err != nil {
			c.t.Fatalf("DescribeTopicPartitions on node %d: %v", id, err)
		}
		pg := pageOf(resp)
		pages = append(pages, pg)
		if pg.cursor == nil {
			return pages
		}
		cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: pg.cursor.Topic, Partition: pg.cursor.Partition}
	}
	c.t.Fatalf("DescribeTopicPartitions: no last page in 100")
	return nil
}

// TestClusterDescribeTopicPartitions checks DescribeTopicPartitions v0
// against three processes through franz-go's kmsg, as Kafka 4's
// DescribeTopicPartitionsRequestHandler: ApiVersions lists it on brokers
// and not on controller listeners; named topics are answered once each in
// name order, unknown ones UNKNOWN_TOPIC_OR_PARTITION and impossible names
// INVALID_TOPIC_EXCEPTION; a limit of 2 pages partitions with NextCursor
// inside and across topics; all topics from a cursor leave out topics
// before it; a bad cursor is INVALID_REQUEST for each named topic; and a
// partition's replicas, ISR, offline replicas and ELR follow the image
// after a follower is killed under min.insync.replicas (KIP-966).
func TestClusterDescribeTopicPartitions(t *testing.T) {
	c := startTestCluster(t, "replica.lag.time.max.ms=4000", "replica.fetch.wait.max.ms=200",
		"replica.fetch.backoff.ms=100", "broker.session.timeout.ms=4000", "broker.heartbeat.interval.ms=500")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	avReq := kmsg.NewPtrApiVersionsRequest()
	avReq.ClientSoftwareName, avReq.ClientSoftwareVersion = "cascade-test", "1"
	av, err := avReq.RequestWith(ctx, c.cl.Broker(1))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(av.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool {
		return k.ApiKey == 75 && k.MinVersion == 0 && k.MaxVersion == 0
	}) {
		t.Errorf("the broker listener's ApiVersions does not list DescribeTopicPartitions v0: %v", av.ApiKeys)
	}
	cav, err := avReq.RequestWith(ctx, c.ctlClient(1))
	if err != nil {
		t.Fatal(err)
	}
	if cav.ErrorCode != 0 || len(cav.ApiKeys) == 0 ||
		slices.ContainsFunc(cav.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == 75 }) {
		t.Errorf("the controller listener's ApiVersions (error %d) lists DescribeTopicPartitions or nothing: %v", cav.ErrorCode, cav.ApiKeys)
	}

	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 20000
	for _, spec := range []struct {
		name   string
		assign [][]int32
		minISR string
	}{
		{"dtp-a", [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, "3"},
		{"dtp-b", [][]int32{{2, 3}}, ""},
		{"dtp-c", [][]int32{{1}, {2}, {3}, {1}, {2}}, ""},
	} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = spec.name, -1, -1
		for p, r := range spec.assign {
			ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			ra.Partition, ra.Replicas = int32(p), r
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
		}
		if spec.minISR != "" {
			cfg := kmsg.NewCreateTopicsRequestTopicConfig()
			cfg.Name, cfg.Value = "min.insync.replicas", kmsg.StringPtr(spec.minISR)
			rt.Configs = append(rt.Configs, cfg)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != 0 {
			t.Fatalf("CreateTopics %s: %v", rt.Topic, kerr.ErrorForCode(rt.ErrorCode))
		}
	}
	full := func(pages []describedPage) bool {
		for _, pg := range pages {
			for _, l := range pg.lines {
				if strings.HasPrefix(l, "  dtp-a/") && !strings.Contains(l, "isr=[1 2 3]") || strings.Contains(l, "leader=-1") {
					return false
				}
			}
		}
		return true
	}
	named := []string{"dtp-c", "dtp-a", "missing", "dtp-b", "bad/name", "dtp-a"}
	var pages []describedPage
	waitFor(t, 30*time.Second, "every partition led, dtp-a's ISRs full", func() bool {
		pages = c.describeAll(ctx, 2, named, 2, nil)
		return full(pages)
	})
	ops := topicOpsBits()
	want := [][]string{
		{"bad/name error=17 id=false internal=false ops=" + ops,
			"dtp-a error=0 id=true internal=false ops=" + ops,
			"  dtp-a/0 error=0 leader=1 replicas=[1 2 3] isr=[1 2 3] elr=[] lastKnownElr=[] offline=[]",
			"  dtp-a/1 error=0 leader=2 replicas=[2 3 1] isr=[1 2 3] elr=[] lastKnownElr=[] offline=[]"},
		{"dtp-a error=0 id=true internal=false ops=" + ops,
			"  dtp-a/2 error=0 leader=3 replicas=[3 1 2] isr=[1 2 3] elr=[] lastKnownElr=[] offline=[]",
			"dtp-b error=0 id=true internal=false ops=" + ops,
			"  dtp-b/0 error=0 leader=2 replicas=[2 3] isr=[2 3] elr=[] lastKnownElr=[] offline=[]"},
		{"dtp-c error=0 id=true internal=false ops=" + ops,
			"  dtp-c/0 error=0 leader=1 replicas=[1] isr=[1] elr=[] lastKnownElr=[] offline=[]",
			"  dtp-c/1 error=0 leader=2 replicas=[2] isr=[2] elr=[] lastKnownElr=[] offline=[]"},
		{"dtp-c error=0 id=true internal=false ops=" + ops,
			"  dtp-c/2 error=0 leader=3 replicas=[3] isr=[3] elr=[] lastKnownElr=[] offline=[]",
			"  dtp-c/3 error=0 leader=1 replicas=[1] isr=[1] elr=[] lastKnownElr=[] offline=[]"},
		{"dtp-c error=0 id=true internal=false ops=" + ops,
			"  dtp-c/4 error=0 leader=2 replicas=[2] isr=[2] elr=[] lastKnownElr=[] offline=[]",
			"missing error=3 id=false internal=false ops=" + ops},
	}
	if len(pages) != len(want) {
		t.Errorf("%d pages, want %d", len(pages), len(want))
	}
	for i := range min(len(pages), len(want)) {
		if got := pages[i].lines; !slices.Equal(got, want[i]) {
			t.Errorf("page %d:\n%s\nwant:\n%s", i+1, strings.Join(got, "\n"), strings.Join(want[i], "\n"))
		}
	}
	// After dtp-b the limit is used up: that cursor names the next
	// topic's partition 0.
	cursors := []string{"dtp-a/2", "dtp-c/0", "dtp-c/2", "dtp-c/4", ""}
	for i := range min(len(pages), len(cursors)) {
		got := ""
		if cur := pages[i].cursor; cur != nil {
			got = fmt.Sprintf("%s/%d", cur.Topic, cur.Partition)
		}
		if got != cursors[i] {
			t.Errorf("page %d: cursor %q, want %q", i+1, got, cursors[i])
		}
	}

	// All topics from a cursor: none before it, every one after.
	all := c.describeAll(ctx, 3, nil, 4, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "dtp-b"})
	var topics []string
	parts := 0
	for _, pg := range all {
		for _, l := range pg.lines {
			if strings.HasPrefix(l, "  ") {
				parts++
			} else if name, _, _ := strings.Cut(l, " "); !slices.Contains(topics, name) {
				topics = append(topics, name)
			}
		}
	}
	if !slices.Equal(topics, []string{"dtp-b", "dtp-c"}) || parts != 6 || len(all) != 2 {
		t.Errorf("all topics from dtp-b with limit 4: topics %v, %d partitions in %d pages; want dtp-b, dtp-c, 6 in 2", topics, parts, len(all))
	}

	// A cursor the named topics do not have, or a negative partition.
	for _, cur := range []kmsg.DescribeTopicPartitionsRequestCursor{{Topic: "dtp-z"}, {Topic: "dtp-a", Partition: -1}} {
		resp, err := c.describePartitions(ctx, 1, []string{"dtp-a", "dtp-b"}, 10, &cur)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 2 || resp.Topics[0].ErrorCode != kerr.InvalidRequest.Code ||
			resp.Topics[1].ErrorCode != kerr.InvalidRequest.Code || resp.NextCursor != nil {
			t.Errorf("cursor %s/%d: %v, want INVALID_REQUEST for both topics", cur.Topic, cur.Partition, pageOf(resp).lines)
		}
	}

	// Node 3 dies: the RF=3 partitions under min.insync.replicas=3 keep
	// it as ELR (it was in the ISR when it shrank), and list it offline.
	c.procs[2].kill()
	var after []describedPage
	waitFor(t, 60*time.Second, "dtp-a without node 3 in its ISRs", func() bool {
		after = c.describeAll(ctx, 1, []string{"dtp-a"}, 10, nil)
		for _, l := range after[0].lines[1:] {
			if !strings.Contains(l, "elr=[3]") {
				return false
			}
		}
		return true
	})
	for _, l := range after[0].lines[1:] {
		if !strings.Contains(l, "offline=[3]") || strings.Contains(l, "leader=3") || strings.Contains(l, "leader=-1") {
			t.Errorf("after node 3 died: %s; want it offline, not leading", l)
		}
	}
	t.Logf("dtp-a after node 3 died:\n%s", strings.Join(after[0].lines, "\n"))
}

// topicOpsBits is the authorized operations of a topic without an
// authorizer, as Kafka reports them.
func topicOpsBits() string {
	var b int32
	for _, op := range []int{3, 4, 5, 6, 7, 8, 10, 11} { // READ..DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
		b |= 1 << op
	}
	return fmt.Sprint(b)
}

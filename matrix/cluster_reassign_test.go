package matrix_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/matrix/apachekafka"
	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// reassignClass is kafka-reassign-partitions.sh's main class.
const reassignClass = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"

// reassignTopics are the topics the reassignment tool moves: one with data
// from broker 1 to brokers 2 and 3, one grown from one replica to three.
var reassignTopics = []string{"moved", "grown"}

// reassignPlan is the --reassignment-json-file both clusters execute.
const reassignPlan = `{"version":1,"partitions":[` +
	`{"topic":"moved","partition":0,"replicas":[2,3]},` +
	`{"topic":"grown","partition":0,"replicas":[1,2,3]}]}`

// TestClusterReassignTool runs Apache Kafka's kafka-reassign-partitions
// (ReassignPartitionsCommand) with --generate, --execute and --verify
// against a three-node Apache Kafka cluster and a three-node Cascade
// cluster, one after the other, with the same topics (placed on broker 1
// by hand) and the same reassignment JSON, and compares what the tool
// prints and what it leaves: the replica sets and leaders, and every
// record read back from the new leader.
func TestClusterReassignTool(t *testing.T) {
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
	answers := map[string]map[string]string{}
	for _, target := range selectedClusterTargets() {
		t.Run(target.name, func(t *testing.T) {
			c := startCluster(t, ctx, target)
			got := runReassignTool(t, ctx, dist, c)
			answers[target.name] = got
			oracle, have := answers["apache-kafka"]
			if target.name == "apache-kafka" || !have {
				return
			}
			for _, k := range slices.Sorted(maps.Keys(got)) {
				if got[k] != oracle[k] {
					t.Errorf("%s differs from Apache Kafka's:\n%s", k, lineDiff(oracle[k], got[k]))
				}
			}
		})
	}
}

// runReassignTool creates the topics, runs the tool's three modes and
// returns what is compared across clusters.
func runReassignTool(t *testing.T, ctx context.Context, dist *apachekafka.Dist, c cluster.Cluster) map[string]string {
	t.Helper()
	bootstrap := c.Seeds()[1]
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Seeds()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.TimeoutMillis = 30000
	for _, name := range reassignTopics {
		tt := kmsg.NewCreateTopicsRequestTopic()
		tt.Topic, tt.NumPartitions, tt.ReplicationFactor = name, -1, -1
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = 0, []int32{1}
		tt.ReplicaAssignment = append(tt.ReplicaAssignment, a)
		ct.Topics = append(ct.Topics, tt)
	}
	resp, err := ct.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("CreateTopics: %v", err)
	}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != 0 {
			t.Fatalf("CreateTopics %s: %s", rt.Topic, codeName(rt.ErrorCode))
		}
	}
	want := map[string][]string{}
	for _, name := range reassignTopics {
		for i := range 200 {
			want[name] = append(want[name], fmt.Sprintf("%s-%03d", name, i))
		}
		var recs []*kgo.Record
		for _, v := range want[name] {
			recs = append(recs, &kgo.Record{Topic: name, Value: []byte(v)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", name, err)
		}
	}

	dir := t.TempDir()
	topicsFile := filepath.Join(dir, "topics.json")
	planFile := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(topicsFile, []byte(`{"version":1,"topics":[{"topic":"moved"},{"topic":"grown"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(planFile, []byte(reassignPlan), 0o644); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	gen, err := dist.Run(ctx, reassignClass, "--bootstrap-server", bootstrap, "--generate",
		"--topics-to-move-json-file", topicsFile, "--broker-list", "2,3")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("--generate:\n%s", gen)
	out["generate: current assignment"], out["generate: proposed brokers"] = generated(t, logDirs(string(gen)))

	exe, err := dist.Run(ctx, reassignClass, "--bootstrap-server", bootstrap, "--execute",
		"--reassignment-json-file", planFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("--execute:\n%s", exe)
	out["execute"] = logDirs(string(exe))

	var verify string
	vctx, vcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer vcancel()
	err = cluster.Poll(vctx, time.Second, func() error {
		rctx, rcancel := context.WithTimeout(vctx, time.Minute)
		defer rcancel()
		v, err := dist.Run(rctx, reassignClass, "--bootstrap-server", bootstrap, "--verify",
			"--reassignment-json-file", planFile)
		if err != nil {
			return err
		}
		verify = string(v)
		if strings.Contains(verify, "is still in progress") {
			return fmt.Errorf("in progress:\n%s", verify)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("--verify: %v", err)
	}
	t.Logf("--verify:\n%s", verify)
	out["verify (done)"] = verify

	// KIP-860: a plan that changes a replication factor, refused with
	// --disallow-replication-factor-change (AlterPartitionReassignments
	// v1), partition by partition.
	shrinkFile := filepath.Join(dir, "shrink.json")
	if err := os.WriteFile(shrinkFile, []byte(`{"version":1,"partitions":[{"topic":"grown","partition":0,"replicas":[3]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	refused, err := dist.Run(ctx, reassignClass, "--bootstrap-server", bootstrap, "--execute",
		"--reassignment-json-file", shrinkFile, "--disallow-replication-factor-change")
	if err == nil {
		t.Errorf("--disallow-replication-factor-change with a changed factor succeeded:\n%s", refused)
	}
	t.Logf("--execute --disallow-replication-factor-change:\n%s", refused)
	out["execute --disallow-replication-factor-change"] = logDirs(string(refused))

	for _, name := range reassignTopics {
		var p kmsg.MetadataResponseTopicPartition
		err := cluster.Poll(ctx, cluster.PollInterval, func() error {
			m, err := cluster.MetadataRequest([]string{name}).RequestWith(ctx, cl)
			if err != nil {
				return err
			}
			if len(m.Topics) != 1 || len(m.Topics[0].Partitions) != 1 {
				return fmt.Errorf("metadata of %s: %+v", name, m.Topics)
			}
			p = m.Topics[0].Partitions[0]
			if len(p.ISR) != len(p.Replicas) {
				return fmt.Errorf("%s: ISR %v of replicas %v", name, p.ISR, p.Replicas)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		out["metadata "+name] = fmt.Sprintf("replicas=%v leader=%d isr=%v", p.Replicas, p.Leader, slices.Sorted(slices.Values(p.ISR)))
		got := readFromLeader(t, ctx, c, int(p.Leader), name, len(want[name]))
		if !slices.Equal(got, want[name]) {
			t.Errorf("%s: read %d records from leader %d, want the %d produced, in order", name, len(got), p.Leader, len(want[name]))
		}
	}
	return out
}

// absPath is a quoted absolute path in the tool's JSON: a log directory,
// which differs between clusters.
var absPath = regexp.MustCompile(`"/[^"]*"`)

// logDirs replaces the log directories the tool prints with one name.
func logDirs(s string) string { return absPath.ReplaceAllString(s, `"<log dir>"`) }

// generated returns --generate's current assignment JSON as printed, and
// the brokers of its proposal (which Kafka places at random).
func generated(t *testing.T, s string) (string, string) {
	t.Helper()
	m := regexp.MustCompile(`(?s)Current partition replica assignment\n(\{.*?\})\n\nProposed partition reassignment configuration\n(\{.*?\})\n`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("--generate printed:\n%s", s)
	}
	var proposal struct {
		Partitions []struct {
			Topic    string  `json:"topic"`
			Replicas []int32 `json:"replicas"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(m[2]), &proposal); err != nil {
		t.Fatalf("proposal %q: %v", m[2], err)
	}
	var brokers []string
	for _, p := range proposal.Partitions {
		for _, r := range p.Replicas {
			if r != 2 && r != 3 {
				t.Errorf("proposal places %s on broker %d, not in --broker-list 2,3", p.Topic, r)
			}
		}
		brokers = append(brokers, fmt.Sprintf("%s:%d replica(s)", p.Topic, len(p.Replicas)))
	}
	slices.Sort(brokers)
	return m[1], strings.Join(brokers, " ")
}

// readFromLeader reads partition 0 of topic from its start through node
// leader's broker until n records came back or the context ends.
func readFromLeader(t *testing.T, ctx context.Context, c cluster.Cluster, leader int, topic string, n int) []string {
	t.Helper()
	ids := c.BrokerIDs()
	i := slices.Index(ids, leader)
	if i < 0 {
		t.Fatalf("leader %d is not a broker of %v", leader, ids)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Seeds()[i]),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out []string
	for len(out) < n && rctx.Err() == nil {
		cl.PollFetches(rctx).EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	return out
}

package apachekafka

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// waitUntil polls cond until it holds, failing the test when ctx ends.
func waitUntil(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	err := poll(ctx, func() error {
		if cond() {
			return nil
		}
		return fmt.Errorf("waiting for %s", what)
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// TestClusterUncleanElectionRecovery records what Apache Kafka does in the
// scenario of Cascade's test of the same name (cmd/cascade): a partition
// with two replicas whose follower is paused out of the ISR, whose leader
// then dies, is led uncleanly by the follower once unclean election is
// enabled on the topic, RECOVERING; the restarted old leader catches up.
// It reads the controller's PartitionChangeRecords from the metadata log
// (kafka-dump-log --cluster-metadata-decoder) and checks when the
// partition goes back to RECOVERED: with the ISR expansion, in the same
// record, not before. Asked for by name (CASCADE_KAFKA_RECOVERY=1): it
// starts three JVMs for about a minute.
func TestClusterUncleanElectionRecovery(t *testing.T) {
	if os.Getenv("CASCADE_KAFKA_RECOVERY") == "" {
		t.Skip("starts three Apache Kafka nodes; run with CASCADE_KAFKA_RECOVERY=1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startClusterOrSkip(t, ctx, ClusterOptions{Overrides: map[string]string{
		"replica.lag.time.max.ms": "4000", "unclean.leader.election.interval.ms": "1000",
	}})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Seeds()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(30*time.Second), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const topic = "recover"
	if _, err := adm.CreateTopic(ctx, 1, 2, map[string]*string{"min.insync.replicas": kmsg.StringPtr("1")}, topic); err != nil {
		t.Fatal(err)
	}
	ps, err := c.WaitForISR(ctx, topic, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	old := ps.Leader
	follower := ps.Replicas[0]
	if follower == old {
		follower = ps.Replicas[1]
	}
	third := 6 - old - follower
	produce := func(v string) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	produce("before")
	if err := c.Pause(follower); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the paused follower out of the ISR", func() bool {
		ps, err := c.Partition(ctx, topic, 0)
		return err == nil && ps.Leader == old && slices.Equal(ps.ISR, []int{old})
	})
	produce("lost")
	if err := c.Kill(old); err != nil {
		t.Fatal(err)
	}
	if err := c.Resume(follower); err != nil {
		t.Fatal(err)
	}
	set := kadm.AlterConfig{Name: "unclean.leader.election.enable", Value: kmsg.StringPtr("true")}
	waitUntil(t, ctx, "unclean election enabled", func() bool {
		r, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{set}, topic)
		if err == nil {
			_, err = r.On(topic, nil)
		}
		return err == nil
	})
	waitUntil(t, ctx, "the follower elected uncleanly", func() bool {
		ps, err := c.Partition(ctx, topic, 0)
		return err == nil && ps.Leader == follower && slices.Equal(ps.ISR, []int{follower})
	})
	produce("after")
	if err := c.Restart(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitForISR(ctx, topic, 0, 2); err != nil {
		t.Fatal(err)
	}
	produce("later")

	// The partition's change records as the third node's metadata log
	// holds them.
	segs, err := filepath.Glob(filepath.Join(c.Node(third).DataDir(), "__cluster_metadata-0", "*.log"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("metadata log segments: %v %v", segs, err)
	}
	var changes []string
	waitUntil(t, ctx, "the expansion in the metadata log", func() bool {
		out, err := c.dist.Run(ctx, DumpLogSegmentsClass, "--cluster-metadata-decoder", "--files", strings.Join(segs, ","))
		if err != nil {
			t.Fatalf("kafka-dump-log: %v\n%s", err, out)
		}
		changes = nil
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, `"PARTITION_CHANGE_RECORD"`) {
				changes = append(changes, line[strings.Index(line, "payload:"):])
			}
		}
		return len(changes) > 0 && strings.Contains(changes[len(changes)-1], fmt.Sprintf(`"isr":[%d,%d]`, min(old, follower), max(old, follower)))
	})
	for _, ch := range changes {
		t.Log(ch)
	}
	lrs := regexp.MustCompile(`"leaderRecoveryState":(-?\d+)`)
	var states []string
	for _, ch := range changes {
		m := lrs.FindStringSubmatch(ch)
		if m == nil {
			states = append(states, "none")
		} else {
			states = append(states, m[1])
		}
	}
	t.Logf("leaderRecoveryState by change record: %v", states)
	i := slices.IndexFunc(changes, func(s string) bool { return strings.Contains(s, `"leaderRecoveryState":1`) })
	if i < 0 {
		t.Fatal("no change record marked the partition RECOVERING")
	}
	last := changes[len(changes)-1]
	if !strings.Contains(last, `"leaderRecoveryState":0`) {
		t.Fatalf("the expansion did not mark the partition RECOVERED: %s", last)
	}
	for _, ch := range changes[i+1 : len(changes)-1] {
		if strings.Contains(ch, `"leaderRecoveryState":0`) {
			t.Fatalf("RECOVERED before the expansion: %s", ch)
		}
	}
}

package matrix

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// expectCode requires err to carry the Kafka error named want.
func expectCode(what string, err error, want ...string) error {
	if err == nil {
		return fmt.Errorf("%s succeeded, want %v", what, want)
	}
	if errors.Is(err, driver.ErrUnsupported) {
		return err // The cell is unsupported, not failed.
	}
	got := driver.Code(err)
	for _, w := range want {
		if got == w {
			return nil
		}
	}
	return fmt.Errorf("%s failed with %v, want %v", what, err, want)
}

// adminScenario is scenario 1: create, describe, add partitions, describe
// and alter configs, errors for existing topics and invalid configs, delete.
var adminScenario = Scenario{
	ID:    "1.admin",
	Title: "create/describe/delete topics, add partitions, describe/alter configs",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		topic := e.Topic("admin-" + d.Client())
		if err := createTopic(ctx, e, d, topic, 3, map[string]string{"retention.ms": "3600000"}); err != nil {
			return "", err
		}
		err := d.CreateTopic(ctx, driver.CreateTopic{Topic: topic, Partitions: 3, ReplicationFactor: e.ReplicationFactor()})
		if err := expectCode("creating an existing topic", err, "TOPIC_ALREADY_EXISTS"); err != nil {
			return "", err
		}
		if err := expectPartitions(ctx, d, topic, 3); err != nil {
			return "", err
		}
		if err := d.CreatePartitions(ctx, topic, 5); err != nil {
			return "", fmt.Errorf("create partitions to 5: %w", err)
		}
		if err := expectPartitions(ctx, d, topic, 5); err != nil {
			return "", err
		}
		err = d.CreatePartitions(ctx, topic, 2)
		if err := expectCode("shrinking to 2 partitions", err, "INVALID_PARTITIONS"); err != nil {
			return "", err
		}
		cfg, err := describeConfigs(ctx, d, topic)
		if err != nil {
			return "", fmt.Errorf("describe configs: %w", err)
		}
		for k, want := range map[string]string{"retention.ms": "3600000", "cleanup.policy": "delete", "max.message.bytes": "1048588"} {
			if cfg[k] != want {
				return "", fmt.Errorf("described %s = %q, want %q", k, cfg[k], want)
			}
		}
		if err := d.AlterConfigs(ctx, driver.AlterConfigs{Topic: topic, Set: map[string]string{"retention.ms": "7200000"}}); err != nil {
			return "", fmt.Errorf("alter retention.ms: %w", err)
		}
		if err := waitConfig(ctx, d, topic, "retention.ms", "7200000"); err != nil {
			return "", err
		}
		err = d.AlterConfigs(ctx, driver.AlterConfigs{Topic: topic, Set: map[string]string{"retention.ms": "not-a-number"}})
		if err := expectCode("altering retention.ms to not-a-number", err, "INVALID_CONFIG"); err != nil {
			return "", err
		}
		err = d.CreateTopic(ctx, driver.CreateTopic{Topic: e.Topic("badcfg"), Partitions: 1, ReplicationFactor: e.ReplicationFactor(),
			Configs: map[string]string{"cleanup.policy": "sometimes"}})
		if err := expectCode("creating a topic with cleanup.policy=sometimes", err, "INVALID_CONFIG"); err != nil {
			return "", err
		}
		if err := d.DeleteTopic(ctx, topic); err != nil {
			return "", fmt.Errorf("delete topic: %w", err)
		}
		if err := waitGone(ctx, d, topic); err != nil {
			return "", err
		}
		return "create, exists error, 3→5 partitions, shrink error, configs, invalid config errors, delete", nil
	},
}

func expectPartitions(ctx context.Context, d driver.Driver, topic string, want int32) error {
	// Metadata propagates asynchronously in Kafka; poll briefly.
	var last error
	for i := 0; i < 50; i++ {
		ti, err := d.DescribeTopic(ctx, topic)
		if err == nil && ti.Partitions == want {
			return nil
		}
		if err != nil {
			last = fmt.Errorf("describe topic: %w", err)
		} else {
			last = fmt.Errorf("topic has %d partitions, want %d", ti.Partitions, want)
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			break
		}
	}
	return last
}

// describeConfigs describes topic's configs, asking again while the
// answer is UNKNOWN_TOPIC_OR_PARTITION: on a cluster, the broker the
// client asks may not have the topic's metadata yet (Kafka propagates it
// to each broker asynchronously).
func describeConfigs(ctx context.Context, d driver.Driver, topic string) (map[string]string, error) {
	for {
		cfg, err := d.DescribeConfigs(ctx, topic)
		if driver.Code(err) != "UNKNOWN_TOPIC_OR_PARTITION" || !sleepCtx(ctx, 100*time.Millisecond) {
			return cfg, err
		}
	}
}

func waitConfig(ctx context.Context, d driver.Driver, topic, key, want string) error {
	var last error
	for i := 0; i < 50; i++ {
		cfg, err := d.DescribeConfigs(ctx, topic)
		if err == nil && cfg[key] == want {
			return nil
		}
		if err != nil {
			last = fmt.Errorf("describe configs: %w", err)
		} else {
			last = fmt.Errorf("described %s = %q, want %q", key, cfg[key], want)
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			break
		}
	}
	return last
}

func waitGone(ctx context.Context, d driver.Driver, topic string) error {
	var last error
	for i := 0; i < 50; i++ {
		_, err := d.DescribeTopic(ctx, topic)
		if driver.Code(err) == "UNKNOWN_TOPIC_OR_PARTITION" {
			return nil
		}
		if errors.Is(err, driver.ErrUnsupported) {
			return err
		}
		last = fmt.Errorf("describe after delete: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
		if !sleepCtx(ctx, 100*time.Millisecond) {
			break
		}
	}
	return last
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// errorsScenario is scenario 9: the errors a client sees for an unknown
// topic (the matrix runs brokers with auto.create.topics.enable=false), an
// invalid partition count and an impossible replication factor.
var errorsScenario = Scenario{
	ID:    "9.errors",
	Title: "unknown topic with auto-create off, invalid partition count, replication factor",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		missing := e.Topic("missing-" + d.Client())
		res, err := d.Produce(ctx, driver.Produce{Topic: missing, Acks: -1,
			Records: []driver.Record{{Partition: 0, Value: []byte(missing + "-0")}}})
		if err == nil {
			if len(res.Deliveries) != 1 || res.Deliveries[0].Error == nil {
				return "", fmt.Errorf("produce to a missing topic succeeded (is auto.create.topics.enable off?)")
			}
			err = res.Deliveries[0].Error
		}
		if err := expectCode("produce to a missing topic", err, "UNKNOWN_TOPIC_OR_PARTITION", "CLIENT_UNKNOWN_TOPIC"); err != nil {
			return "", err
		}
		_, err = d.DescribeTopic(ctx, missing)
		if err := expectCode("describe a missing topic", err, "UNKNOWN_TOPIC_OR_PARTITION"); err != nil {
			return "", err
		}
		err = d.CreateTopic(ctx, driver.CreateTopic{Topic: e.Topic("zero"), Partitions: 0, ReplicationFactor: e.ReplicationFactor()})
		if err := expectCode("create with 0 partitions", err, "INVALID_PARTITIONS"); err != nil {
			return "", err
		}
		// A replication factor above the broker count: 3 on one broker;
		// on a cluster target, whose three brokers take 3, one more.
		rf := int16(3)
		if e.Brokers() >= 3 {
			rf = int16(e.Brokers() + 1)
		}
		err = d.CreateTopic(ctx, driver.CreateTopic{Topic: e.Topic("rf-too-big"), Partitions: 1, ReplicationFactor: rf})
		if err := expectCode(fmt.Sprintf("create with replication factor %d on %d brokers", rf, e.Brokers()), err, "INVALID_REPLICATION_FACTOR"); err != nil {
			return "", err
		}
		err = d.CreateTopic(ctx, driver.CreateTopic{Topic: "bad/name", Partitions: 1, ReplicationFactor: e.ReplicationFactor()})
		if err := expectCode("create topic bad/name", err, "INVALID_TOPIC_EXCEPTION"); err != nil {
			return "", err
		}
		return "unknown topic, 0 partitions, replication factor above the broker count, illegal name: expected errors", nil
	},
	Timeout: 60 * time.Second,
}

// Catalogue returns the scenarios in catalogue order.
func Catalogue() []Scenario {
	s := []Scenario{adminScenario}
	for _, c := range driver.Codecs {
		s = append(s, codecScenario(c))
	}
	s = append(s, maxMessageScenario, nullHeaderScenario, crossScenario, partitionScenario,
		acksScenario("acks=0", driver.Produce{Acks: 0}),
		acksScenario("acks=1", driver.Produce{Acks: 1}),
		acksScenario("acks=all", driver.Produce{Acks: -1}),
		acksScenario("acks=all-5-in-flight", driver.Produce{Acks: -1, MaxInFlight: 5, LingerMs: 1}),
		acksScenario("idempotent", driver.Produce{Acks: -1, Idempotent: true}),
		acksScenario("idempotent-1-in-flight", driver.Produce{Acks: -1, Idempotent: true, MaxInFlight: 1, LingerMs: 1}),
		acksScenario("idempotent-5-in-flight", driver.Produce{Acks: -1, Idempotent: true, MaxInFlight: 5, LingerMs: 1}),
		lostAnswerScenario,
		listOffsetsScenario, maxTimestampScenario, deleteRecordsScenario, emptyAndPastEndScenario)
	s = append(s, groupScenarios()...)
	s = append(s, transactionsScenario, transformScenario, fencingScenario, compactionScenario, retentionScenario, autoCreateScenario, versionsScenario, errorsScenario, unknownGroupScenario)
	s = append(s, aclScenarios()...)
	for _, c := range ClusterScenarios() {
		c.Cluster = true
		s = append(s, c)
	}
	return append(s, ClusterFaultScenarios()...)
}

// BrokerOverrides are the server.properties entries every started target
// gets: no auto-creation, so that scenario 9 sees unknown topics; no
// initial rebalance delay, so that each group join does not wait 3 s; and
// session timeouts down to 1 s (Kafka's floor is 6 s), so that the crash
// cells wait for a dead member only briefly; and a cleaner that looks for
// work every 100 ms (Kafka's default is 15 s), so that the compaction cells
// see a cleaned log within seconds; and a retention check every 200 ms
// (Kafka's default is 5 minutes), so that the retention cell sees an
// expired segment go within a second, and so that any cell which writes
// records older than retention.ms loses them at once and fails every run,
// never only when a slow check happens to run between its produce and its
// reads.
var BrokerOverrides = map[string]string{
	"auto.create.topics.enable":        "false",
	"log.cleaner.backoff.ms":           "100",
	"log.retention.check.interval.ms":  "200",
	"group.initial.rebalance.delay.ms": "0",
	"group.min.session.timeout.ms":     "1000",
}

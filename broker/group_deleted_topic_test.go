package broker_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/broker/metadata"
)

// fetchCommitted asks the group's coordinator for the committed offsets of
// topic's partitions 0..n-1 and returns them; the topic goes by name and
// by its current id, for OffsetFetch v10 (KIP-848) or older. The client's
// metadata may lag a recreation for up to its minimum age, and Apache
// Kafka's metadata cache may not hold a just recreated topic yet, so the
// call is retried while the broker answers UNKNOWN_TOPIC_ID or
// UNKNOWN_TOPIC_OR_PARTITION.
func fetchCommitted(ctx context.Context, t *testing.T, cl *kgo.Client, group, topic string, n int32) []int64 {
	t.Helper()
	for {
		got, err := fetchCommittedOnce(ctx, cl, group, topic, n)
		if err == nil {
			return got
		}
		if !errors.Is(err, kerr.UnknownTopicID) && !errors.Is(err, kerr.UnknownTopicOrPartition) || ctx.Err() != nil {
			t.Fatalf("OffsetFetch %s: %v", topic, err)
		}
		time.Sleep(60 * time.Millisecond)
	}
}

func fetchCommittedOnce(ctx context.Context, cl *kgo.Client, group, topic string, n int32) ([]int64, error) {
	td, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err == nil {
		err = td[topic].Err
	}
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic, rt.TopicID = topic, td[topic].ID
	for p := int32(0); p < n; p++ {
		rt.Partitions = append(rt.Partitions, p)
	}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
		return nil, fmt.Errorf("answer %+v", resp.Groups)
	}
	var out []int64
	for _, tt := range resp.Groups[0].Topics {
		for _, p := range tt.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("partition %d: %w", p.Partition, err)
			}
			out = append(out, p.Offset)
		}
	}
	return out, nil
}

// deletedTopicOffsets is the scenario of Kafka's
// OffsetMetadataManager.onPartitionsDeleted against any broker: commit,
// delete the topic, recreate it under the same name, and expect no committed
// offset. restart, when not nil, restarts the broker before a last check.
// Kafka deletes offsets asynchronously after the topic deletion, so both the
// recreation and the check are retried for a while.
func deletedTopicOffsets(t *testing.T, addr string, restart func() string) {
	ctx := ctxT(t)
	const topic, group, parts = "gone-and-back", "deleted-topic-group", 3
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), fastMeta)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cl.Close() }()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
		t.Fatalf("create: %v", err)
	}
	// Another topic's offsets must survive the deletion.
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic+"-kept"); err != nil {
		t.Fatalf("create: %v", err)
	}
	commits := kadm.Offsets{}
	for p := int32(0); p < parts; p++ {
		commits.Add(kadm.Offset{Topic: topic, Partition: p, At: int64(10 + p), LeaderEpoch: -1})
	}
	commits.Add(kadm.Offset{Topic: topic + "-kept", Partition: 0, At: 42, LeaderEpoch: -1})
	// A broker may answer UNKNOWN_TOPIC_OR_PARTITION until the new topics
	// reach its metadata cache (Apache Kafka's KRaft propagation).
	for {
		err := adm.CommitAllOffsets(ctx, group, commits)
		if err == nil {
			break
		}
		if !errors.Is(err, kerr.UnknownTopicOrPartition) || ctx.Err() != nil {
			t.Fatalf("commit: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := fetchCommitted(ctx, t, cl, group, topic, parts); got[0] != 10 || got[2] != 12 {
		t.Fatalf("committed offsets %v, want 10 11 12", got)
	}
	if _, err := adm.DeleteTopic(ctx, topic); err != nil {
		t.Fatalf("delete: %v", err)
	}
	for {
		_, err := adm.CreateTopic(ctx, parts, 1, nil, topic)
		if err == nil {
			break
		}
		if !errors.Is(err, kerr.TopicAlreadyExists) || ctx.Err() != nil {
			t.Fatalf("recreate: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	want := func(c *kgo.Client, when string) {
		t.Helper()
		for {
			got := fetchCommitted(ctx, t, c, group, topic, parts)
			none := len(got) == parts
			for _, o := range got {
				none = none && o == -1
			}
			if none {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: offsets of the recreated topic %v, want all -1", when, got)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if kept := fetchCommitted(ctx, t, c, group, topic+"-kept", 1); kept[0] != 42 {
			t.Fatalf("%s: offset of the other topic %v, want 42", when, kept)
		}
	}
	want(cl, "after recreation")
	if restart == nil {
		return
	}
	cl.Close()
	cl2, err := kgo.NewClient(kgo.SeedBrokers(restart()), fastMeta)
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	want(cl2, "after restart")
}

func TestGroupDeletedTopicOffsets(t *testing.T) {
	b := brokertest.Start(t, map[string]string{"auto.create.topics.enable": "false"})
	deletedTopicOffsets(t, b.Addr(), func() string {
		b.Restart(t)
		return b.Addr()
	})
}

// TestGroupDeletedTopicOffsetsOracle runs the same scenario against Apache
// Kafka, which is the specification.
func TestGroupDeletedTopicOffsetsOracle(t *testing.T) {
	deletedTopicOffsets(t, oracleAddr(t), nil)
}

// TestGroupDeletedTopicOffsetsAfterCrash deletes a topic from the metadata
// without the group coordinator hearing of it, as a crash between the
// durable metadata deletion and the append of the offsets' tombstones
// leaves it. After a restart the coordinator finds the committed topic
// absent from the image at load and tombstones its offsets, so the topic
// recreated under the same name starts without them, also after a second
// restart; another topic's offsets stay.
func TestGroupDeletedTopicOffsetsAfterCrash(t *testing.T) {
	ctx := ctxT(t)
	const topic, group = "crashed-away", "crash-group"
	b := brokertest.Start(t, map[string]string{"auto.create.topics.enable": "false"})
	adm := b.Admin(t)
	for _, name := range []string{topic, topic + "-kept"} {
		if _, err := adm.CreateTopic(ctx, 2, 1, nil, name); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	commits := kadm.Offsets{}
	commits.Add(kadm.Offset{Topic: topic, Partition: 0, At: 10, LeaderEpoch: -1})
	commits.Add(kadm.Offset{Topic: topic, Partition: 1, At: 11, LeaderEpoch: -1})
	commits.Add(kadm.Offset{Topic: topic + "-kept", Partition: 1, At: 42, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, group, commits); err != nil {
		t.Fatalf("commit: %v", err)
	}
	// The metadata deletion alone, without DeleteTopics' call to
	// GroupCoordinator.TopicsDeleted: no tombstone is appended.
	for _, res := range b.Metadata().DeleteTopics([]metadata.DeleteTopic{{Name: topic}}) {
		if res.Err != nil {
			t.Fatalf("delete: %v", res.Err)
		}
	}
	b.Restart(t)
	adm = b.Admin(t)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatalf("recreate: %v", err)
	}
	check := func(when string) {
		t.Helper()
		cl := b.Client(t, fastMeta)
		if got := fetchCommitted(ctx, t, cl, group, topic, 2); got[0] != -1 || got[1] != -1 {
			t.Fatalf("%s: offsets of the recreated topic %v, want -1 -1", when, got)
		}
		if kept := fetchCommitted(ctx, t, cl, group, topic+"-kept", 2); kept[0] != -1 || kept[1] != 42 {
			t.Fatalf("%s: offsets of the other topic %v, want -1 42", when, kept)
		}
	}
	check("after restart")
	b.Restart(t)
	check("after a second restart")
}

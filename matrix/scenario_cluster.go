package matrix

import (
	"context"
	"fmt"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// ClusterPartitions is how many partitions the cluster scenarios' topics
// have: two per broker of a three-node cluster, so that with Kafka's
// default placement every broker leads some.
const ClusterPartitions = 6

// ClusterTopicPrefix starts the name of every topic the cluster scenarios
// create (after Env.Topic's "m-"), so that a suite can find them in
// Metadata and check how they were placed.
const ClusterTopicPrefix = "cluster-"

// clusterRecords is how many records the cluster scenarios write to each
// partition.
const clusterRecords = 10

// ClusterScenarios are the scenarios run through a multi-node cluster (the
// matrix's own catalogue runs against one broker): a replication-factor-1
// topic whose partitions the cluster spreads over its brokers, written and
// read partition by partition, so that the client must find each
// partition's leader and send to it; and a consumer group reading every
// partition and committing, through a group coordinator that may be any
// broker.
func ClusterScenarios() []Scenario {
	return []Scenario{clusterSpreadScenario, clusterGroupScenario}
}

// clusterTopic creates a ClusterPartitions-partition RF=1 topic with the
// cluster's default placement and writes clusterRecords records to every
// partition with acks=all, and returns the topic and the records.
func clusterTopic(ctx context.Context, e *Env, d driver.Driver, name string) (string, []driver.Record, error) {
	topic := e.Topic(ClusterTopicPrefix + name + "-" + d.Client())
	if err := createTopicRF(ctx, d, topic, ClusterPartitions, 1, nil); err != nil {
		return "", nil, err
	}
	var recs []driver.Record
	for i := 0; i < clusterRecords; i++ {
		for p := int32(0); p < ClusterPartitions; p++ {
			recs = append(recs, driver.Record{Partition: p, Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("%s-%d-%d", topic, p, i))})
		}
	}
	dls, err := produceOK(ctx, d, driver.Produce{Topic: topic, Records: recs, Acks: -1})
	if err != nil {
		return "", nil, err
	}
	for i, dl := range dls {
		if want := int64(i / ClusterPartitions); dl.Partition != recs[i].Partition || dl.Offset != want {
			return "", nil, fmt.Errorf("record %d acknowledged at %d/%d, want %d/%d", i, dl.Partition, dl.Offset, recs[i].Partition, want)
		}
	}
	return topic, recs, nil
}

var clusterSpreadScenario = Scenario{
	ID:    "10.cluster-spread",
	Title: "an RF=1 topic spread over the cluster's brokers: produce to and read back every partition",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		topic, recs, err := clusterTopic(ctx, e, d, "spread")
		if err != nil {
			return "", err
		}
		for p := int32(0); p < ClusterPartitions; p++ {
			got, err := consumeN(ctx, d, topic, p, 0, clusterRecords)
			if err != nil {
				return "", fmt.Errorf("partition %d: %w", p, err)
			}
			for i, r := range got {
				want := recs[i*ClusterPartitions+int(p)]
				if r.Offset != int64(i) || string(r.Value) != string(want.Value) {
					return "", fmt.Errorf("partition %d offset %d holds %q, want %q at %d", p, r.Offset, r.Value, want.Value, i)
				}
			}
		}
		return fmt.Sprintf("%d records on each of %d partitions read back in order", clusterRecords, ClusterPartitions), nil
	},
}

var clusterGroupScenario = Scenario{
	ID:    "10.cluster-group",
	Title: "a consumer group reads every partition of a spread topic and commits",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		topic, recs, err := clusterTopic(ctx, e, d, "group")
		if err != nil {
			return "", err
		}
		group := topic + "-g"
		got, err := groupRead(ctx, d, driver.GroupConsume{Group: group, Topic: topic}, len(recs))
		if err != nil {
			return "", err
		}
		seen := map[string]bool{}
		for _, r := range got {
			seen[string(r.Value)] = true
		}
		for _, r := range recs {
			if !seen[string(r.Value)] {
				return "", fmt.Errorf("the group never read %q", r.Value)
			}
		}
		for p := int32(0); p < ClusterPartitions; p++ {
			off, err := d.FetchCommitted(ctx, driver.FetchCommitted{Group: group, Topic: topic, Partition: p})
			if err != nil {
				return "", fmt.Errorf("fetch committed offset of partition %d: %w", p, err)
			}
			if off != clusterRecords {
				return "", fmt.Errorf("committed offset of partition %d is %d, want %d", p, off, clusterRecords)
			}
		}
		return fmt.Sprintf("%d records read once each, offset %d committed on every partition", len(recs), clusterRecords), nil
	},
}

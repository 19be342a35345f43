//go:build cgo

package main

import (
	"strings"
	"sync"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

func init() {
	rackConsumers = append(rackConsumers, rackConsumer{name: "confluent", start: startConfluentRackConsumer})
}

// startConfluentRackConsumer reads with librdkafka's client.rack, assigned
// the partition (no group membership, no commits).
func startConfluentRackConsumer(t *testing.T, seeds []string, topic, rack string, got func(string)) func() {
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": strings.Join(seeds, ","),
		"group.id": "rack-" + topic, "client.rack": rack, "enable.auto.commit": false,
		"fetch.wait.max.ms": 500, "topic.metadata.refresh.interval.ms": 2000,
		"broker.address.family": "v4", "log_level": 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Assign([]kafka.TopicPartition{{Topic: &topic, Partition: 0, Offset: kafka.OffsetBeginning}}); err != nil {
		t.Fatal(err)
	}
	quit := make(chan struct{})
	var done sync.WaitGroup
	done.Go(func() {
		for {
			select {
			case <-quit:
				return
			default:
			}
			if m, ok := c.Poll(100).(*kafka.Message); ok && m.TopicPartition.Error == nil {
				got(string(m.Value))
			}
		}
	})
	return func() {
		close(quit)
		done.Wait()
		c.Close()
	}
}

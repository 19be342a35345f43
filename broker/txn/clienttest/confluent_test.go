//go:build cgo

package clienttest

import (
	"context"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

func confluentTxn(t *testing.T, p *kafka.Producer, topic string, commit bool, values ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
			Value: []byte(v)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Flush so that aborted records reach the broker: librdkafka purges
	// unsent messages on abort.
	if left := p.Flush(10000); left != 0 {
		t.Fatalf("%d messages not delivered", left)
	}
	var err error
	if commit {
		err = p.CommitTransaction(ctx)
	} else {
		err = p.AbortTransaction(ctx)
	}
	if err != nil {
		t.Fatalf("end (commit=%v): %v", commit, err)
	}
}

func TestConfluentTransactions(t *testing.T) {
	b := brokertest.Start(t)
	createTopic(t, b, "c")
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": b.Addr(), "transactional.id": "confluent-txn",
		"broker.address.family": "v4", "log_level": 3})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	go func() {
		for range p.Events() {
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	confluentTxn(t, p, "c", false, "a1", "a2")
	confluentTxn(t, p, "c", true, "c1")
	confluentTxn(t, p, "c", false, "a3")
	confluentTxn(t, p, "c", true, "c2", "c3")

	want := []string{"c1", "c2", "c3"}
	if got := franzRead(t, b, "c", true, time.Second); !same(got, want) {
		t.Errorf("franz-go read_committed: %v, want %v", got, want)
	}
	if got := saramaRead(t, b, "c", true, time.Second); !same(got, want) {
		t.Errorf("sarama read_committed: %v, want %v", got, want)
	}
	if got := franzRead(t, b, "c", false, time.Second); len(got) != 6 {
		t.Errorf("franz-go read_uncommitted: %v", got)
	}
	if got := confluentRead(t, b, "c", true, 2*time.Second); !same(got, want) {
		t.Errorf("librdkafka read_committed: %v, want %v", got, want)
	}
	if got := confluentRead(t, b, "c", false, 2*time.Second); len(got) != 6 {
		t.Errorf("librdkafka read_uncommitted: %v", got)
	}
}

// confluentRead reads partition 0 of topic from the start for d with an
// assigned (group-less) librdkafka consumer, which filters aborted
// transactions itself from the fetch response's aborted list.
func confluentRead(t *testing.T, b *brokertest.Broker, topic string, committed bool, d time.Duration) []string {
	t.Helper()
	iso := "read_uncommitted"
	if committed {
		iso = "read_committed"
	}
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": b.Addr(), "group.id": "confluent-reader",
		"isolation.level": iso, "enable.auto.commit": false, "broker.address.family": "v4", "log_level": 3})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Assign([]kafka.TopicPartition{{Topic: &topic, Partition: 0, Offset: kafka.OffsetBeginning}}); err != nil {
		t.Fatal(err)
	}
	var got []string
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		switch e := c.Poll(100).(type) {
		case *kafka.Message:
			got = append(got, string(e.Value))
		case kafka.Error:
			t.Errorf("librdkafka consume: %v", e)
		}
	}
	return got
}

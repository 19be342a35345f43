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
}

package broker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

// TestSaramaSmoke runs sarama's default protocol versions (older,
// non-flexible ones: Produce v7, Fetch v10, Metadata v7) through the
// broker; the matrix's sarama cells go further.
func TestSaramaSmoke(t *testing.T) {
	b := brokertest.Start(t)
	createTopic(t, b, "sarama", 1)
	cfg := sarama.NewConfig()
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Compression = sarama.CompressionSnappy
	prod, err := sarama.NewSyncProducer([]string{b.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i := 0; i < 5; i++ {
		if _, off, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "sarama", Value: sarama.StringEncoder(fmt.Sprint(i))}); err != nil || off != int64(i) {
			t.Fatalf("send %d: offset %d, %v", i, off, err)
		}
	}
	cons, err := sarama.NewConsumer([]string{b.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition("sarama", 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	for i := 0; i < 5; i++ {
		select {
		case m := <-pc.Messages():
			if string(m.Value) != fmt.Sprint(i) || m.Offset != int64(i) {
				t.Fatalf("message %d: %q at %d", i, m.Value, m.Offset)
			}
		case err := <-pc.Errors():
			t.Fatal(err)
		case <-time.After(10 * time.Second):
			t.Fatalf("message %d not received", i)
		}
	}
}

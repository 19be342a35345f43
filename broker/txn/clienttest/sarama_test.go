package clienttest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

func createTopic(t *testing.T, b *brokertest.Broker, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := b.Admin(t).CreateTopics(ctx, 1, 1, nil, topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp[topic].Err; err != nil {
		t.Fatal(err)
	}
}

// franzRead reads topic from the start for d at the isolation level.
func franzRead(t *testing.T, b *brokertest.Broker, topic string, committed bool, d time.Duration) []string {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := b.Client(t, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var got []string
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("fetch: %v", err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// saramaRead reads partition 0 of topic from the start for d with sarama's
// partition consumer, which filters aborted transactions itself.
func saramaRead(t *testing.T, b *brokertest.Broker, topic string, committed bool, d time.Duration) []string {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V4_0_0_0
	if committed {
		cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	}
	cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
	c, err := sarama.NewConsumer([]string{b.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var got []string
	deadline := time.After(d)
	for {
		select {
		case m := <-pc.Messages():
			got = append(got, string(m.Value))
		case err := <-pc.Errors():
			t.Errorf("sarama consume: %v", err)
		case <-deadline:
			return got
		}
	}
}

func saramaProducer(t *testing.T, b *brokertest.Broker, id string) sarama.SyncProducer {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V4_0_0_0
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Producer.Transaction.ID = id
	cfg.Producer.Transaction.Retry.Backoff = 20 * time.Millisecond
	cfg.Producer.Transaction.Retry.Max = 200
	cfg.Net.MaxOpenRequests = 1
	p, err := sarama.NewSyncProducer([]string{b.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func saramaTxn(t *testing.T, p sarama.SyncProducer, topic string, commit bool, values ...string) {
	t.Helper()
	if err := p.BeginTxn(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(v)}); err != nil {
			t.Fatalf("send %s: %v", v, err)
		}
	}
	var err error
	if commit {
		err = p.CommitTxn()
	} else {
		err = p.AbortTxn()
	}
	if err != nil {
		t.Fatalf("end (commit=%v): %v", commit, err)
	}
}

func same(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func TestSaramaTransactions(t *testing.T) {
	b := brokertest.Start(t)
	createTopic(t, b, "s")
	p := saramaProducer(t, b, "sarama-txn")
	saramaTxn(t, p, "s", true, "c1", "c2")
	saramaTxn(t, p, "s", false, "a1")
	saramaTxn(t, p, "s", true, "c3")

	want := []string{"c1", "c2", "c3"}
	if got := franzRead(t, b, "s", true, time.Second); !same(got, want) {
		t.Errorf("franz-go read_committed: %v, want %v", got, want)
	}
	if got := saramaRead(t, b, "s", true, time.Second); !same(got, want) {
		t.Errorf("sarama read_committed: %v, want %v", got, want)
	}
	if got := saramaRead(t, b, "s", false, time.Second); !same(got, []string{"c1", "c2", "a1", "c3"}) {
		t.Errorf("sarama read_uncommitted: %v", got)
	}

	// An open transaction holds read_committed consumers at its first
	// offset.
	if err := p.BeginTxn(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "s", Value: sarama.StringEncoder("open")}); err != nil {
		t.Fatal(err)
	}
	plain := b.Client(t, kgo.DefaultProduceTopic("s"))
	if err := plain.ProduceSync(context.Background(), kgo.StringRecord("plain")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if got := saramaRead(t, b, "s", true, time.Second); !same(got, want) {
		t.Errorf("sarama read_committed with an open transaction: %v, want %v", got, want)
	}
	if err := p.CommitTxn(); err != nil {
		t.Fatal(err)
	}
	want = append(want, "open", "plain")
	if got := saramaRead(t, b, "s", true, time.Second); !same(got, want) {
		t.Errorf("sarama read_committed after commit: %v, want %v", got, want)
	}
}

package handler_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

// saramaHandler records every message and marks it for commit.
type saramaHandler struct{ s *seen }

func (saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		h.s.mu.Lock()
		h.s.m[string(msg.Value)]++
		h.s.mu.Unlock()
		sess.MarkMessage(msg, "")
	}
	return nil
}

// startSarama runs one sarama consumer group member until the test ends or
// the returned stop is called.
func startSarama(t *testing.T, b *brokertest.Broker, groupID, topic string, s *seen) (stop func()) {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V4_0_0_0
	cfg.ClientID = "sarama-test"
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Session.Timeout = 2 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 200 * time.Millisecond
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 100 * time.Millisecond
	cfg.Metadata.RefreshFrequency = time.Second
	cg, err := sarama.NewConsumerGroup([]string{fmt.Sprintf("127.0.0.1:%d", b.Port())}, groupID, cfg)
	if err != nil {
		t.Fatalf("sarama: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, saramaHandler{s}); err != nil && ctx.Err() == nil {
				t.Logf("sarama consume: %v", err)
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			if err := cg.Close(); err != nil {
				t.Logf("sarama close: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// TestGroupSarama: two sarama members share a topic, one leaves, every
// record is read and the committed offsets end at the log end.
func TestGroupSarama(t *testing.T) {
	b := brokertest.Start(t, groupProps)
	const topic, groupID = "events", "sarama"
	setupTopic(t, b, topic, 4, 80)
	s := &seen{m: map[string]int{}}
	stop1 := startSarama(t, b, groupID, topic, s)
	startSarama(t, b, groupID, topic, s)
	waitGroup(t, 15*time.Second, "records", func() bool { return s.has(0, 80) })
	stop1()
	produce(t, b, topic, 80, 40)
	waitGroup(t, 15*time.Second, "records after a leave", func() bool { return s.has(80, 40) })
	adm := b.Admin(t)
	waitGroup(t, 10*time.Second, "committed == end", func() bool { return committedEqualsEnd(t, adm, groupID, topic) })
}

// TestGroupMixedClients: a franz-go member and a sarama member in one
// classic group with the same assignor ("range") split the partitions.
func TestGroupMixedClients(t *testing.T) {
	b := brokertest.Start(t, groupProps)
	const topic, groupID = "events", "mixed"
	setupTopic(t, b, topic, 4, 80)
	s := &seen{m: map[string]int{}}
	startMember(t, b, s, kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic), kgo.Balancers(kgo.RangeBalancer()))
	startSarama(t, b, groupID, topic, s)
	adm := b.Admin(t)
	waitGroup(t, 15*time.Second, "two members with partitions", func() bool {
		dg, err := adm.DescribeGroups(groupCtx(t, time.Second), groupID)
		if err != nil || dg[groupID].State != "Stable" || len(dg[groupID].Members) != 2 {
			return false
		}
		for _, m := range dg[groupID].Members {
			c, ok := m.Assigned.AsConsumer()
			if !ok || len(c.Topics) == 0 || len(c.Topics[0].Partitions) != 2 {
				return false
			}
		}
		return true
	})
	waitGroup(t, 15*time.Second, "records", func() bool { return s.has(0, 80) })
	waitGroup(t, 10*time.Second, "committed == end", func() bool { return committedEqualsEnd(t, adm, groupID, topic) })
}

package clienttest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

// saramaHandler records every message and marks it for the auto-commit.
type saramaHandler struct{ s *seen }

func (saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		h.s.add(string(msg.Value))
		sess.MarkMessage(msg, "")
	}
	return nil
}

// saramaMember is a sarama consumer group member; its connections go
// through a crashDialer (Net.Proxy).
type saramaMember struct {
	cg     sarama.ConsumerGroup
	dialer *crashDialer
	cancel context.CancelFunc
	done   chan struct{}
	closed chan struct{}
	once   sync.Once
}

func startSarama(t *testing.T, b *brokertest.Broker, group, topic string, s *seen) member {
	t.Helper()
	d := &crashDialer{}
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V4_0_0_0
	cfg.ClientID = "sarama-group-story"
	cfg.Net.Proxy.Enable, cfg.Net.Proxy.Dialer = true, d
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
	cfg.Consumer.Group.Session.Timeout = sessionTimeout
	cfg.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 100 * time.Millisecond
	cfg.Metadata.RefreshFrequency = time.Second
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	cg, err := sarama.NewConsumerGroup([]string{b.Addr()}, group, cfg)
	if err != nil {
		t.Fatalf("sarama: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &saramaMember{cg: cg, dialer: d, cancel: cancel, done: make(chan struct{}), closed: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, saramaHandler{s}); err != nil && ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond) // Errors while the group rebalances; Consume joins again.
			}
		}
	}()
	t.Cleanup(func() {
		m.leave()
		select {
		case <-m.closed:
		case <-time.After(10 * time.Second):
			t.Error("sarama member still closing 10s after the test")
		}
	})
	return m
}

func (m *saramaMember) close(t func()) {
	m.once.Do(func() {
		m.cancel()
		<-m.done
		go func() {
			defer close(m.closed)
			t()
		}()
	})
}

func (m *saramaMember) leave() {
	m.close(func() { _ = m.cg.Close() }) // Commits the last marks, sends LeaveGroup.
	<-m.closed
}

func (m *saramaMember) crash() {
	m.dialer.crash()
	// Close's commit and LeaveGroup meet refused connections: the broker
	// never hears from the member again.
	m.close(func() { _ = m.cg.Close() })
}

// TestSaramaGroupStory runs the package's story with sarama members (range
// strategy, marks committed every 100 ms).
func TestSaramaGroupStory(t *testing.T) { runGroupStory(t, startSarama) }

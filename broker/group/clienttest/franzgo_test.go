package clienttest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

// franzMember polls and commits what it processed after every poll.
type franzMember struct {
	cl     *kgo.Client
	dialer *crashDialer
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

func startFranz(t *testing.T, b *brokertest.Broker, group, topic string, s *seen) member {
	t.Helper()
	d := &crashDialer{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.Dialer(d.DialContext),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.Balancers(kgo.RangeBalancer()),
		kgo.MetadataMinAge(50*time.Millisecond), kgo.HeartbeatInterval(100*time.Millisecond),
		kgo.SessionTimeout(sessionTimeout), kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RetryTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	m := &franzMember{cl: cl, dialer: d, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		pollAndCommit(cl, s, m.stop, func(err error) {
			if !errors.Is(err, context.Canceled) {
				t.Logf("commit: %v", err)
			}
		})
	}()
	t.Cleanup(m.leave)
	return m
}

// pollAndCommit polls cl until stop is closed, adds the value of every
// record it reads to s, and commits what it read after each poll; a
// failed commit goes to onErr.
func pollAndCommit(cl *kgo.Client, s *seen, stop <-chan struct{}, onErr func(error)) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		select {
		case <-stop:
			return
		default:
		}
		fs.EachRecord(func(r *kgo.Record) { s.add(string(r.Value)) })
		if len(fs.Records()) > 0 {
			cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := cl.CommitUncommittedOffsets(cctx); err != nil {
				onErr(err)
			}
			ccancel()
		}
	}
}

func (m *franzMember) halt() bool {
	first := false
	m.once.Do(func() {
		first = true
		close(m.stop)
		<-m.done
	})
	return first
}

func (m *franzMember) leave() {
	if m.halt() {
		m.cl.Close() // Commits nothing more; sends LeaveGroup.
	}
}

func (m *franzMember) crash() {
	m.dialer.crash()
	if m.halt() {
		// Close tries LeaveGroup over refused connections, so the broker
		// never hears from the member again.
		go m.cl.Close()
	}
}

// TestFranzGoGroupStory runs the package's story with franz-go members
// (range balancer, commits after each poll).
func TestFranzGoGroupStory(t *testing.T) { runGroupStory(t, startFranz) }

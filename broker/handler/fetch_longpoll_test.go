package handler_test

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/broker/wire"
)

// framed returns req as a request frame with correlation id corr.
func framed(req kmsg.Request, corr int32) []byte {
	h := wire.AppendRequestHeader(nil, wire.RequestHeader{Key: req.Key(), Version: req.GetVersion(),
		CorrelationID: corr, Flexible: req.IsFlexible()})
	body := req.AppendTo(h)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// TestAbandonedLongPollsReleaseTheBroker parks eleven large long-poll
// fetches (MaxWaitMs 2^31-1, no data) whose worst-case reservations
// together exceed queued.max.request.bytes, checks that another client is
// served while they wait, then closes their connections and checks that
// the request budget is free again within the liveness bound: a fetch gives
// its decode reservation back once decoded, and a closed connection wakes
// and drops its parked fetch.
func TestAbandonedLongPollsReleaseTheBroker(t *testing.T) {
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := b.Admin(t).CreateTopic(ctx, 1, 1, nil, "idle"); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID = -1
	req.MaxWaitMillis = 1<<31 - 1
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	topic := kmsg.NewFetchRequestTopic()
	topic.Topic = "idle"
	p := kmsg.NewFetchRequestTopicPartition()
	p.PartitionMaxBytes = 1 << 10
	p.CurrentLeaderEpoch, p.LastFetchedEpoch, p.LogStartOffset = -1, -1, -1
	topic.Partitions = append(topic.Partitions, p)
	req.Topics = append(req.Topics, topic)
	// A large unknown tagged field, which Kafka ignores, makes the frame
	// as large as a Fetch may be (socket.request.max.bytes over its
	// decode amplification).
	req.UnknownTags.Set(1000, make([]byte, 2400<<10))
	frame := framed(req, 1)
	budget := b.RequestBudget()
	if worst := 11 * wire.Reservation(1, 12, int32(len(frame)-4)); worst <= budget.Limit() {
		t.Fatalf("eleven fetches of %d bytes reserve %d at worst, within the budget %d", len(frame), worst, budget.Limit())
	}

	var conns []net.Conn
	for range 11 {
		c, err := net.Dial("tcp", b.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go c.Write(frame)
		conns = append(conns, c)
	}
	ask := func(corr int32) {
		t.Helper()
		c, err := net.Dial("tcp", b.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		av := kmsg.NewPtrApiVersionsRequest()
		av.SetVersion(3)
		av.ClientSoftwareName, av.ClientSoftwareVersion = "t", "1"
		c.Write(framed(av, corr))
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := wire.ReadFrame(c, 1<<20); err != nil {
			t.Fatalf("ApiVersions not answered within 2 s: %v (%d bytes reserved)", err, budget.InUse())
		}
	}
	// Each parked fetch holds its frame, no more.
	parked := func() bool { return budget.InUse() >= int64(11*(len(frame)-4)) }
	for deadline := time.Now().Add(30 * time.Second); !parked(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("fetches not parked: %d bytes reserved", budget.InUse())
		}
	}
	ask(2)
	for _, c := range conns {
		c.Close()
	}
	for deadline := time.Now().Add(2 * time.Second); budget.InUse() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still reserved 2 s after the fetching connections closed", budget.InUse())
		}
	}
	ask(3)
}

package broker_test

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/broker/wire"
)

// tagFlood returns a flexible ApiVersions v3 request frame of about size
// bytes whose top-level tagged-field section holds distinct unknown tags:
// kmsg keeps each in a map entry, the most a frame byte can cost to decode.
func tagFlood(size int) []byte {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "flood", "1"
	id := "flood"
	b := wire.AppendRequestHeader(nil, wire.RequestHeader{Key: 18, Version: 3, CorrelationID: 1, ClientID: &id, Flexible: true})
	b = req.AppendTo(b)
	b = b[:len(b)-1] // the empty tag section
	n := size / 3
	b = binary.AppendUvarint(b, uint64(n))
	for i := 0; i < n; i++ {
		b = binary.AppendUvarint(b, uint64(1000+i))
		b = append(b, 0)
	}
	return frameOf(b)
}

// TestRequestBudgetUnderFlood sends hostile frames from many connections at
// once and checks that the bytes reserved for requests in flight never
// exceed queued.max.request.bytes plus one reservation, and that an ordinary
// client produces and consumes meanwhile.
func TestRequestBudgetUnderFlood(t *testing.T) {
	const (
		queued  = 4 << 20
		conns   = 40
		perConn = 3
	)
	b := brokertest.Start(t, map[string]string{
		"socket.request.max.bytes": "1048576",
		"queued.max.request.bytes": "4194304",
	})
	createTopic(t, b, "flood", 1)
	frame := tagFlood(256 << 10)
	reservation := wire.Reservation(18, 3, int32(len(frame)-4))
	if reservation < 4*int64(len(frame)) {
		t.Fatalf("reservation %d does not cover the amplification of %d-byte frames", reservation, len(frame))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	answered := make(chan int, conns)
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", b.Addr())
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(50 * time.Second))
			n := 0
			for j := 0; j < perConn; j++ {
				if _, err := c.Write(frame); err != nil {
					break
				}
			}
			for j := 0; j < perConn; j++ {
				if _, err := wire.ReadFrame(c, 1<<20); err != nil {
					break
				}
				n++
			}
			answered <- n
		}()
	}

	// An ordinary client keeps working while the flood is read.
	cl := b.Client(t, kgo.DefaultProduceTopic("flood"), kgo.ConsumeTopics("flood"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for i := 0; i < 10; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatalf("produce during flood: %v", err)
		}
	}
	got := 0
	for got < 10 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("fetch during flood: %v", err)
		}
		got += fs.NumRecords()
	}

	wg.Wait()
	close(answered)
	total := 0
	for n := range answered {
		total += n
	}
	// Every hostile frame is well-formed, so each is answered.
	if total != conns*perConn {
		t.Errorf("answered %d of %d flood requests", total, conns*perConn)
	}
	budget := b.RequestBudget()
	if peak := budget.Peak(); peak > queued+reservation || peak < reservation {
		t.Errorf("peak reservation %d, bound %d + %d", peak, queued, reservation)
	}
	if budget.InUse() != 0 {
		t.Errorf("%d bytes still reserved after the flood", budget.InUse())
	}
}

// TestAPIFrameCap checks that a frame above its API's cap closes the
// connection before its body is read, while Produce may use all of
// socket.request.max.bytes, as in Kafka.
func TestAPIFrameCap(t *testing.T) {
	b := brokertest.Start(t, map[string]string{"socket.request.max.bytes": "16777216"})
	createTopic(t, b, "big", 1)
	capped := wire.APIFrameCap(15, 5, 16<<20) // DescribeGroups, flexible
	if capped >= 16<<20 {
		t.Fatalf("DescribeGroups cap %d not below socket.request.max.bytes", capped)
	}
	rc := dial(t, b)
	hdr := wire.AppendRequestHeader(nil, wire.RequestHeader{Key: 15, Version: 5, CorrelationID: 1, Flexible: true})
	rc.c.Write(binary.BigEndian.AppendUint32(nil, uint32(capped)+1))
	rc.c.Write(hdr)
	if !rc.closed() {
		t.Fatal("an over-cap DescribeGroups frame was read")
	}
	// A 12 MiB produce is well within Produce's cap.
	big := make([]string, 12)
	for i := range big {
		big[i] = string(make([]byte, 1<<20))
	}
	rc = dial(t, b)
	req := produceReq(9, 1, "big", 0, batch(t, -1, -1, -1, big...))
	if p := produceResult(t, rc, req); p.ErrorCode != kerr.MessageTooLarge.Code {
		// MESSAGE_TOO_LARGE from the log, not a closed connection.
		t.Fatalf("12 MiB produce: error %d, want MESSAGE_TOO_LARGE", p.ErrorCode)
	}
}

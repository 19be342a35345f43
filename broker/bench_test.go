package broker_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/broker/record"
	"github.com/cascade-kafka/cascade/broker/wire"
)

func wireRequest(req kmsg.Request) *wire.Request {
	return &wire.Request{Header: wire.RequestHeader{Key: req.Key(), Version: req.GetVersion(), CorrelationID: 1}, Body: req.AppendTo(nil)}
}

// BenchmarkProduceHandler measures decode, validation and append of one
// uncompressed batch through the dispatcher. Allocations per operation do
// not grow with the records in the batch: the batch stays opaque bytes.
func BenchmarkProduceHandler(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			br := brokertest.Start(b, map[string]string{"log.segment.bytes": "1073741824"})
			createTopicB(b, br, "bench", 1)
			var recs []record.Rec
			for i := 0; i < n; i++ {
				recs = append(recs, record.Rec{Timestamp: 1_700_000_000_000, Key: []byte("key"), Value: make([]byte, 100)})
			}
			bat, err := record.Build(record.NewSpec(recs...))
			if err != nil {
				b.Fatal(err)
			}
			wr := wireRequest(produceReq(9, 1, "bench", 0, bat))
			orig := append([]byte(nil), wr.Body...)
			env := br.Handlers()
			ctx := context.Background()
			b.SetBytes(int64(len(bat)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				copy(wr.Body, orig) // the append rewrites the base offset in place
				resp, err := env.Dispatch(ctx, wr)
				if err != nil {
					b.Fatal(err)
				}
				if p := resp.Msg.(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 {
					b.Fatalf("produce error %d", p.ErrorCode)
				}
			}
		})
	}
}

// BenchmarkFetchHandler measures a 1 MiB fetch from the page cache written
// to a loopback TCP connection: the record bytes go file to socket
// (sendfile), so allocations stay small and constant.
func BenchmarkFetchHandler(b *testing.B) {
	br := brokertest.Start(b, map[string]string{"log.segment.bytes": "1073741824"})
	topic := createTopicB(b, br, "fbench", 1)
	var recs []record.Rec
	for i := 0; i < 100; i++ {
		recs = append(recs, record.Rec{Timestamp: 1_700_000_000_000, Value: make([]byte, 1000)})
	}
	bat, err := record.Build(record.NewSpec(recs...))
	if err != nil {
		b.Fatal(err)
	}
	env := br.Handlers()
	ctx := context.Background()
	for i := 0; i < 12; i++ { // ~1.2 MiB
		if _, err := env.Dispatch(ctx, wireRequest(produceReq(9, 1, "fbench", 0, append([]byte(nil), bat...)))); err != nil {
			b.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.Copy(io.Discard, c)
		}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	req := fetchReq(12, "fbench", topic.ID, fetchPos{0, 0, 1 << 20})
	req.MaxBytes = 1 << 20
	wr := wireRequest(req)
	b.ReportAllocs()
	b.ResetTimer()
	var total int
	for i := 0; i < b.N; i++ {
		resp, err := env.Dispatch(ctx, wr)
		if err != nil {
			b.Fatal(err)
		}
		total = resp.Body.Len()
		if _, err := resp.Body.WriteTo(conn); err != nil {
			b.Fatal(err)
		}
		resp.Body.Release()
	}
	b.SetBytes(int64(total))
}

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/cmd/cascade-bench/internal/bench"
	"github.com/cascade-kafka/cascade/matrix/apachekafka"
)

type hook struct{ n, bytes, wait atomic.Int64 }

func (h *hook) OnBrokerRead(_ kgo.BrokerMetadata, key int16, n int, readWait, timeToRead time.Duration, err error) {
	if key == 1 {
		h.n.Add(1)
		h.bytes.Add(int64(n))
		h.wait.Add(int64(readWait))
	}
}

var _ kgo.HookBrokerRead = (*hook)(nil)

func probe(name, addr string) {
	ctx := context.Background()
	cl, _ := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("fp"), kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.ProducerBatchMaxBytes(131072), kgo.ProducerLinger(5*time.Millisecond))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 8, 1, nil, "fp"); err != nil {
		panic(err)
	}
	time.Sleep(time.Second)
	for i := 0; i < 200000; i++ {
		v := make([]byte, 1024)
		bench.Payload(v, 1, uint64(i))
		cl.Produce(ctx, &kgo.Record{Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				panic(err)
			}
		})
	}
	cl.Flush(ctx)
	cl.Close()
	for _, parts := range [][]int32{{0, 4}, {0, 1, 2, 3, 4, 5, 6, 7}} {
		h := &hook{}
		m := map[int32]kgo.Offset{}
		for _, p := range parts {
			m[p] = kgo.NewOffset().At(0)
		}
		c, _ := kgo.NewClient(kgo.SeedBrokers(addr), kgo.WithHooks(h), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"fp": m}), kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(8<<20))
		want := 200000 * len(parts) / 8
		got := 0
		start := time.Now()
		for got < want-100 && time.Since(start) < 30*time.Second {
			fs := c.PollFetches(ctx)
			got += fs.NumRecords()
		}
		el := time.Since(start)
		c.Close()
		fmt.Printf("%s partitions=%d: %d records in %v; %d fetch responses, avg %.0f KiB, avg read wait %v\n", name, len(parts), got, el.Round(time.Millisecond), h.n.Load(), float64(h.bytes.Load())/float64(max(h.n.Load(), 1))/1024, time.Duration(h.wait.Load()/max(h.n.Load(), 1)))
	}
}

func main() {
	ctx := context.Background()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	inst, err := bench.Cascade{Bin: os.Args[1], WorkDir: "/tmp/fp"}.Start(ctx, 1)
	if err != nil {
		panic(err)
	}
	_ = addr
	probe("cascade", inst.Addr)
	inst.Stop()
	d, err := apachekafka.Ensure(ctx)
	if err != nil {
		panic(err)
	}
	b, err := d.StartBroker(ctx, apachekafka.BrokerOptions{Heap: "1G", JVMOptions: bench.KafkaJVMOptions})
	if err != nil {
		panic(err)
	}
	probe("apache-kafka", b.Addr())
	b.Stop()
	_ = kmsg.NewPtrFetchRequest
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// franzDriver drives github.com/twmb/franz-go/pkg/kgo.
type franzDriver struct{}

func franzCodec(name string) kgo.CompressionCodec {
	switch name {
	case "gzip":
		return kgo.GzipCompression()
	case "snappy":
		return kgo.SnappyCompression()
	case "lz4":
		return kgo.Lz4Compression()
	case "zstd":
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

func (franzDriver) produce(ctx context.Context, job *produceJob) error {
	w := job.w
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(job.addr, ",")...),
		kgo.DefaultProduceTopic(job.topic),
		kgo.ProducerLinger(time.Duration(w.LingerMs) * time.Millisecond),
		kgo.ProducerBatchMaxBytes(int32(max(w.BatchBytes, w.PayloadBytes+512))),
		kgo.ProducerBatchCompression(franzCodec(w.Compression)),
		// The producer's buffer is Kafka's buffer.memory default (32 MiB):
		// Produce blocks when it is full, and that wait counts toward the
		// record's latency.
		kgo.MaxBufferedBytes(producerBufferBytes),
	}
	switch w.Acks {
	case "all":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("franz-go producer: %w", err)
	}
	defer cl.Close()
	pace := newPacer(job.rate)
	for k := int64(0); k < job.count; k++ {
		id := job.first + k
		offered, err := pace.offer(ctx, k)
		if err != nil {
			return err
		}
		job.offered.Add(1)
		if id == job.skip {
			job.acked.Add(1)
			continue
		}
		v := make([]byte, w.PayloadBytes)
		Payload(v, w.Seed, uint64(id))
		cl.Produce(ctx, &kgo.Record{Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				job.failed.Add(1)
				job.errs.set(fmt.Errorf("record %d: %w", id, err))
				return
			}
			job.lat.record(time.Since(offered))
			job.acked.Add(1)
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("franz-go flush: %w", err)
	}
	return nil
}

func (franzDriver) consume(ctx context.Context, job *consumeJob) error {
	if len(job.ends) == 0 {
		return nil
	}
	parts := make(map[int32]kgo.Offset, len(job.ends))
	for p := range job.ends {
		parts[p] = kgo.NewOffset().At(0)
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(job.addr, ",")...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{job.topic: parts}),
		kgo.FetchMaxPartitionBytes(int32(job.w.FetchSize)),
	)
	if err != nil {
		return fmt.Errorf("franz-go consumer: %w", err)
	}
	defer cl.Close()
	remaining := len(job.ends)
	next := make(map[int32]int64, len(job.ends))
	for remaining > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("consumer stopped with %d partitions unfinished: %w", remaining, err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("fetch %s-%d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		// Counters are shared by every consumer, so they are added once
		// per partition of a fetch rather than once per record.
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if len(fp.Records) == 0 {
				return
			}
			var n int
			for _, r := range fp.Records {
				job.v.check(r.Value)
				n += len(r.Value)
			}
			job.v.counted(len(fp.Records))
			job.consumed.Add(int64(len(fp.Records)))
			job.bytes.Add(int64(n))
			p, last := fp.Partition, fp.Records[len(fp.Records)-1].Offset
			if end := job.ends[p]; last+1 > next[p] {
				if next[p] < end && last+1 >= end {
					remaining--
				}
				next[p] = last + 1
			}
		})
	}
	job.ended()
	return nil
}

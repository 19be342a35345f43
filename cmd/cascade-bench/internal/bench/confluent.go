package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// confluentDriver drives github.com/confluentinc/confluent-kafka-go/v2, the
// Go binding of librdkafka, configured with librdkafka's own property names.
type confluentDriver struct{}

// confluentSent is carried in a message's Opaque to its delivery report.
type confluentSent struct {
	id      int64
	offered time.Time
}

func (confluentDriver) produce(ctx context.Context, job *produceJob) error {
	w := job.w
	cfg := kafka.ConfigMap{
		"bootstrap.servers":          job.addr,
		"linger.ms":                  w.LingerMs,
		"batch.size":                 max(w.BatchBytes, w.PayloadBytes+512),
		"compression.type":           w.Compression,
		"acks":                       w.Acks,
		"enable.idempotence":         w.Acks == "all",
		"queue.buffering.max.kbytes": producerBufferBytes >> 10,
		"log_level":                  3,
	}
	p, err := kafka.NewProducer(&cfg)
	if err != nil {
		return fmt.Errorf("confluent-kafka-go producer: %w", err)
	}
	reports := make(chan struct{})
	go func() {
		defer close(reports)
		for ev := range p.Events() {
			switch e := ev.(type) {
			case *kafka.Message:
				sent, _ := e.Opaque.(confluentSent)
				if err := e.TopicPartition.Error; err != nil {
					job.failed.Add(1)
					job.errs.set(fmt.Errorf("record %d: %w", sent.id, err))
					continue
				}
				job.lat.record(time.Since(sent.offered))
				job.acked.Add(1)
			case kafka.Error:
				if e.IsFatal() {
					job.errs.set(fmt.Errorf("confluent-kafka-go producer: %w", e))
				}
			}
		}
	}()
	closed := false
	shutdown := func() {
		if !closed {
			closed = true
			p.Close()
			<-reports
		}
	}
	defer shutdown()

	topic := job.topic
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
		msg := &kafka.Message{
			TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
			Value:          v,
			Opaque:         confluentSent{id: id, offered: offered},
		}
		// librdkafka refuses a send when its queue is full; the wait for
		// room counts toward the record's latency, as a blocking send would.
		for {
			err := p.Produce(msg, nil)
			if err == nil {
				break
			}
			var ke kafka.Error
			if !errors.As(err, &ke) || ke.Code() != kafka.ErrQueueFull {
				return fmt.Errorf("confluent-kafka-go produce: %w", err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
	}
	for p.Flush(100) > 0 {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("confluent-kafka-go flush: %w", err)
		}
	}
	shutdown()
	return nil
}

func (confluentDriver) consume(ctx context.Context, job *consumeJob) error {
	if len(job.ends) == 0 {
		return nil
	}
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers":         job.addr,
		"group.id":                  "cascade-bench-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		"enable.auto.commit":        false,
		"enable.auto.offset.store":  false,
		"max.partition.fetch.bytes": job.w.FetchSize,
		"log_level":                 3,
	})
	if err != nil {
		return fmt.Errorf("confluent-kafka-go consumer: %w", err)
	}
	defer c.Close()
	topic := job.topic
	var tps []kafka.TopicPartition
	for p := range job.ends {
		tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: p, Offset: kafka.Offset(0)})
	}
	if err := c.Assign(tps); err != nil {
		return fmt.Errorf("confluent-kafka-go assign: %w", err)
	}
	remaining := len(job.ends)
	next := make(map[int32]int64, len(job.ends))
	for remaining > 0 {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("consumer stopped with %d partitions unfinished: %w", remaining, err)
		}
		switch e := c.Poll(100).(type) {
		case *kafka.Message:
			if e.TopicPartition.Error != nil {
				return fmt.Errorf("confluent-kafka-go fetch: %w", e.TopicPartition.Error)
			}
			job.v.see(e.Value)
			job.consumed.Add(1)
			job.bytes.Add(int64(len(e.Value)))
			p, off := e.TopicPartition.Partition, int64(e.TopicPartition.Offset)
			if end := job.ends[p]; off+1 > next[p] {
				if next[p] < end && off+1 >= end {
					remaining--
				}
				next[p] = off + 1
			}
		case kafka.Error:
			if e.IsFatal() {
				return fmt.Errorf("confluent-kafka-go consumer: %w", e)
			}
		}
	}
	job.ended()
	return nil
}

package confluent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// newTxnProducer creates a transactional producer and initialises it
// (InitProducerId), which fences older producers of the id.
func (d *drv) newTxnProducer(ctx context.Context, id, clientID string) (*kafka.Producer, error) {
	p, err := kafka.NewProducer(&kafka.ConfigMap{
		"bootstrap.servers":                 d.bootstrap,
		"client.id":                         clientID,
		"transactional.id":                  id,
		"message.timeout.ms":                15000,
		"topic.metadata.propagation.max.ms": 2000,
		"allow.auto.create.topics":          false,
	})
	if err != nil {
		return nil, fmt.Errorf("confluent-kafka-go: %w", err)
	}
	if err := p.InitTransactions(ctx); err != nil {
		p.Close()
		return nil, kafkaErr(err)
	}
	return p, nil
}

// produceAll produces msgs and waits for every delivery report; the first
// failed delivery is the error.
func produceAll(ctx context.Context, p *kafka.Producer, msgs []*kafka.Message) error {
	reports := make(chan kafka.Event, len(msgs))
	for _, m := range msgs {
		if err := p.Produce(m, reports); err != nil {
			return kafkaErr(err)
		}
	}
	var first error
	for range msgs {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev := <-reports:
			m, ok := ev.(*kafka.Message)
			if !ok {
				return fmt.Errorf("confluent-kafka-go: unexpected delivery event %v", ev)
			}
			if m.TopicPartition.Error != nil && first == nil {
				first = kafkaErr(m.TopicPartition.Error)
			}
		}
	}
	return first
}

// Transform is consume-transform-produce with librdkafka: a read_committed
// consumer, a transactional producer, and SendOffsetsToTransaction with
// the consumer's group metadata (KIP-447).
func (d *drv) Transform(ctx context.Context, req driver.Transform) (driver.TransformResult, error) {
	if req.Batch <= 0 {
		return driver.TransformResult{}, errors.New("confluent-kafka-go: transform needs a positive batch")
	}
	p, err := d.newTxnProducer(ctx, req.TransactionalID, "matrix-confluent-transform")
	if err != nil {
		return driver.TransformResult{}, err
	}
	defer p.Close()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers":  d.bootstrap,
		"client.id":          "matrix-confluent-transform",
		"group.id":           req.Group,
		"enable.auto.commit": false,
		"auto.offset.reset":  "earliest",
		"isolation.level":    "read_committed",
		"fetch.wait.max.ms":  200,
	})
	if err != nil {
		return driver.TransformResult{}, fmt.Errorf("confluent-kafka-go: %w", err)
	}
	closed := false
	defer func() {
		if !closed {
			c.Close()
		}
	}()
	if err := c.Subscribe(req.Input, nil); err != nil {
		return driver.TransformResult{}, kafkaErr(err)
	}
	res := driver.TransformResult{Records: []driver.Record{}}
	deadline := time.Now().Add(time.Duration(req.TimeoutMs) * time.Millisecond)
	for {
		abort := len(res.Records) >= req.Count
		if abort && (!req.AbortLast || res.Aborted != nil) {
			break
		}
		want := min(req.Batch, req.Count-len(res.Records))
		if abort {
			want = req.Batch
		}
		batch, err := pollBatch(ctx, c, want, deadline)
		if err != nil {
			return res, err
		}
		if len(batch) == 0 {
			break // Timed out: the caller sees the shortfall.
		}
		if err := p.BeginTransaction(); err != nil {
			return res, kafkaErr(err)
		}
		msgs := make([]*kafka.Message, len(batch))
		recs := make([]driver.Record, len(batch))
		output := req.Output
		for i, m := range batch {
			msgs[i] = &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &output, Partition: m.TopicPartition.Partition},
				Key: m.Key, Value: m.Value, Headers: m.Headers}
			recs[i] = fromMessage(m)
		}
		if err := produceAll(ctx, p, msgs); err != nil {
			_ = p.AbortTransaction(ctx) // The produce error is the one to report.
			return res, err
		}
		next := driver.NextOffsets(recs)
		input := req.Input
		offs := make([]kafka.TopicPartition, len(next))
		for i, po := range next {
			offs[i] = kafka.TopicPartition{Topic: &input, Partition: po.Partition, Offset: kafka.Offset(po.Offset)}
		}
		gm, err := c.GetConsumerGroupMetadata()
		if err != nil {
			return res, kafkaErr(err)
		}
		if err := p.SendOffsetsToTransaction(ctx, offs, gm); err != nil {
			_ = p.AbortTransaction(ctx)
			return res, kafkaErr(err)
		}
		if abort {
			if err := p.AbortTransaction(ctx); err != nil {
				return res, kafkaErr(err)
			}
			res.Aborted = recs
			continue
		}
		if err := p.CommitTransaction(ctx); err != nil {
			return res, kafkaErr(err)
		}
		res.Records = append(res.Records, recs...)
		res.Transactions++
		res.Committed = driver.NextOffsets(res.Records)
	}
	closed = true
	if err := c.Close(); err != nil { // Leaves the group.
		return res, kafkaErr(err)
	}
	return res, nil
}

// pollBatch polls up to want messages: it waits for the first until the
// deadline, then takes what arrives within 50 ms of the previous one.
func pollBatch(ctx context.Context, c *kafka.Consumer, want int, deadline time.Time) ([]*kafka.Message, error) {
	var batch []*kafka.Message
	for len(batch) < want {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		wait := 100 * time.Millisecond
		if len(batch) > 0 {
			wait = 50 * time.Millisecond
		} else if time.Until(deadline) <= 0 {
			return nil, nil
		}
		switch ev := c.Poll(int(wait.Milliseconds())).(type) {
		case *kafka.Message:
			if ev.TopicPartition.Error != nil {
				return nil, kafkaErr(ev.TopicPartition.Error)
			}
			batch = append(batch, ev)
		case kafka.Error:
			if ev.IsFatal() || ev.Code() > 0 {
				return nil, kafkaErr(ev)
			}
		case nil:
			if len(batch) > 0 {
				return batch, nil
			}
		}
	}
	return batch, nil
}

func fromMessage(m *kafka.Message) driver.Record {
	r := driver.Record{Partition: m.TopicPartition.Partition, Offset: int64(m.TopicPartition.Offset),
		Key: m.Key, Value: m.Value, TimestampMs: m.Timestamp.UnixMilli()}
	for _, h := range m.Headers {
		r.Headers = append(r.Headers, driver.Header{Key: h.Key, Value: h.Value})
	}
	return r
}

// txnProducer is a producer of producer_open and whether its transaction
// is open.
type txnProducer struct {
	p     *kafka.Producer
	inTxn bool
}

func (d *drv) ProducerOpen(ctx context.Context, req driver.ProducerOpen) error {
	if _, dup := d.producers[req.Producer]; dup {
		return fmt.Errorf("confluent-kafka-go: producer %q is already open", req.Producer)
	}
	p, err := d.newTxnProducer(ctx, req.TransactionalID, "matrix-confluent-txn-producer")
	if err != nil {
		return err
	}
	d.producers[req.Producer] = &txnProducer{p: p}
	return nil
}

func (d *drv) ProducerSend(ctx context.Context, req driver.ProducerSend) (driver.ProduceResult, error) {
	tp, ok := d.producers[req.Producer]
	if !ok {
		return driver.ProduceResult{}, fmt.Errorf("confluent-kafka-go: no open producer %q", req.Producer)
	}
	res := driver.ProduceResult{Deliveries: []driver.Delivery{}}
	if !tp.inTxn {
		if err := tp.p.BeginTransaction(); err != nil {
			return res, kafkaErr(err)
		}
		tp.inTxn = true
	}
	topic := req.Topic
	for _, r := range req.Records {
		m := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: max(r.Partition, 0)}, Key: r.Key, Value: r.Value}
		reports := make(chan kafka.Event, 1)
		if err := tp.p.Produce(m, reports); err != nil {
			return res, kafkaErr(err)
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case ev := <-reports:
			dm, ok := ev.(*kafka.Message)
			if !ok {
				return res, fmt.Errorf("confluent-kafka-go: unexpected delivery event %v", ev)
			}
			if dm.TopicPartition.Error != nil {
				return res, kafkaErr(dm.TopicPartition.Error)
			}
			res.Deliveries = append(res.Deliveries, driver.Delivery{Partition: dm.TopicPartition.Partition, Offset: int64(dm.TopicPartition.Offset)})
		}
	}
	var err error
	switch req.End {
	case driver.EndOpen:
		return res, nil
	case driver.EndCommit:
		err = tp.p.CommitTransaction(ctx)
	case driver.EndAbort:
		err = tp.p.AbortTransaction(ctx)
	default:
		return res, fmt.Errorf("confluent-kafka-go: unknown transaction end %q", req.End)
	}
	tp.inTxn = false
	return res, kafkaErr(err)
}

func (d *drv) ProducerClose(ctx context.Context, producer string) error {
	tp, ok := d.producers[producer]
	if !ok {
		return fmt.Errorf("confluent-kafka-go: no open producer %q", producer)
	}
	delete(d.producers, producer)
	tp.p.Close()
	return nil
}

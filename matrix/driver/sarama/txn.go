package sarama

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// txnConfig is a transactional producer's configuration: sarama needs
// idempotence and one request in flight for a transactional.id, and the
// manual partitioner keeps each record on the partition it names.
func txnConfig(id string) *sarama.Config {
	cfg := baseConfig()
	cfg.ClientID = "matrix-sarama-txn-producer"
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Producer.Transaction.ID = id
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Retry.Max = 3
	cfg.Producer.Retry.Backoff = 100 * time.Millisecond
	cfg.Net.MaxOpenRequests = 1
	return cfg
}

// forwardHandler hands every claimed message to one channel, so that a
// single loop builds the transactions of all partitions in turn. The
// channel is unbuffered: a message is taken only by the loop that
// processes it.
type forwardHandler struct {
	out chan<- *sarama.ConsumerMessage
}

func (forwardHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (forwardHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h forwardHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for {
		select {
		case <-s.Context().Done():
			return nil
		case m, ok := <-c.Messages():
			if !ok {
				return nil
			}
			select {
			case h.out <- m:
			case <-s.Context().Done():
				return nil
			}
		}
	}
}

// Transform is consume-transform-produce with a sarama consumer group at
// read_committed and a transactional SyncProducer that sends the consumed
// offsets with AddOffsetsToTxn (TxnOffsetCommit) before committing.
func (d *drv) Transform(ctx context.Context, req driver.Transform) (driver.TransformResult, error) {
	if req.Batch <= 0 {
		return driver.TransformResult{}, errors.New("sarama: transform needs a positive batch")
	}
	p, err := sarama.NewSyncProducer(d.addrs, txnConfig(req.TransactionalID))
	if err != nil {
		return driver.TransformResult{}, kafkaErr(err)
	}
	defer p.Close()
	cfg := baseConfig()
	cfg.ClientID = "matrix-sarama-transform"
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	g, err := sarama.NewConsumerGroup(d.addrs, req.Group, cfg)
	if err != nil {
		return driver.TransformResult{}, kafkaErr(err)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Duration(req.TimeoutMs)*time.Millisecond)
	defer cancel()
	in := make(chan *sarama.ConsumerMessage)
	consumeDone := make(chan error, 1)
	go func() {
		var err error
		for err == nil && cctx.Err() == nil {
			err = g.Consume(cctx, []string{req.Input}, forwardHandler{in})
		}
		consumeDone <- err
	}()
	var groupErr error
	errsDone := make(chan struct{})
	go func() {
		defer close(errsDone)
		for e := range g.Errors() {
			if groupErr == nil {
				groupErr = e
			}
		}
	}()
	res, runErr := transformLoop(cctx, p, req, in)
	cancel()
	consumeErr := <-consumeDone
	closeErr := g.Close() // Leaves the group.
	<-errsDone
	if runErr != nil {
		return res, runErr
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	for _, err := range []error{consumeErr, groupErr, closeErr} {
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			return res, kafkaErr(err)
		}
	}
	return res, nil
}

// transformLoop takes messages from in and runs one transaction per batch
// until req.Count records were committed (and the aborted last batch, when
// asked for), or ctx ends.
func transformLoop(ctx context.Context, p sarama.SyncProducer, req driver.Transform, in <-chan *sarama.ConsumerMessage) (driver.TransformResult, error) {
	res := driver.TransformResult{Records: []driver.Record{}}
	for {
		abort := len(res.Records) >= req.Count
		if abort && (!req.AbortLast || res.Aborted != nil) {
			return res, nil
		}
		want := min(req.Batch, req.Count-len(res.Records))
		if abort {
			want = req.Batch
		}
		var batch []*sarama.ConsumerMessage
		select {
		case <-ctx.Done():
			return res, nil // The caller sees the shortfall.
		case m := <-in:
			batch = append(batch, m)
		}
	more:
		for len(batch) < want {
			select {
			case m := <-in:
				batch = append(batch, m)
			case <-time.After(50 * time.Millisecond):
				break more
			}
		}
		if err := p.BeginTxn(); err != nil {
			return res, kafkaErr(err)
		}
		msgs := make([]*sarama.ProducerMessage, len(batch))
		recs := make([]driver.Record, len(batch))
		next := map[int32]int64{}
		for i, m := range batch {
			pm := &sarama.ProducerMessage{Topic: req.Output, Partition: m.Partition, Key: bytesEncoder(m.Key), Value: bytesEncoder(m.Value)}
			r := driver.Record{Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value, TimestampMs: m.Timestamp.UnixMilli()}
			for _, h := range m.Headers {
				pm.Headers = append(pm.Headers, sarama.RecordHeader{Key: h.Key, Value: h.Value})
				r.Headers = append(r.Headers, driver.Header{Key: string(h.Key), Value: h.Value})
			}
			msgs[i], recs[i] = pm, r
			next[m.Partition] = max(next[m.Partition], m.Offset+1)
		}
		if err := p.SendMessages(msgs); err != nil {
			_ = p.AbortTxn() // The send error is the one to report.
			return res, kafkaErr(err)
		}
		var offs []*sarama.PartitionOffsetMetadata
		for part, o := range next {
			offs = append(offs, &sarama.PartitionOffsetMetadata{Partition: part, Offset: o, LeaderEpoch: -1})
		}
		if err := p.AddOffsetsToTxn(map[string][]*sarama.PartitionOffsetMetadata{req.Input: offs}, req.Group); err != nil {
			_ = p.AbortTxn()
			return res, kafkaErr(err)
		}
		if abort {
			if err := p.AbortTxn(); err != nil {
				return res, kafkaErr(err)
			}
			res.Aborted = recs
			continue
		}
		if err := p.CommitTxn(); err != nil {
			return res, kafkaErr(err)
		}
		res.Records = append(res.Records, recs...)
		res.Transactions++
		res.Committed = driver.NextOffsets(res.Records)
	}
}

// txnProducer is a producer of producer_open and whether its transaction
// is open.
type txnProducer struct {
	p     sarama.SyncProducer
	inTxn bool
}

func (d *drv) ProducerOpen(ctx context.Context, req driver.ProducerOpen) error {
	if _, dup := d.producers[req.Producer]; dup {
		return fmt.Errorf("sarama: producer %q is already open", req.Producer)
	}
	// NewSyncProducer sends InitProducerId for the transactional id,
	// which fences older producers of the id.
	p, err := sarama.NewSyncProducer(d.addrs, txnConfig(req.TransactionalID))
	if err != nil {
		return kafkaErr(err)
	}
	d.producers[req.Producer] = &txnProducer{p: p}
	return nil
}

func (d *drv) ProducerSend(ctx context.Context, req driver.ProducerSend) (driver.ProduceResult, error) {
	tp, ok := d.producers[req.Producer]
	if !ok {
		return driver.ProduceResult{}, fmt.Errorf("sarama: no open producer %q", req.Producer)
	}
	res := driver.ProduceResult{Deliveries: []driver.Delivery{}}
	if !tp.inTxn {
		if err := tp.p.BeginTxn(); err != nil {
			return res, kafkaErr(err)
		}
		tp.inTxn = true
	}
	for _, r := range req.Records {
		m := &sarama.ProducerMessage{Topic: req.Topic, Partition: max(r.Partition, 0), Key: bytesEncoder(r.Key), Value: bytesEncoder(r.Value)}
		if _, _, err := tp.p.SendMessage(m); err != nil {
			return res, kafkaErr(err)
		}
		res.Deliveries = append(res.Deliveries, driver.Delivery{Partition: m.Partition, Offset: m.Offset})
	}
	var err error
	switch req.End {
	case driver.EndOpen:
		return res, nil
	case driver.EndCommit:
		err = tp.p.CommitTxn()
	case driver.EndAbort:
		err = tp.p.AbortTxn()
	default:
		return res, fmt.Errorf("sarama: unknown transaction end %q", req.End)
	}
	tp.inTxn = false
	return res, kafkaErr(err)
}

func (d *drv) ProducerClose(ctx context.Context, producer string) error {
	tp, ok := d.producers[producer]
	if !ok {
		return fmt.Errorf("sarama: no open producer %q", producer)
	}
	delete(d.producers, producer)
	if err := tp.p.Close(); err != nil {
		return fmt.Errorf("sarama: close producer: %w", err)
	}
	return nil
}

package franzgo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// Transform is consume-transform-produce with kgo.GroupTransactSession,
// franz-go's exactly-once helper: it polls at read_committed, produces
// inside a transaction and commits the polled offsets with the
// transaction (TxnOffsetCommit), aborting when the group rebalanced.
func (d *drv) Transform(ctx context.Context, req driver.Transform) (driver.TransformResult, error) {
	if req.Batch <= 0 {
		return driver.TransformResult{}, errors.New("franz-go: transform needs a positive batch")
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(d.seeds...), kgo.ClientID("matrix-franz-go-transform"),
		kgo.MetadataMinAge(250*time.Millisecond), kgo.TransactionalID(req.TransactionalID),
		kgo.ConsumerGroup(req.Group), kgo.ConsumeTopics(req.Input), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return driver.TransformResult{}, fmt.Errorf("franz-go: %w", err)
	}
	defer sess.Close() // Leaves the group.
	res := driver.TransformResult{Records: []driver.Record{}}
	cctx, cancel := context.WithTimeout(ctx, time.Duration(req.TimeoutMs)*time.Millisecond)
	defer cancel()
	for {
		abort := len(res.Records) >= req.Count
		if abort && (!req.AbortLast || res.Aborted != nil) {
			return res, nil
		}
		want := min(req.Batch, req.Count-len(res.Records))
		if abort {
			want = req.Batch
		}
		fs := sess.PollRecords(cctx, want)
		if cctx.Err() != nil {
			return res, ctx.Err() // A timeout is not an error: the caller counts.
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if ferr == nil {
				ferr = err
			}
		})
		if ferr != nil {
			return res, kafkaErr(ferr)
		}
		in := fs.Records()
		if len(in) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return res, kafkaErr(err)
		}
		out := make([]*kgo.Record, len(in))
		recs := make([]driver.Record, len(in))
		for i, r := range in {
			out[i] = &kgo.Record{Topic: req.Output, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers}
			recs[i] = fromKgo(r)
		}
		if err := sess.ProduceSync(ctx, out...).FirstErr(); err != nil {
			_, _ = sess.End(ctx, kgo.TryAbort) // The produce error is the one to report.
			return res, kafkaErr(err)
		}
		how := kgo.TryCommit
		if abort {
			how = kgo.TryAbort
		}
		committed, err := sess.End(ctx, how)
		if err != nil {
			return res, kafkaErr(err)
		}
		switch {
		case abort:
			res.Aborted = recs
		case committed:
			res.Records = append(res.Records, recs...)
			res.Transactions++
			res.Committed = driver.NextOffsets(res.Records)
		}
		// Not committed without asking for an abort: the session aborted
		// after a rebalance and rewound; the records come again.
	}
}

func fromKgo(r *kgo.Record) driver.Record {
	dr := driver.Record{Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, TimestampMs: r.Timestamp.UnixMilli()}
	for _, h := range r.Headers {
		dr.Headers = append(dr.Headers, driver.Header{Key: h.Key, Value: h.Value})
	}
	return dr
}

// txnProducer is a producer of producer_open and whether its transaction
// is open.
type txnProducer struct {
	cl    *kgo.Client
	inTxn bool
}

func (d *drv) ProducerOpen(ctx context.Context, req driver.ProducerOpen) error {
	if _, dup := d.producers[req.Producer]; dup {
		return fmt.Errorf("franz-go: producer %q is already open", req.Producer)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.seeds...), kgo.ClientID("matrix-franz-go-txn-producer"),
		kgo.MetadataMinAge(250*time.Millisecond), kgo.TransactionalID(req.TransactionalID),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return fmt.Errorf("franz-go: %w", err)
	}
	// franz-go initialises the producer id lazily; ProducerID sends
	// InitProducerId now, which fences older producers of the id.
	if _, _, err := cl.ProducerID(ctx); err != nil {
		cl.Close()
		return kafkaErr(err)
	}
	d.producers[req.Producer] = &txnProducer{cl: cl}
	return nil
}

func (d *drv) ProducerSend(ctx context.Context, req driver.ProducerSend) (driver.ProduceResult, error) {
	p, ok := d.producers[req.Producer]
	if !ok {
		return driver.ProduceResult{}, fmt.Errorf("franz-go: no open producer %q", req.Producer)
	}
	cl := p.cl
	res := driver.ProduceResult{Deliveries: []driver.Delivery{}}
	if !p.inTxn {
		if err := cl.BeginTransaction(); err != nil {
			return res, kafkaErr(err)
		}
		p.inTxn = true
	}
	for _, r := range req.Records {
		kr := &kgo.Record{Topic: req.Topic, Partition: max(r.Partition, 0), Key: r.Key, Value: r.Value}
		pr := cl.ProduceSync(ctx, kr)[0]
		if pr.Err != nil {
			return res, kafkaErr(pr.Err)
		}
		res.Deliveries = append(res.Deliveries, driver.Delivery{Partition: kr.Partition, Offset: kr.Offset})
	}
	var end kgo.TransactionEndTry
	switch req.End {
	case driver.EndOpen:
		return res, nil
	case driver.EndCommit:
		end = kgo.TryCommit
	case driver.EndAbort:
		end = kgo.TryAbort
	default:
		return res, fmt.Errorf("franz-go: unknown transaction end %q", req.End)
	}
	p.inTxn = false
	return res, kafkaErr(cl.EndTransaction(ctx, end))
}

func (d *drv) ProducerClose(ctx context.Context, producer string) error {
	p, ok := d.producers[producer]
	if !ok {
		return fmt.Errorf("franz-go: no open producer %q", producer)
	}
	delete(d.producers, producer)
	p.cl.Close()
	return nil
}

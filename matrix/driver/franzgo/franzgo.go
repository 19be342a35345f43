// Package franzgo is the matrix driver for github.com/twmb/franz-go (kgo and
// kadm), registered as client "franz-go".
package franzgo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// Client is the client id this driver registers.
const Client = "franz-go"

func init() { driver.Register(Client, Open) }

type drv struct {
	seeds []string
	cl    *kgo.Client
	adm   *kadm.Client
	// producers are the transactional producers of producer_open.
	producers map[string]*txnProducer
	// abandoned are the group members of crash commands, kept open until
	// the process is killed (or, in process, until Close).
	abandoned []*kgo.Client
	// sec are the options of the security the driver was opened with
	// (driver.WithSecurity).
	sec []kgo.Opt
}

// Open connects a franz-go driver to bootstrap (a comma list, as
// bootstrap.servers).
func Open(ctx context.Context, bootstrap string) (driver.Driver, error) {
	seeds := strings.Split(bootstrap, ",")
	sec, err := securityOpts(driver.SecurityFrom(ctx))
	if err != nil {
		return nil, fmt.Errorf("franz-go: %w", err)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID("matrix-franz-go")}, sec...)...)
	if err != nil {
		return nil, fmt.Errorf("franz-go: %w", err)
	}
	return &drv{seeds: seeds, cl: cl, adm: kadm.NewClient(cl), producers: map[string]*txnProducer{}, sec: sec}, nil
}

func (d *drv) Client() string { return Client }

func (d *drv) Info() driver.Info {
	return driver.Info{Library: "github.com/twmb/franz-go " + driver.ModuleVersion("github.com/twmb/franz-go"), Partitioner: "murmur2"}
}

func (d *drv) Close() error {
	for _, p := range d.producers {
		p.cl.Close()
	}
	for _, c := range d.abandoned {
		c.Close()
	}
	d.cl.Close()
	return nil
}

// kafkaErr converts a franz-go error to a driver.Error when it carries a
// Kafka error code.
func kafkaErr(err error) error {
	if err == nil {
		return nil
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return &driver.Error{Code: ke.Message, Message: err.Error()}
	}
	if errors.Is(err, kgo.ErrRecordTimeout) {
		return &driver.Error{Code: "CLIENT_TIMEOUT", Message: err.Error()}
	}
	return err
}

func codeErr(code int16, msg *string) error {
	if code == 0 {
		return nil
	}
	de := &driver.Error{Code: driver.CodeName(code)}
	if msg != nil {
		de.Message = *msg
	}
	return de
}

func (d *drv) CreateTopic(ctx context.Context, req driver.CreateTopic) error {
	cfg := map[string]*string{}
	for k, v := range req.Configs {
		v := v
		cfg[k] = &v
	}
	r, err := d.adm.CreateTopic(ctx, req.Partitions, req.ReplicationFactor, cfg, req.Topic)
	if err != nil {
		return kafkaErr(err)
	}
	if r.Err != nil {
		return &driver.Error{Code: kerrName(r.Err), Message: r.ErrMessage}
	}
	return nil
}

func kerrName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return "UNKNOWN_SERVER_ERROR"
}

func (d *drv) DeleteTopic(ctx context.Context, topic string) error {
	r, err := d.adm.DeleteTopic(ctx, topic)
	if err != nil {
		return kafkaErr(err)
	}
	if r.Err != nil {
		return &driver.Error{Code: kerrName(r.Err), Message: r.ErrMessage}
	}
	return nil
}

func (d *drv) DescribeTopic(ctx context.Context, topic string) (driver.TopicInfo, error) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, d.cl)
	if err != nil {
		return driver.TopicInfo{}, kafkaErr(err)
	}
	for _, rt := range resp.Topics {
		if rt.Topic != nil && *rt.Topic == topic {
			if err := codeErr(rt.ErrorCode, nil); err != nil {
				return driver.TopicInfo{}, err
			}
			return driver.TopicInfo{Topic: topic, Partitions: int32(len(rt.Partitions))}, nil
		}
	}
	return driver.TopicInfo{}, &driver.Error{Code: "UNKNOWN_TOPIC_OR_PARTITION", Message: "topic absent from metadata response"}
}

func (d *drv) CreatePartitions(ctx context.Context, topic string, total int32) error {
	rs, err := d.adm.UpdatePartitions(ctx, int(total), topic)
	if err != nil {
		return kafkaErr(err)
	}
	r, err := rs.On(topic, nil)
	if err != nil {
		return err
	}
	if r.Err != nil {
		return &driver.Error{Code: kerrName(r.Err), Message: r.ErrMessage}
	}
	return nil
}

func (d *drv) DescribeConfigs(ctx context.Context, topic string) (map[string]string, error) {
	rcs, err := d.adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil, kafkaErr(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return nil, err
	}
	if rc.Err != nil {
		return nil, &driver.Error{Code: kerrName(rc.Err), Message: rc.ErrMessage}
	}
	out := map[string]string{}
	for _, c := range rc.Configs {
		if c.Value != nil {
			out[c.Key] = *c.Value
		}
	}
	return out, nil
}

func (d *drv) AlterConfigs(ctx context.Context, req driver.AlterConfigs) error {
	var acs []kadm.AlterConfig
	for k, v := range req.Set {
		v := v
		acs = append(acs, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v})
	}
	for _, k := range req.Delete {
		acs = append(acs, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	rs, err := d.adm.AlterTopicConfigs(ctx, acs, req.Topic)
	if err != nil {
		return kafkaErr(err)
	}
	for _, r := range rs {
		if r.Err != nil {
			return &driver.Error{Code: kerrName(r.Err), Message: r.ErrMessage}
		}
	}
	return nil
}

func (d *drv) Produce(ctx context.Context, req driver.Produce) (driver.ProduceResult, error) {
	opts := append([]kgo.Opt{kgo.SeedBrokers(d.seeds...), kgo.ClientID("matrix-franz-go-producer"), kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.ProducerBatchMaxBytes(16 << 20)}, d.sec...)
	switch req.Acks {
	case 0:
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
	case 1:
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	case -1:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	default:
		return driver.ProduceResult{}, fmt.Errorf("franz-go: invalid acks %d", req.Acks)
	}
	if !req.Idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	} else if req.Acks != -1 {
		return driver.ProduceResult{}, driver.Unsupported("idempotence needs acks=all")
	}
	switch {
	case req.MaxInFlight <= 0:
	case req.Idempotent && req.MaxInFlight == 5:
		// franz-go always allows 5 in flight with idempotence and
		// rejects the option then.
	case req.Idempotent:
		return driver.ProduceResult{}, driver.Unsupported("franz-go fixes 5 requests in flight with idempotence")
	default:
		opts = append(opts, kgo.MaxProduceRequestsInflightPerBroker(req.MaxInFlight))
	}
	if req.LingerMs > 0 {
		opts = append(opts, kgo.ProducerLinger(time.Duration(req.LingerMs)*time.Millisecond))
	}
	if req.AutoCreate {
		opts = append(opts, kgo.AllowAutoTopicCreation())
	}
	if req.TransactionalID != "" {
		opts = append(opts, kgo.TransactionalID(req.TransactionalID))
	}
	switch req.Codec {
	case "", "none":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.NoCompression()))
	case "gzip":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.GzipCompression()))
	case "snappy":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	case "lz4":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	case "zstd":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	default:
		return driver.ProduceResult{}, fmt.Errorf("franz-go: unknown codec %q", req.Codec)
	}
	if req.Records != nil && anyExplicitPartition(req.Records) {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return driver.ProduceResult{}, fmt.Errorf("franz-go: %w", err)
	}
	defer cl.Close()
	if req.TransactionalID != "" {
		if err := cl.BeginTransaction(); err != nil {
			return driver.ProduceResult{}, kafkaErr(err)
		}
	}

	res := driver.ProduceResult{Deliveries: make([]driver.Delivery, len(req.Records))}
	recs := make([]*kgo.Record, len(req.Records))
	for i, r := range req.Records {
		kr := &kgo.Record{Topic: req.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value}
		if r.Partition < 0 {
			kr.Partition = 0 // Ignored by the key partitioner.
		}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		if r.TimestampMs != 0 {
			kr.Timestamp = time.UnixMilli(r.TimestampMs)
		}
		recs[i] = kr
	}
	index := make(map[*kgo.Record]int, len(recs))
	for i, r := range recs {
		index[r] = i
	}
	// ProduceSync returns results in completion order, which differs from
	// the request order across partitions.
	results := cl.ProduceSync(ctx, recs...)
	for _, pr := range results {
		i, ok := index[pr.Record]
		if !ok {
			return res, errors.New("franz-go: a produce result for an unknown record")
		}
		del := driver.Delivery{Partition: pr.Record.Partition, Offset: pr.Record.Offset}
		if pr.Err != nil {
			del.Offset = -1
			del.Error = toErr(kafkaErr(pr.Err))
		} else if req.Acks == 0 {
			del.Offset = -1
		}
		res.Deliveries[i] = del
	}
	if req.TransactionalID != "" {
		commit := kgo.TryCommit
		if req.TxnAbort {
			commit = kgo.TryAbort
		}
		for _, dl := range res.Deliveries {
			if dl.Error != nil {
				commit = kgo.TryAbort
			}
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			return res, kafkaErr(err)
		}
	}
	return res, nil
}

func anyExplicitPartition(rs []driver.Record) bool {
	for _, r := range rs {
		if r.Partition >= 0 {
			return true
		}
	}
	return false
}

func toErr(err error) *driver.Error {
	var de *driver.Error
	if errors.As(err, &de) {
		return de
	}
	return &driver.Error{Code: "CLIENT_ERROR", Message: err.Error()}
}

func (d *drv) Consume(ctx context.Context, req driver.Consume) (driver.ConsumeResult, error) {
	var start kgo.Offset
	switch req.From {
	case -2:
		start = kgo.NewOffset().AtStart()
	case -1:
		start = kgo.NewOffset().AtEnd()
	default:
		start = kgo.NewOffset().At(req.From)
	}
	opts := []kgo.Opt{kgo.SeedBrokers(d.seeds...), kgo.ClientID("matrix-franz-go-consumer"), kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{req.Topic: {req.Partition: start}}),
		kgo.FetchMaxWait(200 * time.Millisecond),
		// Control records (transaction markers) come back as records, so
		// that Next can count them; they are not returned as data.
		kgo.KeepControlRecords()}
	opts = append(opts, d.sec...)
	switch req.Reset {
	case "", "none":
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NoResetOffset()))
	case "earliest":
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	case "latest":
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	default:
		return driver.ConsumeResult{}, fmt.Errorf("franz-go: unknown reset %q", req.Reset)
	}
	if req.Isolation == "read_committed" {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	if req.Rack != "" {
		opts = append(opts, kgo.Rack(req.Rack))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return driver.ConsumeResult{}, fmt.Errorf("franz-go: %w", err)
	}
	defer cl.Close()

	res := driver.ConsumeResult{HighWatermark: -1, Records: []driver.Record{}}
	cctx, cancel := context.WithTimeout(ctx, time.Duration(req.TimeoutMs)*time.Millisecond)
	defer cancel()
	for len(res.Records) < req.Count {
		fs := cl.PollFetches(cctx)
		if cctx.Err() != nil {
			break
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if ferr == nil {
				ferr = err
			}
		})
		if ferr != nil {
			res.Error = toErr(kafkaErr(ferr))
			return res, nil
		}
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			res.HighWatermark = p.HighWatermark
			for _, r := range p.Records {
				// kgo continues after the last record it handed out; an
				// aborted batch it dropped under read_committed after that
				// is not counted, which keeps Next a lower bound.
				next := r.Offset + 1
				if res.Next == nil || next > *res.Next {
					res.Next = &next
				}
				if r.Attrs.IsControl() {
					continue
				}
				dr := driver.Record{Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value,
					TimestampMs: r.Timestamp.UnixMilli()}
				for _, h := range r.Headers {
					dr.Headers = append(dr.Headers, driver.Header{Key: h.Key, Value: h.Value})
				}
				res.Records = append(res.Records, dr)
			}
		})
	}
	return res, ctx.Err()
}

func (d *drv) ListOffsets(ctx context.Context, req driver.ListOffsets) (driver.ListOffsetsResult, error) {
	lreq := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = req.Topic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition = req.Partition
	lp.CurrentLeaderEpoch = -1
	switch req.Kind {
	case "earliest":
		lp.Timestamp = -2
	case "latest":
		lp.Timestamp = -1
	case "timestamp":
		lp.Timestamp = req.TimestampMs
	case "max_timestamp":
		lp.Timestamp = -3 // KIP-734; kmsg sends v7 or later.
	default:
		return driver.ListOffsetsResult{}, fmt.Errorf("franz-go: unknown list offsets kind %q", req.Kind)
	}
	lt.Partitions = append(lt.Partitions, lp)
	lreq.Topics = append(lreq.Topics, lt)
	resp, err := lreq.RequestWith(ctx, d.cl)
	if err != nil {
		return driver.ListOffsetsResult{}, kafkaErr(err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := codeErr(p.ErrorCode, nil); err != nil {
				return driver.ListOffsetsResult{}, err
			}
			return driver.ListOffsetsResult{Offset: p.Offset}, nil
		}
	}
	return driver.ListOffsetsResult{}, errors.New("franz-go: empty ListOffsets response")
}

func (d *drv) DeleteRecords(ctx context.Context, req driver.DeleteRecords) (int64, error) {
	var os kadm.Offsets
	os.AddOffset(req.Topic, req.Partition, req.Before, -1)
	rs, err := d.adm.DeleteRecords(ctx, os)
	if err != nil {
		return 0, kafkaErr(err)
	}
	r, ok := rs.Lookup(req.Topic, req.Partition)
	if !ok {
		return 0, errors.New("franz-go: DeleteRecords response lacks the partition")
	}
	if r.Err != nil {
		return 0, &driver.Error{Code: kerrName(r.Err)}
	}
	return r.LowWatermark, nil
}

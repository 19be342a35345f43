// Package sarama is the matrix driver for github.com/IBM/sarama, registered
// as client "sarama". It configures sarama for Kafka 4 (Config.Version) and
// otherwise keeps sarama's defaults, so the matrix shows what a sarama user
// gets.
package sarama

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// Client is the client id this driver registers.
const Client = "sarama"

func init() { driver.Register(Client, Open) }

type drv struct {
	addrs  []string
	client sarama.Client
	admin  sarama.ClusterAdmin
	// producers are the transactional producers of producer_open.
	producers map[string]*txnProducer
	// abandoned are the group members of crash commands, kept open until
	// the process is killed (or, in process, until Close).
	abandoned []sarama.ConsumerGroup
	// sec is the security the driver was opened with
	// (driver.WithSecurity).
	sec driver.Security
}

func baseConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V4_0_0_0
	cfg.ClientID = "matrix-sarama"
	cfg.Metadata.AllowAutoTopicCreation = false
	cfg.Metadata.Retry.Max = 3
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	cfg.Admin.Timeout = 10 * time.Second
	return cfg
}

// Open connects a sarama driver to bootstrap (a comma list, as
// bootstrap.servers).
func Open(ctx context.Context, bootstrap string) (driver.Driver, error) {
	addrs := strings.Split(bootstrap, ",")
	sec := driver.SecurityFrom(ctx)
	cfg := baseConfig()
	if err := secure(cfg, sec); err != nil {
		return nil, fmt.Errorf("sarama: %w", err)
	}
	client, err := sarama.NewClient(addrs, cfg)
	if err != nil {
		return nil, fmt.Errorf("sarama: %w", err)
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("sarama: %w", err)
	}
	return &drv{addrs: addrs, client: client, admin: admin, producers: map[string]*txnProducer{}, sec: sec}, nil
}

func (d *drv) Client() string { return Client }

func (d *drv) Info() driver.Info {
	return driver.Info{Library: "github.com/IBM/sarama " + driver.ModuleVersion("github.com/IBM/sarama"), Partitioner: "fnv1a (sarama.NewHashPartitioner)"}
}

func (d *drv) Close() error {
	var errs []error
	for _, p := range d.producers {
		errs = append(errs, p.p.Close())
	}
	for _, g := range d.abandoned {
		errs = append(errs, g.Close())
	}
	if err := errors.Join(errs...); err != nil {
		d.admin.Close()
		return fmt.Errorf("sarama: close: %w", err)
	}
	// Closing the admin closes the client it was built from.
	if err := d.admin.Close(); err != nil {
		return fmt.Errorf("sarama: close: %w", err)
	}
	return nil
}

// codeName returns Kafka's name for a sarama KError.
func codeName(k sarama.KError) string { return driver.CodeName(int16(k)) }

// kafkaErr converts sarama's error types to a driver.Error carrying the
// Kafka error name.
func kafkaErr(err error) error {
	if err == nil {
		return nil
	}
	var (
		te  *sarama.TopicError
		tpe *sarama.TopicPartitionError
		dce *sarama.DescribeConfigError
		ke  sarama.KError
	)
	switch {
	case errors.As(err, &te):
		return &driver.Error{Code: codeName(te.Err), Message: err.Error()}
	case errors.As(err, &tpe):
		return &driver.Error{Code: codeName(tpe.Err), Message: err.Error()}
	case errors.As(err, &dce):
		return &driver.Error{Code: codeName(dce.Err), Message: err.Error()}
	case errors.As(err, &ke):
		return &driver.Error{Code: codeName(ke), Message: err.Error()}
	case errors.Is(err, sarama.ErrOutOfBrokers):
		return &driver.Error{Code: "CLIENT_ERROR", Message: err.Error()}
	}
	return err
}

func (d *drv) CreateTopic(ctx context.Context, req driver.CreateTopic) error {
	det := &sarama.TopicDetail{NumPartitions: req.Partitions, ReplicationFactor: req.ReplicationFactor,
		ConfigEntries: map[string]*string{}}
	for k, v := range req.Configs {
		v := v
		det.ConfigEntries[k] = &v
	}
	if err := d.admin.CreateTopic(req.Topic, det, false); err != nil {
		return kafkaErr(err)
	}
	return d.awaitLeaders(ctx, req.Topic, req.Partitions)
}

// awaitLeaders waits, up to 10 s, until sarama's metadata names a leader
// for each of a new topic's partitions. A broker answers CreateTopics once
// the topic is created, before every partition's leader serves it; the
// other clients retry a produce refused meanwhile for as long as their
// delivery timeout, while sarama's producer gives up after its three
// retries 100 ms apart.
func (d *drv) awaitLeaders(ctx context.Context, topic string, partitions int32) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := d.client.RefreshMetadata(topic)
		for p := int32(0); err == nil && p < partitions; p++ {
			_, err = d.client.Leader(topic, p)
		}
		if err == nil || time.Now().After(deadline) {
			return kafkaErr(err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (d *drv) DeleteTopic(ctx context.Context, topic string) error {
	return kafkaErr(d.admin.DeleteTopic(topic))
}

func (d *drv) DescribeTopic(ctx context.Context, topic string) (driver.TopicInfo, error) {
	md, err := d.admin.DescribeTopics([]string{topic})
	if err != nil {
		return driver.TopicInfo{}, kafkaErr(err)
	}
	for _, t := range md {
		if t.Name != topic {
			continue
		}
		if t.Err != sarama.ErrNoError {
			return driver.TopicInfo{}, &driver.Error{Code: codeName(t.Err), Message: t.Err.Error()}
		}
		return driver.TopicInfo{Topic: topic, Partitions: int32(len(t.Partitions))}, nil
	}
	return driver.TopicInfo{}, &driver.Error{Code: "UNKNOWN_TOPIC_OR_PARTITION", Message: "topic absent from metadata response"}
}

func (d *drv) CreatePartitions(ctx context.Context, topic string, total int32) error {
	return kafkaErr(d.admin.CreatePartitions(topic, total, nil, false))
}

func (d *drv) DescribeConfigs(ctx context.Context, topic string) (map[string]string, error) {
	entries, err := d.admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	if err != nil {
		return nil, kafkaErr(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		out[e.Name] = e.Value
	}
	return out, nil
}

func (d *drv) AlterConfigs(ctx context.Context, req driver.AlterConfigs) error {
	entries := map[string]sarama.IncrementalAlterConfigsEntry{}
	for k, v := range req.Set {
		v := v
		entries[k] = sarama.IncrementalAlterConfigsEntry{Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &v}
	}
	for _, k := range req.Delete {
		entries[k] = sarama.IncrementalAlterConfigsEntry{Operation: sarama.IncrementalAlterConfigsOperationDelete}
	}
	return kafkaErr(d.admin.IncrementalAlterConfig(sarama.TopicResource, req.Topic, entries, false))
}

func bytesEncoder(b []byte) sarama.Encoder {
	if b == nil {
		return nil
	}
	return sarama.ByteEncoder(b)
}

func (d *drv) Produce(ctx context.Context, req driver.Produce) (driver.ProduceResult, error) {
	cfg := baseConfig()
	cfg.ClientID = "matrix-sarama-producer"
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.MaxMessageBytes = 16 << 20 // Leave the size limit to the broker.
	cfg.Producer.Retry.Max = 3
	cfg.Producer.Retry.Backoff = 100 * time.Millisecond
	switch req.Acks {
	case 0:
		cfg.Producer.RequiredAcks = sarama.NoResponse
	case 1:
		cfg.Producer.RequiredAcks = sarama.WaitForLocal
	case -1:
		cfg.Producer.RequiredAcks = sarama.WaitForAll
	default:
		return driver.ProduceResult{}, fmt.Errorf("sarama: invalid acks %d", req.Acks)
	}
	if req.Idempotent {
		if req.MaxInFlight > 1 {
			return driver.ProduceResult{}, driver.Unsupported("sarama's idempotent producer requires Net.MaxOpenRequests=1, so it cannot keep %d requests in flight", req.MaxInFlight)
		}
		cfg.Producer.Idempotent = true
		cfg.Net.MaxOpenRequests = 1
	} else if req.MaxInFlight > 0 {
		cfg.Net.MaxOpenRequests = req.MaxInFlight
	}
	if req.LingerMs > 0 {
		cfg.Producer.Flush.Frequency = time.Duration(req.LingerMs) * time.Millisecond
	}
	cfg.Metadata.AllowAutoTopicCreation = req.AutoCreate
	if req.AutoCreate {
		// A topic the produce creates is UNKNOWN_TOPIC_OR_PARTITION until
		// its creation has reached the broker asked, which on a
		// three-node Kafka cluster takes longer than the driver's short
		// metadata budget: give it sarama's default backoff, as the other
		// clients' retries of an unknown topic last seconds.
		cfg.Metadata.Retry.Max = 10
		cfg.Metadata.Retry.Backoff = 250 * time.Millisecond
	}
	if req.TransactionalID != "" {
		cfg.Producer.Transaction.ID = req.TransactionalID
		cfg.Producer.Idempotent = true
		cfg.Net.MaxOpenRequests = 1
	}
	switch req.Codec {
	case "", "none":
		cfg.Producer.Compression = sarama.CompressionNone
	case "gzip":
		cfg.Producer.Compression = sarama.CompressionGZIP
	case "snappy":
		cfg.Producer.Compression = sarama.CompressionSnappy
	case "lz4":
		cfg.Producer.Compression = sarama.CompressionLZ4
	case "zstd":
		cfg.Producer.Compression = sarama.CompressionZSTD
	default:
		return driver.ProduceResult{}, fmt.Errorf("sarama: unknown codec %q", req.Codec)
	}
	manual := false
	for _, r := range req.Records {
		if r.Partition >= 0 {
			manual = true
		}
	}
	if manual {
		cfg.Producer.Partitioner = sarama.NewManualPartitioner
	}
	if err := secure(cfg, d.sec); err != nil {
		return driver.ProduceResult{}, err
	}
	p, err := sarama.NewSyncProducer(d.addrs, cfg)
	if err != nil {
		return driver.ProduceResult{}, kafkaErr(err)
	}
	defer p.Close()
	if req.TransactionalID != "" {
		if err := p.BeginTxn(); err != nil {
			return driver.ProduceResult{}, kafkaErr(err)
		}
	}

	msgs := make([]*sarama.ProducerMessage, len(req.Records))
	index := map[*sarama.ProducerMessage]int{}
	for i, r := range req.Records {
		m := &sarama.ProducerMessage{Topic: req.Topic, Partition: r.Partition, Key: bytesEncoder(r.Key), Value: bytesEncoder(r.Value)}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
		}
		if r.TimestampMs != 0 {
			m.Timestamp = time.UnixMilli(r.TimestampMs)
		}
		msgs[i] = m
		index[m] = i
	}
	res := driver.ProduceResult{Deliveries: make([]driver.Delivery, len(msgs))}
	sendErr := p.SendMessages(msgs)
	failed := map[int]error{}
	var perrs sarama.ProducerErrors
	if errors.As(sendErr, &perrs) {
		for _, pe := range perrs {
			if i, ok := index[pe.Msg]; ok {
				failed[i] = pe.Err
			}
		}
	} else if sendErr != nil {
		return driver.ProduceResult{}, kafkaErr(sendErr)
	}
	for i, m := range msgs {
		dl := driver.Delivery{Partition: m.Partition, Offset: m.Offset}
		if err, bad := failed[i]; bad {
			dl.Offset = -1
			dl.Error = toErr(kafkaErr(err))
		} else if req.Acks == 0 {
			dl.Offset = -1
		}
		res.Deliveries[i] = dl
	}
	if req.TransactionalID != "" {
		if len(failed) > 0 || req.TxnAbort {
			err = p.AbortTxn()
		} else {
			err = p.CommitTxn()
		}
		if err != nil {
			return res, kafkaErr(err)
		}
	}
	return res, nil
}

func toErr(err error) *driver.Error {
	var de *driver.Error
	if errors.As(err, &de) {
		return de
	}
	return &driver.Error{Code: "CLIENT_ERROR", Message: err.Error()}
}

func (d *drv) Consume(ctx context.Context, req driver.Consume) (driver.ConsumeResult, error) {
	cfg := baseConfig()
	cfg.ClientID = "matrix-sarama-consumer"
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	if req.Isolation == "read_committed" {
		cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	}
	cfg.RackID = req.Rack
	if err := secure(cfg, d.sec); err != nil {
		return driver.ConsumeResult{}, err
	}
	c, err := sarama.NewConsumer(d.addrs, cfg)
	if err != nil {
		return driver.ConsumeResult{}, kafkaErr(err)
	}
	defer c.Close()
	from := req.From
	switch from {
	case -2:
		from = sarama.OffsetOldest
	case -1:
		from = sarama.OffsetNewest
	}
	pc, err := c.ConsumePartition(req.Topic, req.Partition, from)
	if errors.Is(err, sarama.ErrOffsetOutOfRange) {
		// sarama's partition consumer has no auto.offset.reset; it
		// reports the range error at start, so the driver applies the
		// requested reset policy as a sarama user would.
		switch req.Reset {
		case "earliest":
			pc, err = c.ConsumePartition(req.Topic, req.Partition, sarama.OffsetOldest)
		case "latest":
			pc, err = c.ConsumePartition(req.Topic, req.Partition, sarama.OffsetNewest)
		}
	}
	res := driver.ConsumeResult{HighWatermark: -1, Records: []driver.Record{}}
	if err != nil {
		ke := kafkaErr(err)
		var de *driver.Error
		if errors.As(ke, &de) {
			res.Error = de
			return res, nil
		}
		return res, ke
	}
	defer pc.Close()
	timer := time.NewTimer(time.Duration(req.TimeoutMs) * time.Millisecond)
	defer timer.Stop()
	for len(res.Records) < req.Count {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-timer.C:
			res.HighWatermark = pc.HighWaterMarkOffset()
			return res, nil
		case cerr := <-pc.Errors():
			res.Error = toErr(kafkaErr(cerr.Err))
			return res, nil
		case m := <-pc.Messages():
			r := driver.Record{Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value, TimestampMs: m.Timestamp.UnixMilli()}
			for _, h := range m.Headers {
				r.Headers = append(r.Headers, driver.Header{Key: string(h.Key), Value: h.Value})
			}
			res.Records = append(res.Records, r)
		}
	}
	res.HighWatermark = pc.HighWaterMarkOffset()
	return res, nil
}

func (d *drv) ListOffsets(ctx context.Context, req driver.ListOffsets) (driver.ListOffsetsResult, error) {
	var ts int64
	switch req.Kind {
	case "earliest":
		ts = sarama.OffsetOldest
	case "latest":
		ts = sarama.OffsetNewest
	case "timestamp":
		ts = req.TimestampMs
	case "max_timestamp":
		return driver.ListOffsetsResult{}, driver.Unsupported("sarama sends ListOffsets up to v6 (NewOffsetRequest) and has no max-timestamp spec; KIP-734 needs v7")
	default:
		return driver.ListOffsetsResult{}, fmt.Errorf("sarama: unknown list offsets kind %q", req.Kind)
	}
	off, err := d.client.GetOffset(req.Topic, req.Partition, ts)
	if err != nil {
		return driver.ListOffsetsResult{}, kafkaErr(err)
	}
	return driver.ListOffsetsResult{Offset: off}, nil
}

func (d *drv) DeleteRecords(ctx context.Context, req driver.DeleteRecords) (int64, error) {
	if err := d.admin.DeleteRecords(req.Topic, map[int32]int64{req.Partition: req.Before}); err != nil {
		return 0, kafkaErr(err)
	}
	// sarama's DeleteRecords does not return the low watermark; ask for it.
	off, err := d.client.GetOffset(req.Topic, req.Partition, sarama.OffsetOldest)
	if err != nil {
		return 0, kafkaErr(err)
	}
	return off, nil
}

// Package confluent is the matrix driver for
// github.com/confluentinc/confluent-kafka-go/v2 (librdkafka, bundled and
// linked with cgo), registered as client "confluent-kafka-go".
//
// It keeps librdkafka's defaults except where a default would only make the
// matrix slow: message.timeout.ms and topic.metadata.propagation.max.ms are
// lowered so that an unknown topic fails in seconds instead of minutes.
package confluent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// Client is the client id this driver registers.
const Client = "confluent-kafka-go"

func init() { driver.Register(Client, Open) }

type drv struct {
	bootstrap string
	admin     *kafka.AdminClient
	// producers are the transactional producers of producer_open.
	producers map[string]*txnProducer
	// abandoned are the group members of crash commands, kept open until
	// the process is killed (or, in process, until Close).
	abandoned []*kafka.Consumer
	// sec is the security the driver was opened with
	// (driver.WithSecurity).
	sec driver.Security
}

// Open connects a confluent-kafka-go driver to bootstrap.
func Open(ctx context.Context, bootstrap string) (driver.Driver, error) {
	sec := driver.SecurityFrom(ctx)
	if sec.Protocol != "" {
		if err := checkAuthentication(ctx, secure(kafka.ConfigMap{"bootstrap.servers": bootstrap, "client.id": "matrix-confluent-probe"}, sec)); err != nil {
			return nil, fmt.Errorf("confluent-kafka-go: %w", err)
		}
	}
	a, err := kafka.NewAdminClient(ptr(secure(kafka.ConfigMap{"bootstrap.servers": bootstrap, "client.id": "matrix-confluent"}, sec)))
	if err != nil {
		return nil, fmt.Errorf("confluent-kafka-go: %w", err)
	}
	return &drv{bootstrap: bootstrap, admin: a, producers: map[string]*txnProducer{}, sec: sec}, nil
}

func (d *drv) Client() string { return Client }

func (d *drv) Info() driver.Info {
	_, lib := kafka.LibraryVersion()
	return driver.Info{Library: "github.com/confluentinc/confluent-kafka-go/v2 " +
		driver.ModuleVersion("github.com/confluentinc/confluent-kafka-go/v2") + " (librdkafka " + lib + ")",
		Partitioner: "consistent_random (librdkafka: crc32 of the key)"}
}

func (d *drv) Close() error {
	var errs []error
	for _, p := range d.producers {
		p.p.Close()
	}
	for _, c := range d.abandoned {
		errs = append(errs, c.Close())
	}
	d.admin.Close()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("confluent-kafka-go: close: %w", err)
	}
	return nil
}

// errName maps a librdkafka error code to Kafka's error name. Broker
// errors (code >= 0) share Kafka's numbering; local errors (< 0) get a
// CLIENT_ name.
func errName(e kafka.Error) string {
	c := e.Code()
	if c >= 0 {
		return driver.CodeName(int16(c))
	}
	switch c {
	case kafka.ErrUnknownTopic:
		return "CLIENT_UNKNOWN_TOPIC"
	case kafka.ErrMsgTimedOut, kafka.ErrTimedOut:
		return "CLIENT_TIMEOUT"
	case kafka.ErrUnknownPartition:
		return "CLIENT_UNKNOWN_PARTITION"
	case kafka.ErrFenced:
		// librdkafka's fatal error for a producer whose epoch was bumped
		// by a newer instance (PRODUCER_FENCED or INVALID_PRODUCER_EPOCH
		// from the broker), as Java's ProducerFencedException.
		return "PRODUCER_FENCED"
	case kafka.ErrAutoOffsetReset:
		// auto.offset.reset=error: the broker answered OFFSET_OUT_OF_RANGE
		// and librdkafka was told not to reset.
		if strings.Contains(strings.ToLower(e.String()), "out of range") {
			return "OFFSET_OUT_OF_RANGE"
		}
		return "CLIENT_AUTO_OFFSET_RESET"
	}
	return fmt.Sprintf("CLIENT_ERROR_%d", int(c))
}

func kafkaErr(err error) error {
	if err == nil {
		return nil
	}
	var ke kafka.Error
	if errors.As(err, &ke) {
		if ke.Code() == kafka.ErrNoError {
			return nil
		}
		return &driver.Error{Code: errName(ke), Message: ke.String()}
	}
	return err
}

func toErr(err error) *driver.Error {
	var de *driver.Error
	if errors.As(kafkaErr(err), &de) {
		return de
	}
	return &driver.Error{Code: "CLIENT_ERROR", Message: err.Error()}
}

func (d *drv) CreateTopic(ctx context.Context, req driver.CreateTopic) error {
	rs, err := d.admin.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: req.Topic, NumPartitions: int(req.Partitions),
		ReplicationFactor: int(req.ReplicationFactor), Config: req.Configs}})
	if err != nil {
		return kafkaErr(err)
	}
	for _, r := range rs {
		if err := kafkaErr(r.Error); err != nil {
			return err
		}
	}
	return nil
}

func (d *drv) DeleteTopic(ctx context.Context, topic string) error {
	rs, err := d.admin.DeleteTopics(ctx, []string{topic})
	if err != nil {
		return kafkaErr(err)
	}
	for _, r := range rs {
		if err := kafkaErr(r.Error); err != nil {
			return err
		}
	}
	return nil
}

func (d *drv) DescribeTopic(ctx context.Context, topic string) (driver.TopicInfo, error) {
	res, err := d.admin.DescribeTopics(ctx, kafka.NewTopicCollectionOfTopicNames([]string{topic}))
	if err != nil {
		return driver.TopicInfo{}, kafkaErr(err)
	}
	for _, t := range res.TopicDescriptions {
		if t.Name != topic {
			continue
		}
		if err := kafkaErr(t.Error); err != nil {
			return driver.TopicInfo{}, err
		}
		return driver.TopicInfo{Topic: topic, Partitions: int32(len(t.Partitions))}, nil
	}
	return driver.TopicInfo{}, &driver.Error{Code: "UNKNOWN_TOPIC_OR_PARTITION", Message: "topic absent from DescribeTopics result"}
}

func (d *drv) CreatePartitions(ctx context.Context, topic string, total int32) error {
	rs, err := d.admin.CreatePartitions(ctx, []kafka.PartitionsSpecification{{Topic: topic, IncreaseTo: int(total)}})
	if err != nil {
		return kafkaErr(err)
	}
	for _, r := range rs {
		if err := kafkaErr(r.Error); err != nil {
			return err
		}
	}
	return nil
}

func (d *drv) DescribeConfigs(ctx context.Context, topic string) (map[string]string, error) {
	rs, err := d.admin.DescribeConfigs(ctx, []kafka.ConfigResource{{Type: kafka.ResourceTopic, Name: topic}})
	if err != nil {
		return nil, kafkaErr(err)
	}
	out := map[string]string{}
	for _, r := range rs {
		if err := kafkaErr(r.Error); err != nil {
			return nil, err
		}
		for k, e := range r.Config {
			out[k] = e.Value
		}
	}
	return out, nil
}

func (d *drv) AlterConfigs(ctx context.Context, req driver.AlterConfigs) error {
	res := kafka.ConfigResource{Type: kafka.ResourceTopic, Name: req.Topic}
	for k, v := range req.Set {
		res.Config = append(res.Config, kafka.ConfigEntry{Name: k, Value: v, IncrementalOperation: kafka.AlterConfigOpTypeSet})
	}
	for _, k := range req.Delete {
		res.Config = append(res.Config, kafka.ConfigEntry{Name: k, IncrementalOperation: kafka.AlterConfigOpTypeDelete})
	}
	rs, err := d.admin.IncrementalAlterConfigs(ctx, []kafka.ConfigResource{res})
	if err != nil {
		return kafkaErr(err)
	}
	for _, r := range rs {
		if err := kafkaErr(r.Error); err != nil {
			return err
		}
	}
	return nil
}

func (d *drv) Produce(ctx context.Context, req driver.Produce) (driver.ProduceResult, error) {
	codec := req.Codec
	if codec == "" {
		codec = "none"
	}
	cfg := kafka.ConfigMap{
		"bootstrap.servers":                 d.bootstrap,
		"client.id":                         "matrix-confluent-producer",
		"acks":                              req.Acks,
		"enable.idempotence":                req.Idempotent,
		"compression.type":                  codec,
		"message.timeout.ms":                15000,
		"topic.metadata.propagation.max.ms": 2000,
		"message.max.bytes":                 16 << 20, // Leave the size limit to the broker.
		"go.delivery.report.fields":         "key,value,headers",
		"allow.auto.create.topics":          req.AutoCreate,
	}
	secure(cfg, d.sec)
	if req.MaxInFlight > 0 {
		cfg["max.in.flight.requests.per.connection"] = req.MaxInFlight
	}
	if req.LingerMs > 0 {
		cfg["linger.ms"] = req.LingerMs
	}
	if req.TransactionalID != "" {
		cfg["transactional.id"] = req.TransactionalID
	}
	p, err := kafka.NewProducer(&cfg)
	if err != nil {
		return driver.ProduceResult{}, fmt.Errorf("confluent-kafka-go: %w", err)
	}
	defer p.Close()
	if req.TransactionalID != "" {
		if err := p.InitTransactions(ctx); err != nil {
			return driver.ProduceResult{}, kafkaErr(err)
		}
		if err := p.BeginTransaction(); err != nil {
			return driver.ProduceResult{}, kafkaErr(err)
		}
	}

	res := driver.ProduceResult{Deliveries: make([]driver.Delivery, len(req.Records))}
	reports := make(chan kafka.Event, len(req.Records))
	topic := req.Topic
	sent := 0
	for i, r := range req.Records {
		part := r.Partition
		if part < 0 {
			part = kafka.PartitionAny
		}
		m := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: part},
			Key: r.Key, Value: r.Value, Opaque: i}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, kafka.Header{Key: h.Key, Value: h.Value})
		}
		if r.TimestampMs != 0 {
			m.Timestamp = time.UnixMilli(r.TimestampMs)
		}
		if err := p.Produce(m, reports); err != nil {
			res.Deliveries[i] = driver.Delivery{Partition: r.Partition, Offset: -1, Error: toErr(err)}
			continue
		}
		sent++
	}
	for got := 0; got < sent; got++ {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case ev := <-reports:
			m, ok := ev.(*kafka.Message)
			if !ok {
				return res, fmt.Errorf("confluent-kafka-go: unexpected delivery event %v", ev)
			}
			i, ok := m.Opaque.(int)
			if !ok || i < 0 || i >= len(res.Deliveries) {
				return res, errors.New("confluent-kafka-go: delivery report for an unknown message")
			}
			dl := driver.Delivery{Partition: m.TopicPartition.Partition, Offset: int64(m.TopicPartition.Offset)}
			if m.TopicPartition.Error != nil {
				dl.Offset, dl.Error = -1, toErr(purgedCause(p, m.TopicPartition.Error))
			} else if req.Acks == 0 || dl.Offset < 0 {
				dl.Offset = -1
			}
			res.Deliveries[i] = dl
		}
	}
	if req.TransactionalID != "" {
		failed := req.TxnAbort
		for _, dl := range res.Deliveries {
			failed = failed || dl.Error != nil
		}
		if failed {
			err = p.AbortTransaction(ctx)
		} else {
			err = p.CommitTransaction(ctx)
		}
		if err != nil {
			return res, kafkaErr(err)
		}
	}
	return res, nil
}

func (d *drv) Consume(ctx context.Context, req driver.Consume) (driver.ConsumeResult, error) {
	reset := req.Reset
	if reset == "" || reset == "none" {
		reset = "error" // librdkafka's name for "no reset: report it".
	}
	isolation := req.Isolation
	if isolation == "" {
		isolation = "read_uncommitted"
	}
	c, err := kafka.NewConsumer(ptr(secure(kafka.ConfigMap{
		"bootstrap.servers":  d.bootstrap,
		"client.id":          "matrix-confluent-consumer",
		"group.id":           "matrix-confluent-unused", // Required by the binding; no subscribe, no commits.
		"enable.auto.commit": false,
		"auto.offset.reset":  reset,
		"isolation.level":    isolation,
		"client.rack":        req.Rack,
		"fetch.wait.max.ms":  200,
	}, d.sec)))
	if err != nil {
		return driver.ConsumeResult{}, fmt.Errorf("confluent-kafka-go: %w", err)
	}
	defer c.Close()
	topic := req.Topic
	from := kafka.Offset(req.From)
	switch req.From {
	case -2:
		from = kafka.OffsetBeginning
	case -1:
		from = kafka.OffsetEnd
	}
	if err := c.Assign([]kafka.TopicPartition{{Topic: &topic, Partition: req.Partition, Offset: from}}); err != nil {
		return driver.ConsumeResult{}, kafkaErr(err)
	}
	res := driver.ConsumeResult{HighWatermark: -1, Records: []driver.Record{}}
	deadline := time.Now().Add(time.Duration(req.TimeoutMs) * time.Millisecond)
	for len(res.Records) < req.Count {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		if left > 100*time.Millisecond {
			left = 100 * time.Millisecond
		}
		switch ev := c.Poll(int(left.Milliseconds()) + 1).(type) {
		case nil:
		case *kafka.Message:
			if ev.TopicPartition.Error != nil {
				res.Error = toErr(ev.TopicPartition.Error)
				return res, nil
			}
			r := driver.Record{Partition: ev.TopicPartition.Partition, Offset: int64(ev.TopicPartition.Offset),
				Key: ev.Key, Value: ev.Value, TimestampMs: ev.Timestamp.UnixMilli()}
			for _, h := range ev.Headers {
				r.Headers = append(r.Headers, driver.Header{Key: h.Key, Value: h.Value})
			}
			res.Records = append(res.Records, r)
		case kafka.Error:
			if ev.IsFatal() || ev.Code() == kafka.ErrAutoOffsetReset || ev.Code() > 0 {
				res.Error = toErr(ev)
				return res, nil
			}
			// Other local errors (e.g. a transient disconnect) are
			// informational; librdkafka retries by itself.
		}
	}
	if _, high, err := c.GetWatermarkOffsets(topic, req.Partition); err == nil {
		res.HighWatermark = high
	}
	return res, nil
}

func (d *drv) ListOffsets(ctx context.Context, req driver.ListOffsets) (driver.ListOffsetsResult, error) {
	var spec kafka.OffsetSpec
	switch req.Kind {
	case "earliest":
		spec = kafka.EarliestOffsetSpec
	case "latest":
		spec = kafka.LatestOffsetSpec
	case "timestamp":
		spec = kafka.NewOffsetSpecForTimestamp(req.TimestampMs)
	case "max_timestamp":
		spec = kafka.MaxTimestampOffsetSpec
	default:
		return driver.ListOffsetsResult{}, fmt.Errorf("confluent-kafka-go: unknown list offsets kind %q", req.Kind)
	}
	topic := req.Topic
	rs, err := d.admin.ListOffsets(ctx, map[kafka.TopicPartition]kafka.OffsetSpec{{Topic: &topic, Partition: req.Partition}: spec})
	if err != nil {
		return driver.ListOffsetsResult{}, kafkaErr(err)
	}
	for tp, info := range rs.ResultInfos {
		if tp.Topic == nil || *tp.Topic != topic || tp.Partition != req.Partition {
			continue
		}
		if err := kafkaErr(info.Error); err != nil {
			return driver.ListOffsetsResult{}, err
		}
		return driver.ListOffsetsResult{Offset: int64(info.Offset)}, nil
	}
	return driver.ListOffsetsResult{}, errors.New("confluent-kafka-go: ListOffsets result lacks the partition")
}

func (d *drv) DeleteRecords(ctx context.Context, req driver.DeleteRecords) (int64, error) {
	topic := req.Topic
	rs, err := d.admin.DeleteRecords(ctx, []kafka.TopicPartition{{Topic: &topic, Partition: req.Partition, Offset: kafka.Offset(req.Before)}})
	if err != nil {
		return 0, kafkaErr(err)
	}
	for _, r := range rs.DeleteRecordsResults {
		if err := kafkaErr(r.TopicPartition.Error); err != nil {
			return 0, err
		}
		if r.DeletedRecords == nil {
			return 0, errors.New("confluent-kafka-go: DeleteRecords result without a low watermark")
		}
		return int64(r.DeletedRecords.LowWatermark), nil
	}
	return 0, errors.New("confluent-kafka-go: empty DeleteRecords result")
}

// purgedCause returns the fatal producer error behind a delivery that
// librdkafka failed because of it (an idempotent producer whose
// InitProducerId was refused with CLUSTER_AUTHORIZATION_FAILED has its
// queue purged), as librdkafka documents: the purge is the consequence,
// rd_kafka_fatal_error the cause an application acts on.
func purgedCause(p *kafka.Producer, err error) error {
	var ke kafka.Error
	if !errors.As(err, &ke) {
		return err
	}
	switch ke.Code() {
	case kafka.ErrPurgeQueue, kafka.ErrPurgeInflight, kafka.ErrFatal:
		if fatal := p.GetFatalError(); fatal != nil {
			return fatal
		}
	}
	return err
}

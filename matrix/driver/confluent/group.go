package confluent

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// librdkafka's names for the classic assignors
// (partition.assignment.strategy).
var assignors = map[string]string{
	"range":              "range",
	"roundrobin":         "roundrobin",
	"cooperative-sticky": "cooperative-sticky",
}

func (d *drv) GroupConsume(ctx context.Context, req driver.GroupConsume) (driver.GroupConsumeResult, error) {
	if err := driver.CheckTopicRegex(req); err != nil {
		return driver.GroupConsumeResult{}, err
	}
	cfg := kafka.ConfigMap{
		"bootstrap.servers":  d.bootstrap,
		"client.id":          "matrix-confluent-group",
		"group.id":           req.Group,
		"enable.auto.commit": req.AutoCommitIntervalMs > 0,
		"auto.offset.reset":  "earliest",
		"fetch.wait.max.ms":  200,
	}
	switch req.Protocol {
	case "", "classic":
		if req.Assignor != "" {
			a, ok := assignors[req.Assignor]
			if !ok {
				return driver.GroupConsumeResult{}, driver.Unsupported("librdkafka has no assignor %q", req.Assignor)
			}
			cfg["partition.assignment.strategy"] = a
		}
	case "consumer":
		cfg["group.protocol"] = "consumer" // KIP-848, librdkafka 2.4+.
	default:
		return driver.GroupConsumeResult{}, fmt.Errorf("confluent-kafka-go: unknown group protocol %q", req.Protocol)
	}
	secure(cfg, d.sec)
	if req.AutoCommitIntervalMs > 0 {
		// librdkafka auto-commits stored offsets; an offset is stored as
		// Poll returns its message (enable.auto.offset.store=true).
		cfg["auto.commit.interval.ms"] = req.AutoCommitIntervalMs
	}
	if req.InstanceID != "" {
		cfg["group.instance.id"] = req.InstanceID
	}
	if req.SessionTimeoutMs > 0 {
		cfg["session.timeout.ms"] = req.SessionTimeoutMs
		cfg["heartbeat.interval.ms"] = max(req.SessionTimeoutMs/4, 1)
	}
	c, err := kafka.NewConsumer(&cfg)
	if err != nil {
		return driver.GroupConsumeResult{}, fmt.Errorf("confluent-kafka-go: %w", err)
	}
	closed := false
	defer func() {
		if !closed {
			c.Close()
		}
	}()
	topic := req.Topic
	if req.TopicRegex != "" {
		topic = "^" + req.TopicRegex // librdkafka's mark of a regex subscription
	}
	if err := c.Subscribe(topic, nil); err != nil {
		return driver.GroupConsumeResult{}, kafkaErr(err)
	}
	res := driver.GroupConsumeResult{Records: []driver.Record{}}
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
		case *kafka.Message:
			if ev.TopicPartition.Error != nil {
				return res, kafkaErr(ev.TopicPartition.Error)
			}
			r := driver.Record{Partition: ev.TopicPartition.Partition, Offset: int64(ev.TopicPartition.Offset),
				Key: ev.Key, Value: ev.Value, TimestampMs: ev.Timestamp.UnixMilli()}
			for _, h := range ev.Headers {
				r.Headers = append(r.Headers, driver.Header{Key: h.Key, Value: h.Value})
			}
			res.Records = append(res.Records, r)
		case kafka.Error:
			if ev.IsFatal() || ev.Code() > 0 {
				return res, kafkaErr(ev)
			}
		}
	}
	if req.Commit && len(res.Records) > 0 {
		next := driver.NextOffsets(res.Records)
		topic := req.Topic
		tps := make([]kafka.TopicPartition, len(next))
		for i, po := range next {
			tps[i] = kafka.TopicPartition{Topic: &topic, Partition: po.Partition, Offset: kafka.Offset(po.Offset)}
		}
		done, err := c.CommitOffsets(tps)
		if err != nil {
			return res, kafkaErr(err)
		}
		for _, tp := range done {
			if tp.Error != nil {
				return res, kafkaErr(tp.Error)
			}
		}
		res.Committed = next
	}
	closed = true
	if req.Crash {
		// No Close, hence no LeaveGroup: the process is killed next.
		d.abandoned = append(d.abandoned, c)
		return res, nil
	}
	if err := c.Close(); err != nil { // Leaves the group, except for a static member.
		return res, kafkaErr(err)
	}
	return res, nil
}

func (d *drv) FetchCommitted(ctx context.Context, req driver.FetchCommitted) (int64, error) {
	topic := req.Topic
	rs, err := d.admin.ListConsumerGroupOffsets(ctx, []kafka.ConsumerGroupTopicPartitions{{Group: req.Group,
		Partitions: []kafka.TopicPartition{{Topic: &topic, Partition: req.Partition}}}})
	if err != nil {
		return 0, kafkaErr(err)
	}
	for _, g := range rs.ConsumerGroupsTopicPartitions {
		for _, tp := range g.Partitions {
			if tp.Error != nil {
				return 0, kafkaErr(tp.Error)
			}
			if tp.Offset < 0 {
				return -1, nil // kafka.OffsetInvalid: nothing committed.
			}
			return int64(tp.Offset), nil
		}
	}
	return 0, errors.New("confluent-kafka-go: ListConsumerGroupOffsets result lacks the partition")
}

func (d *drv) DeleteGroup(ctx context.Context, group string) error {
	rs, err := d.admin.DeleteConsumerGroups(ctx, []string{group})
	if err != nil {
		return kafkaErr(err)
	}
	for _, r := range rs.ConsumerGroupResults {
		if err := kafkaErr(r.Error); err != nil {
			return err
		}
	}
	return nil
}

func (d *drv) DescribeGroup(ctx context.Context, group string) (driver.GroupDescription, error) {
	rs, err := d.admin.DescribeConsumerGroups(ctx, []string{group})
	if err != nil {
		return driver.GroupDescription{}, kafkaErr(err)
	}
	for _, g := range rs.ConsumerGroupDescriptions {
		if g.GroupID != group {
			continue
		}
		if g.Error.Code() != kafka.ErrNoError {
			return driver.GroupDescription{}, kafkaErr(g.Error)
		}
		// librdkafka names the states as Kafka does
		// (rd_kafka_consumer_group_state_name).
		res := driver.GroupDescription{Group: group, State: g.State.String(), Members: []driver.GroupMemberDetail{}}
		for _, m := range g.Members {
			md := driver.GroupMemberDetail{MemberID: m.ConsumerID, ClientID: m.ClientID, Assignment: []driver.TopicPartition{}}
			for _, tp := range m.Assignment.TopicPartitions {
				if tp.Topic != nil {
					md.Assignment = append(md.Assignment, driver.TopicPartition{Topic: *tp.Topic, Partition: tp.Partition})
				}
			}
			res.Members = append(res.Members, md)
		}
		return res, nil
	}
	return driver.GroupDescription{}, fmt.Errorf("confluent-kafka-go: DescribeConsumerGroups answered without group %s", group)
}

func (d *drv) ListGroups(ctx context.Context) ([]string, error) {
	rs, err := d.admin.ListConsumerGroups(ctx)
	if err != nil {
		return nil, kafkaErr(err)
	}
	if len(rs.Errors) > 0 {
		return nil, kafkaErr(rs.Errors[0])
	}
	out := make([]string, 0, len(rs.Valid))
	for _, g := range rs.Valid {
		out = append(out, g.GroupID)
	}
	sort.Strings(out)
	return out, nil
}

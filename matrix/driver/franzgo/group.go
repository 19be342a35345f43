package franzgo

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

func balancer(name string) (kgo.GroupBalancer, error) {
	switch name {
	case "range":
		return kgo.RangeBalancer(), nil
	case "roundrobin":
		return kgo.RoundRobinBalancer(), nil
	case "sticky":
		return kgo.StickyBalancer(), nil
	case "cooperative-sticky":
		return kgo.CooperativeStickyBalancer(), nil
	}
	return nil, driver.Unsupported("franz-go has no assignor %q", name)
}

func (d *drv) GroupConsume(ctx context.Context, req driver.GroupConsume) (driver.GroupConsumeResult, error) {
	if err := driver.CheckTopicRegex(req); err != nil {
		return driver.GroupConsumeResult{}, err
	}
	subscribe := []kgo.Opt{kgo.ConsumeTopics(req.Topic)}
	if req.TopicRegex != "" {
		// franz-go sends its regexes to a KIP-848 broker as
		// SubscribedTopicRegex, wrapped to match anywhere in a name:
		// anchor this one so that the broker's full match is the same.
		subscribe = []kgo.Opt{kgo.ConsumeTopics("^(?:" + req.TopicRegex + ")$"), kgo.ConsumeRegex()}
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(d.seeds...), kgo.ClientID("matrix-franz-go-group"), kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.ConsumerGroup(req.Group), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond)},
		subscribe...)
	switch req.Protocol {
	case "", "classic":
		if req.Assignor != "" {
			b, err := balancer(req.Assignor)
			if err != nil {
				return driver.GroupConsumeResult{}, err
			}
			opts = append(opts, kgo.Balancers(b))
		}
	case "consumer":
		// KIP-848: the broker assigns; franz-go takes the server-side
		// path only with the range or sticky balancer configured.
		opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()))
	default:
		return driver.GroupConsumeResult{}, fmt.Errorf("franz-go: unknown group protocol %q", req.Protocol)
	}
	if req.AutoCommitIntervalMs > 0 {
		// kgo autocommits the offsets of records already polled.
		opts = append(opts, kgo.AutoCommitInterval(time.Duration(req.AutoCommitIntervalMs)*time.Millisecond))
	} else {
		opts = append(opts, kgo.DisableAutoCommit())
	}
	if req.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(req.InstanceID))
	}
	if req.SessionTimeoutMs > 0 {
		st := time.Duration(req.SessionTimeoutMs) * time.Millisecond
		opts = append(opts, kgo.SessionTimeout(st), kgo.HeartbeatInterval(st/4))
	}
	opts = append(opts, d.sec...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return driver.GroupConsumeResult{}, fmt.Errorf("franz-go: %w", err)
	}
	defer func() {
		if req.Crash {
			d.abandoned = append(d.abandoned, cl) // Killed with the process.
			return
		}
		cl.Close() // Leaves the group, except for a static member.
	}()

	res := driver.GroupConsumeResult{Records: []driver.Record{}}
	var got []*kgo.Record
	cctx, cancel := context.WithTimeout(ctx, time.Duration(req.TimeoutMs)*time.Millisecond)
	defer cancel()
	for len(got) < req.Count {
		fs := cl.PollRecords(cctx, req.Count-len(got))
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
			return res, kafkaErr(ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got = append(got, r)
			dr := driver.Record{Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, TimestampMs: r.Timestamp.UnixMilli()}
			for _, h := range r.Headers {
				dr.Headers = append(dr.Headers, driver.Header{Key: h.Key, Value: h.Value})
			}
			res.Records = append(res.Records, dr)
		})
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if req.Commit && len(got) > 0 {
		if err := cl.CommitRecords(ctx, got...); err != nil {
			return res, kafkaErr(err)
		}
		res.Committed = driver.NextOffsets(res.Records)
	}
	return res, nil
}

func (d *drv) FetchCommitted(ctx context.Context, req driver.FetchCommitted) (int64, error) {
	rs, err := d.adm.FetchOffsets(ctx, req.Group)
	if err != nil {
		return 0, kafkaErr(err)
	}
	if err := rs.Error(); err != nil {
		return 0, kafkaErr(err)
	}
	o, ok := rs.Lookup(req.Topic, req.Partition)
	if !ok {
		return -1, nil
	}
	if o.Err != nil {
		return 0, kafkaErr(o.Err)
	}
	return o.At, nil
}

func (d *drv) DeleteGroup(ctx context.Context, group string) error {
	r, err := d.adm.DeleteGroup(ctx, group)
	if err != nil {
		return kafkaErr(err)
	}
	if r.Err != nil {
		return kafkaErr(r.Err)
	}
	return nil
}

func (d *drv) DescribeGroup(ctx context.Context, group string) (driver.GroupDescription, error) {
	ds, err := d.adm.DescribeGroups(ctx, group)
	if err != nil {
		return driver.GroupDescription{}, kafkaErr(err)
	}
	g, ok := ds[group]
	if !ok {
		return driver.GroupDescription{}, fmt.Errorf("franz-go: DescribeGroups answered without group %s", group)
	}
	if g.Err != nil {
		return driver.GroupDescription{}, kafkaErr(g.Err)
	}
	res := driver.GroupDescription{Group: group, State: g.State, Members: []driver.GroupMemberDetail{}}
	for _, m := range g.Members {
		md := driver.GroupMemberDetail{MemberID: m.MemberID, ClientID: m.ClientID, Assignment: []driver.TopicPartition{}}
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				for _, p := range t.Partitions {
					md.Assignment = append(md.Assignment, driver.TopicPartition{Topic: t.Topic, Partition: p})
				}
			}
		}
		res.Members = append(res.Members, md)
	}
	return res, nil
}

func (d *drv) ListGroups(ctx context.Context) ([]string, error) {
	ls, err := d.adm.ListGroups(ctx)
	if err != nil {
		return nil, kafkaErr(err)
	}
	return ls.Groups(), nil
}

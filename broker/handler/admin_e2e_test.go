package handler_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

// These tests drive the admin APIs end to end through franz-go's kadm
// against a real broker.

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func topicConfig(t *testing.T, adm *kadm.Client, topic, key string) kadm.Config {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(ctxT(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc.Configs {
		if c.Key == key {
			return c
		}
	}
	t.Fatalf("%s has no config %s", topic, key)
	return kadm.Config{}
}

func TestAdminTopicsE2E(t *testing.T) {
	b := brokertest.Start(t)
	adm := b.Admin(t)
	ctx := ctxT(t)

	res, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": kadm.StringPtr("60000")}, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if res.ID == (kadm.TopicID{}) || res.NumPartitions != 2 || res.ReplicationFactor != 1 {
		t.Fatalf("%+v", res)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders"); !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("existing topic: %v", err)
	}
	_, err = adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": kadm.StringPtr("forever")}, "bad")
	if !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("invalid config: %v", err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "rf3"); !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("rf 3: %v", err)
	}
	vres, err := adm.ValidateCreateTopics(ctx, 4, 1, nil, "dry")
	if err != nil || vres["dry"].Err != nil {
		t.Fatal(err, vres["dry"].Err)
	}

	if _, err := adm.CreatePartitions(ctx, 1, "orders"); err != nil {
		t.Fatal(err)
	}
	td, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(td["orders"].Partitions) != 3 || td.Has("dry") || td.Has("bad") {
		t.Fatalf("%+v", td)
	}
	cpr, err := adm.UpdatePartitions(ctx, 2, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(cpr["orders"].Err, kerr.InvalidPartitions) {
		t.Fatalf("decrease: %+v", cpr["orders"])
	}

	// Configs: described with their source, altered incrementally, and
	// an invalid value refused.
	if c := topicConfig(t, adm, "orders", "retention.ms"); *c.Value != "60000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("%+v", c)
	}
	if c := topicConfig(t, adm, "orders", "segment.bytes"); *c.Value != "1073741824" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("%+v", c)
	}
	ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("120000")},
		{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")},
	}, "orders")
	if err != nil || ar[0].Err != nil {
		t.Fatal(err, ar)
	}
	if c := topicConfig(t, adm, "orders", "retention.ms"); *c.Value != "120000" {
		t.Fatalf("%+v", c)
	}
	if c := topicConfig(t, adm, "orders", "cleanup.policy"); *c.Value != "delete,compact" {
		t.Fatalf("%+v", c)
	}
	ar, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: kadm.StringPtr("-5")}}, "orders")
	if err != nil || !errors.Is(ar[0].Err, kerr.InvalidConfig) {
		t.Fatal(err, ar)
	}
	ar, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "num.partitions", Value: kadm.StringPtr("4")}}, 1)
	if err != nil || !errors.Is(ar[0].Err, kerr.InvalidRequest) {
		t.Fatal(err, ar)
	}
	brcs, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil || len(brcs) != 1 || brcs[0].Err != nil || len(brcs[0].Configs) == 0 {
		t.Fatal(err, brcs)
	}

	// Everything above survives a restart.
	b.Restart(t)
	adm = b.Admin(t)
	td, err = adm.ListTopics(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(td["orders"].Partitions) != 3 || td["orders"].ID != res.ID {
		t.Fatalf("after restart: %+v", td["orders"])
	}
	if c := topicConfig(t, adm, "orders", "retention.ms"); *c.Value != "120000" {
		t.Fatalf("after restart: %+v", c)
	}

	dr, err := adm.DeleteTopics(ctxT(t), "orders", "missing")
	if err != nil {
		t.Fatal(err)
	}
	if dr["orders"].Err != nil || !errors.Is(dr["missing"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("%+v", dr)
	}
	if _, ok := b.Metadata().Image().Topic("orders"); ok {
		t.Fatal("orders still in the metadata image")
	}
	// A fresh client: kgo caches Metadata answers for MetadataMinAge.
	td, err = b.Admin(t).ListTopics(ctxT(t))
	if err != nil || td.Has("orders") {
		t.Fatalf("%v %+v", err, td)
	}
}

func TestDeleteTopicDisabledE2E(t *testing.T) {
	b := brokertest.Start(t, map[string]string{"delete.topic.enable": "false"})
	adm := b.Admin(t)
	if _, err := adm.CreateTopic(ctxT(t), 1, 1, nil, "keep"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.DeleteTopic(ctxT(t), "keep"); !errors.Is(err, kerr.TopicDeletionDisabled) {
		t.Fatalf("%v", err)
	}
}

func TestDeleteRecordsE2E(t *testing.T) {
	b := brokertest.Start(t)
	adm := b.Admin(t)
	ctx := ctxT(t)
	created, err := adm.CreateTopic(ctx, 1, 1, nil, "events")
	if err != nil {
		t.Fatal(err)
	}
	cl := b.Client(t, kgo.DefaultProduceTopic("events"))
	for i := 0; i < 10; i++ {
		if err := cl.ProduceSync(ctx, kgo.StringRecord("v")).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var os kadm.Offsets
	os.AddOffset("events", 0, 6, -1)
	drr, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := drr.Lookup("events", 0); r.Err != nil || r.LowWatermark != 6 {
		t.Fatalf("%+v", r)
	}
	starts, err := adm.ListStartOffsets(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("events", 0); o.Offset != 6 {
		t.Fatalf("start offset %+v", o)
	}
	var above kadm.Offsets
	above.AddOffset("events", 0, 11, -1)
	drr, err = adm.DeleteRecords(ctx, above)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := drr.Lookup("events", 0); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("above the high watermark: %+v", r)
	}

	// Reading below the new start is OFFSET_OUT_OF_RANGE.
	fr := kmsg.NewPtrFetchRequest()
	fr.MaxWaitMillis, fr.MaxBytes, fr.SessionEpoch, fr.ReplicaID = 100, 1<<20, -1, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "events"
	ft.TopicID = created.ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LogStartOffset = 0, 2, 1<<20, -1, -1
	ft.Partitions = append(ft.Partitions, fp)
	fr.Topics = append(fr.Topics, ft)
	fr.SetVersion(12)
	kresp, err := fr.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	p := kresp.Topics[0].Partitions[0]
	if p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch below start: %+v", p)
	}
}

func TestDescribeClusterAndLogDirsE2E(t *testing.T) {
	b := brokertest.Start(t)
	adm := b.Admin(t)
	ctx := ctxT(t)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "sized"); err != nil {
		t.Fatal(err)
	}
	cl := b.Client(t, kgo.DefaultProduceTopic("sized"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	r := kgo.StringRecord("0123456789")
	r.Partition = 1
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatal(err)
	}

	dc := kmsg.NewPtrDescribeClusterRequest()
	dcr, err := dc.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if dcr.ErrorCode != 0 || dcr.ClusterID == "" || len(dcr.Brokers) != 1 || dcr.Brokers[0].NodeID != 1 {
		t.Fatalf("%+v", dcr)
	}

	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var p0, p1 int64 = -1, -1
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == "sized" && p.Partition == 0 {
				p0 = p.Size
			}
			if p.Topic == "sized" && p.Partition == 1 {
				p1 = p.Size
			}
		})
	})
	if p0 != 0 || p1 <= 0 {
		t.Fatalf("sizes %d %d", p0, p1)
	}
}

func TestDescribeProducersE2E(t *testing.T) {
	b := brokertest.Start(t)
	adm := b.Admin(t)
	ctx := ctxT(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "idem"); err != nil {
		t.Fatal(err)
	}
	cl := b.Client(t, kgo.DefaultProduceTopic("idem"))
	for i := 0; i < 3; i++ {
		if err := cl.ProduceSync(ctx, kgo.StringRecord("v")).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	ps, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"idem": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	var found []kadm.DescribedProducer
	ps.EachProducer(func(p kadm.DescribedProducer) { found = append(found, p) })
	if len(found) != 1 || found[0].LastSequence != 2 || found[0].ProducerID < 0 {
		t.Fatalf("%+v", found)
	}
}

package broker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

// fastMeta lets franz-go refresh metadata quickly: auto-creation answers
// LEADER_NOT_AVAILABLE first (as Kafka does), and franz-go's default minimum
// metadata age of 5 s would otherwise dominate the tests' run time.
var fastMeta = kgo.MetadataMinAge(50 * time.Millisecond)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// consume reads n records from topic with a fresh client.
func consume(t *testing.T, b *brokertest.Broker, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := b.Client(t, append([]kgo.Opt{fastMeta, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	ctx := ctxT(t)
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", len(out), n, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", tp, p, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

// testRecords covers keys, null keys, null and empty values, headers (one
// with a null value) and explicit timestamps.
func testRecords(topic string, n int) []*kgo.Record {
	base := time.UnixMilli(1_700_000_000_000)
	var out []*kgo.Record
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: topic, Timestamp: base.Add(time.Duration(i) * time.Millisecond)}
		switch i % 4 {
		case 0:
			r.Key, r.Value = []byte(fmt.Sprintf("k%d", i)), []byte(fmt.Sprintf("v%d-%s", i, strings.Repeat("x", i)))
		case 1:
			r.Key, r.Value = nil, []byte(fmt.Sprintf("v%d", i)) // null key
		case 2:
			r.Key, r.Value = []byte(fmt.Sprintf("k%d", i)), nil // tombstone
		case 3:
			r.Key, r.Value = []byte{}, []byte{}
			r.Headers = []kgo.RecordHeader{{Key: "h1", Value: []byte("one")}, {Key: "h-null", Value: nil}}
		}
		out = append(out, r)
	}
	return out
}

func sameRecord(a, b *kgo.Record) error {
	switch {
	case !bytes.Equal(a.Key, b.Key) || (a.Key == nil) != (b.Key == nil):
		return fmt.Errorf("key %q vs %q", a.Key, b.Key)
	case !bytes.Equal(a.Value, b.Value) || (a.Value == nil) != (b.Value == nil):
		return fmt.Errorf("value %q vs %q", a.Value, b.Value)
	case !a.Timestamp.Equal(b.Timestamp):
		return fmt.Errorf("timestamp %v vs %v", a.Timestamp, b.Timestamp)
	case len(a.Headers) != len(b.Headers):
		return fmt.Errorf("headers %v vs %v", a.Headers, b.Headers)
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !bytes.Equal(a.Headers[i].Value, b.Headers[i].Value) ||
			(a.Headers[i].Value == nil) != (b.Headers[i].Value == nil) {
			return fmt.Errorf("header %d: %v vs %v", i, a.Headers[i], b.Headers[i])
		}
	}
	return nil
}

func TestEveryCodecRoundTrips(t *testing.T) {
	b := brokertest.Start(t)
	for _, tc := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{
		{"none", kgo.NoCompression()},
		{"gzip", kgo.GzipCompression()},
		{"snappy", kgo.SnappyCompression()},
		{"lz4", kgo.Lz4Compression()},
		{"zstd", kgo.ZstdCompression()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "codec-" + tc.name
			cl := b.Client(t, fastMeta, kgo.ProducerBatchCompression(tc.codec), kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(50*time.Millisecond))
			recs := testRecords(topic, 40)
			res := cl.ProduceSync(ctxT(t), recs...)
			if err := res.FirstErr(); err != nil {
				t.Fatal(err)
			}
			got := consume(t, b, topic, len(recs))
			for i := range recs {
				if got[i].Offset != int64(i) {
					t.Fatalf("record %d at offset %d", i, got[i].Offset)
				}
				if err := sameRecord(recs[i], got[i]); err != nil {
					t.Fatalf("record %d: %v", i, err)
				}
			}
		})
	}
}

func TestManyPartitions(t *testing.T) {
	b := brokertest.Start(t, map[string]string{"num.partitions": "24"})
	cl := b.Client(t, fastMeta, kgo.DefaultProduceTopic("wide"), kgo.AllowAutoTopicCreation())
	const n = 480
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(ctxT(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	parts := map[int32]int{}
	for _, r := range recs {
		parts[r.Partition]++
	}
	if len(parts) < 20 {
		t.Fatalf("records landed on %d partitions only", len(parts))
	}
	got := consume(t, b, "wide", n)
	seen := map[string]bool{}
	for _, r := range got {
		if seen[string(r.Value)] {
			t.Fatalf("duplicate %s", r.Value)
		}
		seen[string(r.Value)] = true
	}
}

func TestMessageMaxBytes(t *testing.T) {
	const limit = 20000
	b := brokertest.Start(t, map[string]string{"message.max.bytes": fmt.Sprint(limit)})
	cl := b.Client(t, fastMeta, kgo.DefaultProduceTopic("big"), kgo.AllowAutoTopicCreation(),
		kgo.ProducerBatchMaxBytes(10*limit), kgo.RecordRetries(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx := ctxT(t)
	// Create the topic first: with no retries, the client would give up on
	// the LEADER_NOT_AVAILABLE that auto-creation answers.
	pre := b.Client(t, fastMeta, kgo.DefaultProduceTopic("big"), kgo.AllowAutoTopicCreation())
	if err := pre.ProduceSync(ctx, &kgo.Record{Value: []byte("first")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A batch with one record: 61 bytes of batch header plus the record's
	// own ~10 bytes of framing.
	fits := &kgo.Record{Value: bytes.Repeat([]byte("a"), limit-100)}
	if err := cl.ProduceSync(ctx, fits).FirstErr(); err != nil {
		t.Fatalf("record under message.max.bytes: %v", err)
	}
	tooBig := &kgo.Record{Value: bytes.Repeat([]byte("a"), limit+1)}
	err := cl.ProduceSync(ctx, tooBig).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("record over message.max.bytes: %v, want MESSAGE_TOO_LARGE", err)
	}
	// The broker is fine afterwards.
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("small")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := consume(t, b, "big", 3)
	if len(got[1].Value) != limit-100 || string(got[2].Value) != "small" {
		t.Fatalf("consumed %d and %q", len(got[1].Value), got[2].Value)
	}
}

func TestRestartKeepsData(t *testing.T) {
	b := brokertest.Start(t)
	cl := b.Client(t, fastMeta, kgo.DefaultProduceTopic("durable"), kgo.AllowAutoTopicCreation())
	recs := testRecords("durable", 20)
	if err := cl.ProduceSync(ctxT(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	b.Restart(t)
	got := consume(t, b, "durable", 20)
	for i := range recs {
		if err := sameRecord(recs[i], got[i]); err != nil {
			t.Fatalf("record %d after restart: %v", i, err)
		}
	}
	// New writes continue at the next offset, with a new producer id.
	cl2 := b.Client(t, fastMeta, kgo.DefaultProduceTopic("durable"))
	r := &kgo.Record{Value: []byte("after")}
	if err := cl2.ProduceSync(ctxT(t), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if r.Offset != 20 {
		t.Fatalf("offset after restart %d, want 20", r.Offset)
	}
	if r.ProducerID <= recs[0].ProducerID {
		t.Fatalf("producer id %d reused after restart (first run had %d)", r.ProducerID, recs[0].ProducerID)
	}
}

func TestAutoCreateOff(t *testing.T) {
	b := brokertest.Start(t, map[string]string{"auto.create.topics.enable": "false"})
	cl := b.Client(t, fastMeta, kgo.DefaultProduceTopic("nope"), kgo.RecordDeliveryTimeout(2*time.Second))
	err := cl.ProduceSync(ctxT(t), &kgo.Record{Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("produce to missing topic: %v", err)
	}
}

func TestLongPollWokenByAppend(t *testing.T) {
	b := brokertest.Start(t)
	prod := b.Client(t, fastMeta, kgo.DefaultProduceTopic("poll"), kgo.AllowAutoTopicCreation())
	if err := prod.ProduceSync(ctxT(t), &kgo.Record{Value: []byte("first")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cons := b.Client(t, fastMeta, kgo.ConsumeTopics("poll"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(10*time.Second))
	ctx := ctxT(t)
	if fs := cons.PollFetches(ctx); len(fs.Records()) != 1 {
		t.Fatalf("first poll: %d records", len(fs.Records()))
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		prod.Produce(ctx, &kgo.Record{Value: []byte("second")}, nil)
	}()
	start := time.Now()
	fs := cons.PollFetches(ctx)
	if len(fs.Records()) != 1 || string(fs.Records()[0].Value) != "second" {
		t.Fatalf("second poll: %v", fs.Records())
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("long poll took %v: not woken by the append", el)
	}
}

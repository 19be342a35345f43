package matrix

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cascade-kafka/cascade/matrix/cluster"
	"github.com/cascade-kafka/cascade/matrix/driver"
)

// baseTimestamp is the explicit record timestamp scenarios use: a whole
// second one day before the run started. It is in the past, so that it is
// plainly the client's and not the broker's, and well inside Kafka's
// default retention.ms (7 days), so that a retention check never deletes
// what a scenario wrote before its readers come. BrokerOverrides checks
// retention every 200 ms, so a scenario that wrote records older than
// retention.ms would lose them within its own cell, on every target and
// every run, instead of once in a while when Kafka's five-minute check
// happened to fall between a produce and a read.
var baseTimestamp = time.Now().Add(-24 * time.Hour).Truncate(time.Second).UnixMilli()

// shapes returns the record shapes of scenario 2: keys, null key,
// tombstone, empty value, empty key, headers (empty-valued, repeated key),
// binary bytes, a large value and explicit timestamps. Values carry the tag
// so they are unique per cell. A null header value is left to
// nullHeaderRecord, since one client library cannot send it and would
// otherwise lose every other shape with it.
func shapes(tag string) []driver.Record {
	v := func(s string) []byte { return []byte(tag + "-" + s) }
	return []driver.Record{
		{Partition: 0, Key: []byte("key-1"), Value: v("plain"), TimestampMs: baseTimestamp},
		{Partition: 0, Key: nil, Value: v("null-key"), TimestampMs: baseTimestamp + 1},
		{Partition: 0, Key: []byte("key-tombstone"), Value: nil, TimestampMs: baseTimestamp + 2},
		{Partition: 0, Key: []byte("key-empty-value"), Value: []byte{}, TimestampMs: baseTimestamp + 3},
		{Partition: 0, Key: []byte{}, Value: v("empty-key"), TimestampMs: baseTimestamp + 4},
		{Partition: 0, Key: []byte("key-headers"), Value: v("headers"), TimestampMs: baseTimestamp + 5,
			Headers: []driver.Header{{Key: "h1", Value: []byte("one")},
				{Key: "h-empty", Value: []byte{}}, {Key: "h1", Value: []byte("dup-key")}}},
		{Partition: 0, Key: []byte{0, 1, 2, 0xff}, Value: append(v("binary"), 0, 0xfe, 0xff), TimestampMs: baseTimestamp + 6},
		{Partition: 0, Key: []byte("key-big"), Value: bytes.Repeat(v("big"), 3000), TimestampMs: baseTimestamp + 7},
	}
}

// nullHeaderRecord returns the record of the null-header-value shape: a
// header whose value is null (a varint length of -1 in DefaultRecord)
// between an empty-valued and a non-empty one, so that a reader must keep
// null and empty apart inside one record.
func nullHeaderRecord(tag string, ts int64) driver.Record {
	return driver.Record{Partition: 0, Key: []byte("key-null-header"), Value: []byte(tag + "-null-header"), TimestampMs: ts,
		Headers: []driver.Header{{Key: "h-empty", Value: []byte{}}, {Key: "h-null", Value: nil}, {Key: "h1", Value: []byte("one")}}}
}

// describeBytes renders a key or value for a failure message.
func describeBytes(b []byte) string {
	switch {
	case b == nil:
		return "null"
	case len(b) == 0:
		return "empty"
	case len(b) > 40:
		return fmt.Sprintf("%q...(%d bytes)", b[:40], len(b))
	default:
		return fmt.Sprintf("%q", b)
	}
}

func sameBytes(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

// compareRecord checks a consumed record against what was produced, byte
// for byte, null versus empty included.
func compareRecord(want, got driver.Record) error {
	var diffs []string
	if !sameBytes(want.Key, got.Key) {
		diffs = append(diffs, fmt.Sprintf("key %s, want %s", describeBytes(got.Key), describeBytes(want.Key)))
	}
	if !sameBytes(want.Value, got.Value) {
		diffs = append(diffs, fmt.Sprintf("value %s, want %s", describeBytes(got.Value), describeBytes(want.Value)))
	}
	if want.TimestampMs != 0 && got.TimestampMs != want.TimestampMs {
		diffs = append(diffs, fmt.Sprintf("timestamp %d, want %d", got.TimestampMs, want.TimestampMs))
	}
	if len(want.Headers) != len(got.Headers) {
		diffs = append(diffs, fmt.Sprintf("%d headers, want %d", len(got.Headers), len(want.Headers)))
	} else {
		for i := range want.Headers {
			w, g := want.Headers[i], got.Headers[i]
			if w.Key != g.Key || !sameBytes(w.Value, g.Value) {
				diffs = append(diffs, fmt.Sprintf("header %d = %q:%s, want %q:%s", i, g.Key, describeBytes(g.Value), w.Key, describeBytes(w.Value)))
			}
		}
	}
	if len(diffs) > 0 {
		return errors.New(strings.Join(diffs, "; "))
	}
	return nil
}

// produceOK produces records and requires every delivery to succeed.
func produceOK(ctx context.Context, d driver.Driver, req driver.Produce) ([]driver.Delivery, error) {
	res, err := d.Produce(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("produce: %w", err)
	}
	if len(res.Deliveries) != len(req.Records) {
		return nil, fmt.Errorf("produce: %d deliveries for %d records", len(res.Deliveries), len(req.Records))
	}
	for i, dl := range res.Deliveries {
		if dl.Error != nil {
			return nil, fmt.Errorf("produce record %d: %w", i, dl.Error)
		}
	}
	return res.Deliveries, nil
}

// consumeN reads exactly n records from a partition starting at from.
func consumeN(ctx context.Context, d driver.Driver, topic string, partition int32, from int64, n int) ([]driver.Record, error) {
	res, err := d.Consume(ctx, driver.Consume{Topic: topic, Partition: partition, From: from, Count: n, TimeoutMs: 10000})
	if err != nil {
		return nil, fmt.Errorf("consume: %w", err)
	}
	if res.Error != nil {
		return nil, fmt.Errorf("consume: %w", res.Error)
	}
	if len(res.Records) < n {
		return res.Records, fmt.Errorf("consume: got %d records from offset %d in 10s, want %d", len(res.Records), from, n)
	}
	return res.Records[:n], nil
}

// createTopic creates a topic of e.ReplicationFactor replicas through d
// and, on a cluster target, waits until every broker knows it, so that
// the cell sees the same topic whichever broker its client asks.
func createTopic(ctx context.Context, e *Env, d driver.Driver, topic string, partitions int32, configs map[string]string) error {
	if err := createTopicRF(ctx, d, topic, partitions, e.ReplicationFactor(), configs); err != nil {
		return err
	}
	if ci := e.Cluster(); ci != nil && partitions > 0 {
		if err := cluster.WaitTopic(ctx, ci.Cluster(), topic, int(partitions)); err != nil {
			return fmt.Errorf("created topic %s: %w", topic, err)
		}
	}
	return nil
}

// createTopicRF creates a topic of rf replicas through d.
func createTopicRF(ctx context.Context, d driver.Driver, topic string, partitions int32, rf int16, configs map[string]string) error {
	if err := d.CreateTopic(ctx, driver.CreateTopic{Topic: topic, Partitions: partitions, ReplicationFactor: rf, Configs: configs}); err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// codecScenario is scenario 2 for one codec: every record shape produced
// and read back by the same client at the offsets the producer reported.
func codecScenario(codec string) Scenario {
	return Scenario{
		ID:    "2.codec/" + codec,
		Title: "produce and consume every record shape with compression " + codec,
		Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
			topic := e.Topic("codec-" + codec + "-" + d.Client())
			if err := createTopic(ctx, e, d, topic, 1, nil); err != nil {
				return "", err
			}
			recs := shapes(topic)
			dls, err := produceOK(ctx, d, driver.Produce{Topic: topic, Records: recs, Codec: codec, Acks: -1})
			if err != nil {
				return "", err
			}
			for i, dl := range dls {
				if dl.Offset != int64(i) {
					return "", fmt.Errorf("record %d reported at offset %d, want %d", i, dl.Offset, i)
				}
			}
			got, err := consumeN(ctx, d, topic, 0, 0, len(recs))
			if err != nil {
				return "", err
			}
			var bad []string
			for i := range recs {
				if got[i].Offset != dls[i].Offset {
					bad = append(bad, fmt.Sprintf("record %d read at offset %d, produced at %d", i, got[i].Offset, dls[i].Offset))
				} else if err := compareRecord(recs[i], got[i]); err != nil {
					bad = append(bad, fmt.Sprintf("record %d: %v", i, err))
				}
			}
			if len(bad) > 0 {
				return "", errors.New(strings.Join(bad, "; "))
			}
			return fmt.Sprintf("%d records round-tripped", len(recs)), nil
		},
	}
}

// nullHeaderScenario is the null-header-value shape of scenario 2, on its
// own so that a client that cannot send a null header value (kafka-python's
// KafkaProducer.send takes (str, bytes) tuples) is unsupported here only.
// The record is produced in an uncompressed and a zstd batch and read back
// by the same client.
var nullHeaderScenario = Scenario{
	ID:    "2.null-header-value",
	Title: "a header with a null value is read back null, distinct from empty",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		topic := e.Topic("nullheader-" + d.Client())
		if err := createTopic(ctx, e, d, topic, 1, nil); err != nil {
			return "", err
		}
		var recs []driver.Record
		var offsets []int64
		for i, codec := range []string{"none", "zstd"} {
			rec := nullHeaderRecord(topic+"-"+codec, baseTimestamp+int64(i))
			dls, err := produceOK(ctx, d, driver.Produce{Topic: topic, Records: []driver.Record{rec}, Codec: codec, Acks: -1})
			if err != nil {
				return "", err
			}
			recs = append(recs, rec)
			offsets = append(offsets, dls[0].Offset)
		}
		for i, off := range offsets {
			if off != int64(i) {
				return "", fmt.Errorf("record %d reported at offset %d, want %d", i, off, i)
			}
		}
		got, err := consumeN(ctx, d, topic, 0, 0, len(recs))
		if err != nil {
			return "", err
		}
		var bad []string
		for i := range recs {
			if got[i].Offset != offsets[i] {
				bad = append(bad, fmt.Sprintf("record %d read at offset %d, produced at %d", i, got[i].Offset, offsets[i]))
			} else if err := compareRecord(recs[i], got[i]); err != nil {
				bad = append(bad, fmt.Sprintf("record %d: %v", i, err))
			}
		}
		if len(bad) > 0 {
			return "", errors.New(strings.Join(bad, "; "))
		}
		return "null header value round-tripped in none and zstd batches", nil
	},
}

// maxMessageBytes is the topic max.message.bytes of the size scenario,
// below every client's own default request limit (about 1 MB).
const maxMessageBytes = 65536

// valueLenForBatch returns the value length that makes a one-record,
// uncompressed v2 batch with a null key and no headers exactly size bytes:
// 61 bytes of batch header (DefaultRecordBatch.RECORD_BATCH_OVERHEAD) plus
// the record (DefaultRecord: varint length, attributes, timestamp delta,
// offset delta, key length -1, value length, value, header count).
func valueLenForBatch(size int) int {
	for v := size - 61 - 16; v < size; v++ {
		body := 1 + 1 + 1 + 1 + varintLen(int64(v)) + v + 1
		if 61+varintLen(int64(body))+body == size {
			return v
		}
	}
	return -1
}

// varintLen is the zig-zag varint length of v, as in ByteUtils.sizeOfVarint.
func varintLen(v int64) int {
	u := uint64((v << 1) ^ (v >> 63))
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// maxMessageScenario is the size half of scenario 2: a batch of exactly
// max.message.bytes is accepted, one byte more is refused with
// MESSAGE_TOO_LARGE (Kafka's RecordTooLargeException).
var maxMessageScenario = Scenario{
	ID:    "2.max-message-bytes",
	Title: "a record at max.message.bytes passes, one byte above fails",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		topic := e.Topic("maxbytes-" + d.Client())
		if err := createTopic(ctx, e, d, topic, 1, map[string]string{"max.message.bytes": fmt.Sprint(maxMessageBytes)}); err != nil {
			return "", err
		}
		n := valueLenForBatch(maxMessageBytes)
		// Values start with the topic so that every value in a history
		// is unique, as the checkers require.
		fill := func(c string, n int) []byte {
			return append([]byte(topic), bytes.Repeat([]byte(c), n-len(topic))...)
		}
		at := fill("a", n)
		if _, err := produceOK(ctx, d, driver.Produce{Topic: topic, Acks: -1,
			Records: []driver.Record{{Partition: 0, Value: at, TimestampMs: baseTimestamp}}}); err != nil {
			return "", fmt.Errorf("batch of exactly max.message.bytes: %w", err)
		}
		above := fill("b", n+1)
		res, err := d.Produce(ctx, driver.Produce{Topic: topic, Acks: -1,
			Records: []driver.Record{{Partition: 0, Value: above, TimestampMs: baseTimestamp}}})
		if err != nil {
			return "", fmt.Errorf("batch one byte above: %w", err)
		}
		if len(res.Deliveries) != 1 || res.Deliveries[0].Error == nil {
			return "", errors.New("batch one byte above max.message.bytes was accepted")
		}
		if c := res.Deliveries[0].Error.Code; c != "MESSAGE_TOO_LARGE" {
			return "", fmt.Errorf("batch one byte above failed with %s, want MESSAGE_TOO_LARGE", res.Deliveries[0].Error)
		}
		got, err := consumeN(ctx, d, topic, 0, 0, 1)
		if err != nil {
			return "", err
		}
		if !bytes.Equal(got[0].Value, at) {
			return "", errors.New("the accepted record read back differs")
		}
		return fmt.Sprintf("value of %d bytes fills a %d-byte batch", n, maxMessageBytes), nil
	},
}

// producedSet is what one producer wrote for the cross-client scenario.
type producedSet struct {
	topic   string
	records []driver.Record
	offsets []int64
	// nullHeader says whether the records include the null-header-value
	// shape (false when the producer answered that it cannot send it).
	nullHeader bool
}

// crossScenario is scenario 3: every client reads what every other client
// wrote, byte for byte, at the offsets the producer reported. Each
// producer writes once per target (memoised); each consumer reads it.
var crossScenario = Scenario{
	ID:    "3.cross-client",
	Title: "consumer reads producer's records byte for byte at the reported offsets",
	Pair: func(ctx context.Context, e *Env, prod, cons driver.Driver) (string, error) {
		v, err := e.Memo("cross/"+prod.Client(), func() (any, error) {
			topic := e.Topic("cross-" + prod.Client())
			if err := createTopic(ctx, e, prod, topic, 1, nil); err != nil {
				return nil, err
			}
			ps := &producedSet{topic: topic, nullHeader: true}
			for i, codec := range []string{"none", "zstd"} {
				recs := shapes(topic + "-" + codec)
				dls, err := produceOK(ctx, prod, driver.Produce{Topic: topic, Records: recs, Codec: codec, Acks: -1})
				if err != nil {
					return nil, fmt.Errorf("producer %s (%s): %w", prod.Client(), codec, err)
				}
				for i, dl := range dls {
					ps.records = append(ps.records, recs[i])
					ps.offsets = append(ps.offsets, dl.Offset)
				}
				// The null-header-value shape goes in its own produce: a
				// producer that cannot send it (2.null-header-value is
				// unsupported for it) still writes every other shape.
				if !ps.nullHeader {
					continue
				}
				rec := nullHeaderRecord(topic+"-"+codec, baseTimestamp+100+int64(i))
				dls, err = produceOK(ctx, prod, driver.Produce{Topic: topic, Records: []driver.Record{rec}, Codec: codec, Acks: -1})
				switch {
				case errors.Is(err, driver.ErrUnsupported):
					ps.nullHeader = false
				case err != nil:
					return nil, fmt.Errorf("producer %s (%s, null header value): %w", prod.Client(), codec, err)
				default:
					ps.records = append(ps.records, rec)
					ps.offsets = append(ps.offsets, dls[0].Offset)
				}
			}
			return ps, nil
		})
		if err != nil {
			return "", err
		}
		ps := v.(*producedSet)
		got, err := consumeN(ctx, cons, ps.topic, 0, ps.offsets[0], len(ps.records))
		if err != nil {
			return "", err
		}
		byOffset := map[int64]driver.Record{}
		for _, r := range got {
			byOffset[r.Offset] = r
		}
		var bad []string
		for i, off := range ps.offsets {
			r, ok := byOffset[off]
			if !ok {
				bad = append(bad, fmt.Sprintf("no record at reported offset %d", off))
				continue
			}
			if err := compareRecord(ps.records[i], r); err != nil {
				bad = append(bad, fmt.Sprintf("offset %d: %v", off, err))
			}
		}
		if len(bad) > 0 {
			return "", errors.New(strings.Join(bad, "; "))
		}
		if !ps.nullHeader {
			return fmt.Sprintf("%d records (none and zstd batches) identical; without the null header value, which %s cannot produce", len(ps.records), prod.Client()), nil
		}
		return fmt.Sprintf("%d records (none and zstd batches, null header value included) identical", len(ps.records)), nil
	},
}

// partitionScenario is scenario 4: where the client's default partitioner
// puts keyed records, compared with the Java client's murmur2. A client
// that uses another hash passes (it is the client's documented choice) and
// the detail says so; a client whose placement is not a function of the
// key fails.
var partitionScenario = Scenario{
	ID:    "4.keyed-partitioning",
	Title: "default partitioner places keys where the Java client does (murmur2)",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		const parts = 12
		topic := e.Topic("keys-" + d.Client())
		if err := createTopic(ctx, e, d, topic, parts, nil); err != nil {
			return "", err
		}
		var recs []driver.Record
		for i := 0; i < 48; i++ {
			k := []byte(fmt.Sprintf("key-%d", i%24)) // Each key twice.
			recs = append(recs, driver.Record{Partition: -1, Key: k, Value: []byte(fmt.Sprintf("%s-%d", topic, i))})
		}
		dls, err := produceOK(ctx, d, driver.Produce{Topic: topic, Records: recs, Acks: -1})
		if err != nil {
			return "", err
		}
		match := 0
		placed := map[string]int32{}
		for i, dl := range dls {
			k := string(recs[i].Key)
			if p, ok := placed[k]; ok && p != dl.Partition {
				return "", fmt.Errorf("key %q went to partitions %d and %d", k, p, dl.Partition)
			}
			placed[k] = dl.Partition
			if dl.Partition == JavaPartition(recs[i].Key, parts) {
				match++
			}
		}
		part := d.Info().Partitioner
		if match == len(dls) {
			return fmt.Sprintf("murmur2-compatible: all %d keyed records on the Java client's partition (default partitioner: %s)", len(dls), part), nil
		}
		return fmt.Sprintf("NOT murmur2-compatible: %d of %d keyed records on the Java client's partition (default partitioner: %s)", match, len(dls), part), nil
	},
}

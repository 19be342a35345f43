package matrix

import (
	"context"
	"fmt"
	"time"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// openVariant opens another instance of d's client on the target's variant
// instance (VariantOverrides), starting the variant on first use.
func openVariant(ctx context.Context, e *Env, d driver.Driver) (driver.Driver, error) {
	bs, err := e.Variant(ctx)
	if err != nil {
		return nil, err
	}
	return e.OpenOn(ctx, d.Client(), bs)
}

// retentionScenario is scenario 9's time-based retention: with retention
// checked every 200 ms (BrokerOverrides), a topic with retention.ms of a
// minute and segment.ms of 100 ms gets five records stamped an hour ago,
// then one stamped now. The second append rolls the segment (its first
// timestamp is older than segment.ms, as Kafka's LogSegment.shouldRoll
// measures it), the retention check deletes the old segment (its largest
// timestamp is past retention.ms, as UnifiedLog's
// deleteRetentionMsBreachedSegments), ListOffsets earliest moves to 5 and
// a read from the earliest offset starts at the new record. The cell's
// reads are left out of the history, which does not model a moved log
// start.
var retentionScenario = Scenario{
	ID:    "9.retention",
	Title: "time-based retention deletes an expired segment and moves the earliest offset",
	Run: func(ctx context.Context, e *Env, v driver.Driver) (string, error) {
		ctx = WithoutHistory(ctx)
		topic := e.Topic("retention-" + v.Client())
		if err := createTopic(ctx, e, v, topic, 1, map[string]string{"retention.ms": "60000", "segment.ms": "100"}); err != nil {
			return "", err
		}
		old := time.Now().Add(-time.Hour).UnixMilli()
		recs := make([]driver.Record, 5)
		for i := range recs {
			recs[i] = driver.Record{Partition: 0, Value: []byte(fmt.Sprintf("%s-old-%d", topic, i)), TimestampMs: old + int64(i)}
		}
		if _, err := produceOK(ctx, v, driver.Produce{Topic: topic, Records: recs, Acks: -1}); err != nil {
			return "", err
		}
		fresh := driver.Record{Partition: 0, Value: []byte(topic + "-new"), TimestampMs: time.Now().UnixMilli()}
		dls, err := produceOK(ctx, v, driver.Produce{Topic: topic, Records: []driver.Record{fresh}, Acks: -1})
		if err != nil {
			return "", err
		}
		if dls[0].Offset != 5 {
			return "", fmt.Errorf("the new record was acknowledged at offset %d, want 5", dls[0].Offset)
		}
		start := time.Now()
		var earliest int64 = -1
		for time.Since(start) < 10*time.Second {
			res, err := v.ListOffsets(ctx, driver.ListOffsets{Topic: topic, Partition: 0, Kind: "earliest"})
			if err != nil {
				return "", fmt.Errorf("list offsets earliest: %w", err)
			}
			earliest = res.Offset
			// Under load a client's five records may land in more than
			// one batch, and segment.ms then rolls between them: the
			// check deletes those segments one pass after another, so
			// the earliest offset may stop at 1 to 4 on its way to 5.
			if earliest >= 5 || !sleepCtx(ctx, 100*time.Millisecond) {
				break
			}
		}
		if earliest != 5 {
			return "", fmt.Errorf("earliest offset is %d %v after the expired records were written, want 5", earliest, time.Since(start).Round(100*time.Millisecond))
		}
		took := time.Since(start).Round(100 * time.Millisecond)
		if err := expectOffset(ctx, v, driver.ListOffsets{Topic: topic, Partition: 0, Kind: "latest"}, 6); err != nil {
			return "", err
		}
		res, err := v.Consume(ctx, driver.Consume{Topic: topic, Partition: 0, From: -2, Count: 1, TimeoutMs: 10000})
		if err != nil {
			return "", fmt.Errorf("consume from earliest: %w", err)
		}
		if res.Error != nil {
			return "", fmt.Errorf("consume from earliest: %w", res.Error)
		}
		if len(res.Records) != 1 || res.Records[0].Offset != 5 || string(res.Records[0].Value) != string(fresh.Value) {
			return "", fmt.Errorf("a read from earliest returned %s, want the new record at offset 5", describeRecords(res.Records))
		}
		return fmt.Sprintf("earliest offset moved 0 → 5 within %v; a read from earliest starts at the new record", took), nil
	},
}

func describeRecords(rs []driver.Record) string {
	if len(rs) == 0 {
		return "nothing"
	}
	out := ""
	for i, r := range rs {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("offset %d %q", r.Offset, r.Value)
	}
	return out
}

// maxTimestampScenario is scenario 6's ListOffsets max timestamp (KIP-734):
// five records in one produce with timestamps out of order; the spec
// returns the offset of the record with the largest timestamp, not the
// batch's last offset (Kafka 3.8 and later, KAFKA-16310), and -1 in an
// empty partition.
var maxTimestampScenario = Scenario{
	ID:    "6.list-offsets-max-timestamp",
	Title: "ListOffsets max timestamp (KIP-734)",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		topic := e.Topic("maxts-" + d.Client())
		if err := createTopic(ctx, e, d, topic, 2, nil); err != nil {
			return "", err
		}
		spread := []int64{3000, 1000, 5000, 2000, 4000}
		recs := make([]driver.Record, len(spread))
		for i, dt := range spread {
			recs[i] = driver.Record{Partition: 0, Value: []byte(fmt.Sprintf("%s-%d", topic, i)), TimestampMs: baseTimestamp + dt}
		}
		dls, err := produceOK(ctx, d, driver.Produce{Topic: topic, Records: recs, Acks: -1})
		if err != nil {
			return "", err
		}
		want := dls[2].Offset
		if err := expectOffset(ctx, d, driver.ListOffsets{Topic: topic, Partition: 0, Kind: "max_timestamp"}, want); err != nil {
			return "", err
		}
		if err := expectOffset(ctx, d, driver.ListOffsets{Topic: topic, Partition: 1, Kind: "max_timestamp"}, -1); err != nil {
			return "", fmt.Errorf("empty partition: %w", err)
		}
		return fmt.Sprintf("offset %d of 0-4 holds the largest timestamp; -1 in an empty partition", want), nil
	},
}

// autoCreateScenario is scenario 10's auto-creation on: on the variant
// instance (auto.create.topics.enable=true), a producer that asks for
// auto-creation writes to a topic nobody created; the broker creates it
// with num.partitions (1), as Kafka's AutoTopicCreationManager, and the
// record reads back. 9.errors is the same produce with auto-creation off.
var autoCreateScenario = Scenario{
	ID:    "9.auto-create",
	Title: "a produce to an unknown topic creates it where auto.create.topics.enable=true",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		v, err := openVariant(ctx, e, d)
		if err != nil {
			return "", err
		}
		defer v.Close()
		topic := e.Topic("autocreate-" + d.Client())
		rec := driver.Record{Partition: 0, Key: []byte("k"), Value: []byte(topic + "-0")}
		dls, err := produceOK(ctx, v, driver.Produce{Topic: topic, Records: []driver.Record{rec}, Acks: -1, AutoCreate: true})
		if err != nil {
			return "", fmt.Errorf("produce to the unknown topic %s: %w", topic, err)
		}
		info, err := v.DescribeTopic(ctx, topic)
		if err != nil {
			return "", fmt.Errorf("describe the auto-created topic: %w", err)
		}
		if info.Partitions != 1 {
			return "", fmt.Errorf("the auto-created topic has %d partitions, want num.partitions=1", info.Partitions)
		}
		got, err := consumeN(ctx, v, topic, 0, dls[0].Offset, 1)
		if err != nil {
			return "", err
		}
		if string(got[0].Value) != string(rec.Value) {
			return "", fmt.Errorf("offset %d holds %q, want %q", got[0].Offset, got[0].Value, rec.Value)
		}
		return fmt.Sprintf("topic created with 1 partition by the produce; record read back at offset %d", dls[0].Offset), nil
	},
	// The first cell starts the variant: a second cluster on a cluster
	// target (variantStartTimeout).
	Timeout: 4 * time.Minute,
}

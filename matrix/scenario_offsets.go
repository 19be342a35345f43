package matrix

import (
	"context"
	"fmt"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// acksScenario is scenario 5 for one producer setting: records produced in
// order to one partition are stored and read back in that order, and (when
// acknowledged) at consecutive offsets.
func acksScenario(id string, req driver.Produce) Scenario {
	return Scenario{
		ID:    "5." + id,
		Title: "order per partition with " + id,
		Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
			topic := e.Topic("acks-" + id + "-" + d.Client())
			if err := createTopic(ctx, e, d, topic, 1, nil); err != nil {
				return "", err
			}
			const n = 300
			p := req
			p.Topic = topic
			p.Records = make([]driver.Record, n)
			for i := range p.Records {
				p.Records[i] = driver.Record{Partition: 0, Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprintf("%s-%d", topic, i))}
			}
			dls, err := produceOK(ctx, d, p)
			if err != nil {
				return "", err
			}
			if req.Acks != 0 {
				for i, dl := range dls {
					if dl.Offset != int64(i) {
						return "", fmt.Errorf("record %d acknowledged at offset %d, want %d", i, dl.Offset, i)
					}
				}
			}
			got, err := consumeN(ctx, d, topic, 0, 0, n)
			if err != nil {
				return "", err
			}
			for i, r := range got {
				if string(r.Value) != string(p.Records[i].Value) || r.Offset != int64(i) {
					return "", fmt.Errorf("offset %d holds %q, want %q", r.Offset, r.Value, p.Records[i].Value)
				}
			}
			return fmt.Sprintf("%d records in order", n), nil
		},
	}
}

// offsetsTopic produces ten records with timestamps base+1000*i to a fresh
// topic and returns its name.
func offsetsTopic(ctx context.Context, e *Env, d driver.Driver, name string) (string, error) {
	topic := e.Topic(name + "-" + d.Client())
	if err := createTopic(ctx, e, d, topic, 1, nil); err != nil {
		return "", err
	}
	recs := make([]driver.Record, 10)
	for i := range recs {
		recs[i] = driver.Record{Partition: 0, Value: []byte(fmt.Sprintf("%s-%d", topic, i)), TimestampMs: baseTimestamp + int64(i)*1000}
	}
	if _, err := produceOK(ctx, d, driver.Produce{Topic: topic, Records: recs, Acks: -1}); err != nil {
		return "", err
	}
	return topic, nil
}

func expectOffset(ctx context.Context, d driver.Driver, req driver.ListOffsets, want int64) error {
	res, err := d.ListOffsets(ctx, req)
	if err != nil {
		return fmt.Errorf("list offsets %s %d: %w", req.Kind, req.TimestampMs, err)
	}
	if res.Offset != want {
		return fmt.Errorf("list offsets %s %d = %d, want %d", req.Kind, req.TimestampMs, res.Offset, want)
	}
	return nil
}

// listOffsetsScenario is scenario 6: ListOffsets earliest, latest and by
// timestamp (first offset whose timestamp is at or after the query; -1
// past the last record), and a seek to the middle.
var listOffsetsScenario = Scenario{
	ID:    "6.list-offsets-and-seek",
	Title: "ListOffsets earliest, latest, by timestamp; seek",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		topic, err := offsetsTopic(ctx, e, d, "offsets")
		if err != nil {
			return "", err
		}
		lo := func(kind string, ts int64) driver.ListOffsets {
			return driver.ListOffsets{Topic: topic, Partition: 0, Kind: kind, TimestampMs: ts}
		}
		for _, c := range []struct {
			req  driver.ListOffsets
			want int64
		}{
			{lo("earliest", 0), 0},
			{lo("latest", 0), 10},
			{lo("timestamp", baseTimestamp), 0},
			{lo("timestamp", baseTimestamp+3500), 4},
			{lo("timestamp", baseTimestamp+9000), 9},
			{lo("timestamp", baseTimestamp+9001), -1},
		} {
			if err := expectOffset(ctx, d, c.req, c.want); err != nil {
				return "", err
			}
		}
		all, err := consumeN(ctx, d, topic, 0, 0, 10)
		if err != nil {
			return "", err
		}
		for i, r := range all {
			if r.Offset != int64(i) || r.TimestampMs != baseTimestamp+int64(i)*1000 {
				return "", fmt.Errorf("record %d read at offset %d with timestamp %d", i, r.Offset, r.TimestampMs)
			}
		}
		got, err := consumeN(ctx, d, topic, 0, 6, 4)
		if err != nil {
			return "", fmt.Errorf("seek to 6: %w", err)
		}
		if got[0].Offset != 6 || string(got[0].Value) != topic+"-6" {
			return "", fmt.Errorf("seek to 6 read offset %d value %q", got[0].Offset, got[0].Value)
		}
		return "earliest 0, latest 10, by timestamp 0/4/9/-1, seek to 6", nil
	},
}

// deleteRecordsScenario is scenario 6's DeleteRecords and reset policies:
// the low watermark moves, ListOffsets earliest follows it, and reading
// below it is OFFSET_OUT_OF_RANGE with reset none, starts at the new start
// with reset earliest, and waits at the end with reset latest.
var deleteRecordsScenario = Scenario{
	ID:    "6.delete-records-and-reset",
	Title: "DeleteRecords, then reading below the start with reset none/earliest/latest",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		topic, err := offsetsTopic(ctx, e, d, "delrec")
		if err != nil {
			return "", err
		}
		// The history format does not model DeleteRecords: what follows
		// is left out of the history.
		ctx = WithoutHistory(ctx)
		low, err := d.DeleteRecords(ctx, driver.DeleteRecords{Topic: topic, Partition: 0, Before: 4})
		if err != nil {
			return "", fmt.Errorf("delete records: %w", err)
		}
		if low != 4 {
			return "", fmt.Errorf("delete records before 4: low watermark %d", low)
		}
		if err := expectOffset(ctx, d, driver.ListOffsets{Topic: topic, Partition: 0, Kind: "earliest"}, 4); err != nil {
			return "", err
		}
		res, err := d.Consume(ctx, driver.Consume{Topic: topic, Partition: 0, From: 2, Count: 1, TimeoutMs: 5000, Reset: "none"})
		if err != nil {
			return "", fmt.Errorf("consume from 2 with reset none: %w", err)
		}
		if res.Error == nil || res.Error.Code != "OFFSET_OUT_OF_RANGE" {
			return "", fmt.Errorf("consume below the start with reset none: error %v and %d records, want OFFSET_OUT_OF_RANGE", res.Error, len(res.Records))
		}
		res, err = d.Consume(ctx, driver.Consume{Topic: topic, Partition: 0, From: 2, Count: 1, TimeoutMs: 10000, Reset: "earliest"})
		if err != nil {
			return "", fmt.Errorf("consume from 2 with reset earliest: %w", err)
		}
		if res.Error != nil || len(res.Records) == 0 || res.Records[0].Offset != 4 {
			return "", fmt.Errorf("consume below the start with reset earliest: error %v, %d records, want offset 4 first", res.Error, len(res.Records))
		}
		res, err = d.Consume(ctx, driver.Consume{Topic: topic, Partition: 0, From: 2, Count: 1, TimeoutMs: 1500, Reset: "latest"})
		if err != nil {
			return "", fmt.Errorf("consume from 2 with reset latest: %w", err)
		}
		if res.Error != nil || len(res.Records) != 0 {
			return "", fmt.Errorf("consume below the start with reset latest: error %v, %d records, want none", res.Error, len(res.Records))
		}
		return "low watermark 4; reset none → OFFSET_OUT_OF_RANGE, earliest → 4, latest → nothing", nil
	},
}

// emptyAndPastEndScenario is scenario 6's edges of a partition (HARNESS 5):
// reading an empty partition from offset 0 or from earliest returns nothing
// and no error (offset 0 is the log end, a valid position); reading at the
// end of a partition with records waits without an error; reading past the
// end is OFFSET_OUT_OF_RANGE with reset none (Kafka's
// ReplicaManager.readFromLog), starts at offset 0 with reset earliest, and
// waits at the end with reset latest.
var emptyAndPastEndScenario = Scenario{
	ID:    "6.empty-and-past-end",
	Title: "reading an empty partition, at the end, and past the end with reset none/earliest/latest",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		topic := e.Topic("edges-" + d.Client())
		if err := createTopic(ctx, e, d, topic, 1, nil); err != nil {
			return "", err
		}
		waitNothing := func(ctx context.Context, what string, req driver.Consume) error {
			req.Topic, req.Count, req.TimeoutMs = topic, 1, 800
			res, err := d.Consume(ctx, req)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if res.Error != nil || len(res.Records) != 0 {
				return fmt.Errorf("%s: error %v and %d records, want neither", what, res.Error, len(res.Records))
			}
			return nil
		}
		if err := waitNothing(ctx, "read an empty partition from 0", driver.Consume{From: 0}); err != nil {
			return "", err
		}
		if err := waitNothing(ctx, "read an empty partition from earliest", driver.Consume{From: -2}); err != nil {
			return "", err
		}
		recs := make([]driver.Record, 3)
		for i := range recs {
			recs[i] = driver.Record{Partition: 0, Value: []byte(fmt.Sprintf("%s-%d", topic, i))}
		}
		if _, err := produceOK(ctx, d, driver.Produce{Topic: topic, Records: recs, Acks: -1}); err != nil {
			return "", err
		}
		if err := waitNothing(ctx, "read at the end (offset 3)", driver.Consume{From: 3}); err != nil {
			return "", err
		}
		// A read that resets is left out of the history, whose fetches
		// start where they were asked to.
		hctx := WithoutHistory(ctx)
		res, err := d.Consume(hctx, driver.Consume{Topic: topic, From: 10, Count: 1, TimeoutMs: 5000, Reset: "none"})
		if err != nil {
			return "", fmt.Errorf("read past the end with reset none: %w", err)
		}
		if res.Error == nil || res.Error.Code != "OFFSET_OUT_OF_RANGE" {
			return "", fmt.Errorf("read past the end with reset none: error %v and %d records, want OFFSET_OUT_OF_RANGE", res.Error, len(res.Records))
		}
		res, err = d.Consume(hctx, driver.Consume{Topic: topic, From: 10, Count: 3, TimeoutMs: 10000, Reset: "earliest"})
		if err != nil {
			return "", fmt.Errorf("read past the end with reset earliest: %w", err)
		}
		if res.Error != nil || len(res.Records) != 3 || res.Records[0].Offset != 0 || string(res.Records[2].Value) != topic+"-2" {
			return "", fmt.Errorf("read past the end with reset earliest: error %v, %d records, want offsets 0..2", res.Error, len(res.Records))
		}
		if err := waitNothing(hctx, "read past the end with reset latest", driver.Consume{From: 10, Reset: "latest"}); err != nil {
			return "", err
		}
		return "empty partition: nothing; at the end: waits; past the end: none → OFFSET_OUT_OF_RANGE, earliest → 0, latest → waits", nil
	},
}

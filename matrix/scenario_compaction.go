package matrix

import (
	"context"
	"fmt"
	"time"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// compactionConfigs make a topic that the log cleaner compacts within a
// second or two on both targets: segments roll 100 ms after their first
// record (segment.ms, checked when the next record is appended, as Kafka's
// LogSegment.shouldRoll), any dirty data makes the log cleanable
// (min.cleanable.dirty.ratio), and a tombstone may be removed 100 ms after
// the pass that first saw it (delete.retention.ms; Kafka's cleaner stamps
// the batch's delete horizon on that pass, KIP-534, and drops the
// tombstone on a later one). BrokerOverrides lowers log.cleaner.backoff.ms
// so the cleaner thread looks for work every 100 ms.
var compactionConfigs = map[string]string{
	"cleanup.policy":            "compact",
	"segment.ms":                "100",
	"min.cleanable.dirty.ratio": "0.01",
	"delete.retention.ms":       "100",
}

// compactionKeys are the keys whose history the compaction cell follows.
var compactionKeys = []string{"k0", "k1", "k2", "k3", "k4"}

// compactionScenario is scenario 9's compaction (HARNESS 9): every key of a
// compacted topic is written twice and one is then deleted by a
// tombstone. Filler records under one more key keep rolling segments, so
// the earlier ones become cleanable. The cell passes once a read from
// offset 0 returns exactly the latest value of each live key followed by
// the filler key: the first values were cleaned away, and so was the
// tombstone after delete.retention.ms. Reading from offset 0 also checks
// that the client steps over the offset gaps compaction leaves.
var compactionScenario = Scenario{
	ID:    "9.compaction",
	Title: "compaction keeps the latest value per key and removes tombstones after delete.retention.ms",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		// The history format models an append-only log: reads of a
		// compacted log would look like lost writes to the checkers.
		ctx = WithoutHistory(ctx)
		topic := e.Topic("compaction-" + d.Client())
		if err := createTopic(ctx, e, d, topic, 1, compactionConfigs); err != nil {
			return "", err
		}
		var recs []driver.Record
		for round := 1; round <= 2; round++ {
			for _, k := range compactionKeys {
				recs = append(recs, driver.Record{Partition: 0, Key: []byte(k), Value: []byte(fmt.Sprintf("%s-%s-v%d", topic, k, round))})
			}
		}
		recs = append(recs, driver.Record{Partition: 0, Key: []byte("k1"), Value: nil})
		if _, err := produceOK(ctx, d, driver.Produce{Topic: topic, Records: recs, Acks: -1}); err != nil {
			return "", err
		}
		// What a fully compacted read starts with: the second values of
		// the live keys, in the order they were written.
		var want []driver.Record
		for _, r := range recs[len(compactionKeys) : 2*len(compactionKeys)] {
			if string(r.Key) != "k1" {
				want = append(want, r)
			}
		}
		start := time.Now()
		var last string
		for i := 0; ; i++ {
			if !sleepCtx(ctx, 300*time.Millisecond) {
				return "", fmt.Errorf("not compacted after %v; last read: %s: %w", time.Since(start).Round(100*time.Millisecond), last, ctx.Err())
			}
			filler := driver.Record{Partition: 0, Key: []byte("filler"), Value: []byte(fmt.Sprintf("%s-filler-%d", topic, i))}
			if _, err := produceOK(ctx, d, driver.Produce{Topic: topic, Records: []driver.Record{filler}, Acks: -1}); err != nil {
				return "", err
			}
			// At least len(want)+1 records exist however far cleaning got:
			// the live keys' latest values and the newest filler.
			got, err := consumeN(ctx, d, topic, 0, 0, len(want)+1)
			if err != nil {
				return "", err
			}
			done, view, err := compactedView(got, want, recs)
			if err != nil {
				return "", err
			}
			last = view
			if done {
				return fmt.Sprintf("compacted after %v and %d filler records: %s", time.Since(start).Round(100*time.Millisecond), i+1, view), nil
			}
		}
	},
	Timeout: 45 * time.Second,
}

// compactedView compares the first records of a compacted partition with
// the fully compacted expectation. It returns done when they match, a
// short description of what was read, and an error when a record is one
// that was never written or is out of offset order: compaction may only
// remove records, never change or reorder them.
func compactedView(got, want, written []driver.Record) (bool, string, error) {
	view := ""
	done := true
	prev := int64(-1)
	for i, r := range got {
		if r.Offset <= prev {
			return false, "", fmt.Errorf("offset %d read after offset %d", r.Offset, prev)
		}
		prev = r.Offset
		key := string(r.Key)
		switch {
		case r.Offset < int64(len(written)):
			w := written[r.Offset]
			if key != string(w.Key) || !sameBytes(r.Value, w.Value) {
				return false, "", fmt.Errorf("offset %d holds key %q value %s, written as key %q value %s", r.Offset, key, describeBytes(r.Value), w.Key, describeBytes(w.Value))
			}
		case key != "filler":
			return false, "", fmt.Errorf("offset %d holds key %q, but only fillers were written there", r.Offset, key)
		}
		tag := fmt.Sprintf("%s@%d", key, r.Offset)
		if r.Value == nil {
			tag += "(tombstone)"
		}
		if view != "" {
			view += " "
		}
		view += tag
		if i < len(want) {
			done = done && r.Offset < int64(len(written)) && sameBytes(r.Value, want[i].Value) && key == string(want[i].Key)
		} else {
			done = done && key == "filler"
		}
	}
	return done, view, nil
}

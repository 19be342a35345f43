package matrix

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// autoCommitMs is the auto.commit.interval.ms of the auto-commit cells:
// short, so that a member commits several times within a cell.
const autoCommitMs = 100

// autoCommitCloseFaults are the clients known to commit, when an
// auto-committing consumer closes, offsets of records the application never
// polled, with the evidence.
var autoCommitCloseFaults = map[string]string{
	"confluent-kafka-go": "confluent-kafka-go's Consumer.Close calls Poll until librdkafka reports the consumer closed; " +
		"those polls take the prefetched messages off the queue and drop them, but librdkafka stores each one's offset " +
		"as it is polled (enable.auto.offset.store=true), and the close commits the stored offsets",
}

// committedOffsets reads the group's committed offset of both partitions of
// a group topic (-1 where none). The read is left out of the history: the
// history format records commits as commands, and an auto-commit is none,
// so the checkers could not explain the offsets read.
func committedOffsets(ctx context.Context, d driver.Driver, group, topic string) ([2]int64, error) {
	ctx = WithoutHistory(ctx)
	var c [2]int64
	for p := int32(0); p < 2; p++ {
		o, err := d.FetchCommitted(ctx, driver.FetchCommitted{Group: group, Topic: topic, Partition: p})
		if err != nil {
			return c, fmt.Errorf("fetch committed offset of partition %d: %w", p, err)
		}
		c[p] = o
	}
	return c, nil
}

// polledNext returns, per partition of a group topic, the offset after the
// last record polled (0 where none was).
func polledNext(recs []driver.Record) [2]int64 {
	var n [2]int64
	for _, po := range driver.NextOffsets(recs) {
		if po.Partition >= 0 && po.Partition < 2 {
			n[po.Partition] = po.Offset
		}
	}
	return n
}

// resumeFrom has a member of the group (with explicit commits) read the
// rest of a group topic from the committed offsets, and checks it starts at
// each partition's committed offset (the start where none) and reads to
// the end without a gap: a record the first member did not poll is never
// skipped. It returns what the member read.
func resumeFrom(ctx context.Context, d driver.Driver, group, topic string, committed [2]int64) ([]driver.Record, error) {
	var start [2]int64
	n := 0
	for p := range start {
		start[p] = max(committed[p], 0)
		n += groupRecords/2 - int(start[p])
	}
	recs, err := groupRead(ctx, d, driver.GroupConsume{Group: group, Topic: topic}, n)
	if err != nil {
		return nil, fmt.Errorf("resuming member: %w", err)
	}
	next := start
	for _, r := range recs {
		if r.Partition < 0 || r.Partition > 1 || r.Offset != next[r.Partition] {
			return nil, fmt.Errorf("resuming member read partition %d offset %d, want offset %d (it resumes at the committed offsets %v)", r.Partition, r.Offset, next[min(max(r.Partition, 0), 1)], committed)
		}
		next[r.Partition]++
	}
	return recs, nil
}

// autoCommitCloseScenario is scenario 7's auto-commit with a clean close
// (HARNESS 7): a member with enable.auto.commit polls at least 6 records
// and closes. The Java client commits the positions after what it polled
// when an auto-committing consumer closes (ConsumerCoordinator's
// maybeAutoCommitOffsetsSync); franz-go autocommits a poll's records only
// once the next poll began (kgo's default since franz-go issue 57), so it
// may commit less. Either way the committed offsets must not pass what was
// polled, and a second member resuming there reads every record the first
// did not poll, in order, without a gap.
var autoCommitCloseScenario = Scenario{
	ID:    "7.auto-commit-close",
	Title: "auto-commit: a member polls, closes; the committed offsets are the next unpolled ones",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		topic, err := groupTopic(ctx, e, d, "autocommit-close")
		if err != nil {
			return "", err
		}
		group := topic + "-g"
		res, err := d.GroupConsume(ctx, driver.GroupConsume{Group: group, Topic: topic, Count: 6, TimeoutMs: 20000, AutoCommitIntervalMs: autoCommitMs})
		if err != nil {
			return "", fmt.Errorf("auto-committing member: %w", err)
		}
		r1 := res.Records
		if len(r1) < 6 {
			return "", fmt.Errorf("auto-committing member polled %d records in 20s, want at least 6", len(r1))
		}
		polled := polledNext(r1)
		c, err := committedOffsets(ctx, d, group, topic)
		if err != nil {
			return "", err
		}
		var lag []string
		for p := range c {
			if c[p] > polled[p] {
				err := fmt.Errorf("after polling %d records and closing, partition %d's committed offset %d passes the next unpolled offset %d: records %d..%d were never polled", len(r1), p, c[p], polled[p], polled[p], c[p]-1)
				if why, ok := autoCommitCloseFaults[d.Client()]; ok {
					return "", fmt.Errorf("%w: %v (%s)", ErrClientFault, err, why)
				}
				return "", err
			}
			if max(c[p], 0) < polled[p] {
				lag = append(lag, fmt.Sprintf("partition %d committed %d of %d polled", p, max(c[p], 0), polled[p]))
			}
		}
		r2, err := resumeFrom(ctx, d, group, topic, c)
		if err != nil {
			return "", err
		}
		how := "committed on close exactly what it polled"
		if len(lag) > 0 {
			how = "committed less than it polled (" + strings.Join(lag, ", ") + ")"
		}
		return fmt.Sprintf("polled %d, %s; the next member resumed there and read %d, none skipped", len(r1), how, len(r2)), nil
	},
	Timeout: 60 * time.Second,
}

// autoCommitCrashScenario is Jepsen's auto_commit check (HARNESS 7): a
// member with enable.auto.commit every 100 ms, in its own driver process,
// polls at least 6 records, idles for a second, and is killed. Whatever it
// committed must not pass the records it polled (an auto-commit that
// commits fetched but unpolled records loses them), and a second member
// resumes from the committed offsets and reads every record the first did
// not poll: re-reads are allowed (at least once), skips are not.
var autoCommitCrashScenario = Scenario{
	ID:    "7.auto-commit-crash",
	Title: "auto-commit: a member polls and is killed; it committed no record it did not poll",
	Run: func(ctx context.Context, e *Env, a driver.Driver) (string, error) {
		topic, err := groupTopic(ctx, e, a, "autocommit-crash")
		if err != nil {
			return "", err
		}
		group := topic + "-g"
		v, k, err := e.OpenKillable(ctx, a.Client())
		if err != nil {
			return "", err
		}
		defer v.Close() // Reaps the killed process.
		res, err := v.GroupConsume(ctx, driver.GroupConsume{Group: group, Topic: topic, Count: 6, TimeoutMs: 20000,
			AutoCommitIntervalMs: autoCommitMs, SessionTimeoutMs: crashSessionMs, Crash: true})
		if err != nil {
			return "", fmt.Errorf("member to crash: %w", err)
		}
		r1 := res.Records
		if len(r1) < 6 {
			return "", fmt.Errorf("member to crash polled %d records in 20s, want at least 6", len(r1))
		}
		// Ten auto-commit intervals with the consumer open and idle: a
		// client that commits in the background (librdkafka, franz-go,
		// sarama) does so now; the Java client and kafka-python commit
		// only inside poll, so theirs may lag.
		if !sleepCtx(ctx, 10*autoCommitMs*time.Millisecond) {
			return "", ctx.Err()
		}
		if err := k.Kill(); err != nil {
			return "", err
		}
		polled := polledNext(r1)
		c, err := committedOffsets(ctx, a, group, topic)
		if err != nil {
			return "", err
		}
		var lag []string
		for p := range c {
			if c[p] > polled[p] {
				return "", fmt.Errorf("partition %d: committed offset %d passes the records polled (next unpolled offset %d): records %d..%d would never be processed", p, c[p], polled[p], polled[p], c[p]-1)
			}
			if max(c[p], 0) < polled[p] {
				lag = append(lag, fmt.Sprintf("partition %d committed %d of %d polled", p, max(c[p], 0), polled[p]))
			}
		}
		r2, err := resumeFrom(ctx, a, group, topic, c)
		if err != nil {
			return "", err
		}
		seen := map[[2]int64]bool{}
		for _, r := range append(append([]driver.Record{}, r1...), r2...) {
			seen[[2]int64{int64(r.Partition), r.Offset}] = true
		}
		if len(seen) != groupRecords {
			return "", fmt.Errorf("the two members read %d distinct records, want %d", len(seen), groupRecords)
		}
		how := "committed exactly what it polled"
		if len(lag) > 0 {
			how = "committed less than it polled (" + strings.Join(lag, ", ") + ")"
		}
		return fmt.Sprintf("killed member polled %d, %s; the next member resumed there and read %d, none skipped", len(r1), how, len(r2)), nil
	},
	Timeout: 60 * time.Second,
}

package matrix

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// groupRecords is how many records the group scenarios spread over two
// partitions.
const groupRecords = 20

// groupTopic creates a two-partition topic and writes groupRecords records
// alternately to partitions 0 and 1, through an idempotent producer: the
// group cells count on each record being in the log once, and a plain
// producer's retry on a loaded machine may write a batch twice.
func groupTopic(ctx context.Context, e *Env, d driver.Driver, name string) (string, error) {
	topic := e.Topic(name + "-" + d.Client())
	if err := createTopic(ctx, e, d, topic, 2, nil); err != nil {
		return "", err
	}
	recs := make([]driver.Record, groupRecords)
	for i := range recs {
		recs[i] = driver.Record{Partition: int32(i % 2), Value: []byte(fmt.Sprintf("%s-%d", topic, i))}
	}
	if _, err := produceOK(ctx, d, driver.Produce{Topic: topic, Records: recs, Acks: -1, Idempotent: true}); err != nil {
		return "", err
	}
	return topic, nil
}

// groupRead runs one group_consume that must return exactly n records.
func groupRead(ctx context.Context, d driver.Driver, req driver.GroupConsume, n int) ([]driver.Record, error) {
	req.Count, req.TimeoutMs, req.Commit = n, 20000, true
	res, err := d.GroupConsume(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s consuming %d records in group %s: %w", d.Client(), n, req.Group, err)
	}
	if len(res.Records) != n {
		return nil, fmt.Errorf("%s read %d records in group %s within 20s, want %d", d.Client(), len(res.Records), req.Group, n)
	}
	return res.Records, nil
}

// expectCommitted checks the group's committed offsets against the records
// it has read so far: the next offset per partition, -1 where none.
func expectCommitted(ctx context.Context, d driver.Driver, group, topic string, read []driver.Record) error {
	want := map[int32]int64{0: -1, 1: -1}
	for _, po := range driver.NextOffsets(read) {
		want[po.Partition] = po.Offset
	}
	for p := int32(0); p < 2; p++ {
		got, err := d.FetchCommitted(ctx, driver.FetchCommitted{Group: group, Topic: topic, Partition: p})
		if err != nil {
			return fmt.Errorf("fetch committed offset of partition %d: %w", p, err)
		}
		if got != want[p] {
			return fmt.Errorf("committed offset of partition %d is %d, want %d", p, got, want[p])
		}
	}
	return nil
}

// exactlyOnce checks that reads cover every record of the group topic once:
// a resumed member neither skipped nor re-read what the first committed.
func exactlyOnce(reads ...[]driver.Record) error {
	seen := map[[2]int64]bool{}
	for _, rs := range reads {
		for _, r := range rs {
			k := [2]int64{int64(r.Partition), r.Offset}
			if seen[k] {
				return fmt.Errorf("partition %d offset %d read twice", r.Partition, r.Offset)
			}
			seen[k] = true
		}
	}
	for p := int64(0); p < 2; p++ {
		for o := int64(0); o < groupRecords/2; o++ {
			if !seen[[2]int64{p, o}] {
				return fmt.Errorf("partition %d offset %d never read", p, o)
			}
		}
	}
	return nil
}

// resumeRun is the shape of scenario 7's resume cells: a member reads 8
// records and commits, leaves; a second member (the same or another
// client) resumes from the committed offsets and reads the other 12.
func resumeRun(ctx context.Context, e *Env, first, second driver.Driver, req driver.GroupConsume, deleteAfter bool) (string, error) {
	topic, err := groupTopic(ctx, e, first, "group")
	if err != nil {
		return "", err
	}
	req.Group, req.Topic = topic+"-g", topic
	r1, err := groupRead(ctx, first, req, 8)
	if err != nil {
		return "", err
	}
	if err := expectCommitted(ctx, first, req.Group, topic, r1); err != nil {
		return "", err
	}
	r2, err := groupRead(ctx, second, req, groupRecords-8)
	if err != nil {
		return "", err
	}
	if err := exactlyOnce(r1, r2); err != nil {
		return "", err
	}
	if err := expectCommitted(ctx, second, req.Group, topic, append(r1, r2...)); err != nil {
		return "", err
	}
	if deleteAfter {
		if err := second.DeleteGroup(ctx, req.Group); err != nil {
			return "", fmt.Errorf("delete the empty group: %w", err)
		}
		err := second.DeleteGroup(ctx, req.Group)
		if err := expectCode("deleting the group again", err, "GROUP_ID_NOT_FOUND"); err != nil {
			return "", err
		}
	}
	return "8 read and committed, 12 resumed from the committed offsets, each record once", nil
}

func groupScenario(id, title string, req driver.GroupConsume, deleteAfter bool) Scenario {
	return Scenario{
		ID:    "7." + id,
		Title: title,
		Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
			return resumeRun(ctx, e, d, d, req, deleteAfter)
		},
		Timeout: 60 * time.Second,
	}
}

// assignorScenario is one cell per classic assignor: a member using it is
// assigned both partitions and reads everything.
func assignorScenario(assignor string) Scenario {
	return Scenario{
		ID:    "7.assignor/" + assignor,
		Title: "subscribe with the " + assignor + " assignor",
		Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
			topic, err := groupTopic(ctx, e, d, "assign-"+assignor)
			if err != nil {
				return "", err
			}
			recs, err := groupRead(ctx, d, driver.GroupConsume{Group: topic + "-g", Topic: topic, Assignor: assignor}, groupRecords)
			if err != nil {
				return "", err
			}
			if err := exactlyOnce(recs); err != nil {
				return "", err
			}
			return "one member assigned both partitions, every record once", nil
		},
		Timeout: 60 * time.Second,
	}
}

// mixedGroupScenario is scenario 7 across clients: one client's member
// commits, another client's member of the same group resumes from it.
var mixedGroupScenario = Scenario{
	ID:    "7.mixed-client-resume",
	Title: "a member of one client resumes from offsets another client committed",
	Pair: func(ctx context.Context, e *Env, first, second driver.Driver) (string, error) {
		return resumeRun(ctx, e, first, second, driver.GroupConsume{}, false)
	},
	Timeout: 60 * time.Second,
}

// unknownGroupScenario is scenario 9's unknown group: deleting a group that
// never existed is GROUP_ID_NOT_FOUND, and it has no committed offsets.
var unknownGroupScenario = Scenario{
	ID:    "9.unknown-group",
	Title: "delete and fetch offsets of a group that does not exist",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		group := e.Topic("nogroup-" + d.Client())
		err := d.DeleteGroup(ctx, group)
		if err := expectCode("deleting an unknown group", err, "GROUP_ID_NOT_FOUND"); err != nil {
			return "", err
		}
		off, err := d.FetchCommitted(ctx, driver.FetchCommitted{Group: group, Topic: group, Partition: 0})
		if err != nil && driver.Code(err) != "GROUP_ID_NOT_FOUND" {
			return "", fmt.Errorf("committed offset of an unknown group: %w", err)
		}
		if err == nil && off != -1 {
			return "", fmt.Errorf("unknown group has committed offset %d", off)
		}
		how := "offset -1"
		if err != nil {
			how = "GROUP_ID_NOT_FOUND"
		}
		return "delete: GROUP_ID_NOT_FOUND; committed offsets: " + how, nil
	},
}

// rebalanceScenario is scenario 7's join and leave: member A of a group
// reads; member B (a second instance of the same client) joins a second
// later, so the group rebalances; B leaves first, so it rebalances again.
// Whether B reads anything depends on what A committed before giving a
// partition up (a client may commit on revocation), and delivery is at
// least once across a rebalance, so the cell checks that both members ride
// the rebalances without an error, that every record was read by someone,
// and that the offsets committed at the end are the partitions' ends.
var rebalanceScenario = Scenario{
	ID:    "7.rebalance-join-leave",
	Title: "a second member joins (the group rebalances) and leaves again",
	Run: func(ctx context.Context, e *Env, a driver.Driver) (string, error) {
		b, err := e.OpenAnother(ctx, a.Client())
		if err != nil {
			return "", err
		}
		defer b.Close()
		topic, err := groupTopic(ctx, e, a, "rebalance")
		if err != nil {
			return "", err
		}
		group := topic + "-g"
		type result struct {
			res driver.GroupConsumeResult
			err error
		}
		aDone := make(chan result, 1)
		go func() {
			// Count is out of reach: A stays a member for the whole window.
			res, err := a.GroupConsume(ctx, driver.GroupConsume{Group: group, Topic: topic, Count: 1 << 20, TimeoutMs: 8000, Commit: true})
			aDone <- result{res, err}
		}()
		// B must join while A is a member; there is no condition to poll
		// through the driver contract, so B starts a fixed second later.
		// B stays 5.5 s: a classic rebalance waits for A to notice it on
		// a heartbeat (every 3 s by default) and rejoin.
		if !sleepCtx(ctx, time.Second) {
			return "", ctx.Err()
		}
		bRes, bErr := b.GroupConsume(ctx, driver.GroupConsume{Group: group, Topic: topic, Count: 1 << 20, TimeoutMs: 5500, Commit: true})
		ar := <-aDone
		if ar.err != nil {
			return "", fmt.Errorf("member A: %w", ar.err)
		}
		if bErr != nil {
			return "", fmt.Errorf("member B: %w", bErr)
		}
		seen := map[[2]int64]bool{}
		for _, r := range append(append([]driver.Record{}, ar.res.Records...), bRes.Records...) {
			seen[[2]int64{int64(r.Partition), r.Offset}] = true
		}
		if len(seen) != groupRecords {
			return "", fmt.Errorf("members read %d distinct records, want %d", len(seen), groupRecords)
		}
		all := make([]driver.Record, 0, groupRecords)
		for k := range seen {
			all = append(all, driver.Record{Partition: int32(k[0]), Offset: k[1]})
		}
		if err := expectCommitted(ctx, a, group, topic, all); err != nil {
			return "", err
		}
		return fmt.Sprintf("A read %d, B read %d; every record read, committed offsets at the ends", len(ar.res.Records), len(bRes.Records)), nil
	},
	Timeout: 60 * time.Second,
}

// crashSessionMs is the session timeout of a member that a cell crashes:
// the broker notices the crash this long after its last heartbeat
// (BrokerOverrides lowers group.min.session.timeout.ms to allow it).
const crashSessionMs = 1500

// crashScenario is scenario 7's member crash: a member in its own driver
// process reads 6 records, commits them and is killed (SIGKILL: no
// LeaveGroup, no more heartbeats). A second member joining the group
// completes its join only once the coordinator expired the dead member at
// its session timeout, is assigned both partitions, and resumes from the
// dead member's commits: every record is read exactly once.
var crashScenario = Scenario{
	ID:    "7.member-crash",
	Title: "a member is killed; the group expires it at its session timeout and another member resumes",
	Run: func(ctx context.Context, e *Env, a driver.Driver) (string, error) {
		topic, err := groupTopic(ctx, e, a, "crash")
		if err != nil {
			return "", err
		}
		v, k, err := e.OpenKillable(ctx, a.Client())
		if err != nil {
			return "", err
		}
		defer v.Close() // Reaps the killed process; its error says it was killed.
		req := driver.GroupConsume{Group: topic + "-g", Topic: topic, SessionTimeoutMs: crashSessionMs, Crash: true}
		r1, err := groupRead(ctx, v, req, 6)
		if err != nil {
			return "", fmt.Errorf("member to crash: %w", err)
		}
		if err := k.Kill(); err != nil {
			return "", err
		}
		killed := time.Now()
		r2, err := groupRead(ctx, a, driver.GroupConsume{Group: req.Group, Topic: topic}, groupRecords-6)
		if err != nil {
			return "", fmt.Errorf("surviving member: %w", err)
		}
		took := time.Since(killed).Round(100 * time.Millisecond)
		if err := exactlyOnce(r1, r2); err != nil {
			return "", err
		}
		if err := expectCommitted(ctx, a, req.Group, topic, append(r1, r2...)); err != nil {
			return "", err
		}
		return fmt.Sprintf("killed member read and committed 6; the next member read the other 14 in %v (session timeout %d ms)", took, crashSessionMs), nil
	},
	Timeout: 60 * time.Second,
}

// regexScenario is a KIP-848 regex subscription: a member of the consumer
// protocol subscribes by a regular expression that two of three topics
// match; the broker resolves it (after the member's first heartbeat, as
// Kafka does) and assigns every partition of those two, not the third.
var regexScenario = Scenario{
	ID:    "7.kip848-regex",
	Title: "KIP-848 group subscribed by a regular expression the broker resolves",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		base := e.Topic("rx-" + d.Client())
		want := map[string]bool{}
		for _, t := range []struct {
			suffix string
			parts  int32
			match  bool
		}{{"-a", 2, true}, {"-b", 1, true}, {"-other", 1, false}} {
			topic := base + t.suffix
			if err := createTopic(ctx, e, d, topic, t.parts, nil); err != nil {
				return "", err
			}
			recs := make([]driver.Record, 4)
			for i := range recs {
				recs[i] = driver.Record{Partition: int32(i) % t.parts, Value: []byte(fmt.Sprintf("%s-%d", topic, i))}
				if t.match {
					want[string(recs[i].Value)] = true
				}
			}
			if _, err := produceOK(ctx, d, driver.Produce{Topic: topic, Records: recs, Acks: -1}); err != nil {
				return "", err
			}
		}
		req := driver.GroupConsume{Group: base + "-g", Protocol: "consumer", TopicRegex: regexp.QuoteMeta(base) + "-(a|b)",
			Count: len(want), TimeoutMs: 30000}
		res, err := d.GroupConsume(ctx, req)
		if err != nil {
			return "", fmt.Errorf("consuming by regex %s: %w", req.TopicRegex, err)
		}
		seen := map[string]bool{}
		for _, r := range res.Records {
			v := string(r.Value)
			if !want[v] {
				return "", fmt.Errorf("read %q, from a topic the regex does not match", v)
			}
			if seen[v] {
				return "", fmt.Errorf("read %q twice", v)
			}
			seen[v] = true
		}
		if len(seen) != len(want) {
			return "", fmt.Errorf("read %d of the %d records of the matching topics within 30s", len(seen), len(want))
		}
		return fmt.Sprintf("assigned the two matching topics' 3 partitions, not the third topic; %d records once", len(want)), nil
	},
	Timeout: 60 * time.Second,
}

// groupScenarios returns scenario 7's cells.
func groupScenarios() []Scenario {
	s := []Scenario{
		groupScenario("resume", "classic group: commit, leave, resume from the committed offsets; delete the empty group", driver.GroupConsume{}, true),
		groupScenario("kip848-resume", "KIP-848 group (group.protocol=consumer): commit, leave, resume", driver.GroupConsume{Protocol: "consumer"}, true),
		groupScenario("static-member-resume", "static membership (group.instance.id): commit, close, rejoin and resume", driver.GroupConsume{InstanceID: "matrix-static-1"}, false),
	}
	for _, a := range []string{"range", "roundrobin", "sticky", "cooperative-sticky"} {
		s = append(s, assignorScenario(a))
	}
	return append(s, regexScenario, rebalanceScenario, crashScenario, autoCommitCloseScenario, autoCommitCrashScenario, mixedGroupScenario, mixedLiveScenario, describeGroupsScenario)
}

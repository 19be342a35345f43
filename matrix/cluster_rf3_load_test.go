package matrix_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/matrix/cluster"
	"github.com/cascade-kafka/cascade/matrix/driver"
)

// rf3RecordsPerPartition is how many records each produce command of the
// load sends to each of its partitions.
const rf3RecordsPerPartition = 4

// rf3MaxCommands bounds the commands of one load loop.
const rf3MaxCommands = 20000

// rf3Command is one produce command of a load loop: one idempotent
// acks=all producer instance of the driver, its records and what the
// driver answered.
type rf3Command struct {
	start, end time.Time
	records    []driver.Record
	deliveries []driver.Delivery
	err        error
}

// acked reports whether any record of the command to partition p was
// acknowledged.
func (c *rf3Command) acked(p int32) bool {
	for i, dl := range c.deliveries {
		if c.err == nil && i < len(c.records) && dl.Error == nil && dl.Offset >= 0 && dl.Partition == p {
			return true
		}
	}
	return false
}

// ackedAny reports whether any record of the command was acknowledged.
func (c *rf3Command) ackedAny() bool {
	for _, r := range c.records {
		if c.acked(r.Partition) {
			return true
		}
	}
	return false
}

// errorCode names why the command acknowledged nothing: the first
// delivery's Kafka error, or the command's.
func (c *rf3Command) errorCode() string {
	if c.err != nil {
		if code := driver.Code(c.err); code != "" {
			return code
		}
		if errors.Is(c.err, context.DeadlineExceeded) {
			return "command deadline"
		}
		return firstLineOf(c.err.Error())
	}
	for _, dl := range c.deliveries {
		if dl.Error != nil {
			return dl.Error.Code
		}
	}
	return "none"
}

func firstLineOf(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

// rf3Loop produces to the partitions target names, one command after
// another, until stopped. Role "leader" follows the partition whose leader
// a round kills; role "others" writes every other partition.
type rf3Loop struct {
	client, role string
	d            driver.Driver
	topic        string
	target       func() []int32
	timeout      time.Duration // Bounds one command.

	stop atomic.Bool
	done chan struct{}
	busy atomic.Int64 // When the running command started (UnixNano), 0 between commands.

	mu   sync.Mutex
	cmds []*rf3Command
}

func (l *rf3Loop) name() string { return l.client + "/" + l.role }

func (l *rf3Loop) run() {
	defer close(l.done)
	for seq := 0; seq < rf3MaxCommands && !l.stop.Load(); seq++ {
		var recs []driver.Record
		for i := 0; i < rf3RecordsPerPartition; i++ {
			for _, p := range l.target() {
				recs = append(recs, driver.Record{Partition: p, Value: fmt.Appendf(nil, "%s-%s-%d-%d-%d", l.client, l.role, seq, p, i)})
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
		c := &rf3Command{start: time.Now(), records: recs}
		l.busy.Store(c.start.UnixNano())
		res, err := l.d.Produce(ctx, driver.Produce{Topic: l.topic, Records: recs, Acks: -1, Idempotent: true})
		l.busy.Store(0)
		cancel()
		c.end, c.deliveries, c.err = time.Now(), res.Deliveries, err
		l.mu.Lock()
		l.cmds = append(l.cmds, c)
		l.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
}

// commands returns the commands so far.
func (l *rf3Loop) commands() []*rf3Command {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.cmds)
}

// ackedSince counts the commands started after t that acknowledged a
// record to p (any partition when p < 0).
func (l *rf3Loop) ackedSince(t time.Time, p int32) int {
	n := 0
	for _, c := range l.commands() {
		if c.start.After(t) && (p < 0 && c.ackedAny() || p >= 0 && c.acked(p)) {
			n++
		}
	}
	return n
}

// waitLoops waits until every loop has n commands started after t that
// acknowledged a record to its partition p (p(loop) < 0: any).
func waitLoops(ctx context.Context, loops []*rf3Loop, t time.Time, n int, p func(*rf3Loop) int32) error {
	return cluster.Poll(ctx, cluster.PollInterval, func() error {
		for _, l := range loops {
			if got := l.ackedSince(t, p(l)); got < n {
				return fmt.Errorf("%s: %d acknowledged commands since %s, want %d", l.name(), got, t.Format("15:04:05.000"), n)
			}
		}
		return nil
	})
}

// rf3Read is one record read back from the cluster.
type rf3Read struct {
	offset int64
	epoch  int32
}

// readBack reads every partition of topic from offset 0 to its high
// watermark with a franz-go client and returns, per partition, each
// value's offsets and partition leader epochs in log order.
func readBack(ctx context.Context, c cluster.Cluster, topic string, partitions int32) (map[int32]map[string][]rf3Read, map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Seeds()...))
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	ends := map[int32]int64{}
	err = cluster.Poll(ctx, cluster.PollInterval, func() error {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		for p := int32(0); p < partitions; p++ {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp = p, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		shards := cl.RequestSharded(ctx, req)
		for _, s := range shards {
			if s.Err != nil {
				return s.Err
			}
			for _, t := range s.Resp.(*kmsg.ListOffsetsResponse).Topics {
				for _, p := range t.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
						return fmt.Errorf("ListOffsets %s/%d: %w", topic, p.Partition, err)
					}
					ends[p.Partition] = p.Offset
				}
			}
		}
		if len(ends) != int(partitions) {
			return fmt.Errorf("ListOffsets answered %d of %d partitions", len(ends), partitions)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	offsets := map[string]map[int32]kgo.Offset{topic: {}}
	for p := int32(0); p < partitions; p++ {
		offsets[topic][p] = kgo.NewOffset().At(0)
	}
	cl.AddConsumePartitions(offsets)
	out := map[int32]map[string][]rf3Read{}
	next := map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		out[p] = map[string][]rf3Read{}
	}
	for polls := 0; ; polls++ {
		complete := true
		for p := int32(0); p < partitions; p++ {
			if next[p] < ends[p] {
				complete = false
			}
		}
		if complete {
			return out, ends, nil
		}
		if polls >= 10000 || ctx.Err() != nil {
			return nil, nil, fmt.Errorf("read back %v of high watermarks %v", next, ends)
		}
		fs := cl.PollFetches(ctx)
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				complete = false
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition][string(r.Value)] = append(out[r.Partition][string(r.Value)], rf3Read{offset: r.Offset, epoch: r.LeaderEpoch})
			next[r.Partition] = r.Offset + 1
		})
	}
}

// checkReadBack verifies the loops' records against what was read back:
// every acknowledged record once, at its acknowledged offset; each loop's
// acknowledged records of a partition in the order it sent them; no record
// read that was not sent, nor one sent twice; a record whose produce
// failed with a Kafka error (not a timeout) never read. It returns the
// number of acknowledged records, and the problems found (at most a few of
// each kind).
func checkReadBack(loops []*rf3Loop, reads map[int32]map[string][]rf3Read) (int, []string) {
	var problems []string
	report := func(format string, args ...any) {
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	sent := map[string]bool{}
	acked := 0
	for _, l := range loops {
		last := map[int32]int64{}
		for _, c := range l.commands() {
			for i, r := range c.records {
				v := string(r.Value)
				sent[v] = true
				got := reads[r.Partition][v]
				if len(got) > 1 {
					report("%s: %s read %d times (offsets %v)", l.name(), v, len(got), got)
				}
				if c.err != nil || i >= len(c.deliveries) {
					continue // Unknown outcome: it may or may not be there.
				}
				dl := c.deliveries[i]
				if dl.Error != nil {
					if outcomeOf(dl.Error) == "fail" && len(got) > 0 {
						report("%s: %s failed with %s but was read at %d", l.name(), v, dl.Error.Code, got[0].offset)
					}
					continue
				}
				acked++
				switch {
				case len(got) == 0:
					report("%s: %s acknowledged at %d/%d is missing", l.name(), v, dl.Partition, dl.Offset)
				case dl.Partition != r.Partition || got[0].offset != dl.Offset:
					report("%s: %s acknowledged at %d/%d, read at %d/%d", l.name(), v, dl.Partition, dl.Offset, r.Partition, got[0].offset)
				}
				if prev, ok := last[r.Partition]; ok && dl.Offset <= prev {
					report("%s: %s acknowledged at %d/%d, not after the loop's previous %d", l.name(), v, dl.Partition, dl.Offset, prev)
				}
				last[r.Partition] = dl.Offset
			}
		}
	}
	for p, vs := range reads {
		for v := range vs {
			if !sent[v] {
				report("partition %d holds %q, which no loop sent", p, v)
			}
		}
	}
	return acked, problems
}

// outcomeOf classifies a delivery error as the history does: a Kafka
// error the broker answered means not applied, except the codes that
// leave it unknown.
func outcomeOf(e *driver.Error) string {
	switch e.Code {
	case "CLIENT_TIMEOUT", "REQUEST_TIMED_OUT", "CLIENT_ERROR", "NOT_ENOUGH_REPLICAS_AFTER_APPEND":
		return "unknown"
	}
	if strings.HasPrefix(e.Code, "CLIENT_") {
		return "unknown"
	}
	return "fail"
}

// firstAckAfter returns when the first command of l returned that had a
// record to partition p acknowledged and appended at a leader epoch above
// epoch (a new leader's), false when none did.
func firstAckAfter(l *rf3Loop, p int32, epoch int32, reads map[int32]map[string][]rf3Read) (time.Time, bool) {
	var first time.Time
	for _, c := range l.commands() {
		for i, r := range c.records {
			if r.Partition != p || !c.acked(p) || i >= len(c.deliveries) || c.deliveries[i].Error != nil {
				continue
			}
			got := reads[p][string(r.Value)]
			if len(got) > 0 && got[0].epoch > epoch && (first.IsZero() || c.end.Before(first)) {
				first = c.end
			}
		}
	}
	return first, !first.IsZero()
}

// longestAckGap returns the longest time between consecutive returns of
// l's acknowledged commands, from the last before from up to until, and
// the median of the gaps before from (the loop's
// ordinary pace).
func longestAckGap(l *rf3Loop, from, until time.Time) (gap, normal time.Duration) {
	var ends []time.Time
	for _, c := range l.commands() {
		if c.ackedAny() {
			ends = append(ends, c.end)
		}
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i].Before(ends[j]) })
	var before []time.Duration
	for i := 1; i < len(ends); i++ {
		d := ends[i].Sub(ends[i-1])
		switch {
		case !ends[i].After(from):
			before = append(before, d)
		case ends[i-1].Before(until):
			// A gap running past until is cut there: by then every loop
			// was acknowledged again, and what follows is another phase.
			end := ends[i]
			if end.After(until) {
				end = until
			}
			gap = max(gap, end.Sub(ends[i-1]))
		}
	}
	if len(before) > 20 {
		before = before[len(before)-20:]
	}
	if len(before) > 0 {
		slices.Sort(before)
		normal = before[len(before)/2]
	}
	return gap, normal
}

// unacknowledged summarises the commands of l that returned in (from, to]
// with nothing acknowledged: what they got, and how long the longest ran.
func unacknowledged(l *rf3Loop, from, to time.Time) string {
	codes := map[string]int{}
	var longest time.Duration
	for _, c := range l.commands() {
		if c.end.After(from) && !c.end.After(to) && !c.ackedAny() {
			codes[c.errorCode()]++
			longest = max(longest, c.end.Sub(c.start))
		}
	}
	if len(codes) == 0 {
		return ""
	}
	var parts []string
	for code, n := range codes {
		parts = append(parts, fmt.Sprintf("%s ×%d", code, n))
	}
	sort.Strings(parts)
	return fmt.Sprintf("%s (longest %.1f s)", strings.Join(parts, ", "), longest.Seconds())
}

// longLivedClient is the loops' name for one franz-go client with its
// defaults (MetadataMinAge 5 s among them) kept for the whole run, as an
// application keeps its producer: its failover includes the client's own
// metadata refresh, which a driver's producer per command mostly skips.
const longLivedClient = "franz-go-long-lived"

// longLived is a driver whose produce command sends through one kgo
// client created at open; it has no other command.
type longLived struct {
	driver.Driver // nil: only Produce and Close are called.
	cl            *kgo.Client
}

func openLongLived(seeds []string) (*longLived, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, err
	}
	return &longLived{cl: cl}, nil
}

func (d *longLived) Client() string { return longLivedClient }

func (d *longLived) Produce(ctx context.Context, req driver.Produce) (driver.ProduceResult, error) {
	res := driver.ProduceResult{Deliveries: make([]driver.Delivery, len(req.Records))}
	recs := make([]*kgo.Record, len(req.Records))
	index := map[*kgo.Record]int{}
	for i, r := range req.Records {
		recs[i] = &kgo.Record{Topic: req.Topic, Partition: r.Partition, Value: r.Value}
		index[recs[i]] = i
	}
	for _, pr := range d.cl.ProduceSync(ctx, recs...) {
		dl := driver.Delivery{Partition: pr.Record.Partition, Offset: pr.Record.Offset}
		if pr.Err != nil {
			dl.Offset, dl.Error = -1, &driver.Error{Code: "CLIENT_ERROR", Message: pr.Err.Error()}
			var ke *kerr.Error
			if errors.As(pr.Err, &ke) {
				dl.Error.Code = ke.Message
			}
		}
		res.Deliveries[index[pr.Record]] = dl
	}
	return res, nil
}

func (d *longLived) Close() error {
	d.cl.Close()
	return nil
}

package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The consume-transform-produce loops (copiers) read the workload's topic
// with read_committed in one group and copy each record, keyed by where
// it was read, to CopyTopic in transactions that also commit the group's
// offsets (franz-go's GroupTransactSession: TxnOffsetCommit inside the
// transaction, KIP-447). Exactly once means that the committed copy holds
// every committed input record below the group's committed offsets once,
// and nothing else.
const (
	copyGroup           = "faults-copiers"
	copyTransactionalID = "faults-copy-"
	copyTxnTimeout      = 10 * time.Second
)

// copyKey is the key a copy carries: the partition and offset it was read at.
func copyKey(p int32, off int64) string { return fmt.Sprintf("%d/%d", p, off) }

// copier is the progress of the workload's copiers.
type copier struct {
	mu sync.Mutex
	// committed counts copies in committed transactions; aborted those in
	// transactions that ended otherwise; lastCommit is when the last
	// commit returned, on the recorder's clock.
	committed, aborted, endErrors int
	lastCommit                    int64
}

func (c *copier) note(n int, ok bool, err error, at int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err != nil:
		c.endErrors++
		c.aborted += n
	case ok:
		c.committed += n
		c.lastCommit = at
	default:
		c.aborted += n
	}
}

// CopyStats are the copiers' counts.
type CopyStats struct {
	Committed, Aborted, EndErrors int
	// LastCommit is when the last committed transaction returned, on the
	// history's clock (-1: none).
	LastCommit int64
}

// CopyStats returns the copiers' counts so far.
func (w *Workload) CopyStats() CopyStats {
	c := &w.copies
	c.mu.Lock()
	defer c.mu.Unlock()
	last := int64(-1)
	if c.committed > 0 {
		last = c.lastCommit
	}
	return CopyStats{c.committed, c.aborted, c.endErrors, last}
}

// copy runs copier i until ctx is done. Every transaction it begins is
// ended before it returns: a transaction left open would hold the copy
// topic's last stable offset until the coordinator aborts it. A session
// whose End fails is replaced, as franz-go asks (no End error is
// retryable): the new one's InitProducerId fences the old epoch and the
// group's committed offsets rewind it.
func (w *Workload) copy(ctx context.Context, i int) error {
	name := fmt.Sprintf("copier-%d", i)
	var logOpts []kgo.Opt
	if w.ClientLog != nil {
		// The session's own log shows where a stalled copier waits.
		logOpts = append(logOpts, kgo.WithLogger(kgo.BasicLogger(w.ClientLog, kgo.LogLevelInfo,
			func() string { return time.Now().Format("15:04:05.000000 ") + name + ": " })))
	}
	newSession := func() (*kgo.GroupTransactSession, error) {
		return kgo.NewGroupTransactSession(w.clientOpts(append(logOpts,
			kgo.ClientID(name),
			kgo.TransactionalID(copyTransactionalID+strconv.Itoa(i)),
			kgo.TransactionTimeout(copyTxnTimeout),
			kgo.ConsumerGroup(copyGroup), kgo.ConsumeTopics(w.Topic),
			kgo.SessionTimeout(groupSessionTimeout),
			kgo.HeartbeatInterval(500*time.Millisecond),
			kgo.RebalanceTimeout(10*time.Second),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.RequireStableFetchOffsets(),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.FetchMaxWait(500*time.Millisecond),
			kgo.RecordDeliveryTimeout(8*time.Second),
			kgo.ProducerLinger(0),
		)...)...)
	}
	sess, err := newSession()
	if err != nil {
		return err
	}
	defer func() { sess.Close() }()
	replace := func(why string, err error) error {
		w.logf("%s: %s: %v; replacing the session", name, why, err)
		sess.Close()
		sess, err = newSession()
		return err
	}
	for ctx.Err() == nil {
		pc, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := sess.PollRecords(pc, 200)
		cancel()
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				w.logf("%s: fetch %s/%d: %v", name, t, p, err)
			}
		})
		n := fs.NumRecords()
		if n == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			if err := replace("begin", err); err != nil {
				return err
			}
			continue
		}
		// Nothing is cancelled mid-transaction (a cancelled End leaves
		// the session unusable); the run's end is honoured between
		// transactions.
		octx := context.WithoutCancel(ctx)
		// A copy that fails aborts the transaction, as in franz-go's
		// GroupTransactSession example and as Kafka's
		// KafkaProducer.commitTransaction refuses to commit once a send
		// failed. franz-go fails some records without failing the
		// producer id (a request never sent because the connection to
		// the leader's address was closed at once, while its broker is
		// down), and End(TryCommit) would then commit the group's
		// offsets past records whose copies are in no partition of the
		// transaction.
		produced := kgo.AbortingFirstErrPromise(sess.Client())
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(octx, &kgo.Record{Topic: w.CopyTopic, Partition: r.Partition,
				Key: []byte(copyKey(r.Partition, r.Offset)), Value: r.Value}, produced.Promise())
		})
		began := time.Now()
		perr := produced.Err()
		if perr != nil {
			w.logf("%s: a copy of a transaction of %d records failed: %v; aborting it", name, n, perr)
		}
		ok, err := sess.End(octx, kgo.TransactionEndTry(perr == nil))
		w.copies.note(n, ok, err, w.Rec.Now())
		if d := time.Since(began); d > 5*time.Second {
			w.logf("%s: a transaction of %d records ended (committed: %v) after %v", name, n, ok, d.Round(time.Millisecond))
		}
		if err != nil {
			if err := replace("end", err); err != nil {
				return err
			}
		}
	}
	return nil
}

// ExactlyOnce is what the copy topic held against its input after a run.
type ExactlyOnce struct {
	// Expected counts the committed input records below the copiers'
	// committed offsets; Copies the committed copies.
	Expected, Copies int
	// Missing are input records with no copy; Duplicated those copied
	// more than once; Extra copies of records at or past the committed
	// offsets, or whose value differs from the input's.
	Missing, Duplicated, Extra []string
}

// Exact reports whether the copy holds each expected record once.
func (e ExactlyOnce) Exact() bool {
	return len(e.Missing)+len(e.Duplicated)+len(e.Extra) == 0
}

// String summarises the comparison, with the first few of each list.
func (e ExactlyOnce) String() string {
	return fmt.Sprintf("%d input records below the committed offsets, %d committed copies; missing %d [%s], duplicated %d [%s], extra %d [%s]",
		e.Expected, e.Copies, len(e.Missing), headList(e.Missing), len(e.Duplicated), headList(e.Duplicated), len(e.Extra), headList(e.Extra))
}

// CheckExactlyOnce compares, after the copiers have stopped, the copy
// topic read with read_committed against the input read with
// read_committed below the copy group's committed offsets, through a
// client of seeds.
func (w *Workload) CheckExactlyOnce(ctx context.Context, seeds []string) (ExactlyOnce, error) {
	var out ExactlyOnce
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return out, err
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, copyGroup)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		return out, fmt.Errorf("the copy group's offsets: %w", err)
	}
	until := map[int32]int64{}
	for p := range w.Partitions {
		until[p] = 0
		if o, ok := offs.Lookup(w.Topic, p); ok && o.At > 0 {
			until[p] = o.At
		}
	}
	in, err := readCommitted(ctx, seeds, w.Topic, until)
	if err != nil {
		return out, fmt.Errorf("reading %s: %w", w.Topic, err)
	}
	input := map[string]string{}
	for _, r := range in {
		input[copyKey(r.Partition, r.Offset)] = string(r.Value)
	}
	copies, err := readCommitted(ctx, seeds, w.CopyTopic, nil)
	if err != nil {
		return out, fmt.Errorf("reading %s: %w", w.CopyTopic, err)
	}
	seen := map[string]int{}
	for _, r := range copies {
		out.Copies++
		k := string(r.Key)
		seen[k]++
		if v, ok := input[k]; !ok || v != string(r.Value) {
			out.Extra = append(out.Extra, k)
		}
	}
	for k := range input {
		out.Expected++
		switch n := seen[k]; {
		case n == 0:
			out.Missing = append(out.Missing, k)
		case n > 1:
			out.Duplicated = append(out.Duplicated, fmt.Sprintf("%s×%d", k, n))
		}
	}
	slices.Sort(out.Missing)
	slices.Sort(out.Duplicated)
	slices.Sort(out.Extra)
	return out, nil
}

// readCommitted reads every partition of topic from the start with cl
// (read_committed) until it goes quiet, and keeps the records below
// until's offset for their partition (every record when until is nil).
// The run's clients have stopped: nothing more is being written.
func readCommitted(ctx context.Context, seeds []string, topic string, until map[int32]int64) ([]*kgo.Record, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []*kgo.Record
	var errs []error
	for quiet := 0; quiet < 3 && ctx.Err() == nil; {
		pc, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pc)
		cancel()
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				errs = append(errs, fmt.Errorf("%s/%d: %w", t, p, err))
			}
		})
		if fs.NumRecords() == 0 {
			quiet++
			continue
		}
		quiet = 0
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := until[r.Partition]; until == nil || ok && r.Offset < end {
				out = append(out, r)
			}
		})
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

// copyTopic is where the suites' copiers write.
const copyTopic = "faults-copy"

// waitCopied waits until the copiers have committed a transaction that
// returned after finalHeal, or bound has passed; it reports whether they
// did.
func waitCopied(ctx context.Context, w *Workload, finalHeal int64, bound time.Duration) bool {
	for deadline := time.Now().Add(bound); ctx.Err() == nil; {
		if w.CopyStats().LastCommit > finalHeal {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// checkCopies fails the run when the copiers stayed stuck after the final
// heal or their copy is not exactly once, and writes the comparison to
// exactly-once.txt.
func (r *Suite) checkCopies(ctx context.Context, w *Workload, stuck bool) {
	t := r.T
	st := w.CopyStats()
	t.Logf("copiers: %d records in committed transactions, %d in aborted ones, %d failed ends", st.Committed, st.Aborted, st.EndErrors)
	if stuck {
		t.Errorf("stuck copiers: no transaction committed within %v after the final heal", livenessBound)
	}
	if st.Committed == 0 {
		t.Errorf("the copiers committed nothing: the exactly-once check ran on nothing")
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	eo, err := w.CheckExactlyOnce(cctx, r.Addrs)
	if err != nil {
		t.Errorf("the exactly-once check: %v", err)
		return
	}
	if err := os.WriteFile(filepath.Join(r.Dir, "exactly-once.txt"), []byte(eo.String()+"\n"), 0o644); err != nil {
		t.Errorf("writing exactly-once.txt: %v", err)
	}
	if eo.Exact() {
		t.Logf("exactly once: %s", eo)
		return
	}
	t.Errorf("the copy is not exactly once: %s", eo)
}

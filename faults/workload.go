package faults

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	lin "github.com/cascade-kafka/cascade/linearizability"
	"github.com/cascade-kafka/cascade/matrix/driver"
)

// Workload is a set of idempotent producers and consumers of several
// client libraries on one topic, recording every operation in one history.
type Workload struct {
	// Bootstrap is the address clients start from (a proxy), or a comma
	// list of them, as bootstrap.servers.
	Bootstrap  string
	Topic      string
	Partitions int32
	// Producers and Consumers are franz-go clients: idempotent producers
	// and direct-fetch consumers that also list offsets and commit.
	Producers int
	Consumers int
	// ConfluentProducers are idempotent confluent-kafka-go (librdkafka)
	// producers.
	ConfluentProducers int
	// TxnProducers are franz-go transactional producers; odd-numbered
	// consumers read with read_committed when there are any.
	TxnProducers int
	// Java opens the matrix's Java driver (Apache Kafka's own client in a
	// JVM, matrix/clients/java) for JavaProducers and JavaConsumers; nil
	// runs no Java clients.
	Java          driver.Opener
	JavaProducers int
	JavaConsumers int
	// ClientLog, when set, receives client libraries' logs and the
	// workload's notes on replaced clients, one line each.
	ClientLog io.Writer
	// Group receives the consumers' commits.
	Group string
	// GroupConsumers are franz-go consumers in MemberGroup (subscribed,
	// eager range assignment) whose assignments are recorded as
	// assignment ops for the double_owner check.
	GroupConsumers int
	MemberGroup    string
	Rec            *lin.Recorder
	Seed           uint64
	// NoIdempotence turns the producers' idempotence off, so that lost
	// answers become duplicates: a control that the checks can fail.
	NoIdempotence bool
	// LeaderAcks has the franz-go producers ask for acks=1 (their
	// idempotence off, which needs acks=all): the leader answers after
	// its own append, so a leader cut off and replaced loses what it
	// acknowledged alone. A negative control's setting.
	LeaderAcks bool

	// Copiers are consume-transform-produce loops (franz-go
	// GroupTransactSession) copying Topic to CopyTopic exactly once.
	Copiers   int
	CopyTopic string

	copies   copier
	mu       sync.Mutex
	produced int
	acked    int
	logMu    sync.Mutex
}

// count counts one produce, acknowledged or not.
func (w *Workload) count(acked bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.produced++
	if acked {
		w.acked++
	}
}

// logf writes one line to ClientLog, stamped with the wall clock.
func (w *Workload) logf(format string, args ...any) {
	if w.ClientLog == nil {
		return
	}
	w.logMu.Lock()
	defer w.logMu.Unlock()
	fmt.Fprintf(w.ClientLog, "%s %s\n", time.Now().Format("15:04:05.000000"), fmt.Sprintf(format, args...))
}

// Stats are counts of a workload run.
type Stats struct{ Produced, Acked int }

// Stats returns how many produces were issued and acknowledged so far.
func (w *Workload) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Stats{w.produced, w.acked}
}

func (w *Workload) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(strings.Split(w.Bootstrap, ",")...),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.DialTimeout(2 * time.Second),
		kgo.RequestTimeoutOverhead(2 * time.Second),
		kgo.ConnIdleTimeout(5 * time.Second),
	}, extra...)
}

// Run runs producers and consumers until ctx is done. Client errors are
// recorded as fail or unknown outcomes, not returned; Run returns an error
// only when the recorder cannot write or a client cannot be built or
// started.
func (w *Workload) Run(ctx context.Context) error {
	if w.Java == nil && w.JavaProducers+w.JavaConsumers > 0 {
		return errors.New("workload: Java clients asked for without a Java driver opener")
	}
	var wg sync.WaitGroup
	if w.GroupConsumers > 0 && w.MemberGroup == "" {
		return errors.New("workload: group consumers asked for without a MemberGroup")
	}
	if w.Copiers > 0 && w.CopyTopic == "" {
		return errors.New("workload: copiers asked for without a CopyTopic")
	}
	errc := make(chan error, w.Producers+w.Consumers+w.ConfluentProducers+w.TxnProducers+w.JavaProducers+w.JavaConsumers+w.GroupConsumers+w.Copiers)
	start := func(n int, f func(i int) error) {
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := f(i); err != nil {
					errc <- err
				}
			}()
		}
	}
	start(w.Producers, func(i int) error { return w.produce(ctx, i) })
	start(w.Consumers, func(i int) error { return w.consume(ctx, fmt.Sprintf("consumer-%d", i), i, false) })
	start(w.ConfluentProducers, func(i int) error { return w.produceConfluent(ctx, i) })
	start(w.TxnProducers, func(i int) error { return w.produceTxn(ctx, i) })
	start(w.JavaProducers, func(i int) error { return w.produceJava(ctx, i) })
	start(w.JavaConsumers, func(i int) error { return w.consumeJava(ctx, i) })
	start(w.GroupConsumers, func(i int) error { return w.consumeGroup(ctx, i) })
	start(w.Copiers, func(i int) error { return w.copy(ctx, i) })
	wg.Wait()
	close(errc)
	return errors.Join(collect(errc)...)
}

func collect(c <-chan error) []error {
	var errs []error
	for e := range c {
		errs = append(errs, e)
	}
	return errs
}

// produce writes unique values "p<i>-<n>" round robin over the partitions,
// one at a time, with an idempotent franz-go producer (acks=all).
func (w *Workload) produce(ctx context.Context, i int) error {
	name := fmt.Sprintf("producer-%d", i)
	opts := []kgo.Opt{
		kgo.ClientID(name),
		kgo.DefaultProduceTopic(w.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(4 * time.Second),
		kgo.ProducerLinger(0),
	}
	if w.NoIdempotence || w.LeaderAcks {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	if w.LeaderAcks {
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	}
	cl, err := kgo.NewClient(w.clientOpts(opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for n := 0; ctx.Err() == nil; n++ {
		p := int32((n + i) % int(w.Partitions))
		v := fmt.Sprintf("p%d-%d", i, n)
		call := w.Rec.Begin()
		res := cl.ProduceSync(context.WithoutCancel(ctx), &kgo.Record{Partition: p, Value: []byte(v)})
		r, perr := res.First()
		op := lin.Op{Client: name, Op: lin.OpProduce, Topic: w.Topic, Partition: p, Value: v, Outcome: lin.OutcomeOK}
		if perr != nil {
			// A produce that reached no broker may still have; only the
			// broker's explicit rejection is a certain failure, and
			// franz-go retries those that are retriable.
			op.Outcome, op.Error = lin.OutcomeUnknown, opError(perr)
			var ke *kerr.Error
			if errors.As(perr, &ke) && !ke.Retriable {
				op.Outcome = lin.OutcomeFail
			}
		} else {
			op.Offset = lin.Int64(r.Offset)
		}
		if err := w.Rec.End(call, op); err != nil {
			return err
		}
		w.count(perr == nil)
	}
	return nil
}

func opError(err error) *lin.OpError {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return &lin.OpError{Code: ke.Message, Message: err.Error()}
	}
	return &lin.OpError{Code: "client", Message: err.Error()}
}

// consume reads every partition in turn with single Fetch requests from
// its own positions; every tenth operation lists the latest offset, commits
// its position or reads the committed one. With drain it returns once every
// partition was read up to the high watermark its last fetch reported and
// that watermark did not move.
func (w *Workload) consume(ctx context.Context, name string, i int, drain bool) error {
	cl, err := kgo.NewClient(w.clientOpts(
		kgo.ClientID(name),
		// Fetch v12: topics by name, no sessions needed.
		kgo.MaxVersions(kversion.V3_0_0()),
	)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	// Commits go through a client that never retries: a commit is not
	// idempotent, and a retry of one whose first attempt was applied
	// before its connection was cut applies it a second time, possibly
	// after a later commit of another consumer, which no single write of
	// a register explains. Sent once, a cut commit is just unknown.
	ccl, err := kgo.NewClient(w.clientOpts(kgo.ClientID(name+"-commits"), kgo.RequestRetries(0))...)
	if err != nil {
		return err
	}
	defer ccl.Close()
	adm := kadm.NewClient(ccl)
	rng := rand.New(rand.NewPCG(w.Seed, uint64(i)+1000))
	pos := make([]int64, w.Partitions)
	caughtUp := make([]bool, w.Partitions)
	for n := 0; ctx.Err() == nil; n++ {
		p := int32(n % int(w.Partitions))
		var err error
		switch r := rng.IntN(10); {
		case drain || r < 7:
			var hw int64
			hw, err = w.fetch(ctx, cl, name, p, &pos[p], w.TxnProducers > 0 && i%2 == 1)
			caughtUp[p] = hw >= 0 && pos[p] >= hw
		case r == 7:
			err = w.listLatest(ctx, cl, name, p)
		case r == 8:
			err = w.commit(ctx, adm, name, p, pos[p])
		default:
			err = w.fetchCommitted(ctx, adm, name, p)
		}
		if err != nil {
			return err
		}
		if drain {
			all := true
			for _, c := range caughtUp {
				all = all && c
			}
			if all {
				return nil
			}
		}
	}
	if drain {
		return fmt.Errorf("drain of %s not finished: %w", w.Topic, ctx.Err())
	}
	return nil
}

// fetch issues one Fetch for partition p from *pos and records it. It
// returns the high watermark (-1 when the fetch failed) and moves *pos past
// the batches returned, control and aborted ones included. With
// readCommitted it reads at read_committed, up to the last stable offset.
func (w *Workload) fetch(ctx context.Context, cl *kgo.Client, name string, p int32, pos *int64, readCommitted bool) (int64, error) {
	req := kmsg.NewPtrFetchRequest()
	iso, isoName := kgo.ReadUncommitted(), lin.ReadUncommitted
	if readCommitted {
		iso, isoName = kgo.ReadCommitted(), lin.ReadCommitted
		req.IsolationLevel = 1
	}
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 100, 1, 1<<20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = w.Topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, *pos, 256<<10
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	op := lin.Op{Client: name, Op: lin.OpFetch, Topic: w.Topic, Partition: p, From: lin.Int64(*pos),
		Isolation: isoName, Outcome: lin.OutcomeFail}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	call := w.Rec.Begin()
	resp, err := req.RequestWith(rctx, cl)
	hw := int64(-1)
	switch {
	case err != nil:
		op.Error = opError(err)
	case len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1:
		op.Error = &lin.OpError{Code: "client", Message: "fetch response without the partition asked for"}
	default:
		part := &resp.Topics[0].Partitions[0]
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: *pos, Topic: w.Topic, Partition: p,
			IsolationLevel: iso}, part, kgo.DefaultDecompressor(), nil)
		if fp.Err != nil {
			op.Error = opError(fp.Err)
			if errors.Is(fp.Err, kerr.OffsetOutOfRange) {
				*pos = 0 // the log lost its tail; read again from the start
			}
			break
		}
		op.Outcome, hw = lin.OutcomeOK, part.HighWatermark
		op.HighWatermark = lin.Int64(hw)
		for _, r := range fp.Records {
			op.Records = append(op.Records, lin.Record{Offset: r.Offset, Value: string(r.Value)})
		}
		*pos = max(*pos, next)
		op.Next = lin.Int64(*pos)
	}
	return hw, w.Rec.End(call, op)
}

func (w *Workload) listLatest(ctx context.Context, cl *kgo.Client, name string, p int32) error {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = w.Topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = p, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	op := lin.Op{Client: name, Op: lin.OpListOffsets, Topic: w.Topic, Partition: p, Kind: lin.KindLatest, Outcome: lin.OutcomeFail}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	call := w.Rec.Begin()
	resp, err := req.RequestWith(rctx, cl)
	switch {
	case err != nil:
		op.Error = opError(err)
	case len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1:
		op.Error = &lin.OpError{Code: "client", Message: "list_offsets response without the partition asked for"}
	default:
		part := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(part.ErrorCode); err != nil {
			op.Error = opError(err)
			break
		}
		op.Outcome, op.Offset = lin.OutcomeOK, lin.Int64(part.Offset)
	}
	return w.Rec.End(call, op)
}

func (w *Workload) commit(ctx context.Context, adm *kadm.Client, name string, p int32, off int64) error {
	op := lin.Op{Client: name, Op: lin.OpCommit, Group: w.Group, Topic: w.Topic, Partition: p, Offset: lin.Int64(off), Outcome: lin.OutcomeOK}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: w.Topic, Partition: p, At: off, LeaderEpoch: -1})
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	call := w.Rec.Begin()
	resp, err := adm.CommitOffsets(rctx, w.Group, os)
	switch {
	case err == nil && errors.Is(resp.Error(), kerr.UnknownTopicOrPartition):
		// kadm answers this itself, without sending the commit, when it
		// cannot resolve the topic's id from metadata (the broker is
		// down); a broker refuses a commit to a topic it does not know.
		op.Outcome, op.Error = lin.OutcomeFail, opError(resp.Error())
	case err == nil && resp.Error() != nil:
		// Any other error may follow an earlier attempt, retried by
		// the client, that was written before its answer was lost.
		op.Outcome, op.Error = lin.OutcomeUnknown, opError(resp.Error())
	case err != nil:
		op.Outcome, op.Error = lin.OutcomeUnknown, opError(err)
	}
	return w.Rec.End(call, op)
}

func (w *Workload) fetchCommitted(ctx context.Context, adm *kadm.Client, name string, p int32) error {
	op := lin.Op{Client: name, Op: lin.OpFetchCommitted, Group: w.Group, Topic: w.Topic, Partition: p, Outcome: lin.OutcomeFail}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	call := w.Rec.Begin()
	resp, err := adm.FetchOffsets(rctx, w.Group)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		op.Error = opError(err)
	} else {
		off := int64(-1)
		if o, ok := resp.Lookup(w.Topic, p); ok {
			if o.Err != nil {
				op.Error = opError(o.Err)
				return w.Rec.End(call, op)
			}
			off = o.At
		}
		op.Outcome, op.Offset = lin.OutcomeOK, lin.Int64(off)
	}
	return w.Rec.End(call, op)
}

// Drain reads every partition from the start up to its high watermark
// with a fresh consumer, after the faults are healed, so every
// acknowledged write is either read or reported lost.
func (w *Workload) Drain(ctx context.Context) error {
	return w.consume(ctx, "drain", 10_000, true)
}

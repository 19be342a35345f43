package handler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/partition"
	"github.com/cascade-kafka/cascade/broker/record"
	"github.com/cascade-kafka/cascade/broker/replica"
	"github.com/cascade-kafka/cascade/broker/replication"
	"github.com/cascade-kafka/cascade/broker/txn"
)

// TransactionStateTopic is Kafka's internal topic of transaction state.
const TransactionStateTopic = "__transaction_state"

// consumerOffsetsTopic is Kafka's internal topic of group offsets.
const consumerOffsetsTopic = "__consumer_offsets"

// TxnCoordinatorConfig tunes the transaction coordinator runtime; zero
// values take Kafka's defaults.
type TxnCoordinatorConfig struct {
	// AbortInterval is transaction.abort.timed.out.transaction.cleanup.interval.ms
	// (Kafka default 10 s): how often timed-out transactions are aborted
	// and idle transactional ids expired.
	AbortInterval time.Duration
	// IDExpiration is transactional.id.expiration.ms (default 7 days).
	IDExpiration time.Duration
	// MarkerRetryBackoff is the pause before rewriting a marker whose
	// append failed.
	MarkerRetryBackoff time.Duration
}

// TxnCoordinator runs the transaction coordinator: one txn.Coordinator per
// partition of __transaction_state, driven by a single goroutine fed by
// channels (as Kafka's TransactionCoordinator with its
// TransactionStateManager and TransactionMarkerChannelManager). It appends
// the state machine's records to __transaction_state, writes commit and
// abort markers to data partitions, aborts timed-out transactions, and
// replays __transaction_state at start. A single node leads, and loads,
// every partition; a cluster node loads the shard of a partition when the
// metadata image makes it the leader, with the leader epoch as coordinator
// epoch, and unloads it when another node does (coordinator_leaders.go);
// on a replicated partition a state write and a marker count once the high
// watermark has passed them (coordinator_acks.go).
type TxnCoordinator struct {
	env *Env
	cfg TxnCoordinatorConfig

	calls   chan func()
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	started atomic.Bool
	wg      sync.WaitGroup // marker writers, shard loaders and waits for replicated writes
	unsub   func()
	// ctx ends at Close: the waits for replicated writes give up.
	ctx    context.Context
	cancel context.CancelFunc

	// gates orders transactional appends before markers: a produce holds
	// its producer's gate shared from verification to append, a marker
	// write holds it exclusively. See BeginTransactionalAppend.
	gates [64]sync.RWMutex

	hookMu        sync.Mutex
	offsetsMarker []offsetsMarkerFunc

	// Owned by the loop goroutine.
	shards map[int32]*txnShard
	lead   leadership // cluster: the partitions served or loading
}

// offsetsMarkerFunc is told of a marker written to a __consumer_offsets
// partition.
type offsetsMarkerFunc = func(partition int32, producerID int64, epoch int16, commit bool)

// txnShard is the coordinator of one __transaction_state partition.
type txnShard struct {
	n int32
	m *txn.Coordinator
	p *partition.Partition
	// unloaded is set when the shard stops serving: its marker writers
	// give up, the partition's next leader completes the transactions.
	unloaded atomic.Bool
}

// NewTxnCoordinator returns a coordinator over env's metadata and
// partitions; Start runs it.
func NewTxnCoordinator(env *Env, cfg TxnCoordinatorConfig) *TxnCoordinator {
	if cfg.AbortInterval <= 0 {
		cfg.AbortInterval = 10 * time.Second
	}
	if cfg.IDExpiration <= 0 {
		cfg.IDExpiration = 7 * 24 * time.Hour
	}
	if cfg.MarkerRetryBackoff <= 0 {
		cfg.MarkerRetryBackoff = 100 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &TxnCoordinator{env: env, cfg: cfg, calls: make(chan func()), stop: make(chan struct{}), done: make(chan struct{}),
		lead: newLeadership(TransactionStateTopic, true), ctx: ctx, cancel: cancel}
}

// Start loads __transaction_state if it exists (completing transactions
// left prepared, as Kafka's loadTransactionsForTxnTopicPartition) and starts
// the loop. Without the topic, it is created by the first transactional
// request. A cluster node instead follows the image, loading the
// partitions it leads as the image shows them.
func (c *TxnCoordinator) Start() error {
	var err error
	if c.env.Cluster != nil {
		c.unsub = c.lead.subscribe(c.env)
	} else if _, ok := c.env.Meta.Image().Topic(TransactionStateTopic); ok {
		err = c.load(false)
	}
	c.started.Store(true)
	go c.run()
	return err
}

// Close stops the loop and the marker writers. Transactions in flight are
// completed by the next start, from __transaction_state.
func (c *TxnCoordinator) Close() {
	if c.unsub != nil {
		c.unsub()
	}
	c.once.Do(func() { close(c.stop) })
	if c.started.Load() {
		<-c.done
	}
	c.cancel()
	c.wg.Wait()
}

// OnOffsetsMarker registers fn to be called after a marker is written to a
// partition of __consumer_offsets: the group coordinator makes the
// transaction's pending offsets visible (commit) or drops them (abort), as
// Kafka's GroupCoordinator.onTransactionCompleted.
func (c *TxnCoordinator) OnOffsetsMarker(fn offsetsMarkerFunc) {
	c.hookMu.Lock()
	c.offsetsMarker = append(c.offsetsMarker, fn)
	c.hookMu.Unlock()
}

func (c *TxnCoordinator) run() {
	defer close(c.done)
	t := time.NewTicker(c.cfg.AbortInterval)
	defer t.Stop()
	for {
		select {
		case fn := <-c.calls:
			fn()
		case <-c.lead.changed:
			c.followLeadership()
		case <-t.C:
			now := c.nowMs()
			for _, s := range c.shards {
				c.process(s, s.m.Tick(now), nil)
			}
		case <-c.stop:
			return
		}
	}
}

func (c *TxnCoordinator) nowMs() int64 { return c.env.now().UnixMilli() }

// errTxnStopped answers requests racing Close.
var errTxnStopped = fmt.Errorf("%w: shutting down", txn.ErrCoordinatorNotAvailable)

// call runs fn on the loop and waits for it.
func (c *TxnCoordinator) call(ctx context.Context, fn func()) error {
	done := make(chan struct{})
	select {
	case c.calls <- func() { fn(); close(done) }:
	case <-c.stop:
		return errTxnStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-c.stop:
		return errTxnStopped
	}
}

// post queues fn on the loop without waiting; false if stopping.
func (c *TxnCoordinator) post(fn func()) bool {
	select {
	case c.calls <- fn:
		return true
	case <-c.stop:
		return false
	}
}

// request runs one request against the shard of id and waits for its
// reply, which may come only after the state record is appended. Only
// create (InitProducerId) makes __transaction_state; before it exists no
// producer id is mapped to a transactional id.
func (c *TxnCoordinator) request(ctx context.Context, id string, create bool, fn func(m *txn.Coordinator, now int64) txn.Output) txn.Reply {
	reply := make(chan txn.Reply, 1)
	err := c.call(ctx, func() {
		s, err := c.shardFor(id, create)
		if errors.Is(err, errNoTxnState) {
			err = txn.ErrInvalidProducerIDMapping
		}
		if err != nil {
			reply <- txn.Reply{Err: err, ProducerID: -1, ProducerEpoch: -1}
			return
		}
		if !c.process(s, fn(s.m, c.nowMs()), reply) {
			// The request's write was not answered: a bug in the
			// state machine's contract.
			reply <- txn.Reply{Err: fmt.Errorf("%w: no reply", txn.ErrUnknown), ProducerID: -1, ProducerEpoch: -1}
		}
	})
	if err != nil {
		return txn.Reply{Err: err, ProducerID: -1, ProducerEpoch: -1}
	}
	// On a replicated partition the reply comes once the write is
	// committed (awaitState).
	select {
	case r := <-reply:
		return r
	case <-ctx.Done():
		return txn.Reply{Err: ctx.Err(), ProducerID: -1, ProducerEpoch: -1}
	case <-c.stop:
		return txn.Reply{Err: errTxnStopped, ProducerID: -1, ProducerEpoch: -1}
	}
}

// process carries out an Output on the loop: appends its writes (whose
// completion may produce the reply), and starts its marker writes. It
// reports whether reply, when not nil, was answered or handed to a write's
// completion.
func (c *TxnCoordinator) process(s *txnShard, out txn.Output, reply chan<- txn.Reply) bool {
	if out.Reply != nil && reply != nil {
		reply <- *out.Reply
		reply = nil
	}
	handled := reply == nil
	for _, mk := range out.Markers {
		c.writeMarkers(s, mk)
	}
	for _, w := range out.Writes {
		required, err := c.appendState(s, w)
		if err != nil {
			c.env.logger().Warn("writing transaction state", "transactional_id", w.TransactionalID, "err", err)
		}
		if err == nil && required >= 0 {
			c.awaitState(s, w, required, reply)
			handled = true
		} else if c.process(s, s.m.Appended(w.Op, err), reply) {
			handled = true
		}
		reply = nil
	}
	return handled
}

// appendState appends one record to the shard's __transaction_state
// partition, uncompressed as Kafka's TransactionLog.ENFORCED_COMPRESSION,
// and returns the offset the high watermark must reach before the write is
// committed (-1 when the partition is not replicated). As Kafka's
// TransactionStateManager it appends with requiredAcks=-1: with the ISR
// under transaction.state.log.min.isr nothing is appended
// (NOT_ENOUGH_REPLICAS, which the client gets as COORDINATOR_NOT_AVAILABLE).
func (c *TxnCoordinator) appendState(s *txnShard, w txn.Write) (int64, error) {
	b, err := record.Build(record.NewSpec(record.Rec{Timestamp: c.nowMs(), Key: w.Key, Value: w.Value}))
	if err != nil {
		return -1, err
	}
	tp := s.p.TopicPartition()
	if err := c.env.checkCoordinatorAppend(tp); err != nil {
		return -1, txnAppendError(err)
	}
	info, err := s.p.AppendCoordinator(b)
	if err != nil {
		return -1, txnAppendError(err)
	}
	return c.env.coordinatorAppended(tp, info), nil
}

// awaitState completes write w of shard s once the high watermark reaches
// required, beside the loop: the transaction's pending transition keeps
// its other requests out meanwhile (CONCURRENT_TRANSACTIONS), as Kafka's
// TransactionMetadata.pendingState does while its DelayedProduce waits. A
// wait that fails is the write's failure (txnAppendError): the state
// machine drops the transition, and the record, if it commits later, is
// read by the partition's next load. A shard unloaded meanwhile answers
// NOT_COORDINATOR.
func (c *TxnCoordinator) awaitState(s *txnShard, w txn.Write, required int64, reply chan<- txn.Reply) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		err := c.env.awaitCoordinatorWrite(c.ctx, s.p.TopicPartition(), required, txnWriteTimeout)
		if err != nil {
			c.env.logger().Warn("transaction state write not committed", "transactional_id", w.TransactionalID, "err", err)
			err = txnAppendError(err)
		}
		posted := c.post(func() {
			if c.shards[s.n] != s {
				if reply != nil {
					reply <- txn.Reply{Err: fmt.Errorf("%w: %s-%d unloaded", txn.ErrNotCoordinator, TransactionStateTopic, s.n),
						ProducerID: -1, ProducerEpoch: -1}
				}
				return
			}
			c.process(s, s.m.Appended(w.Op, err), reply)
		})
		if !posted && reply != nil {
			reply <- txn.Reply{Err: errTxnStopped, ProducerID: -1, ProducerEpoch: -1}
		}
	}()
}

// txnAppendError maps a failed __transaction_state append to the error the
// client gets, as TransactionStateManager.appendTransactionToLog does: a
// partition no longer led here or a storage failure is NOT_COORDINATOR, a
// record too large for the topic UNKNOWN_SERVER_ERROR; anything else (too
// few replicas in sync, the ISR not catching up in time) leaves the
// coordinator unavailable, so the client retries.
func txnAppendError(err error) error {
	switch {
	case errors.Is(err, partition.ErrDeleted), errors.Is(err, log.ErrClosed), errors.Is(err, log.ErrStorage),
		errors.Is(err, replica.ErrNotLeaderOrFollower):
		return fmt.Errorf("%w: %v", txn.ErrNotCoordinator, err)
	case errors.Is(err, log.ErrMessageTooLarge):
		return fmt.Errorf("%w: %v", txn.ErrUnknown, err)
	}
	return err
}

// errNoTxnState answers reads of transaction state before any transaction
// created __transaction_state: no transactional id can be known.
var errNoTxnState = errors.New("handler: no __transaction_state yet")

// shardFor returns the coordinator of id's __transaction_state partition,
// loading the topic on first use; create makes the topic if it does not
// exist (InitProducerId), otherwise its absence is errNoTxnState.
func (c *TxnCoordinator) shardFor(id string, create bool) (*txnShard, error) {
	if c.env.Cluster != nil {
		return c.clusterShardFor(id, create)
	}
	if c.shards == nil {
		if _, ok := c.env.Meta.Image().Topic(TransactionStateTopic); !ok && !create {
			return nil, errNoTxnState
		}
		if err := c.load(true); err != nil {
			c.env.logger().Warn("transaction coordinator unavailable", "err", err)
			return nil, err
		}
	}
	n := txn.PartitionFor(id, int32(len(c.shards)))
	s := c.shards[n]
	if s == nil {
		return nil, fmt.Errorf("%w: %s-%d not hosted", txn.ErrNotCoordinator, TransactionStateTopic, n)
	}
	return s, nil
}

// load creates __transaction_state if asked and missing, then replays every
// partition into a fresh coordinator. It runs before the loop starts or on
// the loop.
func (c *TxnCoordinator) load(create bool) error {
	t, ok := c.env.Meta.Image().Topic(TransactionStateTopic)
	if !ok {
		if !create {
			return nil
		}
		if err := c.env.createInternalTopic(c.env.txnStateTopicSpec()); err != nil {
			return fmt.Errorf("%w: %v", txn.ErrCoordinatorNotAvailable, err)
		}
		if t, ok = c.env.Meta.Image().Topic(TransactionStateTopic); !ok {
			return fmt.Errorf("%w: %s not created", txn.ErrCoordinatorNotAvailable, TransactionStateTopic)
		}
	}
	shards := make(map[int32]*txnShard, len(t.Partitions))
	for _, tp := range t.Partitions {
		n := tp.Partition
		p := c.env.Partitions.Get(log.TopicPartition{Topic: TransactionStateTopic, Partition: n})
		if p == nil {
			// The partition manager follows the image synchronously;
			// a missing partition is a log that failed to open.
			return fmt.Errorf("%w: %s-%d has no log", txn.ErrCoordinatorNotAvailable, TransactionStateTopic, n)
		}
		m := c.newShardMachine(p.LeaderEpoch())
		if err := c.replay(p, m); err != nil {
			return fmt.Errorf("%w: loading %s-%d: %v", txn.ErrCoordinatorNotAvailable, TransactionStateTopic, n, err)
		}
		shards[n] = &txnShard{n: n, m: m, p: p}
	}
	c.shards = shards
	for _, s := range shards {
		c.process(s, s.m.Loaded(), nil)
	}
	return nil
}

// newShardMachine returns the state machine of one __transaction_state
// partition at the given coordinator epoch (the partition's leader epoch).
func (c *TxnCoordinator) newShardMachine(coordinatorEpoch int32) *txn.Coordinator {
	return txn.New(txn.Config{
		MaxTimeoutMs:       int32(c.env.Config.TransactionMaxTimeout / time.Millisecond),
		IDExpirationMs:     c.cfg.IDExpiration.Milliseconds(),
		CoordinatorEpoch:   coordinatorEpoch,
		TransactionVersion: finalizedTransactionVersion(),
		NewProducerID:      c.env.Meta.NextProducerID,
	})
}

// maxStateRecordBytes caps a decompressed __transaction_state batch.
const maxStateRecordBytes = 64 << 20

// replay feeds every record of p to m, as Kafka's
// TransactionStateManager.loadTransactionMetadata; a record that does not
// decode is skipped with a warning, as Kafka skips unknown versions.
func (c *TxnCoordinator) replay(p *partition.Partition, m *txn.Coordinator) error {
	return forEachBatch(p, p.LogStartOffset(), func(b record.Batch) error {
		if b.Control() {
			return nil
		}
		return replayRecords(b, maxStateRecordBytes, func(offset int64, key, value []byte) {
			if err := m.Replay(key, value); err != nil {
				c.env.logger().Warn("skipping transaction state record", "offset", offset, "err", err)
			}
		})
	})
}

// writeMarkers writes a transaction's markers in the background (Kafka's
// TransactionMarkerChannelManager), then reports to the state machine.
func (c *TxnCoordinator) writeMarkers(s *txnShard, mk txn.Markers) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for _, tp := range mk.Partitions {
			for attempt := 0; ; attempt++ {
				if s.unloaded.Load() {
					return
				}
				err := c.writeMarkerTo(tp, mk)
				if err == nil || !retriableMarkerError(err) {
					if err != nil {
						c.env.logger().Error("dropping transaction marker", "transactional_id", mk.TransactionalID,
							"partition", tp.String(), "err", err)
					}
					break
				}
				if attempt%100 == 0 {
					// A partition without a leader is retried until it
					// has one: say so now and then, not every time.
					c.env.logger().Warn("retrying transaction marker", "transactional_id", mk.TransactionalID,
						"partition", tp.String(), "attempt", attempt+1, "err", err)
				}
				select {
				case <-time.After(c.cfg.MarkerRetryBackoff):
				case <-c.stop:
					return
				}
			}
		}
		c.post(func() {
			if c.shards[s.n] != s {
				return // unloaded: the partition's next leader completes the transaction
			}
			c.process(s, s.m.MarkersWritten(mk.TransactionalID, c.nowMs()), nil)
		})
	}()
}

// retriableMarkerError reports whether a marker append may succeed later,
// as TransactionMarkerRequestCompletionHandler retries storage, leadership
// and replication errors (NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT).
func retriableMarkerError(err error) bool {
	for _, r := range []error{log.ErrStorage, errMarkerRetriable, replica.ErrNotLeaderOrFollower,
		replica.ErrNotEnoughReplicas, replica.ErrNotEnoughReplicasAfterAppend, replication.ErrRequestTimedOut} {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}

// WriteMarker appends one commit or abort marker for a producer to a
// partition (one partition of a WriteTxnMarkers request). A partition not
// hosted here (its topic deleted) needs no marker, as Kafka drops markers
// for unknown partitions. The producer's gate is held exclusively so that
// no verified transactional append of the producer lands after the marker.
// The marker's epoch is checked as transactions v1 check it: it may not be
// below the producer's epoch in the partition.
func (c *TxnCoordinator) WriteMarker(topic string, part int32, producerID int64, epoch int16, commit bool, coordinatorEpoch int32) error {
	return c.WriteMarkerVersion(topic, part, producerID, epoch, commit, coordinatorEpoch, 0)
}

// WriteMarkerVersion is WriteMarker for a transaction of the given
// transaction.version (WriteTxnMarkers v2, KIP-1228). From version 2 every
// transaction ends with an epoch bump, so a marker must carry an epoch
// above the producer's epoch in the partition; one at the same epoch is
// accepted only as the retry of a marker already written, when no
// transaction of the producer is open there (ProducerAppendInfo
// .checkProducerEpoch, KAFKA-19999). Otherwise the answer wraps
// log.ErrInvalidProducerEpoch.
func (c *TxnCoordinator) WriteMarkerVersion(topic string, part int32, producerID int64, epoch int16, commit bool, coordinatorEpoch int32, transactionVersion int8) error {
	p := c.env.Partitions.Get(log.TopicPartition{Topic: topic, Partition: part})
	if p == nil {
		return nil
	}
	g := c.gate(producerID)
	g.Lock()
	if transactionVersion >= 2 {
		if current, ongoing, known := c.producerTxnState(txn.TopicPartition{Topic: topic, Partition: part}, producerID); known &&
			(epoch < current || (epoch == current && ongoing)) {
			g.Unlock()
			return fmt.Errorf("%w: epoch of producer %d in %s-%d is %d, which is <= the last seen epoch %d (TV%d)",
				log.ErrInvalidProducerEpoch, producerID, topic, part, epoch, current, transactionVersion)
		}
	}
	tp := log.TopicPartition{Topic: topic, Partition: part}
	if err := c.env.checkCoordinatorAppend(tp); err != nil {
		g.Unlock()
		return err
	}
	info, err := p.AppendCoordinator(record.ControlBatch(producerID, epoch, commit, coordinatorEpoch, c.nowMs()))
	g.Unlock()
	if errors.Is(err, partition.ErrDeleted) || errors.Is(err, log.ErrClosed) {
		return nil
	}
	if err != nil {
		return err
	}
	// As Kafka's WriteTxnMarkers handler (requiredAcks=-1): the marker
	// is written once committed, so that the partition's next leader has
	// it; a wait that fails is retried by the coordinator.
	required := c.env.coordinatorAppended(tp, info)
	if err := c.env.awaitCoordinatorWrite(c.ctx, tp, required, markerWriteTimeout); err != nil && !committedAfterAppend(err) {
		return err
	}
	if topic == consumerOffsetsTopic {
		c.hookMu.Lock()
		hooks := append([]offsetsMarkerFunc(nil), c.offsetsMarker...)
		c.hookMu.Unlock()
		for _, fn := range hooks {
			fn(part, producerID, epoch, commit)
		}
	}
	return nil
}

func (c *TxnCoordinator) gate(producerID int64) *sync.RWMutex {
	return &c.gates[uint64(producerID)%uint64(len(c.gates))]
}

// InitProducerID answers InitProducerId for a transactional id (the
// transactional path of 22_init_producer_id.go). pid and epoch are -1
// unless the producer recovers (KIP-360). The error is nil or a txn error.
func (c *TxnCoordinator) InitProducerID(ctx context.Context, transactionalID string, timeoutMs int32, pid int64, epoch int16) (int64, int16, error) {
	r := c.request(ctx, transactionalID, true, func(m *txn.Coordinator, now int64) txn.Output {
		return m.InitProducerID(txn.InitRequest{TransactionalID: transactionalID, TimeoutMs: timeoutMs,
			ProducerID: pid, ProducerEpoch: epoch}, now)
	})
	return r.ProducerID, r.ProducerEpoch, r.Err
}

// finalizedTransactionVersion is the transaction.version level ApiVersions
// advertises as finalized (18_api_versions.go): the coordinator ends its own
// aborts at this level, as Kafka's TransactionStateManager.transactionVersionLevel.
func finalizedTransactionVersion() int16 {
	for _, f := range features {
		if f.name == "transaction.version" {
			return f.finalizedLevel
		}
	}
	return 0
}

// AddPartitions adds partitions to the producer's transaction
// (AddPartitionsToTxn v0-3, and AddOffsetsToTxn with the group's
// __consumer_offsets partition, at client transaction version tv 0; the
// implicit adds of transactions v2 at tv 2).
func (c *TxnCoordinator) AddPartitions(ctx context.Context, transactionalID string, pid int64, epoch int16, tps []txn.TopicPartition, tv int16) error {
	return c.request(ctx, transactionalID, false, func(m *txn.Coordinator, now int64) txn.Output {
		return m.AddPartitions(txn.AddPartitionsRequest{TransactionalID: transactionalID, ProducerID: pid,
			ProducerEpoch: epoch, Partitions: tps, TransactionVersion: tv}, now)
	}).Err
}

// EndTxn commits or aborts the producer's transaction at client
// transaction version tv (2 from EndTxn v5). It returns once the decision
// is in __transaction_state; markers follow in the background. At tv 2 it
// also returns the producer id and epoch for the producer's next
// transaction, otherwise -1 and -1.
func (c *TxnCoordinator) EndTxn(ctx context.Context, transactionalID string, pid int64, epoch int16, commit bool, tv int16) (int64, int16, error) {
	r := c.request(ctx, transactionalID, false, func(m *txn.Coordinator, now int64) txn.Output {
		return m.EndTxn(txn.EndTxnRequest{TransactionalID: transactionalID, ProducerID: pid,
			ProducerEpoch: epoch, Commit: commit, TransactionVersion: tv}, now)
	})
	return r.ProducerID, r.ProducerEpoch, r.Err
}

// Verify reports which partitions are part of the producer's ongoing
// transaction (AddPartitionsToTxn v4+ with VerifyOnly, KIP-890 part 1).
func (c *TxnCoordinator) Verify(ctx context.Context, transactionalID string, pid int64, epoch int16, tps []txn.TopicPartition) (map[txn.TopicPartition]error, error) {
	var res map[txn.TopicPartition]error
	var verr error
	err := c.call(ctx, func() {
		s, err := c.shardFor(transactionalID, false)
		if errors.Is(err, errNoTxnState) {
			err = txn.ErrInvalidProducerIDMapping
		}
		if err != nil {
			verr = err
			return
		}
		res, verr = s.m.Verify(txn.VerifyRequest{TransactionalID: transactionalID, ProducerID: pid,
			ProducerEpoch: epoch, Partitions: tps})
	})
	if err != nil {
		return nil, err
	}
	return res, verr
}

// BeginTransactionalAppend is called by Produce (and TxnOffsetCommit)
// before appending a transactional batch of producer (pid, epoch) to tp. It
// makes sure tp is part of the producer's ongoing transaction and holds the
// producer's gate until release is called after the append: a marker for
// the producer waits for the gate, so a batch let through always lands
// before the marker that ends its transaction.
//
// As Kafka's UnifiedLog.maybeStartTransactionVerification, an epoch older
// than the one tp's log has seen is refused at once (errStaleEpoch), and
// only a producer's first batch of a transaction in tp asks the
// coordinator: if tp's log already has a transaction of the producer open
// at this epoch, the coordinator added tp, and the marker that will close
// it has not been written (it would have closed the transaction in the
// log, and markers wait for the gate held here). For that first batch, add
// false verifies that tp was added (AddPartitionsToTxn v4 VerifyOnly,
// KIP-890 part 1), add true adds it for the producer (transactions v2,
// KIP-890 part 2: Produce v12, TxnOffsetCommit v5). A batch arriving after
// EndTxn finds no open transaction in the log and is refused by the
// coordinator (v1: the partition is no longer in an ongoing transaction;
// v2: the epoch was bumped). On error there is nothing to release.
func (c *TxnCoordinator) BeginTransactionalAppend(ctx context.Context, transactionalID string, pid int64, epoch int16, tp txn.TopicPartition, add bool) (release func(), err error) {
	g := c.gate(pid)
	retryUntil := time.Now().Add(addPartitionsRetryMax)
	for {
		g.RLock()
		logEpoch, ongoing, known := c.producerTxnState(tp, pid)
		switch {
		case known && logEpoch > epoch:
			g.RUnlock()
			return nil, fmt.Errorf("%w: epoch %d of producer %d is older than %d in %s", errStaleEpoch, epoch, pid, logEpoch, tp)
		case known && ongoing && logEpoch == epoch:
			return g.RUnlock, nil
		}
		if node, remote := c.remoteCoordinator(transactionalID); remote {
			err = c.remoteAddPartition(ctx, node, transactionalID, pid, epoch, tp, add)
		} else if add {
			err = c.AddPartitions(ctx, transactionalID, pid, epoch, []txn.TopicPartition{tp}, 2)
		} else {
			var res map[txn.TopicPartition]error
			res, err = c.Verify(ctx, transactionalID, pid, epoch, []txn.TopicPartition{tp})
			if err == nil {
				err = res[tp]
			}
		}
		if err == nil {
			return g.RUnlock, nil
		}
		g.RUnlock()
		// On a cluster the previous transaction's markers go to other
		// nodes, so a transactions v2 producer's next batch often
		// finds it still completing. As Kafka's ReplicaManager
		// (KAFKA-18654), the add is retried for a while
		// (add.partitions.to.txn.retry.backoff.ms and .max.ms) before the
		// producer is told to retry, with the gate released so that the
		// markers can land.
		if c.env.Cluster == nil || !add || !errors.Is(err, txn.ErrConcurrentTransactions) || time.Now().After(retryUntil) {
			return nil, err
		}
		select {
		case <-time.After(addPartitionsRetryBackoff):
		case <-ctx.Done():
			return nil, err
		}
	}
}

// addPartitionsRetryBackoff and addPartitionsRetryMax are Kafka's defaults
// of add.partitions.to.txn.retry.backoff.ms and
// add.partitions.to.txn.retry.backoff.max.ms.
const (
	addPartitionsRetryBackoff = 20 * time.Millisecond
	addPartitionsRetryMax     = 100 * time.Millisecond
)

// errStaleEpoch is returned by BeginTransactionalAppend for a batch whose
// epoch is older than the partition has seen (INVALID_PRODUCER_EPOCH).
var errStaleEpoch = errors.New("handler: producer epoch older than the partition's")

// producerTxnLog is implemented by logs that report a producer's epoch and
// open transaction (Kafka's UnifiedLog producer state).
type producerTxnLog interface {
	ProducerTxnState(pid int64) (epoch int16, ongoing, known bool)
}

// producerTxnState returns the producer's epoch in tp's log and whether it
// has a transaction open there; known is false when tp is not hosted or
// its log cannot tell, so that the coordinator is asked.
func (c *TxnCoordinator) producerTxnState(tp txn.TopicPartition, pid int64) (epoch int16, ongoing, known bool) {
	p := c.env.Partitions.Get(log.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	if p == nil {
		return 0, false, false
	}
	l, ok := p.Log().(producerTxnLog)
	if !ok {
		return 0, false, false
	}
	return l.ProducerTxnState(pid)
}

// DescribeTransaction answers DescribeTransactions for one id.
func (c *TxnCoordinator) DescribeTransaction(ctx context.Context, transactionalID string) (txn.Description, error) {
	var d txn.Description
	var derr error
	err := c.call(ctx, func() {
		if transactionalID == "" {
			derr = txn.ErrInvalidRequest
			return
		}
		s, err := c.shardFor(transactionalID, false)
		if errors.Is(err, errNoTxnState) {
			err = txn.ErrTransactionalIDNotFound
		}
		if err != nil {
			derr = err
			return
		}
		d, derr = s.m.Describe(transactionalID)
	})
	if err != nil {
		return d, err
	}
	return d, derr
}

// ListTransactions answers ListTransactions across every shard.
func (c *TxnCoordinator) ListTransactions(ctx context.Context, f txn.ListFilter) ([]txn.Description, []string, error) {
	var out []txn.Description
	var unknown []string
	var lerr error
	err := c.call(ctx, func() {
		if c.env.Cluster != nil {
			// A node that leads no partition of __transaction_state
			// lists none, whether or not the topic exists.
			if lerr = c.clusterListable(); lerr != nil {
				return
			}
		} else if c.shards == nil {
			if _, ok := c.env.Meta.Image().Topic(TransactionStateTopic); ok {
				if lerr = c.load(false); lerr != nil {
					return
				}
			}
		}
		if len(c.shards) == 0 {
			// Nothing transactional here.
			for _, name := range f.States {
				if _, ok := txn.ParseState(name); !ok {
					unknown = append(unknown, name)
				}
			}
			return
		}
		now := c.nowMs()
		for _, n := range slices.Sorted(maps.Keys(c.shards)) {
			ds, u, err := c.shards[n].m.List(f, now)
			if err != nil {
				lerr = err
				return
			}
			out = append(out, ds...)
			unknown = u
		}
	})
	if err != nil {
		return nil, nil, err
	}
	return out, unknown, lerr
}

package txn

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// Defaults of Kafka's transaction coordinator configs.
const (
	DefaultMaxTimeoutMs   = 900000    // transaction.max.timeout.ms
	DefaultIDExpirationMs = 604800000 // transactional.id.expiration.ms
)

// noProducerID and noEpoch are Kafka's RecordBatch.NO_PRODUCER_ID and
// NO_PRODUCER_EPOCH.
const (
	noProducerID = -1
	noEpoch      = -1
)

// Config configures a Coordinator.
type Config struct {
	// MaxTimeoutMs is transaction.max.timeout.ms: the largest
	// transaction.timeout.ms a producer may ask for.
	MaxTimeoutMs int32
	// IDExpirationMs is transactional.id.expiration.ms: a transactional id
	// idle (no transaction in progress) this long is expired.
	IDExpirationMs int64
	// CoordinatorEpoch is the leader epoch of the __transaction_state
	// partition; markers carry it.
	CoordinatorEpoch int32
	// TransactionVersion is the finalized level of the transaction.version
	// feature (0-2). From level 1 the TransactionLogValue is written in
	// version 1 (Kafka's TransactionVersion.transactionLogValueVersion); at
	// level 2 the coordinator's own aborts (timeouts, fencing by
	// InitProducerId) bump the epoch as transactions v2 do, because Kafka
	// ends them with the server's level rather than a client's.
	TransactionVersion int16
	// NewProducerID allocates a fresh, durable producer id. It is the one
	// call out of the state machine; it must not call back into it.
	NewProducerID func() (int64, error)
}

// Op identifies one pending write to __transaction_state.
type Op uint64

// Write is one record the caller must append to __transaction_state, then
// report with Appended.
type Write struct {
	Op              Op
	TransactionalID string
	Key             []byte
	Value           []byte // nil: a tombstone
}

// Markers asks the caller to write a commit or abort control batch for the
// producer to every partition listed, then report with MarkersWritten (Kafka's
// WriteTxnMarkers request from coordinator to partition leaders).
type Markers struct {
	TransactionalID  string
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
	Partitions       []TopicPartition
}

// Reply answers a request.
type Reply struct {
	Err           error // nil or one of this package's errors, possibly wrapped
	ProducerID    int64 // InitProducerId
	ProducerEpoch int16 // InitProducerId
}

// Output is what one input asks of the caller. A request's Output has either
// a Reply, or exactly one Write whose Appended Output carries the reply.
type Output struct {
	Reply   *Reply
	Writes  []Write
	Markers []Markers
}

// fields is the persisted part of a transactional id's state (Kafka's
// TxnTransitMetadata).
type fields struct {
	producerID     int64
	prevProducerID int64
	nextProducerID int64
	epoch          int16
	lastEpoch      int16
	timeoutMs      int32
	state          State
	partitions     []TopicPartition // sorted, no duplicates
	startMs        int64
	updateMs       int64
	// clientTV is the transaction version of the client request that
	// made the last transition (Kafka's clientTransactionVersion): 2 when
	// the epoch is bumped at every commit and abort.
	clientTV int16
}

type opKind uint8

const (
	opInit          opKind = iota + 1 // InitProducerId: reply with id and epoch
	opInitFence                       // InitProducerId fenced an ongoing txn: reply CONCURRENT_TRANSACTIONS
	opAddPartitions                   // AddPartitionsToTxn / AddOffsetsToTxn
	opEndTxn                          // EndTxn from the client
	opTimeoutAbort                    // abort of a timed-out transaction; nobody waits
	opComplete                        // CompleteCommit / CompleteAbort after markers
	opExpire                          // tombstone of an expired transactional id
)

// meta is one transactional id's state (Kafka's TransactionMetadata).
type meta struct {
	id string
	fields

	// pending is the transition waiting for its write (Kafka's
	// pendingState); pendingOp is 0 while markers are still being written.
	hasPending  bool
	pending     fields
	pendingKind opKind
	pendingOp   Op

	awaitingMarkers bool // Prepare* logged, markers handed out
	retryComplete   bool // the complete write failed; Tick writes it again
	failedFence     bool // Kafka's hasFailedEpochFence
}

// Coordinator is the transaction coordinator state machine for the
// transactional ids of one __transaction_state partition. It is not safe for
// concurrent use: one goroutine drives it.
type Coordinator struct {
	cfg     Config
	txns    map[string]*meta
	ops     map[Op]string // pending write → transactional id
	nextOp  Op
	loading bool
}

// New returns a coordinator that is loading: requests are answered with
// ErrCoordinatorLoading until Loaded.
func New(cfg Config) *Coordinator {
	if cfg.MaxTimeoutMs <= 0 {
		cfg.MaxTimeoutMs = DefaultMaxTimeoutMs
	}
	if cfg.IDExpirationMs <= 0 {
		cfg.IDExpirationMs = DefaultIDExpirationMs
	}
	return &Coordinator{cfg: cfg, txns: make(map[string]*meta), ops: make(map[Op]string), loading: true}
}

// isEpochExhausted is Kafka's TransactionMetadata.isEpochExhausted: the
// coordinator keeps one epoch in reserve for fencing.
func isEpochExhausted(e int16) bool { return e >= math.MaxInt16-1 }

// prepare records next as m's pending transition, checking it is legal. As
// Kafka's TransactionMetadata.prepareTransitionTo, the transition's previous
// producer id is the id before it.
func (m *meta) prepare(next fields, kind opKind) error {
	if m.hasPending {
		return fmt.Errorf("%w: %s already has a pending transition to %s", ErrUnknown, m.id, m.pending.state)
	}
	if !canTransition(m.state, next.state) {
		return fmt.Errorf("%w: %s cannot go from %s to %s", ErrUnknown, m.id, m.state, next.state)
	}
	next.prevProducerID = m.producerID
	m.hasPending, m.pending, m.pendingKind = true, next, kind
	return nil
}

func (m *meta) clearPending() {
	m.hasPending, m.pending, m.pendingKind, m.pendingOp = false, fields{}, 0, 0
}

// write allocates an op for m's pending transition and encodes its record.
func (c *Coordinator) write(m *meta) (Write, error) {
	c.nextOp++
	op := c.nextOp
	w := Write{Op: op, TransactionalID: m.id, Key: EncodeKey(m.id)}
	if m.pending.state != Dead {
		v, err := EncodeValue(c.value(m.pending))
		if err != nil {
			m.clearPending()
			return Write{}, fmt.Errorf("%w: %v", ErrUnknown, err)
		}
		w.Value = v
	}
	m.pendingOp = op
	c.ops[op] = m.id
	return w, nil
}

func (c *Coordinator) value(f fields) Value {
	v := Value{
		ProducerID:               f.producerID,
		PreviousProducerID:       f.prevProducerID,
		NextProducerID:           f.nextProducerID,
		ProducerEpoch:            f.epoch,
		NextProducerEpoch:        noEpoch,
		TimeoutMs:                f.timeoutMs,
		State:                    f.state,
		LastUpdateMs:             f.updateMs,
		StartMs:                  f.startMs,
		ClientTransactionVersion: f.clientTV,
	}
	if c.cfg.TransactionVersion >= 1 {
		v.Version = 1
	}
	if f.state != Empty {
		v.Partitions = append([]TopicPartition(nil), f.partitions...)
	}
	return v
}

func reply(err error) Output {
	return Output{Reply: &Reply{Err: err, ProducerID: noProducerID, ProducerEpoch: noEpoch}}
}

// writeOutput turns m's freshly prepared transition into an Output.
func (c *Coordinator) writeOutput(m *meta) Output {
	w, err := c.write(m)
	if err != nil {
		return reply(err)
	}
	return Output{Writes: []Write{w}}
}

// InitRequest is InitProducerId with a transactional id. ProducerID and
// ProducerEpoch are -1 unless the producer recovers from an error (KIP-360).
type InitRequest struct {
	TransactionalID string
	TimeoutMs       int32
	ProducerID      int64
	ProducerEpoch   int16
}

// InitProducerID answers InitProducerId for a transactional id, as Kafka's
// TransactionCoordinator.handleInitProducerId: it bumps the epoch (fencing
// earlier producers), rotates the producer id when the epoch is exhausted,
// and aborts an ongoing transaction first, answering CONCURRENT_TRANSACTIONS
// so that the client retries.
func (c *Coordinator) InitProducerID(req InitRequest, nowMs int64) Output {
	switch {
	case req.TransactionalID == "":
		return reply(ErrInvalidRequest)
	case (req.ProducerID == noProducerID) != (req.ProducerEpoch == noEpoch):
		// As KafkaApis.handleInitProducerIdRequest: both or neither.
		return reply(ErrInvalidRequest)
	case req.TimeoutMs <= 0 || req.TimeoutMs > c.cfg.MaxTimeoutMs:
		return reply(ErrInvalidTimeout)
	case c.loading:
		return reply(ErrCoordinatorLoading)
	}
	expected := req.ProducerID != noProducerID
	m := c.txns[req.TransactionalID]
	if m == nil {
		pid, err := c.newProducerID()
		if err != nil {
			return reply(err)
		}
		m = &meta{id: req.TransactionalID, fields: fields{
			producerID: pid, prevProducerID: noProducerID, nextProducerID: noProducerID,
			epoch: noEpoch, lastEpoch: noEpoch, timeoutMs: req.TimeoutMs, state: Empty,
			startMs: -1, updateMs: nowMs,
		}}
		c.txns[m.id] = m
	}
	if m.hasPending || m.awaitingMarkers {
		return reply(ErrConcurrentTransactions)
	}
	if expected && !(m.epoch == noEpoch || req.ProducerID == m.producerID ||
		(req.ProducerID == m.prevProducerID && isEpochExhausted(req.ProducerEpoch))) {
		return reply(ErrProducerFenced)
	}
	switch m.state {
	case PrepareCommit, PrepareAbort:
		return reply(ErrConcurrentTransactions)
	case Empty, CompleteCommit, CompleteAbort:
		next := m.fields
		next.state, next.timeoutMs, next.partitions, next.startMs, next.updateMs = Empty, req.TimeoutMs, nil, -1, nowMs
		if isEpochExhausted(m.epoch) && (!expected || req.ProducerEpoch == m.epoch) {
			// Kafka's prepareProducerIdRotation.
			pid, err := c.newProducerID()
			if err != nil {
				return reply(err)
			}
			next.prevProducerID, next.producerID, next.epoch = m.producerID, pid, 0
			next.lastEpoch = noEpoch
			if expected {
				next.lastEpoch = m.epoch
			}
		} else {
			// Kafka's prepareIncrementProducerEpoch.
			switch {
			case !expected:
				next.epoch, next.lastEpoch = m.epoch+1, noEpoch
			case m.epoch == noEpoch || req.ProducerEpoch == m.epoch:
				next.epoch, next.lastEpoch = m.epoch+1, m.epoch
			case req.ProducerEpoch == m.lastEpoch:
				// A retry of a bump whose answer was lost.
			default:
				return reply(ErrProducerFenced)
			}
		}
		if err := m.prepare(next, opInit); err != nil {
			return reply(err)
		}
		return c.writeOutput(m)
	case Ongoing:
		// Abort the ongoing transaction with a bumped epoch; the epoch is
		// never returned, the client retries and bumps it again.
		return c.fenceAndAbort(m, nowMs, opInitFence)
	}
	return reply(fmt.Errorf("%w: %s in state %s", ErrUnknown, m.id, m.state))
}

func (c *Coordinator) newProducerID() (int64, error) {
	if c.cfg.NewProducerID == nil {
		return 0, fmt.Errorf("%w: no producer id allocator", ErrCoordinatorNotAvailable)
	}
	pid, err := c.cfg.NewProducerID()
	if err != nil {
		return 0, fmt.Errorf("%w: allocating a producer id: %v", ErrCoordinatorNotAvailable, err)
	}
	return pid, nil
}

// fenceAndAbort is Kafka's prepareFenceProducerEpoch followed by
// endTransaction(ABORT, isFromClient=false) at the server's transaction
// version. Below version 2 (endTransactionWithTV1) the in-memory epoch is
// bumped at once (unless an earlier fence failed to be written), and
// PrepareAbort is written with it. At version 2 the abort is a
// transactions v2 abort: the fence only clears the way, and PrepareAbort is
// written with the epoch bumped once (TransactionMetadata.prepareAbortOrCommit),
// leaving memory untouched until the write succeeds.
func (c *Coordinator) fenceAndAbort(m *meta, nowMs int64, kind opKind) Output {
	var next fields
	if c.cfg.TransactionVersion >= 2 {
		next = m.endFields(PrepareAbort, c.cfg.TransactionVersion, noProducerID, false, nowMs)
	} else {
		if !m.failedFence && m.epoch < math.MaxInt16 {
			m.epoch++
		}
		m.lastEpoch = noEpoch
		next = m.endFields(PrepareAbort, 0, noProducerID, false, nowMs)
	}
	if err := m.prepare(next, kind); err != nil {
		return reply(err)
	}
	return c.writeOutput(m)
}

// AddPartitionsRequest is AddPartitionsToTxn from a client (v0-3), from a
// partition leader adding a partition on a producer's behalf (v4+ without
// VerifyOnly: transactions v2, KIP-890 part 2), or AddOffsetsToTxn with the
// __consumer_offsets partition of its group.
type AddPartitionsRequest struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Partitions      []TopicPartition
	// TransactionVersion is the client's: 2 for AddPartitionsToTxn v4+
	// (TransactionVersion.transactionVersionForAddPartitionsToTxn), else 0.
	TransactionVersion int16
}

// AddPartitions adds partitions to the producer's transaction, starting one
// if none is ongoing (Kafka's handleAddPartitionsToTransaction, whose checks
// come in this order: a pending transition, the producer id, its epoch,
// then the state).
func (c *Coordinator) AddPartitions(req AddPartitionsRequest, nowMs int64) Output {
	switch {
	case req.TransactionalID == "":
		return reply(ErrInvalidRequest)
	case c.loading:
		return reply(ErrCoordinatorLoading)
	}
	m := c.txns[req.TransactionalID]
	switch {
	case m == nil:
		return reply(ErrInvalidProducerIDMapping)
	case m.hasPending || m.awaitingMarkers:
		return reply(ErrConcurrentTransactions)
	case m.producerID != req.ProducerID:
		return reply(ErrInvalidProducerIDMapping)
	case m.epoch != req.ProducerEpoch:
		return reply(ErrProducerFenced)
	case m.state == PrepareCommit || m.state == PrepareAbort:
		return reply(ErrConcurrentTransactions)
	case m.state == Ongoing && m.hasAll(req.Partitions):
		return reply(nil)
	}
	// TransactionMetadata.prepareAddPartitions.
	next := m.fields
	if m.state != Ongoing {
		next.startMs = nowMs
	}
	next.state, next.updateMs, next.clientTV = Ongoing, nowMs, req.TransactionVersion
	next.partitions = unionPartitions(m.partitions, req.Partitions)
	if err := m.prepare(next, opAddPartitions); err != nil {
		return reply(err)
	}
	return c.writeOutput(m)
}

// check finds a transactional id and checks the producer's id and epoch, as
// Kafka's coordinator does for every request after InitProducerId.
func (c *Coordinator) check(id string, pid int64, epoch int16) (*meta, error) {
	if id == "" {
		return nil, ErrInvalidRequest
	}
	if c.loading {
		return nil, ErrCoordinatorLoading
	}
	m := c.txns[id]
	switch {
	case m == nil || m.producerID != pid:
		return nil, ErrInvalidProducerIDMapping
	case m.epoch != epoch:
		return nil, ErrProducerFenced
	}
	return m, nil
}

func (m *meta) has(tp TopicPartition) bool {
	i := sort.Search(len(m.partitions), func(i int) bool {
		p := m.partitions[i]
		return p.Topic > tp.Topic || (p.Topic == tp.Topic && p.Partition >= tp.Partition)
	})
	return i < len(m.partitions) && m.partitions[i] == tp
}

func (m *meta) hasAll(tps []TopicPartition) bool {
	for _, tp := range tps {
		if !m.has(tp) {
			return false
		}
	}
	return true
}

func unionPartitions(a, b []TopicPartition) []TopicPartition {
	out := make([]TopicPartition, 0, len(a)+len(b))
	out = append(out, a...)
	out = append(out, b...)
	sortPartitions(out)
	n := 0
	for i, tp := range out {
		if i == 0 || tp != out[n-1] {
			out[n] = tp
			n++
		}
	}
	return out[:n]
}

// VerifyRequest is the batched broker form of AddPartitionsToTxn (v4+,
// VerifyOnly), sent by a partition leader before it appends a producer's
// first transactional batch (KIP-890 part 1).
type VerifyRequest struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Partitions      []TopicPartition
}

// Verify reports, per partition, whether it is part of the producer's
// ongoing transaction (nil) or not (ErrTransactionAbortable). A non-nil
// error applies to every partition. As Kafka's
// handleVerifyPartitionsInTransaction, pending transitions are not checked.
func (c *Coordinator) Verify(req VerifyRequest) (map[TopicPartition]error, error) {
	m, err := c.check(req.TransactionalID, req.ProducerID, req.ProducerEpoch)
	if err != nil {
		return nil, err
	}
	if m.state == PrepareCommit || m.state == PrepareAbort {
		return nil, ErrConcurrentTransactions
	}
	out := make(map[TopicPartition]error, len(req.Partitions))
	for _, tp := range req.Partitions {
		if m.state == Ongoing && m.has(tp) {
			out[tp] = nil
		} else {
			out[tp] = ErrTransactionAbortable
		}
	}
	return out, nil
}

// EndTxnRequest is EndTxn.
type EndTxnRequest struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Commit          bool
	// TransactionVersion is the client's: 2 for EndTxn v5 and above
	// (TransactionVersion.transactionVersionForEndTxn), else 0.
	TransactionVersion int16
}

// EndTxn commits or aborts the producer's transaction. Below transaction
// version 2 it is Kafka's endTransactionWithTV1: the epoch stays, and
// retrying the end of a completed transaction with the same result
// succeeds. At version 2 see endTxnV2.
func (c *Coordinator) EndTxn(req EndTxnRequest, nowMs int64) Output {
	if req.TransactionVersion >= 2 {
		return c.endTxnV2(req, nowMs)
	}
	m, err := c.check(req.TransactionalID, req.ProducerID, req.ProducerEpoch)
	if err != nil {
		return reply(err)
	}
	if m.hasPending || m.awaitingMarkers {
		// While markers are written Kafka holds the pending transition
		// to Complete*: any EndTxn is retried.
		return reply(ErrConcurrentTransactions)
	}
	switch m.state {
	case Ongoing:
		st := PrepareAbort
		if req.Commit {
			st = PrepareCommit
		}
		if err := m.prepare(m.endFields(st, 0, noProducerID, false, nowMs), opEndTxn); err != nil {
			return reply(err)
		}
		return c.writeOutput(m)
	case CompleteCommit:
		if req.Commit {
			return reply(nil)
		}
	case CompleteAbort:
		if !req.Commit {
			return reply(nil)
		}
	case PrepareCommit:
		if req.Commit {
			return reply(ErrConcurrentTransactions)
		}
	case PrepareAbort:
		if !req.Commit {
			return reply(ErrConcurrentTransactions)
		}
	case Empty:
	default:
		return reply(fmt.Errorf("%w: %s in state %s", ErrUnknown, m.id, m.state))
	}
	return reply(ErrInvalidTxnState)
}

// endTxnV2 is Kafka's TransactionCoordinator.endTransaction for
// transactions v2 (KIP-890 part 2): every commit and abort bumps the
// epoch, and the reply carries the producer id and epoch to use next. When
// the epoch would reach Short.MAX_VALUE a new producer id is allocated; the
// markers still carry the old id with the exhausted epoch, and the id
// changes (epoch 0) when the transaction completes. A client may abort
// without having added a partition. Which states accept which epochs, as
// Kafka's table:
//
//	               Abort            Commit
//	               retry  current   retry  current
//	Empty          FENCED bump      FENCED INVALID_TXN_STATE
//	CompleteAbort  ok     bump      INVALID_TXN_STATE
//	CompleteCommit INVALID bump     ok     INVALID_TXN_STATE
//
// where retry is the epoch before the last bump (or the last epoch of the
// previous producer id after an overflow).
func (c *Coordinator) endTxnV2(req EndTxnRequest, nowMs int64) Output {
	switch {
	case req.TransactionalID == "":
		return reply(ErrInvalidRequest)
	case c.loading:
		return reply(ErrCoordinatorLoading)
	}
	m := c.txns[req.TransactionalID]
	if m == nil {
		return reply(ErrInvalidProducerIDMapping)
	}
	retryOnOverflow := m.prevProducerID == req.ProducerID && req.ProducerEpoch == math.MaxInt16-1 && m.epoch == 0
	retryOnBump := int32(m.epoch) == int32(req.ProducerEpoch)+1
	isRetry := retryOnBump || retryOnOverflow
	var validEpoch bool
	switch m.state {
	case PrepareCommit, PrepareAbort:
		validEpoch = retryOnBump
	case CompleteCommit, CompleteAbort:
		validEpoch = isRetry || req.ProducerEpoch == m.epoch
	default:
		validEpoch = req.ProducerEpoch == m.epoch
	}
	switch {
	case m.producerID != req.ProducerID && !retryOnOverflow:
		return reply(ErrInvalidProducerIDMapping)
	case !validEpoch:
		return reply(ErrProducerFenced)
	case m.hasPending || m.awaitingMarkers:
		return reply(ErrConcurrentTransactions)
	}
	current := func() Output {
		return Output{Reply: &Reply{ProducerID: m.producerID, ProducerEpoch: m.epoch}}
	}
	end := func(st State, noPartitionAdded bool) Output {
		next := int64(noProducerID)
		if isEpochExhausted(m.epoch) {
			pid, err := c.newProducerID()
			if err != nil {
				return reply(err)
			}
			next = pid
		}
		if err := m.prepare(m.endFields(st, req.TransactionVersion, next, noPartitionAdded, nowMs), opEndTxn); err != nil {
			return reply(err)
		}
		return c.writeOutput(m)
	}
	switch m.state {
	case Ongoing:
		if req.Commit {
			return end(PrepareCommit, false)
		}
		return end(PrepareAbort, false)
	case CompleteCommit:
		switch {
		case req.Commit && isRetry:
			return current()
		case !req.Commit && !isRetry:
			return end(PrepareAbort, true)
		}
	case CompleteAbort:
		switch {
		case !req.Commit && isRetry:
			return current()
		case !req.Commit:
			return end(PrepareAbort, true)
		}
	case PrepareCommit:
		if req.Commit {
			return reply(ErrConcurrentTransactions)
		}
	case PrepareAbort:
		if !req.Commit {
			return reply(ErrConcurrentTransactions)
		}
	case Empty:
		if !req.Commit {
			return end(PrepareAbort, true)
		}
	default:
		return reply(fmt.Errorf("%w: %s in state %s", ErrUnknown, m.id, m.state))
	}
	return reply(ErrInvalidTxnState)
}

// endFields returns m's transition to PrepareCommit or PrepareAbort (Kafka's
// TransactionMetadata.prepareAbortOrCommit): at client transaction version
// 2 the epoch is bumped (except an abort already at Short.MAX_VALUE, which
// goes through so that the producer can recover) and nextPID, when not -1,
// is the producer id the transaction completes with. An abort with no
// partition added starts now.
func (m *meta) endFields(st State, tv int16, nextPID int64, noPartitionAdded bool, nowMs int64) fields {
	next := m.fields
	next.state = st
	if tv >= 2 {
		if m.epoch != math.MaxInt16 || st != PrepareAbort {
			next.epoch = m.epoch + 1
		}
		next.lastEpoch = m.epoch
	}
	if noPartitionAdded {
		next.startMs = nowMs
	}
	next.nextProducerID, next.updateMs, next.clientTV = nextPID, nowMs, tv
	return next
}

// Appended completes the write op: err is the append's failure, nil when
// the record is in __transaction_state. The Output carries the reply of the
// request that caused the write (ignored for writes nobody waits on) and
// any markers now due.
func (c *Coordinator) Appended(op Op, err error) Output {
	id, ok := c.ops[op]
	if !ok {
		return reply(fmt.Errorf("%w: unknown write %d", ErrNotCoordinator, op))
	}
	delete(c.ops, op)
	m := c.txns[id]
	if m == nil || !m.hasPending || m.pendingOp != op {
		return reply(fmt.Errorf("%w: write %d of %s is stale", ErrNotCoordinator, op, id))
	}
	kind := m.pendingKind
	if err != nil {
		err = appendError(err)
		m.clearPending()
		switch kind {
		case opInitFence, opTimeoutAbort:
			// Below transactions v2 the bumped epoch stays in memory but
			// was never written or returned: do not bump again (Kafka's
			// hasFailedEpochFence). A v2 fence left memory untouched.
			m.failedFence = c.cfg.TransactionVersion < 2
		case opComplete:
			m.retryComplete = true
		}
		return reply(err)
	}
	m.fields = m.pending
	m.clearPending()
	switch kind {
	case opExpire:
		delete(c.txns, id)
		return reply(nil)
	case opInit:
		m.failedFence = false
		return Output{Reply: &Reply{ProducerID: m.producerID, ProducerEpoch: m.epoch}}
	case opInitFence:
		out := c.startMarkers(m)
		out.Reply = &Reply{Err: ErrConcurrentTransactions, ProducerID: noProducerID, ProducerEpoch: noEpoch}
		return out
	case opEndTxn, opTimeoutAbort:
		out := c.startMarkers(m)
		out.Reply = &Reply{ProducerID: noProducerID, ProducerEpoch: noEpoch}
		if kind == opEndTxn && m.clientTV >= 2 {
			// Transactions v2 answer with the id and epoch the
			// transaction completes with (the Complete* transition).
			out.Reply.ProducerID, out.Reply.ProducerEpoch = m.completedID()
		}
		return out
	}
	return reply(nil)
}

// appendError maps a failed append to the error Kafka's
// TransactionStateManager.appendTransactionToLog answers with.
func appendError(err error) error {
	switch {
	case errors.Is(err, ErrNotCoordinator), errors.Is(err, ErrCoordinatorNotAvailable), errors.Is(err, ErrUnknown):
		return err
	}
	return fmt.Errorf("%w: %v", ErrCoordinatorNotAvailable, err)
}

// startMarkers hands out the markers of a transaction just logged in a
// Prepare state; until MarkersWritten the transaction is busy. A
// transaction without partitions (a transactions v2 abort with nothing
// added) has no markers and completes at once, as
// TransactionMarkerChannelManager.addTxnMarkersToSend appends its
// completion directly.
func (c *Coordinator) startMarkers(m *meta) Output {
	m.failedFence = false
	if len(m.partitions) == 0 {
		return c.complete(m, m.updateMs)
	}
	m.awaitingMarkers = true
	return Output{Markers: []Markers{{
		TransactionalID:  m.id,
		ProducerID:       m.producerID,
		ProducerEpoch:    m.epoch,
		Commit:           m.state == PrepareCommit,
		CoordinatorEpoch: c.cfg.CoordinatorEpoch,
		Partitions:       append([]TopicPartition(nil), m.partitions...),
	}}}
}

// MarkersWritten reports that every marker of id's transaction is written;
// the Output's Write moves it to CompleteCommit or CompleteAbort (Kafka's
// prepareComplete once TransactionMarkerChannelManager is done).
func (c *Coordinator) MarkersWritten(id string, nowMs int64) Output {
	m := c.txns[id]
	if m == nil || !m.awaitingMarkers {
		return reply(fmt.Errorf("%w: %q is not writing markers", ErrNotCoordinator, id))
	}
	m.awaitingMarkers = false
	return c.complete(m, nowMs)
}

// completedID returns the producer id and epoch a prepared transaction
// completes with: after an epoch overflow of transactions v2, the next
// producer id with epoch 0 (TransactionMetadata.prepareComplete).
func (m *meta) completedID() (int64, int16) {
	if m.clientTV >= 2 && m.nextProducerID != noProducerID {
		return m.nextProducerID, 0
	}
	return m.producerID, m.epoch
}

func (c *Coordinator) complete(m *meta, nowMs int64) Output {
	next := m.fields
	next.state = CompleteAbort
	if m.state == PrepareCommit {
		next.state = CompleteCommit
	}
	next.producerID, next.epoch = m.completedID()
	next.nextProducerID = noProducerID
	next.partitions, next.updateMs = nil, nowMs
	if err := m.prepare(next, opComplete); err != nil {
		return reply(err)
	}
	return c.writeOutput(m)
}

// Tick advances time to nowMs: it aborts transactions that outlived their
// timeout, fencing their producer with a bumped epoch (Kafka's
// abortTimedOutTransactions), retries failed completion writes, and expires
// transactional ids idle for transactional.id.expiration.ms.
func (c *Coordinator) Tick(nowMs int64) Output {
	var out Output
	if c.loading {
		return out
	}
	ids := make([]string, 0, len(c.txns))
	for id := range c.txns {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := c.txns[id]
		if m.hasPending || m.awaitingMarkers {
			continue
		}
		var o Output
		switch {
		case m.retryComplete:
			m.retryComplete = false
			o = c.complete(m, nowMs)
		case m.state == Ongoing && m.startMs+int64(m.timeoutMs) < nowMs:
			o = c.fenceAndAbort(m, nowMs, opTimeoutAbort)
		case (m.state == Empty || m.state == CompleteCommit || m.state == CompleteAbort) &&
			m.updateMs <= nowMs-c.cfg.IDExpirationMs:
			next := m.fields
			next.state, next.partitions = Dead, nil
			if err := m.prepare(next, opExpire); err != nil {
				continue
			}
			o = c.writeOutput(m)
		default:
			continue
		}
		out.Writes = append(out.Writes, o.Writes...)
		out.Markers = append(out.Markers, o.Markers...)
	}
	return out
}

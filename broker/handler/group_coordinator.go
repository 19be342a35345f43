package handler

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/group"
	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/metadata"
	"github.com/cascade-kafka/cascade/broker/partition"
	"github.com/cascade-kafka/cascade/broker/record"
)

// GroupCoordinator runs the group coordinator: one group.Coordinator state
// machine for the __consumer_offsets partitions this broker leads, driven by
// a single goroutine fed by a channel (Kafka's CoordinatorRuntime with one
// event loop). It appends the state machine's records to __consumer_offsets
// and answers a request only after its records are appended, under the
// topic's flush policy; it ticks the state machine's timers from the broker
// clock and replays __consumer_offsets at start, so offsets and groups
// survive a restart. A single node leads, and loads, every partition; a
// cluster node loads a partition when the metadata image makes it the
// leader and unloads it when another does (coordinator_leaders.go), and on
// a replicated partition answers only once the high watermark has passed
// the records (coordinator_acks.go).
type GroupCoordinator struct {
	env *Env
	cfg group.Config

	calls   chan func()
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	unsub   func()
	loaders sync.WaitGroup
	// ctx ends at Close: the waits for replicated writes give up.
	ctx    context.Context
	cancel context.CancelFunc
	acks   sync.WaitGroup // waits for replicated writes

	// Owned by the loop goroutine.
	m       *group.Coordinator
	parts   map[int32]*partition.Partition // nil until loaded
	lead    leadership                     // cluster: the partitions served or loading
	img     *metadata.Image                // image last given to SetTopics
	waiters map[uint64]groupWaiter
	nextID  uint64
	// written is, per replicated partition, the end of the last batch
	// appended: a reply on the partition's groups waits until the high
	// watermark reaches it, so that no answer shows a write that may not
	// survive a failover (uncommittedPartition).
	written map[int32]int64
	// seqs are the next sequence numbers of the transactional batches
	// this coordinator writes for producers (TxnOffsetCommit), per
	// partition, as the log checks sequences of coordinator appends.
	seqs map[producerSeqKey]producerSeq
}

type producerSeqKey struct {
	partition int32
	pid       int64
}

type producerSeq struct {
	epoch int16
	next  int32
}

type groupWaiter struct {
	ch  chan kmsg.Response
	req kmsg.Request
}

// NewGroupCoordinator returns a coordinator over env's metadata and
// partitions with the given state machine configuration; Start runs it.
func NewGroupCoordinator(env *Env, cfg group.Config) *GroupCoordinator {
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewSource(env.now().UnixNano()))
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &GroupCoordinator{
		env: env, cfg: cfg, ctx: ctx, cancel: cancel,
		calls: make(chan func()), stop: make(chan struct{}), done: make(chan struct{}),
		lead:    newLeadership(consumerOffsetsTopic, false),
		waiters: map[uint64]groupWaiter{},
		written: map[int32]int64{},
		seqs:    map[producerSeqKey]producerSeq{},
	}
}

// GroupConfig maps the broker configuration to the state machine's.
func GroupConfig(env *Env) group.Config {
	c := group.DefaultConfig()
	bc := env.Config
	c.OffsetsTopicPartitions = bc.OffsetsTopicNumPartitions
	c.InitialRebalanceDelay = bc.GroupInitialRebalanceDelay
	if bc.GroupMinSessionTimeout > 0 {
		c.MinSessionTimeout = bc.GroupMinSessionTimeout
	}
	if bc.GroupMaxSessionTimeout > 0 {
		c.MaxSessionTimeout = bc.GroupMaxSessionTimeout
	}
	if bc.GroupMaxSize > 0 {
		c.MaxGroupSize = int(bc.GroupMaxSize)
	}
	if bc.OffsetsRetention > 0 {
		c.OffsetsRetention = bc.OffsetsRetention
	}
	if bc.OffsetsRetentionCheckInterval > 0 {
		c.OffsetsRetentionCheck = bc.OffsetsRetentionCheckInterval
	}
	if bc.OffsetMetadataMaxBytes > 0 {
		c.OffsetMetadataMaxBytes = int(bc.OffsetMetadataMaxBytes)
	}
	if bc.GroupConsumerSessionTimeout > 0 {
		c.ConsumerSessionTimeout = bc.GroupConsumerSessionTimeout
	}
	if bc.GroupConsumerHeartbeatInterval > 0 {
		c.ConsumerHeartbeatInterval = bc.GroupConsumerHeartbeatInterval
	}
	if bc.GroupConsumerMaxSize > 0 {
		c.ConsumerMaxSize = int(bc.GroupConsumerMaxSize)
	}
	if len(bc.GroupConsumerAssignors) > 0 {
		c.ConsumerAssignors = bc.GroupConsumerAssignors
	}
	if bc.GroupConsumerMigrationPolicy != "" {
		c.MigrationPolicy = bc.GroupConsumerMigrationPolicy
	}
	return c
}

// Start loads __consumer_offsets if it exists and starts the loop. Without
// the topic, the first group request creates it. A cluster node instead
// follows the image: it loads the partitions it leads as the image shows
// them, and FindCoordinator creates the topic.
func (c *GroupCoordinator) Start() error {
	if c.env.Txn != nil {
		c.env.Txn.OnOffsetsMarker(c.onMarker)
	}
	var err error
	if c.env.Cluster != nil {
		c.unsub = c.lead.subscribe(c.env)
	} else if _, ok := c.env.Meta.Image().Topic(consumerOffsetsTopic); ok {
		err = c.load(false)
	}
	go c.run()
	return err
}

// Close stops the loop; requests waiting on it get COORDINATOR_NOT_AVAILABLE.
func (c *GroupCoordinator) Close() {
	if c.unsub != nil {
		c.unsub()
	}
	c.once.Do(func() { close(c.stop) })
	<-c.done
	c.cancel()
	c.loaders.Wait()
	c.acks.Wait()
}

// groupTickMax bounds how long the loop sleeps between ticks.
const groupTickMax = time.Second

func (c *GroupCoordinator) run() {
	defer close(c.done)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case fn := <-c.calls:
			fn()
		case <-c.lead.changed:
			c.followLeadership()
		case <-t.C:
			if c.m != nil {
				c.m.Tick(c.env.now())
				c.process()
			}
		case <-c.stop:
			for id, w := range c.waiters {
				w.ch <- group.ErrorResponse(w.req, kerr.CoordinatorNotAvailable.Code)
				delete(c.waiters, id)
			}
			return
		}
		wait := groupTickMax
		if c.m != nil {
			if d := c.m.NextDeadline(); !d.IsZero() {
				wait = min(max(time.Until(d), time.Millisecond), groupTickMax)
			}
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(wait)
	}
}

// Do runs one group API request and returns its response, which may come
// only after a rebalance completes (JoinGroup) or the request's records are
// appended (OffsetCommit).
func (c *GroupCoordinator) Do(ctx context.Context, req *Request) kmsg.Response {
	ch := make(chan kmsg.Response, 1)
	fn := func() {
		// ListGroups goes to every broker, not through FindCoordinator:
		// as Kafka, it does not create __consumer_offsets.
		_, list := req.Msg.(*kmsg.ListGroupsRequest)
		if c.env.Cluster != nil {
			if code := c.servingCode(req.Msg); code != 0 {
				ch <- group.ErrorResponse(req.Msg, code)
				return
			}
		} else if err := c.ensureLoaded(!list); err != nil {
			c.env.logger().Warn("group coordinator unavailable", "err", err)
			ch <- group.ErrorResponse(req.Msg, kerr.CoordinatorNotAvailable.Code)
			return
		}
		if c.m == nil {
			resp := req.Msg.(*kmsg.ListGroupsRequest).ResponseKind()
			ch <- resp
			return
		}
		c.syncTopics()
		c.nextID++
		id := c.nextID
		c.waiters[id] = groupWaiter{ch: ch, req: req.Msg}
		host := req.Conn
		if h, _, ok := cutPort(host); ok {
			host = h
		}
		greq := group.Request{ID: id, ClientID: req.ClientID, ClientHost: "/" + host, Msg: req.Msg}
		if _, ok := req.Msg.(*kmsg.ConsumerGroupHeartbeatRequest); ok {
			// Only a heartbeat may resolve a regex for its sender.
			greq.CanDescribe = c.env.topicAllowed(req, acl.Describe)
		}
		if err := c.m.Step(c.env.now(), greq); err != nil {
			delete(c.waiters, id)
			ch <- group.ErrorResponse(req.Msg, kerr.UnknownServerError.Code)
			return
		}
		c.process()
	}
	select {
	case c.calls <- fn:
	case <-c.stop:
		return group.ErrorResponse(req.Msg, kerr.CoordinatorNotAvailable.Code)
	case <-ctx.Done():
		return group.ErrorResponse(req.Msg, kerr.CoordinatorNotAvailable.Code)
	}
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		return group.ErrorResponse(req.Msg, kerr.CoordinatorNotAvailable.Code)
	case <-c.done:
		select {
		case r := <-ch:
			return r
		default:
			return group.ErrorResponse(req.Msg, kerr.CoordinatorNotAvailable.Code)
		}
	}
}

// onMarker is told by the transaction coordinator of a marker written to a
// __consumer_offsets partition: the transaction's pending offsets become
// visible or are dropped (Kafka's GroupCoordinator.onTransactionCompleted).
func (c *GroupCoordinator) onMarker(partition int32, producerID int64, _ int16, commit bool) {
	select {
	case c.calls <- func() {
		// A partition still loading replays the marker from its log.
		if c.m != nil && c.parts[partition] != nil {
			c.m.CompleteTransaction(partition, producerID, commit)
		}
	}:
	case <-c.stop:
	}
}

// cutPort splits "host:port" at the last colon.
func cutPort(addr string) (host, port string, ok bool) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[:i], addr[i+1:], true
		}
	}
	return addr, "", false
}

// syncTopics gives the state machine the current topics when the image
// changed. A topic of the previous image that is gone, or whose name now
// belongs to another topic id, was deleted: the state machine drops every
// group's offsets of it, as Kafka's GroupCoordinatorService.onPartitionsDeleted
// does when the metadata publisher sees the deletion. The first sync after
// loading __consumer_offsets has no previous image: there, the committed
// topics absent from the image are the deleted ones (group's
// DeleteAbsentTopics), which covers a deletion made durable in the metadata
// just before a crash, before TopicsDeleted appended its tombstones (a
// window Kafka leaves open, see DeleteAbsentTopics).
func (c *GroupCoordinator) syncTopics() {
	img := c.env.Meta.Image()
	if img == c.img {
		return
	}
	prev := c.img
	c.img = img
	ts := img.Topics()
	out := make([]group.Topic, 0, len(ts))
	for _, t := range ts {
		out = append(out, group.Topic{Name: t.Name, ID: t.ID, Partitions: int32(len(t.Partitions))})
	}
	c.m.SetTopics(out)
	if prev == nil {
		c.m.DeleteAbsentTopics(c.env.now())
		return
	}
	var deleted []group.Topic
	for _, t := range prev.Topics() {
		if now, ok := img.Topic(t.Name); !ok || now.ID != t.ID {
			deleted = append(deleted, group.Topic{Name: t.Name, ID: t.ID, Partitions: int32(len(t.Partitions))})
		}
	}
	if len(deleted) > 0 {
		c.m.DeleteTopics(c.env.now(), deleted)
	}
}

// TopicsDeleted is called by DeleteTopics once deletions are in the
// metadata image: the groups' offsets of the deleted topics are tombstoned
// in __consumer_offsets before it returns, so a topic recreated at once
// under the same name starts without them. Without a loaded coordinator
// there are no offsets to delete.
func (c *GroupCoordinator) TopicsDeleted(ctx context.Context) {
	done := make(chan struct{})
	fn := func() {
		defer close(done)
		if c.m == nil {
			return
		}
		c.syncTopics()
		c.process()
	}
	select {
	case c.calls <- fn:
	case <-c.stop:
		return
	case <-ctx.Done():
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	case <-c.done:
	}
}

// process appends what the state machine produced, one batch per
// __consumer_offsets partition, then sends the replies; on a replicated
// partition the replies of its groups wait for the high watermark to pass
// its last batch (answerCommitted). A failed append answers the replies
// of that partition's groups with the write error as Kafka maps it
// (coordinatorWriteErrorCode) and reloads the partition from the log, so
// memory never runs ahead of what is in the log, as Kafka's
// CoordinatorRuntime reverts a shard to its last committed state. Replies
// of groups on other partitions are sent as they are.
func (c *GroupCoordinator) process() {
	for {
		rd := c.m.Ready()
		if rd.Empty() {
			return
		}
		failed := map[int32]int16{}
		required := map[int32]int64{} // replicated partition → offset its high watermark must reach
		for _, b := range batchRecords(rd.Records) {
			if _, ok := failed[b.partition]; ok {
				continue
			}
			end, err := c.appendBatch(b)
			if err != nil {
				failed[b.partition] = coordinatorWriteErrorCode(err)
				c.env.logger().Warn("appending to __consumer_offsets", "partition", b.partition, "err", err)
				continue
			}
			if end >= 0 {
				required[b.partition] = end
				c.written[b.partition] = end
			}
		}
		uncommitted := map[int32][]groupAnswer{}
		for _, r := range rd.Replies {
			w, ok := c.waiters[r.ID]
			if !ok {
				continue
			}
			delete(c.waiters, r.ID)
			if code, ok := c.failedCode(w.req, failed); ok {
				w.ch <- group.ErrorResponse(w.req, code)
				continue
			}
			if n, ok := c.uncommittedPartition(w.req, required); ok {
				uncommitted[n] = append(uncommitted[n], groupAnswer{groupWaiter: w, msg: r.Msg})
				continue
			}
			w.ch <- r.Msg
		}
		for n, as := range uncommitted {
			c.answerCommitted(n, c.written[n], as)
		}
		for n := range failed {
			c.reload(n)
		}
	}
}

// failedCode returns the error code of the first of req's groups whose
// __consumer_offsets partition failed its append.
func (c *GroupCoordinator) failedCode(req kmsg.Request, failed map[int32]int16) (int16, bool) {
	if len(failed) == 0 {
		return 0, false
	}
	for _, g := range group.GroupIDs(req) {
		if code, ok := failed[c.m.Partition(g)]; ok {
			return code, true
		}
	}
	return 0, false
}

// coordinatorWriteErrorCode maps a failed append of coordinator records to
// the code a group API answers, as Kafka's
// CoordinatorOperationExceptionHelper.handleOperationException: errors of
// the log's availability become retriable coordinator errors, errors of the
// records' size become UNKNOWN_SERVER_ERROR (a client must not retry a
// commit that can never fit), and others pass through.
func coordinatorWriteErrorCode(err error) int16 {
	switch code := ErrorCode(err); code {
	case kerr.UnknownTopicOrPartition.Code, kerr.NotEnoughReplicas.Code, kerr.RequestTimedOut.Code:
		return kerr.CoordinatorNotAvailable.Code
	case kerr.NotLeaderForPartition.Code, kerr.KafkaStorageError.Code:
		return kerr.NotCoordinator.Code
	case kerr.MessageTooLarge.Code, kerr.RecordListTooLarge.Code, kerr.InvalidFetchSize.Code:
		return kerr.UnknownServerError.Code
	case kerr.NetworkException.Code:
		// Kafka: older clients retry COORDINATOR_LOAD_IN_PROGRESS
		// correctly, NETWORK_EXCEPTION not always.
		return kerr.CoordinatorLoadInProgress.Code
	default:
		return code
	}
}

// offsetsBatch is a run of records for one partition that go in one batch:
// plain, or transactional for one producer.
type offsetsBatch struct {
	partition int32
	recs      []group.Record
}

// batchRecords splits records into batches, keeping their order within each
// partition.
func batchRecords(recs []group.Record) []offsetsBatch {
	var out []offsetsBatch
	last := map[int32]int{} // partition → index in out of its open batch
	for _, r := range recs {
		if i, ok := last[r.Partition]; ok {
			b0 := out[i].recs[0]
			if b0.Transactional == r.Transactional && b0.ProducerID == r.ProducerID && b0.ProducerEpoch == r.ProducerEpoch {
				out[i].recs = append(out[i].recs, r)
				continue
			}
		}
		last[r.Partition] = len(out)
		out = append(out, offsetsBatch{partition: r.Partition, recs: []group.Record{r}})
	}
	return out
}

// appendBatch appends b to its partition and returns the offset the high
// watermark must reach before the batch is committed, -1 when the
// partition is not replicated. As Kafka's CoordinatorPartitionWriter the
// append itself is requiredAcks=1: the wait for the high watermark is what
// makes the write durable.
func (c *GroupCoordinator) appendBatch(b offsetsBatch) (int64, error) {
	p := c.parts[b.partition]
	if p == nil {
		// Not led here: NOT_COORDINATOR, as Kafka's NOT_LEADER_OR_FOLLOWER.
		return -1, fmt.Errorf("%w: %s-%d not hosted", partition.ErrDeleted, consumerOffsetsTopic, b.partition)
	}
	now := c.env.now().UnixMilli()
	recs := make([]record.Rec, 0, len(b.recs))
	for _, r := range b.recs {
		recs = append(recs, record.Rec{Timestamp: now, Key: r.Key, Value: r.Value})
	}
	spec := record.NewSpec(recs...)
	first := b.recs[0]
	var key producerSeqKey
	var seq producerSeq
	if first.Transactional {
		key = producerSeqKey{b.partition, first.ProducerID}
		seq = c.seqs[key]
		if seq.epoch != first.ProducerEpoch {
			seq = producerSeq{epoch: first.ProducerEpoch}
		}
		spec.Transactional = true
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = first.ProducerID, first.ProducerEpoch, seq.next
	}
	batch, err := record.Build(spec)
	if err != nil {
		return -1, err
	}
	info, err := p.AppendCoordinator(batch)
	if err != nil {
		return -1, err
	}
	if first.Transactional {
		seq.next += int32(len(recs))
		c.seqs[key] = seq
	}
	return c.env.coordinatorAppended(p.TopicPartition(), info), nil
}

// groupAnswer is a reply held until its partition's write is committed.
type groupAnswer struct {
	groupWaiter
	msg kmsg.Response
}

// uncommittedPartition returns the partition of the first of req's groups
// whose answer must wait for the high watermark: one just written
// (required), or one whose last write the high watermark has not reached
// yet. Kafka's CoordinatorRuntime answers reads from the state as of the
// high watermark instead; waiting for it gives the same answers, later.
func (c *GroupCoordinator) uncommittedPartition(req kmsg.Request, required map[int32]int64) (int32, bool) {
	if len(c.written) == 0 {
		return 0, false
	}
	for _, g := range group.GroupIDs(req) {
		n := c.m.Partition(g)
		if _, ok := required[n]; ok {
			return n, true
		}
		end, ok := c.written[n]
		if !ok {
			continue
		}
		if p := c.parts[n]; p != nil && p.HighWatermark() >= end {
			delete(c.written, n)
			continue
		}
		return n, true
	}
	return 0, false
}

// answerCommitted sends the replies of groups on partition n once its high
// watermark reaches required, as Kafka's CoordinatorRuntime completes a
// write event; the loop goes on meanwhile. A wait that ends otherwise
// answers as Kafka's CoordinatorOperationExceptionHelper maps the failure:
// a timeout (the ISR not catching up) is COORDINATOR_NOT_AVAILABLE, a lost
// leadership NOT_COORDINATOR. The state machine keeps the write, as
// Kafka's runtime keeps an appended write whose wait timed out: it is in
// the log, and commits when the ISR catches up, or goes with the
// partition's next leader, which this node unloads for.
func (c *GroupCoordinator) answerCommitted(n int32, required int64, as []groupAnswer) {
	tp := log.TopicPartition{Topic: consumerOffsetsTopic, Partition: n}
	c.acks.Add(1)
	go func() {
		defer c.acks.Done()
		err := c.env.awaitCoordinatorWrite(c.ctx, tp, required, groupWriteTimeout)
		code := int16(0)
		switch {
		case err == nil || committedAfterAppend(err):
		case c.ctx.Err() != nil:
			code = kerr.CoordinatorNotAvailable.Code
		default:
			code = coordinatorWriteErrorCode(err)
			c.env.logger().Warn("__consumer_offsets write not committed", "partition", n, "err", err)
		}
		for _, a := range as {
			if code != 0 {
				a.ch <- group.ErrorResponse(a.req, code)
				continue
			}
			a.ch <- a.msg
		}
	}()
}

// reload drops partition n's groups and replays them from the log; requests
// parked on those groups are answered with COORDINATOR_NOT_AVAILABLE.
func (c *GroupCoordinator) reload(n int32) {
	c.m.Unload(n)
	c.failWaiters(n, kerr.CoordinatorNotAvailable.Code)
	if p := c.parts[n]; p != nil {
		if err := c.replay(p, c.m); err != nil {
			c.env.logger().Error("reloading __consumer_offsets", "partition", n, "err", err)
		}
	}
	if c.env.Cluster != nil {
		c.m.LoadPartitionComplete(c.env.now(), n)
		return
	}
	c.m.LoadComplete(c.env.now())
}

// failWaiters answers the requests parked on groups of partition n with
// code.
func (c *GroupCoordinator) failWaiters(n int32, code int16) {
	for id, w := range c.waiters {
		for _, g := range group.GroupIDs(w.req) {
			if c.m.Partition(g) == n {
				w.ch <- group.ErrorResponse(w.req, code)
				delete(c.waiters, id)
				break
			}
		}
	}
}

func (c *GroupCoordinator) ensureLoaded(create bool) error {
	if c.parts != nil {
		return nil
	}
	return c.load(create)
}

// load creates __consumer_offsets if asked and missing (as Kafka's
// auto-creation of internal topics on FindCoordinator), then replays every
// partition into a fresh state machine.
func (c *GroupCoordinator) load(create bool) error {
	cfg := c.env.Config
	t, ok := c.env.Meta.Image().Topic(consumerOffsetsTopic)
	if !ok {
		if !create {
			return nil
		}
		if err := c.createTopic(); err != nil {
			return err
		}
		if t, ok = c.env.Meta.Image().Topic(consumerOffsetsTopic); !ok {
			return fmt.Errorf("%s not created", consumerOffsetsTopic)
		}
	}
	gc := c.cfg
	gc.OffsetsTopicPartitions = int32(len(t.Partitions))
	if gc.OffsetsTopicPartitions == 0 {
		gc.OffsetsTopicPartitions = cfg.OffsetsTopicNumPartitions
	}
	m := group.New(gc)
	parts := make(map[int32]*partition.Partition, len(t.Partitions))
	for i := range t.Partitions {
		n := int32(i)
		p := c.env.Partitions.Get(log.TopicPartition{Topic: consumerOffsetsTopic, Partition: n})
		if p == nil {
			return fmt.Errorf("%s-%d has no log", consumerOffsetsTopic, n)
		}
		if err := c.replay(p, m); err != nil {
			return fmt.Errorf("loading %s-%d: %w", consumerOffsetsTopic, n, err)
		}
		parts[n] = p
	}
	c.m, c.parts, c.img = m, parts, nil
	c.syncTopics()
	c.m.LoadComplete(c.env.now())
	return nil
}

// createTopic creates __consumer_offsets (offsetsTopicSpec).
func (c *GroupCoordinator) createTopic() error {
	return c.env.createInternalTopic(c.env.offsetsTopicSpec())
}

// maxOffsetsRecordBytes caps a decompressed __consumer_offsets batch.
const maxOffsetsRecordBytes = 64 << 20

// replay feeds every record of p to m, as Kafka's CoordinatorLoaderImpl:
// transactional offset commits stay pending until their commit or abort
// marker; a record that does not decode is skipped with a warning.
func (c *GroupCoordinator) replay(p *partition.Partition, m *group.Coordinator) error {
	n := p.TopicPartition().Partition
	return forEachBatch(p, p.LogStartOffset(), func(b record.Batch) error { return c.replayBatch(m, n, b) })
}

// replayBatch feeds one batch of partition n to m (replay).
func (c *GroupCoordinator) replayBatch(m *group.Coordinator, n int32, b record.Batch) error {
	if b.Control() {
		if ctl, err := b.ControlOf(); err == nil && (ctl.Type == record.ControlCommit || ctl.Type == record.ControlAbort) {
			m.CompleteTransaction(n, b.ProducerID(), ctl.Type == record.ControlCommit)
		}
		return nil
	}
	if b.Transactional() {
		c.seqs[producerSeqKey{n, b.ProducerID()}] = producerSeq{epoch: b.ProducerEpoch(), next: b.LastSequence() + 1}
	}
	return replayRecords(b, maxOffsetsRecordBytes, func(offset int64, key, value []byte) {
		var err error
		if b.Transactional() {
			err = m.ReplayTransactional(b.ProducerID(), key, value)
		} else {
			err = m.Replay(key, value)
		}
		if err != nil {
			c.env.logger().Warn("skipping __consumer_offsets record", "offset", offset, "err", err)
		}
	})
}

// groupRequest is the body of every group API handler: route the request
// to the coordinator, or answer COORDINATOR_NOT_AVAILABLE without one.
func groupRequest(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	if env.Authorizer != nil {
		return authorizedGroupRequest(ctx, env, req)
	}
	return coordinatorRequest(ctx, env, req)
}

// coordinatorRequest hands an authorized group request to the coordinator.
func coordinatorRequest(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	if env.Groups == nil {
		return group.ErrorResponse(req.Msg, kerr.CoordinatorNotAvailable.Code), nil
	}
	return env.Groups.Do(ctx, req), nil
}

// EnsureLoaded creates and loads __consumer_offsets if it is not yet
// (FindCoordinator for a group key does this first, as Kafka).
func (c *GroupCoordinator) EnsureLoaded(ctx context.Context) error {
	errc := make(chan error, 1)
	select {
	case c.calls <- func() { errc <- c.ensureLoaded(true) }:
	case <-c.stop:
		return errors.New("group coordinator stopped")
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-errc:
		return err
	case <-c.done:
		return errors.New("group coordinator stopped")
	}
}

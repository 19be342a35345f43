package share

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// StateConfig holds the share coordinator settings, named after Kafka's
// broker properties.
type StateConfig struct {
	StateTopicPartitions int32 // share.coordinator.state.topic.num.partitions
	// SnapshotUpdateRecordsPerSnapshot is
	// share.coordinator.snapshot.update.records.per.snapshot: after this
	// many ShareUpdate records of a share-partition the next write is a
	// whole ShareSnapshot.
	SnapshotUpdateRecordsPerSnapshot int
}

// DefaultStateConfig returns Apache Kafka 4.x's defaults.
func DefaultStateConfig() StateConfig {
	return StateConfig{StateTopicPartitions: 50, SnapshotUpdateRecordsPerSnapshot: 500}
}

// StateRecord is one key/value pair to append to a __share_group_state
// partition.
type StateRecord struct {
	Partition int32
	Key       []byte
	Value     []byte
}

// StateRequest is a share coordinator request fed to
// StateCoordinator.Step: an InitializeShareGroupState,
// WriteShareGroupState, ReadShareGroupState or
// ReadShareGroupStateSummary.
type StateRequest struct {
	ID  uint64
	Msg kmsg.Request
}

// StateReady is what the caller must do after a Step: append Records to
// __share_group_state, in order, and only then send Replies.
type StateReady struct {
	Records []StateRecord
	Replies []Reply
}

// Reply answers the request with the same ID.
type Reply struct {
	ID  uint64
	Msg kmsg.Response
}

// ErrUnsupportedRequest is returned by Step for a request the state
// machine does not serve.
var ErrUnsupportedRequest = errors.New("share: not a request of this state machine")

// StateCoordinator is the share coordinator of Kafka's
// ShareCoordinatorShard: it keeps the durable state of every
// share-partition of some __share_group_state partitions, turns each
// WriteShareGroupState into a ShareSnapshot or ShareUpdate record, and
// rebuilds the state from those records with Replay. Like the group
// coordinator it does no I/O and keeps no clock.
type StateCoordinator struct {
	cfg StateConfig
	// state is the merged state of each share-partition (Kafka's
	// shareStateMap); updates counts the ShareUpdate records since its
	// last snapshot, exactly as Kafka's snapshotUpdateCount does.
	state   map[StateKey]*SnapshotValue
	updates map[StateKey]int
	out     StateReady
}

// NewState returns an empty share coordinator.
func NewState(cfg StateConfig) *StateCoordinator {
	d := DefaultStateConfig()
	orDefault(&cfg.StateTopicPartitions, d.StateTopicPartitions)
	orDefault(&cfg.SnapshotUpdateRecordsPerSnapshot, d.SnapshotUpdateRecordsPerSnapshot)
	return &StateCoordinator{cfg: cfg, state: map[StateKey]*SnapshotValue{}, updates: map[StateKey]int{}}
}

// StatePartitionFor returns the __share_group_state partition of a
// share-partition: abs(hashCode("group:topicId:partition")) % partitions,
// as Kafka's ShareCoordinatorService.partitionFor with
// SharePartitionKey.asCoordinatorKey, the topic id in Kafka's Uuid text
// form (URL-safe base64 without padding).
func StatePartitionFor(k StateKey, partitions int32) int32 {
	key := fmt.Sprintf("%s:%s:%d", k.Group, base64.RawURLEncoding.EncodeToString(k.TopicID[:]), k.Partition)
	h := javaHash(key)
	if h == math.MinInt32 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % partitions
}

// javaHash is Java's String.hashCode, over UTF-16 code units.
func javaHash(s string) int32 {
	var h int32
	for _, c := range s {
		if c < 0x10000 {
			h = 31*h + int32(c)
			continue
		}
		c -= 0x10000
		h = 31*h + int32(0xD800+(c>>10))
		h = 31*h + int32(0xDC00+(c&0x3FF))
	}
	return h
}

// Ready returns and clears what the coordinator produced since the last
// call.
func (c *StateCoordinator) Ready() StateReady {
	r := c.out
	c.out = StateReady{}
	return r
}

// State returns the durable state of a share-partition.
func (c *StateCoordinator) State(k StateKey) (SnapshotValue, bool) {
	v, ok := c.state[k]
	if !ok {
		return SnapshotValue{}, false
	}
	cp := *v
	cp.StateBatches = append([]StateBatch(nil), v.StateBatches...)
	return cp, true
}

// Step feeds one request; its reply, and the records to append before it
// is sent, come from Ready.
func (c *StateCoordinator) Step(now time.Time, r StateRequest) error {
	switch m := r.Msg.(type) {
	case *kmsg.WriteShareGroupStateRequest:
		c.write(now, r.ID, m)
	case *kmsg.ReadShareGroupStateRequest:
		c.read(now, r.ID, m)
	case *kmsg.InitializeShareGroupStateRequest:
		c.initialize(now, r.ID, m)
	case *kmsg.ReadShareGroupStateSummaryRequest:
		c.readSummary(r.ID, m)
	default:
		return fmt.Errorf("%w: %T", ErrUnsupportedRequest, r.Msg)
	}
	return nil
}

func (c *StateCoordinator) write(now time.Time, id uint64, m *kmsg.WriteShareGroupStateRequest) {
	resp := kmsg.NewPtrWriteShareGroupStateResponse()
	resp.Version = m.Version
	for _, t := range m.Topics {
		rt := kmsg.WriteShareGroupStateResponseTopic{TopicID: t.TopicID}
		for _, p := range t.Partitions {
			k := StateKey{Group: m.GroupID, TopicID: t.TopicID, Partition: p.Partition}
			code, msg := c.writePartition(now, m.Version, k, p)
			rp := kmsg.WriteShareGroupStateResponseTopicPartition{Partition: p.Partition, ErrorCode: code}
			if msg != "" {
				rp.ErrorMessage = &msg
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	c.out.Replies = append(c.out.Replies, Reply{ID: id, Msg: resp})
}

// writePartition validates one partition's write as Kafka 4.4's
// ShareCoordinatorShard.maybeGetWriteStateError, then writes its record.
func (c *StateCoordinator) writePartition(now time.Time, version int16, k StateKey, p kmsg.WriteShareGroupStateRequestTopicPartition) (int16, string) {
	if code, msg := c.validate(k, p.LeaderEpoch, p.StateEpoch, "Write"); code != 0 {
		return code, msg
	}
	batches := make([]StateBatch, 0, len(p.StateBatches))
	for _, b := range p.StateBatches {
		if b.LastOffset < b.FirstOffset || (b.DeliveryState != int8(Available) && b.DeliveryState != int8(Acknowledged) && b.DeliveryState != int8(Archived)) {
			return kerr.InvalidRequest.Code, fmt.Sprintf("Invalid state batch %d-%d state %d.", b.FirstOffset, b.LastOffset, b.DeliveryState)
		}
		batches = append(batches, StateBatch{FirstOffset: b.FirstOffset, LastOffset: b.LastOffset, DeliveryState: b.DeliveryState, DeliveryCount: b.DeliveryCount})
	}
	// DeliveryCompleteCount came with WriteShareGroupState v1 (Kafka
	// 4.2); an older write carries none.
	complete := p.DeliveryCompleteCount
	if version < 1 {
		complete = -1
	}
	return c.apply(c.stateRecord(now, k, p.LeaderEpoch, p.StartOffset, complete, batches))
}

// validate checks the request fields and epochs of a write or read
// (Kafka's maybeGetWriteStateError and maybeGetReadStateError): only an
// initialized share-partition is written or read, and an older leader or
// state epoch than the last one recorded is fenced. A stateEpoch of -1
// is not checked (reads carry none).
func (c *StateCoordinator) validate(k StateKey, leaderEpoch, stateEpoch int32, op string) (int16, string) {
	cur := c.state[k]
	if code, msg := validKey(k); code != 0 {
		return code, msg
	}
	switch {
	case leaderEpoch < 0:
		return kerr.InvalidRequest.Code, "The leader epoch cannot be a negative number."
	case stateEpoch < -1 || (op == "Write" && stateEpoch < 0):
		return kerr.InvalidRequest.Code, "The state epoch cannot be a negative number."
	case cur == nil:
		return kerr.InvalidRequest.Code, op + " operation on uninitialized share partition not allowed."
	case cur.LeaderEpoch > leaderEpoch:
		return kerr.FencedLeaderEpoch.Code, ""
	case stateEpoch >= 0 && cur.StateEpoch > stateEpoch:
		return kerr.FencedStateEpoch.Code, ""
	}
	return 0, ""
}

// stateRecord is Kafka 4.4's generateShareStateRecord: the start offset
// never moves back, the count of completed deliveries is the written one
// when the start offset moved, the larger of the two when it held, and
// the current one for a write from behind; past the update limit the
// record is a whole snapshot with the next snapshot epoch.
func (c *StateCoordinator) stateRecord(now time.Time, k StateKey, leaderEpoch int32, start int64, complete int32, batches []StateBatch) StateRecord {
	cur := c.state[k]
	newStart := max(start, cur.StartOffset)
	switch {
	case start == cur.StartOffset:
		complete = max(complete, cur.DeliveryCompleteCount)
	case start < cur.StartOffset:
		complete = cur.DeliveryCompleteCount
	}
	if c.updates[k] >= c.cfg.SnapshotUpdateRecordsPerSnapshot {
		return c.snapshotRecord(k, SnapshotValue{
			SnapshotEpoch: cur.SnapshotEpoch + 1, StateEpoch: cur.StateEpoch, LeaderEpoch: leaderEpoch, StartOffset: newStart,
			DeliveryCompleteCount: complete, CreateTimestamp: now.UnixMilli(), WriteTimestamp: now.UnixMilli(),
			StateBatches: mergeBatches(cur.StateBatches, batches, newStart),
		})
	}
	return StateRecord{Key: EncodeStateKey(RecordShareUpdate, k), Value: EncodeUpdateValue(UpdateValue{
		SnapshotEpoch: cur.SnapshotEpoch, LeaderEpoch: leaderEpoch, StartOffset: newStart,
		DeliveryCompleteCount: complete, StateBatches: mergeBatches(nil, batches, newStart),
	})}
}

// apply places a record, replays it into the state (as Kafka's runtime
// replays what a shard writes) and queues it for the log.
func (c *StateCoordinator) apply(rec StateRecord) (int16, string) {
	_, k, err := DecodeStateKey(rec.Key)
	if err == nil {
		err = c.Replay(rec.Key, rec.Value)
	}
	if err != nil {
		return kerr.UnknownServerError.Code, err.Error()
	}
	rec.Partition = StatePartitionFor(k, c.cfg.StateTopicPartitions)
	c.out.Records = append(c.out.Records, rec)
	return 0, ""
}

func (c *StateCoordinator) snapshotRecord(k StateKey, v SnapshotValue) StateRecord {
	return StateRecord{Key: EncodeStateKey(RecordShareSnapshot, k), Value: EncodeSnapshotValue(v)}
}

// initialize is InitializeShareGroupState, by which the group coordinator
// creates a share-partition's state before its first fetch: a snapshot
// with the given state epoch and start offset, no batches, leader epoch
// 0, and the next snapshot epoch when the share-partition had state
// (Kafka's generateInitializeStateRecord).
func (c *StateCoordinator) initialize(now time.Time, id uint64, m *kmsg.InitializeShareGroupStateRequest) {
	resp := kmsg.NewPtrInitializeShareGroupStateResponse()
	resp.Version = m.Version
	resp.Topics = make([]kmsg.InitializeShareGroupStateResponseTopic, len(m.Topics))
	for i, t := range m.Topics {
		rt := &resp.Topics[i]
		rt.TopicID = t.TopicID
		rt.Partitions = make([]kmsg.InitializeShareGroupStateResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			rp := &rt.Partitions[j]
			code, msg := c.initializePartition(now, StateKey{Group: m.GroupID, TopicID: t.TopicID, Partition: p.Partition}, p)
			rp.Partition, rp.ErrorCode = p.Partition, code
			if msg != "" {
				rp.ErrorMessage = &msg
			}
		}
	}
	c.out.Replies = append(c.out.Replies, Reply{ID: id, Msg: resp})
}

// validKey refuses a null topic id and a negative partition.
func validKey(k StateKey) (int16, string) {
	switch {
	case k.TopicID == ([16]byte{}):
		return kerr.InvalidRequest.Code, "The topic id cannot be null."
	case k.Partition < 0:
		return kerr.InvalidRequest.Code, "The partition id cannot be a negative number."
	}
	return 0, ""
}

func (c *StateCoordinator) initializePartition(now time.Time, k StateKey, p kmsg.InitializeShareGroupStateRequestTopicPartition) (int16, string) {
	cur := c.state[k]
	if code, msg := validKey(k); code != 0 {
		return code, msg
	}
	switch {
	case p.StateEpoch < 0:
		return kerr.InvalidRequest.Code, "The state epoch cannot be a negative number."
	case cur != nil && cur.StateEpoch > p.StateEpoch:
		return kerr.FencedStateEpoch.Code, ""
	}
	v := SnapshotValue{StateEpoch: p.StateEpoch, StartOffset: p.StartOffset, CreateTimestamp: now.UnixMilli(), WriteTimestamp: now.UnixMilli(), StateBatches: []StateBatch{}}
	if cur != nil {
		v.SnapshotEpoch = cur.SnapshotEpoch + 1
	}
	if p.StartOffset == -1 {
		v.DeliveryCompleteCount = -1
	}
	return c.apply(c.snapshotRecord(k, v))
}

// read answers ReadShareGroupState with the merged state, as Kafka 4.4's
// readStateAndMaybeUpdateLeaderEpoch: a read from a new leader epoch is
// also written, so that the old leader's writes are fenced from then on.
func (c *StateCoordinator) read(now time.Time, id uint64, m *kmsg.ReadShareGroupStateRequest) {
	resp := kmsg.NewPtrReadShareGroupStateResponse()
	resp.Version = m.Version
	for _, t := range m.Topics {
		rt := kmsg.ReadShareGroupStateResponseTopic{TopicID: t.TopicID}
		for _, p := range t.Partitions {
			rp := kmsg.NewReadShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			k := StateKey{Group: m.GroupID, TopicID: t.TopicID, Partition: p.Partition}
			code, msg := c.validate(k, p.LeaderEpoch, -1, "Read")
			if code == 0 && c.state[k].LeaderEpoch != p.LeaderEpoch {
				code, msg = c.apply(c.stateRecord(now, k, p.LeaderEpoch, -1, -1, nil))
			}
			if code != 0 {
				rp.ErrorCode = code
				if msg != "" {
					rp.ErrorMessage = &msg
				}
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			v := c.state[k]
			rp.StateEpoch, rp.StartOffset = v.StateEpoch, v.StartOffset
			for _, b := range v.StateBatches {
				rp.StateBatches = append(rp.StateBatches, kmsg.ReadShareGroupStateResponseTopicPartitionStateBatch{
					FirstOffset: b.FirstOffset, LastOffset: b.LastOffset, DeliveryState: b.DeliveryState, DeliveryCount: b.DeliveryCount})
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	c.out.Replies = append(c.out.Replies, Reply{ID: id, Msg: resp})
}

// readSummary answers ReadShareGroupStateSummary, the start offset and
// epochs that DescribeShareGroupOffsets reports, as Kafka 4.4's
// readStateSummary: a share-partition never initialized answers start
// offset -1.
func (c *StateCoordinator) readSummary(id uint64, m *kmsg.ReadShareGroupStateSummaryRequest) {
	resp := kmsg.NewPtrReadShareGroupStateSummaryResponse()
	resp.Version = m.Version
	for _, t := range m.Topics {
		rt := kmsg.ReadShareGroupStateSummaryResponseTopic{TopicID: t.TopicID}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, c.summary(StateKey{Group: m.GroupID, TopicID: t.TopicID, Partition: p.Partition}))
		}
		resp.Topics = append(resp.Topics, rt)
	}
	c.out.Replies = append(c.out.Replies, Reply{ID: id, Msg: resp})
}

func (c *StateCoordinator) summary(k StateKey) kmsg.ReadShareGroupStateSummaryResponseTopicPartition {
	rp := kmsg.NewReadShareGroupStateSummaryResponseTopicPartition()
	rp.Partition = k.Partition
	if code, msg := validKey(k); code != 0 {
		rp.ErrorCode, rp.ErrorMessage = code, &msg
	} else if v := c.state[k]; v == nil {
		rp.StartOffset, rp.DeliveryCompleteCount = -1, -1
	} else {
		rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset, rp.DeliveryCompleteCount = v.StateEpoch, v.LeaderEpoch, v.StartOffset, v.DeliveryCompleteCount
	}
	return rp
}

// Replay applies one __share_group_state record, as Kafka's
// ShareCoordinatorShard.replay: a snapshot replaces the share-partition's
// state, an update merges its batches over it (newer batches win where
// they overlap) and moves the start offset unless it is -1. A nil value
// (tombstone) deletes the share-partition.
func (c *StateCoordinator) Replay(key, value []byte) error {
	typ, k, err := DecodeStateKey(key)
	if err != nil {
		return err
	}
	if value == nil {
		delete(c.state, k)
		delete(c.updates, k)
		return nil
	}
	switch typ {
	case RecordShareSnapshot:
		v, err := DecodeSnapshotValue(value)
		if err != nil {
			return err
		}
		c.state[k] = &v
		if n, ok := c.updates[k]; ok && n >= c.cfg.SnapshotUpdateRecordsPerSnapshot {
			c.updates[k] = 0
		}
	case RecordShareUpdate:
		u, err := DecodeUpdateValue(value)
		if err != nil {
			return err
		}
		cur := c.state[k]
		if cur == nil {
			cur = &SnapshotValue{SnapshotEpoch: u.SnapshotEpoch, LeaderEpoch: u.LeaderEpoch, StartOffset: u.StartOffset, DeliveryCompleteCount: -1}
			c.state[k] = cur
		}
		if u.LeaderEpoch > cur.LeaderEpoch {
			cur.LeaderEpoch = u.LeaderEpoch
		}
		if u.StartOffset != -1 {
			cur.StartOffset = u.StartOffset
		}
		if u.DeliveryCompleteCount != -1 {
			cur.DeliveryCompleteCount = u.DeliveryCompleteCount
		}
		cur.StateBatches = mergeBatches(cur.StateBatches, u.StateBatches, cur.StartOffset)
		if n, ok := c.updates[k]; ok {
			c.updates[k] = n + 1
		} else {
			c.updates[k] = 0
		}
	}
	return nil
}

// mergeBatches lays newer over older, offset by offset (Kafka's
// PersisterStateBatchCombiner: where they overlap the newer batch wins),
// drops what lies below start, and joins neighbours of equal state and
// count. The result is sorted and non-overlapping.
func mergeBatches(older, newer []StateBatch, start int64) []StateBatch {
	out := append([]StateBatch(nil), older...)
	for _, n := range newer {
		var next []StateBatch
		for _, o := range out {
			if o.LastOffset < n.FirstOffset || o.FirstOffset > n.LastOffset {
				next = append(next, o)
				continue
			}
			if o.FirstOffset < n.FirstOffset {
				left := o
				left.LastOffset = n.FirstOffset - 1
				next = append(next, left)
			}
			if o.LastOffset > n.LastOffset {
				right := o
				right.FirstOffset = n.LastOffset + 1
				next = append(next, right)
			}
		}
		out = append(next, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FirstOffset < out[j].FirstOffset })
	var merged []StateBatch
	for _, b := range out {
		if start >= 0 && b.LastOffset < start {
			continue
		}
		if start >= 0 && b.FirstOffset < start {
			b.FirstOffset = start
		}
		if l := len(merged) - 1; l >= 0 && merged[l].LastOffset+1 == b.FirstOffset &&
			merged[l].DeliveryState == b.DeliveryState && merged[l].DeliveryCount == b.DeliveryCount {
			merged[l].LastOffset = b.LastOffset
			continue
		}
		merged = append(merged, b)
	}
	return merged
}

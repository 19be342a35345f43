package group

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config holds the group coordinator settings, named after Kafka's broker
// properties.
type Config struct {
	OffsetsTopicPartitions    int32         // offsets.topic.num.partitions
	InitialRebalanceDelay     time.Duration // group.initial.rebalance.delay.ms
	MinSessionTimeout         time.Duration // group.min.session.timeout.ms
	MaxSessionTimeout         time.Duration // group.max.session.timeout.ms
	MaxGroupSize              int           // group.max.size
	OffsetsRetention          time.Duration // offsets.retention.minutes
	OffsetsRetentionCheck     time.Duration // offsets.retention.check.interval.ms
	OffsetMetadataMaxBytes    int           // offset.metadata.max.bytes
	ConsumerSessionTimeout    time.Duration // group.consumer.session.timeout.ms
	ConsumerHeartbeatInterval time.Duration // group.consumer.heartbeat.interval.ms
	ConsumerMaxSize           int           // group.consumer.max.size
	ConsumerAssignors         []string      // group.consumer.assignors; the first is the default
	MigrationPolicy           string        // group.consumer.migration.policy (KIP-848 online migration)
	// NewMemberJoinTimeout is how long a new classic member's JoinGroup
	// may wait for its first generation before the member is dropped.
	// Kafka has no property for it: GroupCoordinatorConfig fixes
	// CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS at 5 minutes.
	NewMemberJoinTimeout time.Duration
	// Rand generates member ids. Seed it to make a run replayable.
	Rand *rand.Rand
}

// DefaultConfig returns Apache Kafka 4.x's defaults.
func DefaultConfig() Config {
	return Config{
		OffsetsTopicPartitions:    50,
		InitialRebalanceDelay:     3 * time.Second,
		MinSessionTimeout:         6 * time.Second,
		MaxSessionTimeout:         30 * time.Minute,
		MaxGroupSize:              math.MaxInt32,
		OffsetsRetention:          7 * 24 * time.Hour,
		OffsetsRetentionCheck:     10 * time.Minute,
		OffsetMetadataMaxBytes:    4096,
		ConsumerSessionTimeout:    45 * time.Second,
		ConsumerHeartbeatInterval: 5 * time.Second,
		ConsumerMaxSize:           math.MaxInt32,
		ConsumerAssignors:         []string{AssignorUniform, AssignorRange},
		MigrationPolicy:           MigrationBidirectional,
		NewMemberJoinTimeout:      5 * time.Minute,
		Rand:                      rand.New(rand.NewSource(time.Now().UnixNano())),
	}
}

// Request is one group API request fed to Step. ID is chosen by the caller
// and comes back on the Reply that answers it, possibly in a later Ready (a
// JoinGroup parks until its rebalance completes).
type Request struct {
	ID         uint64
	ClientID   string
	ClientHost string
	Msg        kmsg.Request
	// CanDescribe reports whether the sender may describe a topic; nil
	// allows every topic. A regular expression resolved for a
	// ConsumerGroupHeartbeat matches only the topics it allows.
	CanDescribe func(topic string) bool
}

// Reply answers the Request with the same ID.
type Reply struct {
	ID  uint64
	Msg kmsg.Response
}

// Ready is what the caller must do after a Step or Tick: append Records to
// their __consumer_offsets partitions, in order, under the flush policy, and
// only then send Replies. An offset commit is thus acknowledged only once it
// is in the log, as Kafka's CoordinatorRuntime does.
type Ready struct {
	Records []Record
	Replies []Reply
}

// Empty reports whether r asks nothing of the caller.
func (r Ready) Empty() bool { return len(r.Records) == 0 && len(r.Replies) == 0 }

// Topic is what the coordinator knows about one topic of the metadata image.
type Topic struct {
	Name       string
	ID         [16]byte
	Partitions int32
}

// ErrUnsupportedRequest is returned by Step for a request that is not a group
// API.
var ErrUnsupportedRequest = errors.New("group: not a group coordinator request")

// Coordinator is the group coordinator state machine for the groups of some
// set of __consumer_offsets partitions. It does no I/O and keeps no clock: the
// caller passes the time on every call, appends what Ready returns, and feeds
// the log back through Replay when it loads a partition.
type Coordinator struct {
	cfg Config
	now time.Time

	classic  map[string]*classicGroup
	consumer map[string]*consumerGroup
	offsets  map[string]map[tp]offsetEntry
	// txnOffsets are TxnOffsetCommit offsets waiting for their marker.
	txnOffsets map[pendingTxn]map[tp]offsetEntry

	topics   map[string]Topic
	topicIDs map[[16]byte]string
	// topicsGen counts the views of the image SetTopics was given;
	// newTopicsGen is the last that brought a topic name the one before
	// it did not have (Kafka's lastMetadataImageWithNewTopics).
	topicsGen, newTopicsGen int64

	timers      map[string]timer
	nextCleanup time.Time
	newID       func(clientID string) string

	out Ready
}

type timer struct {
	at time.Time
	fn func()
}

// New returns an empty coordinator.
func New(cfg Config) *Coordinator {
	d := DefaultConfig()
	if cfg.OffsetsTopicPartitions <= 0 {
		cfg.OffsetsTopicPartitions = d.OffsetsTopicPartitions
	}
	if cfg.MaxGroupSize <= 0 {
		cfg.MaxGroupSize = d.MaxGroupSize
	}
	if cfg.ConsumerMaxSize <= 0 {
		cfg.ConsumerMaxSize = d.ConsumerMaxSize
	}
	if len(cfg.ConsumerAssignors) == 0 {
		cfg.ConsumerAssignors = d.ConsumerAssignors
	}
	if cfg.Rand == nil {
		cfg.Rand = d.Rand
	}
	if cfg.MigrationPolicy == "" {
		cfg.MigrationPolicy = d.MigrationPolicy
	}
	if cfg.OffsetsRetentionCheck <= 0 {
		cfg.OffsetsRetentionCheck = d.OffsetsRetentionCheck
	}
	if cfg.NewMemberJoinTimeout <= 0 {
		cfg.NewMemberJoinTimeout = d.NewMemberJoinTimeout
	}
	c := &Coordinator{
		cfg:      cfg,
		classic:  map[string]*classicGroup{},
		consumer: map[string]*consumerGroup{},
		offsets:  map[string]map[tp]offsetEntry{},
		topics:   map[string]Topic{},
		topicIDs: map[[16]byte]string{},
		timers:   map[string]timer{},
	}
	c.newID = c.randomMemberID
	return c
}

// randomMemberID returns clientID-<uuid>, as Kafka's classic coordinator
// names members.
func (c *Coordinator) randomMemberID(clientID string) string {
	return clientID + "-" + uuidString(c.newUUID())
}

func (c *Coordinator) newUUID() [16]byte {
	var u [16]byte
	c.cfg.Rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

func uuidString(u [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// PartitionFor returns the __consumer_offsets partition of a group:
// abs(groupId.hashCode()) % partitions, with Java's String.hashCode over
// UTF-16 code units and Kafka's Utils.abs (which maps MinInt32 to 0).
func PartitionFor(groupID string, partitions int32) int32 {
	var h int32
	for _, r := range groupID {
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	if h == math.MinInt32 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % partitions
}

// Partition returns the __consumer_offsets partition of groupID under this
// coordinator's configuration.
func (c *Coordinator) Partition(groupID string) int32 {
	return PartitionFor(groupID, c.cfg.OffsetsTopicPartitions)
}

// SetTopics replaces the coordinator's view of the metadata image. KIP-848
// groups notice changed subscriptions on their members' next heartbeat.
func (c *Coordinator) SetTopics(topics []Topic) {
	c.topicsGen++
	for _, t := range topics {
		if _, known := c.topics[t.Name]; !known {
			c.newTopicsGen = c.topicsGen
			break
		}
	}
	c.topics = make(map[string]Topic, len(topics))
	c.topicIDs = make(map[[16]byte]string, len(topics))
	for _, t := range topics {
		c.topics[t.Name] = t
		c.topicIDs[t.ID] = t.Name
	}
}

// Ready returns and clears what the coordinator has produced since the last
// call.
func (c *Coordinator) Ready() Ready {
	r := c.out
	c.out = Ready{}
	return r
}

// Step feeds one request. Its answer comes from Ready, now or later.
func (c *Coordinator) Step(now time.Time, r Request) error {
	c.now = now
	switch m := r.Msg.(type) {
	case *kmsg.JoinGroupRequest:
		c.joinGroup(r, m)
	case *kmsg.SyncGroupRequest:
		c.syncGroup(r, m)
	case *kmsg.HeartbeatRequest:
		c.heartbeat(r, m)
	case *kmsg.LeaveGroupRequest:
		c.leaveGroup(r, m)
	case *kmsg.OffsetCommitRequest:
		c.offsetCommit(r, m)
	case *kmsg.TxnOffsetCommitRequest:
		c.txnOffsetCommit(r, m)
	case *kmsg.OffsetFetchRequest:
		c.offsetFetch(r, m)
	case *kmsg.OffsetDeleteRequest:
		c.offsetDelete(r, m)
	case *kmsg.DescribeGroupsRequest:
		c.describeGroups(r, m)
	case *kmsg.ListGroupsRequest:
		c.listGroups(r, m)
	case *kmsg.DeleteGroupsRequest:
		c.deleteGroups(r, m)
	case *kmsg.ConsumerGroupHeartbeatRequest:
		c.consumerGroupHeartbeat(r, m)
	case *kmsg.ConsumerGroupDescribeRequest:
		c.consumerGroupDescribe(r, m)
	default:
		return fmt.Errorf("%w: %T", ErrUnsupportedRequest, r.Msg)
	}
	return nil
}

// Tick fires every timer due at now: session and rebalance timeouts, the
// initial rebalance delay, pending-sync expiry, and the periodic expiry of
// offsets (offsets.retention.check.interval.ms).
func (c *Coordinator) Tick(now time.Time) {
	c.now = now
	for {
		key, ok := c.nextDue()
		if !ok {
			break
		}
		t := c.timers[key]
		delete(c.timers, key)
		t.fn()
	}
	if c.nextCleanup.IsZero() {
		c.nextCleanup = now.Add(c.cfg.OffsetsRetentionCheck)
	} else if !now.Before(c.nextCleanup) {
		c.cleanupGroups()
		c.nextCleanup = now.Add(c.cfg.OffsetsRetentionCheck)
	}
}

// NextDeadline returns the earliest pending timer, or the zero time.
func (c *Coordinator) NextDeadline() time.Time {
	var min time.Time
	for _, t := range c.timers {
		if min.IsZero() || t.at.Before(min) {
			min = t.at
		}
	}
	if !c.nextCleanup.IsZero() && (min.IsZero() || c.nextCleanup.Before(min)) {
		min = c.nextCleanup
	}
	return min
}

// nextDue returns the key of the earliest timer due at c.now; ties break by
// key so that a run is deterministic.
func (c *Coordinator) nextDue() (string, bool) {
	best, found := "", false
	var at time.Time
	for k, t := range c.timers {
		if t.at.After(c.now) {
			continue
		}
		if !found || t.at.Before(at) || (t.at.Equal(at) && k < best) {
			best, at, found = k, t.at, true
		}
	}
	return best, found
}

func (c *Coordinator) schedule(key string, after time.Duration, fn func()) {
	c.timers[key] = timer{at: c.now.Add(after), fn: fn}
}

func (c *Coordinator) cancel(key string) { delete(c.timers, key) }

func (c *Coordinator) nowMs() int64 { return c.now.UnixMilli() }

func (c *Coordinator) reply(id uint64, m kmsg.Response) {
	c.out.Replies = append(c.out.Replies, Reply{ID: id, Msg: m})
}

func (c *Coordinator) record(group string, key, value []byte) {
	c.out.Records = append(c.out.Records, Record{Partition: c.Partition(group), Key: key, Value: value})
}

// groupExists reports whether any kind of group, or committed offsets, exist
// under id.
func (c *Coordinator) groupExists(id string) bool {
	return c.classic[id] != nil || c.consumer[id] != nil
}

// LoadComplete is called after the caller has replayed a partition: members
// loaded from the log get fresh session timers, as Kafka does on load.
func (c *Coordinator) LoadComplete(now time.Time) {
	c.loadComplete(now, func(string) bool { return true })
}

// LoadPartitionComplete is LoadComplete for the groups of one
// __consumer_offsets partition only, for a node that loads partitions as it
// becomes their leader: the members of groups it already served keep their
// session deadlines.
func (c *Coordinator) LoadPartitionComplete(now time.Time, partition int32) {
	c.loadComplete(now, func(g string) bool { return c.Partition(g) == partition })
}

func (c *Coordinator) loadComplete(now time.Time, loaded func(group string) bool) {
	c.now = now
	for _, g := range sortedKeys(c.classic) {
		if !loaded(g) {
			continue
		}
		grp := c.classic[g]
		for _, id := range grp.order {
			c.scheduleClassicHeartbeat(grp, grp.members[id])
		}
	}
	for _, g := range sortedKeys(c.consumer) {
		if !loaded(g) {
			continue
		}
		grp := c.consumer[g]
		grp.subMeta = grp.fingerprint(c)
		for _, id := range sortedKeys(grp.members) {
			c.scheduleConsumerSession(grp, grp.members[id])
		}
	}
}

// Unload drops every group of a __consumer_offsets partition, as when the
// broker stops leading it or an append to it failed; Replay then rebuilds the
// state from the log.
func (c *Coordinator) Unload(partition int32) {
	for id, g := range c.classic {
		if c.Partition(id) == partition {
			for mid := range g.members {
				c.cancel(hbKey(id, mid))
			}
			c.cancel(joinKey(id))
			c.cancel(syncKey(id))
			delete(c.classic, id)
		}
	}
	for id, g := range c.consumer {
		if c.Partition(id) == partition {
			for mid := range g.members {
				c.cancelConsumerTimers(id, mid)
			}
			delete(c.consumer, id)
		}
	}
	for id := range c.offsets {
		if c.Partition(id) == partition {
			delete(c.offsets, id)
		}
	}
	for k := range c.txnOffsets {
		if c.Partition(k.group) == partition {
			delete(c.txnOffsets, k)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func strp(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

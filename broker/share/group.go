package share

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupConfig holds the share group coordinator settings, named after
// Kafka's broker properties.
type GroupConfig struct {
	HeartbeatInterval      time.Duration // group.share.heartbeat.interval.ms
	SessionTimeout         time.Duration // group.share.session.timeout.ms
	MaxSize                int           // group.share.max.size
	OffsetsTopicPartitions int32         // offsets.topic.num.partitions
	AssignmentInterval     time.Duration // group.share.assignment.interval.ms (KIP-1263); 0 assigns on every heartbeat
}

// DefaultGroupConfig returns Apache Kafka 4.4's defaults.
func DefaultGroupConfig() GroupConfig {
	return GroupConfig{
		HeartbeatInterval:      5 * time.Second,
		SessionTimeout:         45 * time.Second,
		MaxSize:                200,
		OffsetsTopicPartitions: 50,
		AssignmentInterval:     time.Second,
	}
}

// Topic is what the share group coordinator knows of one topic of the
// metadata image.
type Topic struct {
	Name       string
	ID         [16]byte
	Partitions int32
}

// GroupRequest is one ShareGroupHeartbeat fed to Groups.Step.
type GroupRequest struct {
	ID         uint64
	ClientID   string
	ClientHost string
	Msg        kmsg.Request
}

// MemberLeft names a member that left its share group or whose session
// expired: the caller releases the records it holds in every
// share-partition of the group (Partition.ReleaseMember), as Kafka's
// ShareGroupListener.onMemberLeave does.
type MemberLeft struct {
	Group  string
	Member string
}

// StateInit asks the caller to initialize the state of share-partitions
// newly subscribed by a group: an InitializeShareGroupState to the share
// coordinator with the group epoch as state epoch, then
// Groups.Initialized. StartOffset is -1 (place it by
// share.auto.offset.reset) for a topic new to the group, and 0 for
// partitions added to a topic it already had, as Kafka 4.4's
// buildInitializeShareGroupStateRequest.
type StateInit struct {
	Group       string
	StateEpoch  int32
	TopicID     [16]byte
	Partitions  []int32
	StartOffset int64
}

// GroupReady is what the caller must do after a Step or Tick: append
// Records to __consumer_offsets in order, then send Replies, release the
// records of the members in Left, and initialize the share state asked by
// Initialize.
type GroupReady struct {
	Records    []GroupRecord
	Replies    []Reply
	Left       []MemberLeft
	Initialize []StateInit
}

type shareMember struct {
	id                    string
	epoch, prevEpoch      int32
	rack                  *string
	clientID, clientHost  string
	subscribed            []string
	assigned              Assignment
	sessionDeadline       time.Time
	hasMetadata, hasEpoch bool
}

type shareGroup struct {
	id              string
	epoch           int32
	assignmentEpoch int32
	// assignmentTime is when the target assignment was last computed
	// (AssignmentTimestamp, KIP-1263), 0 when never.
	assignmentTime int64
	members        map[string]*shareMember
	target         map[string]Assignment
	// metadataHash hashes the subscribed topics' names, ids and
	// partition counts; a change bumps the group epoch, as Kafka's
	// MetadataHash does. It is persisted in ShareGroupMetadataValue, so a
	// change while the coordinator was down is noticed after a load.
	metadataHash int64
	// initializing and initialized are the share-partitions whose state
	// the group asked to initialize, and those done
	// (ShareGroupStatePartitionMetadata).
	initializing, initialized map[[16]byte]*initTopic
}

type initTopic struct {
	name  string
	parts map[int32]bool
}

// Groups is the share group coordinator of Kafka's GroupMetadataManager
// (shareGroupHeartbeat): membership by ShareGroupHeartbeat (API key 76,
// v1), target assignment by the SimpleAssignor, session expiry, and the
// share group records of __consumer_offsets with Replay. It does no I/O
// and keeps no clock.
type Groups struct {
	cfg      GroupConfig
	now      time.Time
	groups   map[string]*shareGroup
	topics   map[string]Topic
	topicIDs map[[16]byte]Topic
	out      GroupReady
}

// NewGroups returns an empty share group coordinator.
func NewGroups(cfg GroupConfig) *Groups {
	d := DefaultGroupConfig()
	orDefault(&cfg.HeartbeatInterval, d.HeartbeatInterval)
	orDefault(&cfg.SessionTimeout, d.SessionTimeout)
	orDefault(&cfg.MaxSize, d.MaxSize)
	orDefault(&cfg.OffsetsTopicPartitions, d.OffsetsTopicPartitions)
	return &Groups{cfg: cfg, groups: map[string]*shareGroup{}, topics: map[string]Topic{}, topicIDs: map[[16]byte]Topic{}}
}

// SetTopics replaces the coordinator's view of the metadata image; groups
// whose subscribed topics changed get a new assignment on their next
// heartbeat.
func (c *Groups) SetTopics(topics []Topic) {
	c.topics = make(map[string]Topic, len(topics))
	c.topicIDs = make(map[[16]byte]Topic, len(topics))
	for _, t := range topics {
		c.topics[t.Name] = t
		c.topicIDs[t.ID] = t
	}
}

// Ready returns and clears what the coordinator produced since the last
// call.
func (c *Groups) Ready() GroupReady {
	r := c.out
	c.out = GroupReady{}
	return r
}

// Partition returns the __consumer_offsets partition of a group, as the
// group coordinator places every kind of group:
// abs(groupId.hashCode()) % offsets.topic.num.partitions.
func (c *Groups) Partition(group string) int32 {
	h := javaHash(group)
	if h == math.MinInt32 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % c.cfg.OffsetsTopicPartitions
}

// Step feeds one request; its reply comes from Ready.
func (c *Groups) Step(now time.Time, r GroupRequest) error {
	c.now = now
	m, ok := r.Msg.(*kmsg.ShareGroupHeartbeatRequest)
	if !ok {
		return fmt.Errorf("%w: %T", ErrUnsupportedRequest, r.Msg)
	}
	resp := c.heartbeat(r, m)
	resp.Version = m.Version
	c.out.Replies = append(c.out.Replies, Reply{ID: r.ID, Msg: resp})
	return nil
}

func hbError(err *kerr.Error, msg string) *kmsg.ShareGroupHeartbeatResponse {
	resp := kmsg.NewPtrShareGroupHeartbeatResponse()
	resp.ErrorCode = err.Code
	if msg != "" {
		resp.ErrorMessage = &msg
	}
	return resp
}

// heartbeat is Kafka's GroupMetadataManager.shareGroupHeartbeat.
func (c *Groups) heartbeat(r GroupRequest, m *kmsg.ShareGroupHeartbeatRequest) *kmsg.ShareGroupHeartbeatResponse {
	// throwIfShareGroupHeartbeatRequestIsInvalid.
	switch {
	case strings.TrimSpace(m.MemberID) == "":
		return hbError(kerr.InvalidRequest, "MemberId can't be empty.")
	case strings.TrimSpace(m.GroupID) == "":
		return hbError(kerr.InvalidRequest, "GroupId can't be empty.")
	case m.RackID != nil && strings.TrimSpace(*m.RackID) == "":
		return hbError(kerr.InvalidRequest, "RackId can't be empty.")
	case m.MemberEpoch == 0 && len(m.SubscribedTopicNames) == 0:
		return hbError(kerr.InvalidRequest, "SubscribedTopicNames must be set in first request.")
	case m.MemberEpoch < -1:
		return hbError(kerr.InvalidRequest, "MemberEpoch is invalid.")
	}
	g := c.groups[m.GroupID]
	if m.MemberEpoch == -1 {
		if g == nil {
			return hbError(kerr.GroupIDNotFound, fmt.Sprintf("Share group %s not found.", m.GroupID))
		}
		mem := g.members[m.MemberID]
		if mem == nil {
			return hbError(kerr.UnknownMemberID, fmt.Sprintf("Member %s is not a member of group %s.", m.MemberID, m.GroupID))
		}
		c.fence(g, mem)
		resp := kmsg.NewPtrShareGroupHeartbeatResponse()
		resp.MemberID, resp.MemberEpoch = &m.MemberID, -1
		return resp
	}
	if g == nil {
		if m.MemberEpoch != 0 {
			return hbError(kerr.GroupIDNotFound, fmt.Sprintf("Share group %s not found.", m.GroupID))
		}
		g = newShareGroup(m.GroupID)
		c.groups[m.GroupID] = g
	}
	old := g.members[m.MemberID]
	if old == nil && len(g.members) >= c.cfg.MaxSize {
		return hbError(kerr.GroupMaxSizeReached, fmt.Sprintf("The share group has reached its maximum capacity of %d members.", c.cfg.MaxSize))
	}
	if old == nil && m.MemberEpoch != 0 {
		return hbError(kerr.UnknownMemberID, fmt.Sprintf("Member %s is not a member of group %s.", m.MemberID, m.GroupID))
	}
	if old != nil && m.MemberEpoch != 0 {
		// throwIfShareGroupMemberEpochIsInvalid; a member may retry with
		// its previous epoch when the bump did not reach it. Epoch 0
		// from a known member is a rejoin.
		if m.MemberEpoch > old.epoch {
			return hbError(kerr.FencedMemberEpoch, fmt.Sprintf("The share group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", m.MemberEpoch, old.epoch))
		}
		if m.MemberEpoch < old.epoch && m.MemberEpoch != old.prevEpoch {
			return hbError(kerr.FencedMemberEpoch, fmt.Sprintf("The share group member has a smaller member epoch (%d) than the one known by the group coordinator (%d), and it does not match the previous member epoch (%d). The member must abandon all its partitions and rejoin.", m.MemberEpoch, old.epoch, old.prevEpoch))
		}
	}

	// 1. Create or update the member; a changed subscription, or changed
	// metadata of the subscribed topics, bumps the group epoch.
	var mem shareMember
	if old != nil {
		mem = *old
	} else {
		mem = shareMember{id: m.MemberID, assigned: Assignment{}}
	}
	if m.RackID != nil {
		mem.rack = m.RackID
	}
	if m.SubscribedTopicNames != nil {
		mem.subscribed = sortedUnique(m.SubscribedTopicNames)
	}
	mem.clientID, mem.clientHost = r.ClientID, r.ClientHost
	// Kafka's initializedAssignmentPending: share-partitions initialized
	// since the last target assignment call for a new one.
	bump := c.initializedAssignmentPending(g)
	if old == nil || !sameMetadata(old, &mem) {
		c.record(g.id, GroupKey{Type: RecordShareGroupMemberMetadata, Group: g.id, Member: mem.id}, EncodeMemberMetadataValue(MemberMetadataValue{
			RackID: mem.rack, ClientID: mem.clientID, ClientHost: mem.clientHost, SubscribedTopics: mem.subscribed}))
		bump = bump || old == nil || !slices.Equal(old.subscribed, mem.subscribed)
	}
	g.members[mem.id] = &mem
	if h := c.metadataHash(g); h != g.metadataHash {
		g.metadataHash, bump = h, true
	}
	if bump {
		g.epoch++
		c.recordEpoch(g)
	}
	// 2. A new target assignment when the group epoch passed it, at most
	// once every group.share.assignment.interval.ms (KIP-1263); until
	// then members reconcile with the last one.
	if g.epoch > g.assignmentEpoch && c.canAssign(g) {
		c.updateTarget(g)
	}
	// 3. Reconcile: share groups revoke nothing, so the member takes its
	// target at once.
	target := g.target[mem.id]
	if target == nil {
		target = Assignment{}
	}
	changed := !mem.assigned.equal(target)
	if mem.epoch != g.assignmentEpoch || changed {
		mem.prevEpoch, mem.epoch, mem.assigned = mem.epoch, g.assignmentEpoch, target
		c.record(g.id, GroupKey{Type: RecordShareGroupCurrentMember, Group: g.id, Member: mem.id}, EncodeCurrentAssignmentValue(CurrentAssignmentValue{
			MemberEpoch: mem.epoch, PreviousMemberEpoch: mem.prevEpoch, Assigned: mem.assigned.list()}))
	}
	mem.sessionDeadline = c.now.Add(c.cfg.SessionTimeout)
	c.maybeInitialize(g)

	resp := kmsg.NewPtrShareGroupHeartbeatResponse()
	resp.MemberID, resp.MemberEpoch = &mem.id, mem.epoch
	resp.HeartbeatIntervalMillis = int32(c.cfg.HeartbeatInterval.Milliseconds())
	if m.MemberEpoch == 0 || changed {
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		for _, tp := range mem.assigned.list() {
			a.TopicPartitions = append(a.TopicPartitions, kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{TopicID: tp.TopicID, Partitions: tp.Partitions})
		}
		resp.Assignment = &a
	}
	return resp
}

func sameMetadata(a, b *shareMember) bool {
	return deref(a.rack) == deref(b.rack) && (a.rack == nil) == (b.rack == nil) &&
		a.clientID == b.clientID && a.clientHost == b.clientHost && slices.Equal(a.subscribed, b.subscribed)
}

func sortedUnique(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}

// metadataHash hashes the topics the group's members subscribe to, as they
// exist in the metadata image: 0 when none does. Kafka hashes the same
// facts with Murmur3 (and racks); Cascade's FNV-1a hash differs, so a
// Kafka coordinator taking over a Cascade group bumps its epoch once.
func (c *Groups) metadataHash(g *shareGroup) int64 {
	names := map[string]bool{}
	for _, m := range g.members {
		for _, t := range m.subscribed {
			names[t] = true
		}
	}
	var b strings.Builder
	for _, n := range sortedKeys(names) {
		if t, ok := c.topics[n]; ok {
			fmt.Fprintf(&b, "%s/%x/%d;", n, t.ID, t.Partitions)
		}
	}
	if b.Len() == 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(b.String()))
	return int64(h.Sum64())
}

func (c *Groups) recordEpoch(g *shareGroup) {
	c.record(g.id, GroupKey{Type: RecordShareGroupMetadata, Group: g.id}, EncodeGroupMetadataValue(GroupMetadataValue{Epoch: g.epoch, MetadataHash: g.metadataHash}))
}

// updateTarget computes the group's target assignment at its epoch and
// writes a target record for each member whose target changed, then the
// target assignment epoch (Kafka's TargetAssignmentBuilder).
func (c *Groups) updateTarget(g *shareGroup) {
	var specs []assignSpec
	for _, id := range sortedKeys(g.members) {
		m := g.members[id]
		s := assignSpec{id: id, current: g.target[id]}
		for _, n := range m.subscribed {
			if t, ok := c.topics[n]; ok {
				s.topics = append(s.topics, t.ID)
			}
		}
		specs = append(specs, s)
	}
	// Only share-partitions whose state is initialized are assignable
	// (Kafka 4.4's withTopicAssignablePartitionsMap).
	next := simpleAssign(specs, func(id [16]byte) []int32 {
		var ps []int32
		for p := int32(0); p < c.topicIDs[id].Partitions; p++ {
			if hasInit(g.initialized, id, p) {
				ps = append(ps, p)
			}
		}
		return ps
	})
	for _, id := range sortedKeys(next) {
		old, had := g.target[id]
		if !had || !old.equal(next[id]) {
			c.record(g.id, GroupKey{Type: RecordShareGroupTargetMember, Group: g.id, Member: id}, EncodeTargetMemberValue(next[id].list()))
		}
	}
	g.target = next
	g.assignmentEpoch, g.assignmentTime = g.epoch, c.now.UnixMilli()
	c.record(g.id, GroupKey{Type: RecordShareGroupTargetMetadata, Group: g.id}, EncodeTargetMetadataValue(TargetMetadataValue{
		AssignmentEpoch: g.assignmentEpoch, AssignmentTimestamp: g.assignmentTime}))
}

// fence removes a member, as Kafka's shareGroupFenceMember: tombstones of
// its current assignment, target assignment and metadata, then a bumped
// group epoch so that the others are reassigned its partitions. The last
// member leaving also moves the target assignment epoch, with no
// timestamp, as the empty group needs no assignment.
func (c *Groups) fence(g *shareGroup, m *shareMember) {
	last := len(g.members) == 1
	for _, typ := range []int16{RecordShareGroupCurrentMember, RecordShareGroupTargetMember, RecordShareGroupMemberMetadata} {
		c.record(g.id, GroupKey{Type: typ, Group: g.id, Member: m.id}, nil)
	}
	delete(g.members, m.id)
	delete(g.target, m.id)
	g.metadataHash = c.metadataHash(g)
	g.epoch++
	c.recordEpoch(g)
	if last {
		g.assignmentEpoch, g.assignmentTime = g.epoch, 0
		c.record(g.id, GroupKey{Type: RecordShareGroupTargetMetadata, Group: g.id}, EncodeTargetMetadataValue(TargetMetadataValue{AssignmentEpoch: g.epoch}))
	}
	c.out.Left = append(c.out.Left, MemberLeft{Group: g.id, Member: m.id})
}

// Tick expires the sessions due at now (group.share.session.timeout.ms
// without a heartbeat), fencing those members.
func (c *Groups) Tick(now time.Time) {
	c.now = now
	for _, gid := range sortedKeys(c.groups) {
		g := c.groups[gid]
		for _, mid := range sortedKeys(g.members) {
			m := g.members[mid]
			if !m.sessionDeadline.IsZero() && !now.Before(m.sessionDeadline) {
				c.fence(g, m)
			}
		}
	}
}

// NextDeadline returns the earliest session expiry, or the zero time.
func (c *Groups) NextDeadline() time.Time {
	var min time.Time
	for _, g := range c.groups {
		for _, m := range g.members {
			if min.IsZero() || m.sessionDeadline.Before(min) {
				min = m.sessionDeadline
			}
		}
	}
	return min
}

// Member reports a member's epoch and current assignment.
func (c *Groups) Member(group, member string) (epoch int32, assigned Assignment, ok bool) {
	g := c.groups[group]
	if g == nil || g.members[member] == nil {
		return 0, nil, false
	}
	m := g.members[member]
	return m.epoch, m.assigned, true
}

func (c *Groups) record(group string, k GroupKey, value []byte) {
	c.out.Records = append(c.out.Records, GroupRecord{Partition: c.Partition(group), Key: EncodeGroupKey(k), Value: value})
}

// Replay applies one __consumer_offsets record of a share group; records
// of other kinds of groups are ignored (ok false), so the caller may feed
// every record of the partition to the group coordinator and here alike.
func (c *Groups) Replay(key, value []byte) (ok bool, err error) {
	k, ok, err := DecodeGroupKey(key)
	if err != nil || !ok {
		return ok, err
	}
	g := c.groups[k.Group]
	if g == nil {
		if value == nil {
			return true, nil
		}
		g = newShareGroup(k.Group)
		c.groups[k.Group] = g
	}
	member := func() *shareMember {
		m := g.members[k.Member]
		if m == nil {
			m = &shareMember{id: k.Member, assigned: Assignment{}}
			g.members[k.Member] = m
		}
		return m
	}
	switch k.Type {
	case RecordShareGroupMetadata:
		if value == nil {
			delete(c.groups, k.Group)
			return true, nil
		}
		var v GroupMetadataValue
		if v, err = DecodeGroupMetadataValue(value); err == nil {
			g.epoch, g.metadataHash = v.Epoch, v.MetadataHash
		}
	case RecordShareGroupTargetMetadata:
		if value != nil {
			var v TargetMetadataValue
			if v, err = DecodeTargetMetadataValue(value); err == nil {
				g.assignmentEpoch, g.assignmentTime = v.AssignmentEpoch, v.AssignmentTimestamp
			}
		}
	case RecordShareGroupMemberMetadata:
		if value == nil {
			delete(g.members, k.Member)
			return true, nil
		}
		var v MemberMetadataValue
		if v, err = DecodeMemberMetadataValue(value); err == nil {
			m := member()
			m.rack, m.clientID, m.clientHost, m.subscribed, m.hasMetadata = v.RackID, v.ClientID, v.ClientHost, v.SubscribedTopics, true
		}
	case RecordShareGroupTargetMember:
		if value == nil {
			delete(g.target, k.Member)
			return true, nil
		}
		var tps []TopicPartitions
		if tps, err = DecodeTargetMemberValue(value); err == nil {
			g.target[k.Member] = assignmentOf(tps)
		}
	case RecordShareGroupCurrentMember:
		if value == nil {
			if m := g.members[k.Member]; m != nil {
				m.assigned, m.hasEpoch = Assignment{}, false
			}
			return true, nil
		}
		var v CurrentAssignmentValue
		if v, err = DecodeCurrentAssignmentValue(value); err == nil {
			m := member()
			m.epoch, m.prevEpoch, m.assigned, m.hasEpoch = v.MemberEpoch, v.PreviousMemberEpoch, assignmentOf(v.Assigned), true
		}
	case RecordShareGroupStatePartitionMeta:
		g.initializing, g.initialized = map[[16]byte]*initTopic{}, map[[16]byte]*initTopic{}
		if value == nil {
			return true, nil
		}
		var v StatePartitionMetadataValue
		if v, err = DecodeStatePartitionMetadataValue(value); err == nil {
			addInit(g.initializing, v.Initializing)
			addInit(g.initialized, v.Initialized)
		}
	case recordShareGroupPartitionMetaLegacy:
	default:
		err = badType(k.Type)
	}
	return true, err
}

// LoadComplete is called after the caller has replayed the log: members
// get fresh session deadlines, as Kafka does when it loads a partition. A member left with a current
// assignment but no metadata record (its tombstone came later) is
// dropped.
func (c *Groups) LoadComplete(now time.Time) {
	c.now = now
	for _, g := range c.groups {
		for id, m := range g.members {
			if !m.hasMetadata {
				delete(g.members, id)
				continue
			}
			m.sessionDeadline = now.Add(c.cfg.SessionTimeout)
		}
	}
}

// orDefault replaces a zero or negative setting with its default.
func orDefault[T cmp.Ordered](v *T, d T) {
	var zero T
	if *v <= zero {
		*v = d
	}
}

func newShareGroup(id string) *shareGroup {
	return &shareGroup{id: id, members: map[string]*shareMember{}, target: map[string]Assignment{},
		initializing: map[[16]byte]*initTopic{}, initialized: map[[16]byte]*initTopic{}}
}

func addInit(m map[[16]byte]*initTopic, ts []TopicPartitionsInfo) {
	for _, t := range ts {
		it := m[t.TopicID]
		if it == nil {
			it = &initTopic{name: t.TopicName, parts: map[int32]bool{}}
			m[t.TopicID] = it
		}
		for _, p := range t.Partitions {
			it.parts[p] = true
		}
	}
}

func initList(m map[[16]byte]*initTopic) []TopicPartitionsInfo {
	out := []TopicPartitionsInfo{}
	for id, it := range m {
		ps := slices.Sorted(maps.Keys(it.parts))
		if len(ps) > 0 {
			out = append(out, TopicPartitionsInfo{TopicID: id, TopicName: it.name, Partitions: ps})
		}
	}
	slices.SortFunc(out, func(a, b TopicPartitionsInfo) int { return strings.Compare(a.TopicName, b.TopicName) })
	return out
}

// maybeInitialize asks for the state of the share-partitions the group
// subscribes to and has neither initialized nor asked for (Kafka's
// maybeCreateInitializeShareGroupStateRequest), and records them as
// initializing.
func (c *Groups) maybeInitialize(g *shareGroup) {
	names := map[string]bool{}
	for _, m := range g.members {
		for _, n := range m.subscribed {
			names[n] = true
		}
	}
	var inits []StateInit
	for _, n := range sortedKeys(names) {
		t, ok := c.topics[n]
		if !ok {
			continue
		}
		init := StateInit{Group: g.id, StateEpoch: g.epoch, TopicID: t.ID, StartOffset: -1}
		if g.initialized[t.ID] != nil || g.initializing[t.ID] != nil {
			init.StartOffset = 0
		}
		for p := int32(0); p < t.Partitions; p++ {
			if !hasInit(g.initialized, t.ID, p) && !hasInit(g.initializing, t.ID, p) {
				init.Partitions = append(init.Partitions, p)
			}
		}
		if len(init.Partitions) > 0 {
			inits = append(inits, init)
		}
	}
	if len(inits) == 0 {
		return
	}
	for _, in := range inits {
		addInit(g.initializing, []TopicPartitionsInfo{{TopicID: in.TopicID, TopicName: c.topicIDs[in.TopicID].Name, Partitions: in.Partitions}})
	}
	c.recordInit(g)
	c.out.Initialize = append(c.out.Initialize, inits...)
}

// canAssign is Kafka's canComputeNextTargetAssignment.
func (c *Groups) canAssign(g *shareGroup) bool {
	iv := c.cfg.AssignmentInterval.Milliseconds()
	return g.assignmentTime == 0 || iv == 0 || c.now.UnixMilli() >= g.assignmentTime+iv
}

// initializedAssignmentPending reports whether a non-empty group has an
// initialized share-partition of a subscribed topic that no member's
// target assignment holds.
func (c *Groups) initializedAssignmentPending(g *shareGroup) bool {
	if len(g.members) == 0 || len(g.initialized) == 0 {
		return false
	}
	held := map[tidp]bool{}
	for _, a := range g.target {
		for t, ps := range a {
			for _, p := range ps {
				held[tidp{t, p}] = true
			}
		}
	}
	for _, m := range g.members {
		for _, n := range m.subscribed {
			t, ok := c.topics[n]
			if !ok || g.initialized[t.ID] == nil {
				continue
			}
			for p := range g.initialized[t.ID].parts {
				if p < t.Partitions && !held[tidp{t.ID, p}] {
					return true
				}
			}
		}
	}
	return false
}

func hasInit(m map[[16]byte]*initTopic, t [16]byte, p int32) bool {
	return m[t] != nil && m[t].parts[p]
}

func (c *Groups) recordInit(g *shareGroup) {
	c.record(g.id, GroupKey{Type: RecordShareGroupStatePartitionMeta, Group: g.id}, EncodeStatePartitionMetadataValue(StatePartitionMetadataValue{
		Initializing: initList(g.initializing), Initialized: initList(g.initialized), Deleting: []TopicPartitionsInfo{}}))
}

// Initialized records that the share coordinator initialized the state of
// a group's share-partitions (Kafka's initializeShareGroupState), moving
// them from initializing to initialized.
func (c *Groups) Initialized(now time.Time, group string, topicID [16]byte, partitions []int32) {
	c.now = now
	g := c.groups[group]
	if g == nil {
		return
	}
	name := c.topicIDs[topicID].Name
	if it := g.initializing[topicID]; it != nil {
		name = it.name
		for _, p := range partitions {
			delete(it.parts, p)
		}
		if len(it.parts) == 0 {
			delete(g.initializing, topicID)
		}
	}
	addInit(g.initialized, []TopicPartitionsInfo{{TopicID: topicID, TopicName: name, Partitions: partitions}})
	c.recordInit(g)
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

package group

import (
	"encoding/base64"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Member states of a KIP-848 member, Kafka's MemberState values.
const (
	memberStable     int8 = 0
	memberUnrevoked  int8 = 1
	memberUnreleased int8 = 2
)

// Special member epochs of ConsumerGroupHeartbeat.
const (
	leaveEpoch       = -1 // the member leaves
	staticLeaveEpoch = -2 // a static member leaves temporarily
)

type consumerMember struct {
	id               string
	instanceID       *string
	rackID           *string
	clientID         string
	clientHost       string
	topics           []string // sorted
	regex            *string
	rebalanceTimeout int32
	assignor         *string
	epoch            int32
	prevEpoch        int32
	state            int8
	assigned         assignment
	revoking         assignment
	// assignEpochs holds, for each partition of assigned and revoking, the
	// member epoch at which it was assigned to the member: Kafka 4.4's
	// ConsumerGroupMember.assignmentEpoch, which lets a commit carrying an
	// older member epoch through for partitions the member has owned since
	// that epoch. A partition missing here was assigned at the member's
	// current epoch (a member converted from a classic group, or replayed
	// from a record without epochs).
	assignEpochs map[partKey]int32
	// classic is set while the member uses the classic protocol in this
	// consumer group (KIP-848 online migration).
	classic *classicMeta
}

// partKey names one partition of an assignment by topic id.
type partKey struct {
	id [16]byte
	p  int32
}

// assignmentEpoch returns the epoch at which partition p of topic id was
// assigned to m, and false when m neither owns it nor has it pending
// revocation: Kafka's ConsumerGroupMember.assignmentEpoch, then
// pendingRevocationEpoch.
func (m *consumerMember) assignmentEpoch(id [16]byte, p int32) (int32, bool) {
	if !m.assigned.has(id, p) && !m.revoking.has(id, p) {
		return 0, false
	}
	if e, ok := m.assignEpochs[partKey{id, p}]; ok {
		return e, true
	}
	return m.epoch, true
}

// pinEpochs records the assignment epoch of every partition of m that has
// none yet, before m's epoch changes other than by reconciliation.
func (m *consumerMember) pinEpochs() {
	if m.assignEpochs == nil {
		m.assignEpochs = map[partKey]int32{}
	}
	for _, a := range []assignment{m.assigned, m.revoking} {
		for id, ps := range a {
			for _, p := range ps {
				k := partKey{id, p}
				if _, ok := m.assignEpochs[k]; !ok {
					m.assignEpochs[k] = m.epoch
				}
			}
		}
	}
}

// classicMeta is what a consumer group keeps of a classic member: Kafka's
// ConsumerGroupMemberMetadataValue.ClassicMemberMetadata.
type classicMeta struct {
	sessionTimeout int32
	protocols      []protocol
}

// consumerGroup mirrors Kafka's ConsumerGroup (KIP-848).
type consumerGroup struct {
	id              string
	epoch           int32
	assignmentEpoch int32
	members         map[string]*consumerMember
	target          map[string]assignment
	subMeta         string // fingerprint of the subscribed topics at the last epoch bump
	// regexes are the resolutions of the members' regular expressions.
	regexes map[string]*resolvedRegex
}

// newConsumerGroup returns an empty consumer group at group epoch 1 and
// target assignment epoch 1, as Kafka 4.x's ModernGroup and
// TargetAssignmentMetadata.INITIAL: the first member's join bumps the group
// to epoch 2.
func newConsumerGroup(id string) *consumerGroup {
	return &consumerGroup{id: id, epoch: 1, assignmentEpoch: 1, members: map[string]*consumerMember{}, target: map[string]assignment{},
		regexes: map[string]*resolvedRegex{}}
}

func newConsumerMember(id string) *consumerMember {
	return &consumerMember{id: id, prevEpoch: -1, rebalanceTimeout: -1, assigned: assignment{}, revoking: assignment{}}
}

// stateName is Kafka's ConsumerGroup.ConsumerGroupState.
func (g *consumerGroup) stateName() string {
	if len(g.members) == 0 {
		return "Empty"
	}
	if g.epoch != g.assignmentEpoch {
		return "Assigning"
	}
	for _, m := range g.members {
		if m.epoch != g.assignmentEpoch || m.state != memberStable {
			return "Reconciling"
		}
	}
	return "Stable"
}

func (g *consumerGroup) byInstance(id string) *consumerMember {
	for _, m := range g.members {
		if m.instanceID != nil && *m.instanceID == id {
			return m
		}
	}
	return nil
}

// memberTopics returns the existing topics m subscribes to, by name or
// through the group's resolution of its regular expression, sorted by
// name.
func (c *Coordinator) memberTopics(g *consumerGroup, m *consumerMember) []Topic {
	set := map[string]bool{}
	for _, t := range m.topics {
		if _, ok := c.topics[t]; ok {
			set[t] = true
		}
	}
	for _, t := range c.regexTopics(g, deref(m.regex)) {
		set[t.Name] = true
	}
	out := make([]Topic, 0, len(set))
	for _, name := range sortedKeys(set) {
		out = append(out, c.topics[name])
	}
	return out
}

// subscribedTopics returns every topic name the group's members subscribe to.
func (g *consumerGroup) subscribedTopics(c *Coordinator) map[string]bool {
	out := map[string]bool{}
	for _, m := range g.members {
		for _, t := range m.topics {
			out[t] = true
		}
		for _, t := range c.memberTopics(g, m) {
			out[t.Name] = true
		}
	}
	return out
}

// fingerprint summarises the subscribed topics' ids and partition counts; a
// change bumps the group epoch (the role of Kafka's metadata hash, KIP-1101).
func (g *consumerGroup) fingerprint(c *Coordinator) string {
	var b strings.Builder
	for _, name := range sortedKeys(g.subscribedTopics(c)) {
		t := c.topics[name]
		fmt.Fprintf(&b, "%s/%x/%d;", name, t.ID, t.Partitions)
	}
	return b.String()
}

func (c *Coordinator) bumpGroupEpoch(g *consumerGroup) {
	g.epoch++
	g.subMeta = g.fingerprint(c)
	c.record(g.id, encodeGroupKey(RecordConsumerGroupMetadata, g.id), encodeEpochValue(g.epoch))
}

func (c *Coordinator) storeMember(g *consumerGroup, m *consumerMember) {
	c.record(g.id, encodeMemberKey(RecordConsumerGroupMemberMetadata, g.id, m.id), EncodeConsumerMemberValue(ConsumerMemberValue{
		InstanceID: m.instanceID, RackID: m.rackID, ClientID: m.clientID, ClientHost: m.clientHost,
		SubscribedTopics: nonNilStrings(m.topics), SubscribedRegex: m.regex, RebalanceTimeoutMs: m.rebalanceTimeout, ServerAssignor: m.assignor,
		Classic: m.classic.record(),
	}))
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (c *Coordinator) storeCurrent(g *consumerGroup, m *consumerMember) {
	c.record(g.id, encodeMemberKey(RecordConsumerGroupCurrentMember, g.id, m.id), EncodeCurrentAssignmentValue(CurrentAssignmentValue{
		MemberEpoch: m.epoch, PreviousMemberEpoch: m.prevEpoch, State: m.state,
		Assigned: m.withEpochs(m.assigned), PendingRevocation: m.withEpochs(m.revoking),
	}))
}

// withEpochs returns a, a part of m's assignment, as record topic
// partitions carrying the epoch each partition was assigned at (tagged
// field AssignmentEpochs), so a coordinator that replays the record
// validates commits with older epochs as this one does.
func (m *consumerMember) withEpochs(a assignment) []TopicPartitions {
	tps := a.topicPartitions()
	for i := range tps {
		tps[i].AssignmentEpochs = make([]int32, len(tps[i].Partitions))
		for j, p := range tps[i].Partitions {
			tps[i].AssignmentEpochs[j], _ = m.assignmentEpoch(tps[i].TopicID, p)
		}
	}
	return tps
}

// replayEpochs sets m's assignment epochs from the assignment record tps;
// a partition without an epoch was assigned at the record's member epoch,
// as Kafka's Utils.assignmentFromTopicPartitions.
func (m *consumerMember) replayEpochs(tps []TopicPartitions) {
	for _, tp := range tps {
		if tp.AssignmentEpochs == nil {
			continue
		}
		for j, p := range tp.Partitions {
			m.assignEpochs[partKey{tp.TopicID, p}] = tp.AssignmentEpochs[j]
		}
	}
}

// computeTarget runs the server-side assignor and stores the new target
// assignment (Kafka's TargetAssignmentBuilder).
func (c *Coordinator) computeTarget(g *consumerGroup) {
	spec := assignSpec{subs: map[string][]Topic{}, current: g.target, instances: map[string]string{}}
	name := ""
	for _, id := range sortedKeys(g.members) {
		m := g.members[id]
		spec.members = append(spec.members, id)
		spec.subs[id] = c.memberTopics(g, m)
		if m.instanceID != nil {
			spec.instances[id] = *m.instanceID
		}
		if name == "" && m.assignor != nil {
			name = *m.assignor
		}
	}
	if name == "" {
		name = c.cfg.ConsumerAssignors[0]
	}
	var next map[string]assignment
	if name == AssignorRange {
		next = assignRange(spec)
	} else {
		next = assignUniform(spec)
	}
	for _, id := range spec.members {
		if old, ok := g.target[id]; !ok || !old.equal(next[id]) {
			c.record(g.id, encodeMemberKey(RecordConsumerGroupTargetMember, g.id, id), EncodeTargetMemberValue(next[id].topicPartitions()))
		}
	}
	g.target = next
	g.assignmentEpoch = g.epoch
	c.record(g.id, encodeGroupKey(RecordConsumerGroupTargetMetadata, g.id), encodeEpochValue(g.assignmentEpoch))
}

// partitionEpoch returns the epoch of the member other than self that owns
// the partition, or -1 when it is free.
func (g *consumerGroup) partitionEpoch(self string, id [16]byte, p int32) int32 {
	for _, o := range g.members {
		if o.id != self && (o.assigned.has(id, p) || o.revoking.has(id, p)) {
			return o.epoch
		}
	}
	return -1
}

func ownsAny(revoking assignment, owned assignment) bool {
	if owned == nil {
		return true // the member did not say: assume it still owns them
	}
	for id, ps := range revoking {
		for _, p := range ps {
			if owned.has(id, p) {
				return true
			}
		}
	}
	return false
}

// reconcile is Kafka's CurrentAssignmentBuilder: it moves m one step towards
// its target, revoking before assigning, and assigning a partition only once
// its previous owner has released it.
func (c *Coordinator) reconcile(g *consumerGroup, m *consumerMember, owned assignment) {
	switch m.state {
	case memberStable:
		if m.epoch != g.assignmentEpoch {
			c.nextAssignment(g, m, m.epoch, owned)
		}
	case memberUnrevoked:
		if !ownsAny(m.revoking, owned) {
			c.nextAssignment(g, m, m.epoch+1, owned)
		}
	default:
		c.nextAssignment(g, m, m.epoch, owned)
	}
}

func (m *consumerMember) setEpoch(e int32) {
	m.prevEpoch = m.epoch
	m.epoch = e
}

func (c *Coordinator) nextAssignment(g *consumerGroup, m *consumerMember, epoch int32, owned assignment) {
	target := g.target[m.id]
	newAssigned, revoke, pending := assignment{}, assignment{}, assignment{}
	unreleased := false
	ids := map[[16]byte]bool{}
	for id := range target {
		ids[id] = true
	}
	for id := range m.assigned {
		ids[id] = true
	}
	// As Kafka's CurrentAssignmentBuilder.computeNextAssignment: kept and
	// revoked partitions keep the epoch they were assigned at, newly
	// assigned ones take the target assignment epoch.
	epochs := map[partKey]int32{}
	for id := range ids {
		for _, p := range m.assigned[id] {
			if target.has(id, p) {
				newAssigned.add(id, p)
			} else {
				revoke.add(id, p)
			}
			epochs[partKey{id, p}], _ = m.assignmentEpoch(id, p)
		}
		for _, p := range target[id] {
			if newAssigned.has(id, p) {
				continue
			}
			if g.partitionEpoch(m.id, id, p) != -1 {
				unreleased = true
				continue
			}
			pending.add(id, p)
		}
	}
	switch {
	case len(revoke) > 0 && ownsAny(revoke, owned):
		m.state = memberUnrevoked
		m.setEpoch(epoch)
		m.assigned, m.revoking = newAssigned, revoke
	default:
		for id, ps := range pending {
			newAssigned[id] = append(newAssigned[id], ps...)
			for _, p := range ps {
				epochs[partKey{id, p}] = g.assignmentEpoch
			}
		}
		for id, ps := range revoke {
			for _, p := range ps {
				delete(epochs, partKey{id, p})
			}
		}
		m.state = memberStable
		if unreleased {
			m.state = memberUnreleased
		}
		m.setEpoch(g.assignmentEpoch)
		m.assigned, m.revoking = newAssigned, assignment{}
	}
	m.assignEpochs = epochs
	m.assigned.sortAll()
	m.revoking.sortAll()
}

// scheduleConsumerSession (re)arms m's session timeout: the broker's
// group.consumer.session.timeout.ms, or for a classic member the session
// timeout of its JoinGroup.
func (c *Coordinator) scheduleConsumerSession(g *consumerGroup, m *consumerMember) {
	gid, mid := g.id, m.id
	d := c.cfg.ConsumerSessionTimeout
	if m.classic != nil {
		d = ms(m.classic.sessionTimeout)
	}
	c.schedule(sessionKey(gid, mid), d, func() { c.fenceConsumerMember(gid, mid) })
}

func (c *Coordinator) fenceConsumerMember(gid, mid string) {
	g := c.consumer[gid]
	if g == nil || g.members[mid] == nil {
		return
	}
	c.fenceMember(g, g.members[mid])
}

// removeConsumerMember writes the member's tombstones and bumps the group
// epoch so that the next heartbeat computes a new target assignment.
func (c *Coordinator) removeConsumerMember(g *consumerGroup, m *consumerMember) {
	c.dropMemberRegex(g, m)
	c.dropConsumerMember(g, m)
	c.bumpGroupEpoch(g)
}

// deleteConsumerGroup writes the tombstones of an empty consumer group.
func (c *Coordinator) deleteConsumerGroup(g *consumerGroup) {
	for _, id := range sortedKeys(g.members) {
		c.removeConsumerMember(g, g.members[id])
	}
	c.record(g.id, encodeGroupKey(RecordConsumerGroupTargetMetadata, g.id), nil)
	c.record(g.id, encodeGroupKey(RecordConsumerGroupPartitionMeta, g.id), nil)
	c.record(g.id, encodeGroupKey(RecordConsumerGroupMetadata, g.id), nil)
	delete(c.consumer, g.id)
}

func ownedFromRequest(ts []kmsg.ConsumerGroupHeartbeatRequestTopic) assignment {
	if ts == nil {
		return nil
	}
	a := assignment{}
	for _, t := range ts {
		a[t.TopicID] = append(a[t.TopicID], t.Partitions...)
	}
	a.sortAll()
	return a
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sameStrPtr(a, b *string) bool {
	return (a == nil) == (b == nil) && deref(a) == deref(b)
}

// validateHeartbeat is Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid.
func (c *Coordinator) validateHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest) (*kerr.Error, string) {
	switch {
	case req.Group == "":
		return kerr.InvalidRequest, "GroupId can't be empty."
	case req.InstanceID != nil && *req.InstanceID == "":
		return kerr.InvalidRequest, "InstanceId can't be empty."
	case req.RackID != nil && *req.RackID == "":
		return kerr.InvalidRequest, "RackId can't be empty."
	case req.MemberEpoch < staticLeaveEpoch:
		return kerr.InvalidRequest, "MemberEpoch is invalid."
	case req.MemberID == "" && (req.Version >= 1 || req.MemberEpoch != 0):
		return kerr.InvalidRequest, "MemberId can't be empty."
	case req.MemberEpoch == staticLeaveEpoch && req.InstanceID == nil:
		return kerr.InvalidRequest, "InstanceId can't be null."
	}
	if req.MemberEpoch == 0 {
		switch {
		case req.RebalanceTimeoutMillis == -1:
			return kerr.InvalidRequest, "RebalanceTimeoutMs must be provided in first request."
		case len(req.Topics) != 0 || req.Topics == nil:
			return kerr.InvalidRequest, "TopicPartitions must be empty when (re-)joining."
		case req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
			return kerr.InvalidRequest, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
		}
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		if _, err := compileRegex(*req.SubscribedTopicRegex); err != nil {
			return kerr.InvalidRegularExpression, regexError(*req.SubscribedTopicRegex, err)
		}
	}
	if req.ServerAssignor != nil {
		ok := false
		for _, a := range c.cfg.ConsumerAssignors {
			ok = ok || a == *req.ServerAssignor
		}
		if !ok {
			return kerr.UnsupportedAssignor, "ServerAssignor " + *req.ServerAssignor + " is not supported."
		}
	}
	return nil, ""
}

func (c *Coordinator) consumerGroupHeartbeat(r Request, req *kmsg.ConsumerGroupHeartbeatRequest) {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	fail := func(err *kerr.Error, msg string) {
		resp.ErrorCode = err.Code
		if msg != "" {
			resp.ErrorMessage = strp(msg)
		}
		c.reply(r.ID, resp)
	}
	if err, msg := c.validateHeartbeat(req); err != nil {
		fail(err, msg)
		return
	}
	g := c.consumer[req.Group]
	if req.MemberEpoch == leaveEpoch || req.MemberEpoch == staticLeaveEpoch {
		if g == nil {
			fail(kerr.GroupIDNotFound, fmt.Sprintf("Group %s not found.", req.Group))
			return
		}
		c.consumerLeave(r, req, g, resp)
		return
	}
	if g == nil {
		if cl := c.classic[req.Group]; cl != nil {
			if len(cl.members) > 0 || len(cl.pending) > 0 {
				var err *kerr.Error
				var msg string
				if g, err, msg = c.upgradeForHeartbeat(req, cl); err != nil {
					fail(err, msg)
					return
				}
			} else if req.MemberEpoch == 0 {
				delete(c.classic, req.Group)
				c.record(req.Group, encodeGroupKey(RecordGroupMetadata, req.Group), nil)
			}
		}
	}
	if g == nil {
		if req.MemberEpoch != 0 {
			fail(kerr.UnknownMemberID, fmt.Sprintf("Consumer group %s not found.", req.Group))
			return
		}
		g = newConsumerGroup(req.Group)
		c.consumer[req.Group] = g
	}
	owned := ownedFromRequest(req.Topics)
	memberID := req.MemberID
	if memberID == "" {
		u := c.newUUID()
		memberID = base64.RawURLEncoding.EncodeToString(u[:])
	}
	var m *consumerMember
	isNew, replaced := false, false
	if req.InstanceID != nil {
		existing := g.byInstance(*req.InstanceID)
		switch {
		case req.MemberEpoch == 0 && existing == nil:
		case req.MemberEpoch == 0 && existing.epoch != staticLeaveEpoch && existing.id != memberID && existing.classic == nil:
			// Only a member of the consumer protocol must have left first;
			// a classic incarnation is replaced at once (KIP-848 migration).
			fail(kerr.UnreleasedInstanceID, fmt.Sprintf("Static member %s with instance id %s cannot join the group because the instance id is owned by member %s.", memberID, *req.InstanceID, existing.id))
			return
		case req.MemberEpoch == 0 && existing.id != memberID:
			// KIP-848 static membership: the new incarnation takes over the
			// previous one's assignment without a rebalance.
			m = c.replaceStaticConsumer(g, existing, memberID)
			// As Kafka's getOrMaybeSubscribeStaticConsumerGroupMember, the
			// new incarnation starts at epoch 0 and keeps the assignment
			// with its assignment epochs.
			m.epoch, m.prevEpoch = 0, 0
			replaced = true
		case existing == nil:
			fail(kerr.UnknownMemberID, "")
			return
		case existing.id != memberID:
			fail(kerr.FencedInstanceID, "")
			return
		default:
			m = existing
		}
	}
	if m == nil {
		m = g.members[memberID]
	}
	if m == nil {
		if req.MemberEpoch != 0 {
			fail(kerr.UnknownMemberID, fmt.Sprintf("Member %s is not a member of group %s.", memberID, req.Group))
			return
		}
		if len(g.members) >= c.cfg.ConsumerMaxSize {
			fail(kerr.GroupMaxSizeReached, fmt.Sprintf("The consumer group has reached its maximum capacity of %d members.", c.cfg.ConsumerMaxSize))
			return
		}
		m = newConsumerMember(memberID)
		g.members[memberID] = m
		isNew = true
	} else if req.MemberEpoch == 0 && !replaced {
		if m.epoch != 0 && m.epoch != staticLeaveEpoch || len(m.assigned) > 0 {
			// A known member joining again with epoch 0 has lost its
			// state (it was fenced): it restarts from an empty assignment.
			m.setEpoch(0)
			m.state = memberStable
			m.assigned, m.revoking = assignment{}, assignment{}
			m.assignEpochs = nil
		}
	} else if req.MemberEpoch > m.epoch || (req.MemberEpoch < m.epoch && (req.MemberEpoch != m.prevEpoch || !subset(owned, m.assigned))) {
		fail(kerr.FencedMemberEpoch, fmt.Sprintf("The consumer group member has a different member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, m.epoch))
		return
	}

	counts := g.regexCounts()
	before := *m
	namesChanged := false
	if req.InstanceID != nil {
		m.instanceID = req.InstanceID
	}
	if req.RackID != nil {
		m.rackID = req.RackID
	}
	if req.RebalanceTimeoutMillis != -1 {
		m.rebalanceTimeout = req.RebalanceTimeoutMillis
	}
	if req.ServerAssignor != nil {
		m.assignor = req.ServerAssignor
	}
	m.clientID, m.clientHost = r.ClientID, r.ClientHost
	// A classic member heartbeating with the consumer protocol now uses
	// it (Kafka sets its ClassicMemberMetadata to null).
	m.classic = nil
	c.cancel(cgJoinKey(g.id, m.id))
	c.cancel(cgSyncKey(g.id, m.id))
	if req.SubscribedTopicNames != nil {
		names := append([]string(nil), req.SubscribedTopicNames...)
		sort.Strings(names)
		if !sameStrings(names, m.topics) {
			m.topics, namesChanged = names, true
		}
	}
	if req.SubscribedTopicRegex != nil {
		rx := req.SubscribedTopicRegex
		if *rx == "" {
			rx = nil
		}
		if !sameStrPtr(rx, m.regex) {
			m.regex = rx
		}
	}
	if isNew || namesChanged || !sameStrPtr(before.regex, m.regex) || !sameStrPtr(before.instanceID, m.instanceID) || !sameStrPtr(before.rackID, m.rackID) ||
		before.rebalanceTimeout != m.rebalanceTimeout || !sameStrPtr(before.assignor, m.assignor) ||
		before.clientID != m.clientID || before.clientHost != m.clientHost || before.classic != nil {
		c.storeMember(g, m)
	}
	// As Kafka's consumerGroupHeartbeat: a new member or a changed
	// subscription bumps the group epoch when its topic names changed,
	// when it took up a regex the group has resolved, or when the
	// subscribed topics changed; a new regex waits for its resolution.
	regexBump := c.updateRegexes(r, g, counts, before.regex, m.regex)
	if namesChanged || regexBump || g.fingerprint(c) != g.subMeta {
		c.bumpGroupEpoch(g)
	}
	if g.epoch > g.assignmentEpoch {
		c.computeTarget(g)
	}
	c.reconcile(g, m, owned)
	changed := before.epoch != m.epoch || before.prevEpoch != m.prevEpoch || before.state != m.state ||
		!before.assigned.equal(m.assigned) || !before.revoking.equal(m.revoking)
	if isNew || changed {
		c.storeCurrent(g, m)
	}
	c.scheduleConsumerSession(g, m)
	if m.state == memberUnrevoked {
		if before.state != memberUnrevoked || isNew {
			gid, mid := g.id, m.id
			c.schedule(revokeKey(gid, mid), ms(m.rebalanceTimeout), func() {
				if g := c.consumer[gid]; g != nil && g.members[mid] != nil && g.members[mid].state == memberUnrevoked {
					c.fenceMember(g, g.members[mid])
				}
			})
		}
	} else {
		c.cancel(revokeKey(g.id, m.id))
	}
	resp.MemberID = strp(m.id)
	resp.MemberEpoch = m.epoch
	resp.HeartbeatIntervalMillis = int32(c.cfg.ConsumerHeartbeatInterval.Milliseconds())
	if req.MemberEpoch == 0 || !before.assigned.equal(m.assigned) || (owned != nil && !owned.equal(m.assigned)) {
		resp.Assignment = &kmsg.ConsumerGroupHeartbeatResponseAssignment{}
		for _, t := range m.assigned.topicPartitions() {
			resp.Assignment.Topics = append(resp.Assignment.Topics, kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{TopicID: t.TopicID, Partitions: t.Partitions})
		}
	}
	c.reply(r.ID, resp)
}

// subset reports whether every partition of owned is in assigned; a nil
// owned (not sent) counts as a subset.
func subset(owned, assigned assignment) bool {
	for id, ps := range owned {
		for _, p := range ps {
			if !assigned.has(id, p) {
				return false
			}
		}
	}
	return true
}

func (c *Coordinator) replaceStaticConsumer(g *consumerGroup, old *consumerMember, newID string) *consumerMember {
	m := newConsumerMember(newID)
	m.instanceID, m.rackID, m.clientID, m.clientHost = old.instanceID, old.rackID, old.clientID, old.clientHost
	m.topics, m.regex, m.rebalanceTimeout, m.assignor = old.topics, old.regex, old.rebalanceTimeout, old.assignor
	m.classic = old.classic
	m.epoch, m.prevEpoch, m.state = old.prevEpoch, old.prevEpoch, memberStable
	m.assigned, m.revoking = old.assigned.clone(), old.revoking.clone()
	old.pinEpochs()
	m.assignEpochs = make(map[partKey]int32, len(old.assignEpochs))
	for k, e := range old.assignEpochs {
		m.assignEpochs[k] = e
	}
	target, hasTarget := g.target[old.id]
	c.dropConsumerMember(g, old)
	g.members[newID] = m
	// As Kafka's replaceMember: the new member's subscription, target and
	// current assignment records follow the old member's tombstones.
	c.storeMember(g, m)
	if hasTarget {
		g.target[newID] = target
		c.record(g.id, encodeMemberKey(RecordConsumerGroupTargetMember, g.id, newID), EncodeTargetMemberValue(target.topicPartitions()))
	}
	c.storeCurrent(g, m)
	return m
}

func (c *Coordinator) consumerLeave(r Request, req *kmsg.ConsumerGroupHeartbeatRequest, g *consumerGroup, resp *kmsg.ConsumerGroupHeartbeatResponse) {
	var m *consumerMember
	if req.InstanceID != nil {
		m = g.byInstance(*req.InstanceID)
		if m != nil && m.id != req.MemberID {
			resp.ErrorCode = kerr.FencedInstanceID.Code
			c.reply(r.ID, resp)
			return
		}
	} else {
		m = g.members[req.MemberID]
	}
	if m == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		c.reply(r.ID, resp)
		return
	}
	if req.MemberEpoch == staticLeaveEpoch {
		// The static member keeps its assignment until its session times
		// out or it comes back.
		// As Kafka's consumerGroupStaticMemberGroupLeave, the partitions
		// it keeps count as assigned at epoch 0, so the member that
		// replaces it may commit them with any epoch it saw.
		m.pinEpochs()
		for id, ps := range m.assigned {
			for _, p := range ps {
				m.assignEpochs[partKey{id, p}] = 0
			}
		}
		m.setEpoch(staticLeaveEpoch)
		c.storeCurrent(g, m)
	} else {
		c.fenceMember(g, m)
	}
	resp.MemberID = strp(req.MemberID)
	resp.MemberEpoch = req.MemberEpoch
	c.reply(r.ID, resp)
}

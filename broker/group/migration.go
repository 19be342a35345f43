package group

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Online migration between the classic and the consumer group protocols
// (KIP-848), as Kafka 4.x's GroupMetadataManager with
// group.consumer.migration.policy:
//
//   - Upgrade: a ConsumerGroupHeartbeat joining (epoch 0) a non-empty
//     classic group of protocol type "consumer" converts it to a consumer
//     group (convertToConsumerGroup): every classic member becomes a member
//     of the consumer group at the classic generation, Stable, keeping its
//     last assignment as current and target assignment. Parked JoinGroup and
//     SyncGroup requests are answered REBALANCE_IN_PROGRESS.
//   - Classic members in a consumer group are served by the consumer
//     group's state machine: JoinGroup updates the member and answers at
//     once with the member epoch as generation, no leader and no member
//     list; SyncGroup returns the member's current assignment in the
//     consumer protocol encoding; Heartbeat answers REBALANCE_IN_PROGRESS
//     when the member must rejoin to progress (classicGroupJoinToConsumerGroup,
//     classicGroupSyncToConsumerGroup, classicGroupHeartbeatToConsumerGroup,
//     classicGroupLeaveToConsumerGroup).
//   - Downgrade: when the last member using the consumer protocol leaves or
//     is fenced while classic members remain, the group becomes a classic
//     group (convertToClassicGroup): Stable at the group epoch, each member's
//     target assignment as its classic assignment, then a rebalance. A
//     classic static member that replaces the last consumer protocol member
//     (same group.instance.id) downgrades the group too, taking over the
//     replaced member's target assignment; the rebalance follows only when
//     the join changed the subscriptions (the assignment is stale).

// Values of group.consumer.migration.policy (Kafka's
// ConsumerGroupMigrationPolicy); an unknown value acts as disabled.
const (
	MigrationBidirectional = "bidirectional"
	MigrationUpgrade       = "upgrade"
	MigrationDowngrade     = "downgrade"
	MigrationDisabled      = "disabled"
)

const consumerProtocolType = "consumer"

func (c *Coordinator) upgradeEnabled() bool {
	p := strings.ToLower(c.cfg.MigrationPolicy)
	return p == MigrationBidirectional || p == MigrationUpgrade
}

func (c *Coordinator) downgradeEnabled() bool {
	p := strings.ToLower(c.cfg.MigrationPolicy)
	return p == MigrationBidirectional || p == MigrationDowngrade
}

func cgJoinKey(g, m string) string { return "cgjoin/" + g + "/" + m }
func cgSyncKey(g, m string) string { return "cgsync/" + g + "/" + m }

func (m *classicMeta) record() *ClassicMemberMetadata {
	if m == nil {
		return nil
	}
	out := &ClassicMemberMetadata{SessionTimeoutMs: m.sessionTimeout, SupportedProtocols: []ClassicProtocol{}}
	for _, p := range m.protocols {
		out.SupportedProtocols = append(out.SupportedProtocols, ClassicProtocol{Name: p.name, Metadata: nonNil(p.meta)})
	}
	return out
}

func classicFromRecord(v *ClassicMemberMetadata) *classicMeta {
	if v == nil {
		return nil
	}
	m := &classicMeta{sessionTimeout: v.SessionTimeoutMs}
	for _, p := range v.SupportedProtocols {
		m.protocols = append(m.protocols, protocol{name: p.Name, meta: p.Metadata})
	}
	return m
}

func (m *classicMeta) equal(o *classicMeta) bool {
	if m == nil || o == nil {
		return m == o
	}
	if m.sessionTimeout != o.sessionTimeout || len(m.protocols) != len(o.protocols) {
		return false
	}
	for i := range m.protocols {
		if m.protocols[i].name != o.protocols[i].name || !sameBytes(m.protocols[i].meta, o.protocols[i].meta) {
			return false
		}
	}
	return true
}

// firstProtocol is the member's first listed protocol, the one Kafka names
// in its JoinGroup and SyncGroup answers.
func (m *classicMeta) firstProtocol() protocol {
	if m == nil || len(m.protocols) == 0 {
		return protocol{}
	}
	return m.protocols[0]
}

// protocolVersion reads the consumer protocol version that leads embedded
// protocol metadata (ConsumerProtocol.deserializeVersion), bounded to the
// assignment versions kmsg writes.
func protocolVersion(meta []byte) int16 {
	if len(meta) < 2 {
		return 0
	}
	return min(max(int16(binary.BigEndian.Uint16(meta)), 0), 3)
}

// encodeAssignment writes a in the consumer protocol's assignment format,
// topics by name in name order; topics no longer in the image are left out.
func (c *Coordinator) encodeAssignment(a assignment, version int16) []byte {
	out := kmsg.ConsumerMemberAssignment{Version: version}
	for _, t := range a.topicPartitions() {
		name, ok := c.topicIDs[t.TopicID]
		if !ok {
			continue
		}
		out.Topics = append(out.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: name, Partitions: t.Partitions})
	}
	sort.Slice(out.Topics, func(i, j int) bool { return out.Topics[i].Topic < out.Topics[j].Topic })
	return out.AppendTo(nil)
}

// decodeAssignment reads a consumer protocol assignment into topic ids; an
// empty one (a member that never synced) is no assignment.
func (c *Coordinator) decodeAssignment(b []byte) (assignment, error) {
	a := assignment{}
	if len(b) == 0 {
		return a, nil
	}
	var ca kmsg.ConsumerMemberAssignment
	if err := ca.ReadFrom(b); err != nil {
		return nil, err
	}
	for _, t := range ca.Topics {
		if tt, ok := c.topics[t.Topic]; ok {
			a[tt.ID] = append(a[tt.ID], t.Partitions...)
		}
	}
	a.sortAll()
	return a, nil
}

// ownedFromSubscription returns the partitions a classic member says it
// owns (consumer protocol v1+), never nil: a classic member always reports.
func (c *Coordinator) ownedFromSubscription(s kmsg.ConsumerMemberMetadata) assignment {
	a := assignment{}
	for _, t := range s.OwnedPartitions {
		if tt, ok := c.topics[t.Topic]; ok {
			a[tt.ID] = append(a[tt.ID], t.Partitions...)
		}
	}
	a.sortAll()
	return a
}

// validateOnlineUpgrade is Kafka's GroupMetadataManager.validateOnlineUpgrade.
func (c *Coordinator) validateOnlineUpgrade(cl *classicGroup) bool {
	return c.upgradeEnabled() && deref(cl.protocolType) == consumerProtocolType && len(cl.members) <= c.cfg.ConsumerMaxSize
}

// convertToConsumerGroup is Kafka's convertToConsumerGroup with
// ConsumerGroup.fromClassicGroup. It reports false, changing nothing, when
// a member's embedded consumer protocol does not decode.
func (c *Coordinator) convertToConsumerGroup(cl *classicGroup) (*consumerGroup, bool) {
	g := newConsumerGroup(cl.id)
	g.epoch, g.assignmentEpoch = cl.generation, cl.generation
	ids := sortedKeys(cl.members)
	for _, id := range ids {
		cm := cl.members[id]
		meta := cm.metadata(deref(cl.protocol))
		if cl.protocol == nil && len(cm.protocols) > 0 {
			meta = cm.protocols[0].meta
		}
		var sub kmsg.ConsumerMemberMetadata
		if err := sub.ReadFrom(meta); err != nil {
			return nil, false
		}
		assigned, err := c.decodeAssignment(cm.assignment)
		if err != nil {
			return nil, false
		}
		m := newConsumerMember(id)
		m.epoch, m.prevEpoch, m.state = cl.generation, cl.generation, memberStable
		m.instanceID, m.rackID = cm.instanceID, sub.Rack
		m.rebalanceTimeout = cm.rebalanceTimeout
		m.clientID, m.clientHost = cm.clientID, cm.clientHost
		m.topics = append([]string{}, sub.Topics...)
		sort.Strings(m.topics)
		m.assigned = assigned
		m.classic = &classicMeta{sessionTimeout: cm.sessionTimeout, protocols: append([]protocol(nil), cm.protocols...)}
		g.members[id] = m
		g.target[id] = assigned.clone()
	}
	for _, id := range ids {
		cm := cl.members[id]
		if cm.join != nil {
			c.reply(cm.join.id, &kmsg.JoinGroupResponse{Version: cm.join.version, ErrorCode: kerr.RebalanceInProgress.Code, Generation: -1, MemberID: cm.id})
		}
		if cm.sync != nil {
			c.reply(cm.sync.id, &kmsg.SyncGroupResponse{Version: cm.sync.version, ErrorCode: kerr.RebalanceInProgress.Code})
		}
		c.cancel(hbKey(cl.id, id))
	}
	for id := range cl.pending {
		c.cancel(pendingKey(cl.id, id))
	}
	c.cancel(joinKey(cl.id))
	c.cancel(syncKey(cl.id))
	delete(c.classic, cl.id)
	c.consumer[cl.id] = g
	// As ClassicGroup.createGroupTombstoneRecords then
	// ConsumerGroup.createConsumerGroupRecords.
	c.record(cl.id, encodeGroupKey(RecordGroupMetadata, cl.id), nil)
	for _, id := range ids {
		c.storeMember(g, g.members[id])
	}
	c.record(g.id, encodeGroupKey(RecordConsumerGroupMetadata, g.id), encodeEpochValue(g.epoch))
	for _, id := range ids {
		c.record(g.id, encodeMemberKey(RecordConsumerGroupTargetMember, g.id, id), EncodeTargetMemberValue(g.target[id].topicPartitions()))
	}
	c.record(g.id, encodeGroupKey(RecordConsumerGroupTargetMetadata, g.id), encodeEpochValue(g.assignmentEpoch))
	for _, id := range ids {
		c.storeCurrent(g, g.members[id])
	}
	g.subMeta = g.fingerprint(c)
	for _, id := range ids {
		c.scheduleConsumerSession(g, g.members[id])
	}
	return g, true
}

// validateOnlineDowngrade is Kafka's validateOnlineDowngradeWithFencedMember:
// leaving is the last member using the consumer protocol and others remain.
func (c *Coordinator) validateOnlineDowngrade(g *consumerGroup, leaving string) bool {
	m := g.members[leaving]
	if m == nil || m.classic != nil || len(g.members) <= 1 {
		return false
	}
	for _, o := range g.members {
		if o.id != leaving && o.classic == nil {
			return false
		}
	}
	return c.downgradeEnabled() && len(g.members)-1 <= c.cfg.MaxGroupSize
}

// fenceMember removes m from g, as Kafka's consumerGroupFenceMember: when m
// is the last member using the consumer protocol, the group is downgraded
// to a classic group instead.
func (c *Coordinator) fenceMember(g *consumerGroup, m *consumerMember) {
	if c.validateOnlineDowngrade(g, m.id) {
		c.convertToClassicGroup(g, m.id, nil, g.epoch, true)
		return
	}
	c.removeConsumerMember(g, m)
}

// validateOnlineDowngradeReplacing is Kafka's
// validateOnlineDowngradeWithReplacedMember: the static member replaced by a
// classic member's JoinGroup is the only member using the consumer protocol,
// and the group fits a classic group. Unlike a departure, the group keeps its
// size, so a group of one member qualifies.
func (c *Coordinator) validateOnlineDowngradeReplacing(g *consumerGroup, replaced *consumerMember) bool {
	if replaced.classic != nil {
		return false
	}
	for _, o := range g.members {
		if o.id != replaced.id && o.classic == nil {
			return false
		}
	}
	return c.downgradeEnabled() && len(g.members) <= c.cfg.MaxGroupSize
}

// convertToClassicGroup is Kafka's convertToClassicGroup with
// ClassicGroup.fromConsumerGroup. The downgrade is caused either by leaving's
// departure, or by joining, a classic static member that replaced the last
// consumer protocol member (leaving is then empty). The classic group is
// Stable at generation, the group epoch before the causing request; the
// other members come first and joining last, each with its target
// assignment (joining inherited the replaced member's); a rebalance starts
// if asked.
func (c *Coordinator) convertToClassicGroup(g *consumerGroup, leaving string, joining *consumerMember, generation int32, rebalance bool) {
	ids := sortedKeys(g.members)
	// As ConsumerGroup.createGroupTombstoneRecords (and
	// createGroupTombstoneRecordsWithReplacedMember: the replaced member's
	// records are already tombstoned, the joining member's follow).
	for _, id := range ids {
		c.record(g.id, encodeMemberKey(RecordConsumerGroupCurrentMember, g.id, id), nil)
	}
	for _, id := range ids {
		c.record(g.id, encodeMemberKey(RecordConsumerGroupTargetMember, g.id, id), nil)
	}
	c.record(g.id, encodeGroupKey(RecordConsumerGroupTargetMetadata, g.id), nil)
	for _, id := range ids {
		c.record(g.id, encodeMemberKey(RecordConsumerGroupMemberMetadata, g.id, id), nil)
	}
	c.record(g.id, encodeGroupKey(RecordConsumerGroupPartitionMeta, g.id), nil)
	c.record(g.id, encodeGroupKey(RecordConsumerGroupMetadata, g.id), nil)
	for _, id := range ids {
		c.cancelConsumerTimers(g.id, id)
	}

	cl := newClassicGroup(g.id, c.nowMs())
	cl.state = stateStable
	cl.generation = generation
	cl.protocolType = strp(consumerProtocolType)
	add := func(m *consumerMember) {
		cm := &classicMember{
			id: m.id, instanceID: m.instanceID, clientID: m.clientID, clientHost: m.clientHost,
			rebalanceTimeout: m.rebalanceTimeout, sessionTimeout: m.classic.sessionTimeout,
			protocolType: consumerProtocolType, protocols: append([]protocol(nil), m.classic.protocols...),
		}
		cl.members[m.id] = cm
		cl.order = append(cl.order, m.id)
		if m.instanceID != nil {
			cl.static[*m.instanceID] = m.id
		}
		if cl.leader == nil {
			cl.leader = strp(m.id)
		}
	}
	for _, id := range ids {
		if id == leaving || (joining != nil && id == joining.id) {
			continue
		}
		add(g.members[id])
	}
	if joining != nil {
		add(joining)
	}
	cl.protocol = strp(cl.selectProtocol())
	for _, id := range cl.order {
		cm := cl.members[id]
		cm.assignment = c.encodeAssignment(g.target[id], protocolVersion(cm.metadata(*cl.protocol)))
	}
	delete(c.consumer, g.id)
	c.classic[g.id] = cl
	c.storeGroup(cl)
	for _, id := range cl.order {
		c.scheduleClassicHeartbeat(cl, cl.members[id])
	}
	if rebalance {
		c.prepareRebalance(cl)
	}
}

func (c *Coordinator) cancelConsumerTimers(gid, mid string) {
	c.cancel(sessionKey(gid, mid))
	c.cancel(revokeKey(gid, mid))
	c.cancel(cgJoinKey(gid, mid))
	c.cancel(cgSyncKey(gid, mid))
}

// supportsClassicProtocols is Kafka's ConsumerGroup.supportsClassicProtocols:
// the protocol type is "consumer" and one of the protocols is supported by
// every member that uses the classic protocol.
func (g *consumerGroup) supportsClassicProtocols(protocolType string, protos []kmsg.JoinGroupRequestProtocol) bool {
	if protocolType != consumerProtocolType || len(protos) == 0 {
		return false
	}
	for _, p := range protos {
		ok := true
		for _, m := range g.members {
			if m.classic == nil {
				continue
			}
			found := false
			for _, q := range m.classic.protocols {
				found = found || q.name == p.Name
			}
			ok = ok && found
		}
		if ok {
			return true
		}
	}
	return false
}

// scheduleClassicFence fences the classic member mid of group gid after d
// unless the timer is cancelled first (Kafka's consumer group join and sync
// timeouts of classic members).
func (c *Coordinator) scheduleClassicFence(key, gid, mid string, d int32) {
	c.schedule(key, ms(d), func() { c.fenceConsumerMember(gid, mid) })
}

// classicJoinToConsumer is Kafka's classicGroupJoinToConsumerGroup.
func (c *Coordinator) classicJoinToConsumer(r Request, req *kmsg.JoinGroupRequest, g *consumerGroup, rebalance int32) {
	fail := func(err *kerr.Error) { c.reply(r.ID, joinError(req, req.MemberID, err.Code)) }
	memberID := req.MemberID
	unknown := memberID == ""
	if unknown {
		u := c.newUUID()
		memberID = base64.RawURLEncoding.EncodeToString(u[:])
	}
	if len(g.members) >= c.cfg.ConsumerMaxSize && g.members[memberID] == nil {
		fail(kerr.GroupMaxSizeReached)
		return
	}
	if !g.supportsClassicProtocols(req.ProtocolType, req.Protocols) {
		fail(kerr.InconsistentGroupProtocol)
		return
	}
	if unknown && req.InstanceID == nil && req.Version >= 4 {
		c.reply(r.ID, joinError(req, memberID, kerr.MemberIDRequired.Code))
		return
	}
	var sub kmsg.ConsumerMemberMetadata
	if err := sub.ReadFrom(req.Protocols[0].Metadata); err != nil {
		// Kafka fails the join on an unreadable embedded subscription.
		fail(kerr.InconsistentGroupProtocol)
		return
	}

	var m *consumerMember
	isNew := false
	// Step 4 of Kafka's classicGroupJoinToConsumerGroup: a static member
	// replacing the last member using the consumer protocol downgrades the
	// group. Kafka decides it on the group as it was before this join and
	// builds the classic group at that group epoch.
	downgrade := false
	epochBefore := g.epoch
	if req.InstanceID != nil {
		existing := g.byInstance(*req.InstanceID)
		downgrade = existing != nil && c.validateOnlineDowngradeReplacing(g, existing)
		switch {
		case existing == nil && !unknown:
			fail(kerr.UnknownMemberID)
			return
		case existing != nil && !unknown && existing.id != memberID:
			fail(kerr.FencedInstanceID)
			return
		case existing != nil && unknown:
			// The static member rejoins under a new member id and takes
			// over the previous one's assignment.
			m = c.replaceStaticConsumer(g, existing, memberID)
			m.epoch, m.prevEpoch = 0, 0
		default:
			m = existing
		}
	}
	if m == nil {
		m = g.members[memberID]
	}
	if m == nil {
		m = newConsumerMember(memberID)
		g.members[memberID] = m
		isNew = true
	}

	before := *m
	if req.InstanceID != nil {
		m.instanceID = req.InstanceID
	}
	if sub.Rack != nil {
		m.rackID = sub.Rack
	}
	if rebalance != -1 {
		m.rebalanceTimeout = rebalance
	}
	m.clientID, m.clientHost = r.ClientID, r.ClientHost
	topics := append([]string{}, sub.Topics...)
	sort.Strings(topics)
	changedSub := !sameStrings(topics, m.topics)
	m.topics = topics
	cm := &classicMeta{sessionTimeout: req.SessionTimeoutMillis}
	for _, p := range req.Protocols {
		cm.protocols = append(cm.protocols, protocol{name: p.Name, meta: append([]byte(nil), p.Metadata...)})
	}
	m.classic = cm
	if isNew || changedSub || !cm.equal(before.classic) || !sameStrPtr(before.instanceID, m.instanceID) ||
		!sameStrPtr(before.rackID, m.rackID) || before.rebalanceTimeout != m.rebalanceTimeout ||
		before.clientID != m.clientID || before.clientHost != m.clientHost {
		c.storeMember(g, m)
	}
	if isNew || changedSub || g.fingerprint(c) != g.subMeta {
		c.bumpGroupEpoch(g)
	}
	// A downgrade skips the new target assignment; when this join made the
	// assignment stale, the member is not reconciled either and the classic
	// group rebalances instead.
	stale := g.epoch > g.assignmentEpoch
	if stale && !downgrade {
		c.computeTarget(g)
	}
	if !(downgrade && stale) && (m.epoch != g.assignmentEpoch || m.state != memberStable) {
		c.reconcile(g, m, c.ownedFromSubscription(sub))
	}
	if isNew || before.epoch != m.epoch || before.prevEpoch != m.prevEpoch || before.state != m.state ||
		!before.assigned.equal(m.assigned) || !before.revoking.equal(m.revoking) {
		c.storeCurrent(g, m)
	}
	resp := &kmsg.JoinGroupResponse{
		Version:      req.Version,
		Generation:   m.epoch,
		ProtocolType: strp(consumerProtocolType),
		Protocol:     strp(cm.firstProtocol().name),
		MemberID:     m.id,
	}
	if downgrade {
		c.convertToClassicGroup(g, "", m, epochBefore, stale)
		c.reply(r.ID, resp)
		return
	}
	// Classic members have a join and a sync timer instead of the
	// revocation timer of consumer protocol members.
	c.cancel(revokeKey(g.id, m.id))
	c.cancel(cgJoinKey(g.id, m.id))
	c.scheduleConsumerSession(g, m)
	c.scheduleClassicFence(cgSyncKey(g.id, m.id), g.id, m.id, rebalance)
	c.reply(r.ID, resp)
}

// classicMemberOf is Kafka's validateConsumerGroupMember followed by
// throwIfMemberDoesNotUseClassicProtocol.
func (g *consumerGroup) classicMemberOf(memberID string, instanceID *string) (*consumerMember, *kerr.Error) {
	var m *consumerMember
	if instanceID == nil {
		m = g.members[memberID]
		if m == nil {
			return nil, kerr.UnknownMemberID
		}
	} else {
		m = g.byInstance(*instanceID)
		if m == nil {
			return nil, kerr.UnknownMemberID
		}
		if m.id != memberID {
			return nil, kerr.FencedInstanceID
		}
	}
	if m.classic == nil {
		return nil, kerr.UnknownMemberID
	}
	return m, nil
}

// mustRejoin reports whether a classic member has to rejoin to progress,
// as classicGroupHeartbeatToConsumerGroup: the group epoch moved on, it
// has partitions to revoke, or partitions it waited for were released.
func (g *consumerGroup) mustRejoin(m *consumerMember) bool {
	switch {
	case m.epoch < g.epoch, m.state == memberUnrevoked:
		return true
	case m.state == memberUnreleased:
		return !g.waitingOnUnreleased(m)
	}
	return false
}

// waitingOnUnreleased is Kafka's ConsumerGroup.waitingOnUnreleasedPartition.
func (g *consumerGroup) waitingOnUnreleased(m *consumerMember) bool {
	for id, ps := range g.target[m.id] {
		for _, p := range ps {
			if !m.assigned.has(id, p) && g.partitionEpoch(m.id, id, p) != -1 {
				return true
			}
		}
	}
	return false
}

// scheduleJoinIfAbsent arms the classic member's join timeout unless it is
// armed already.
func (c *Coordinator) scheduleJoinIfAbsent(g *consumerGroup, m *consumerMember) {
	if _, ok := c.timers[cgJoinKey(g.id, m.id)]; !ok {
		c.scheduleClassicFence(cgJoinKey(g.id, m.id), g.id, m.id, m.rebalanceTimeout)
	}
}

// classicSyncToConsumer is Kafka's classicGroupSyncToConsumerGroup.
func (c *Coordinator) classicSyncToConsumer(r Request, req *kmsg.SyncGroupRequest, g *consumerGroup) {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	defer c.reply(r.ID, resp)
	if len(g.members) == 0 {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return
	}
	m, err := g.classicMemberOf(req.MemberID, req.InstanceID)
	switch {
	case err != nil:
	case req.Generation != m.epoch:
		err = kerr.IllegalGeneration
	case req.ProtocolType != nil && *req.ProtocolType != consumerProtocolType,
		req.Protocol != nil && *req.Protocol != m.classic.firstProtocol().name:
		err = kerr.InconsistentGroupProtocol
	case g.epoch > m.epoch && m.state != memberUnrevoked:
		c.scheduleJoinIfAbsent(g, m)
		err = kerr.RebalanceInProgress
	}
	if err != nil {
		resp.ErrorCode = err.Code
		return
	}
	c.cancel(cgSyncKey(g.id, m.id))
	c.scheduleConsumerSession(g, m)
	resp.ProtocolType, resp.Protocol = req.ProtocolType, req.Protocol
	resp.MemberAssignment = c.encodeAssignment(m.assigned, protocolVersion(m.classic.firstProtocol().meta))
}

// classicHeartbeatToConsumer is Kafka's classicGroupHeartbeatToConsumerGroup.
func (c *Coordinator) classicHeartbeatToConsumer(r Request, req *kmsg.HeartbeatRequest, g *consumerGroup) {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	defer c.reply(r.ID, resp)
	m, err := g.classicMemberOf(req.MemberID, req.InstanceID)
	if err == nil && req.Generation != m.epoch {
		err = kerr.IllegalGeneration
	}
	if err != nil {
		resp.ErrorCode = err.Code
		return
	}
	c.scheduleConsumerSession(g, m)
	if g.mustRejoin(m) {
		resp.ErrorCode = kerr.RebalanceInProgress.Code
		c.scheduleJoinIfAbsent(g, m)
	}
}

// classicLeaveToConsumer is Kafka's classicGroupLeaveToConsumerGroup: the
// leaving classic members are removed and the group epoch is bumped once.
func (c *Coordinator) classicLeaveToConsumer(r Request, req *kmsg.LeaveGroupRequest, g *consumerGroup) {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	defer c.reply(r.ID, resp)
	removed := false
	for _, lm := range leaveMembers(req) {
		out := kmsg.LeaveGroupResponseMember{MemberID: lm.MemberID, InstanceID: lm.InstanceID}
		var m *consumerMember
		var err *kerr.Error
		if lm.InstanceID == nil {
			m, err = g.classicMemberOf(lm.MemberID, nil)
		} else {
			// An admin may remove a static member by instance id alone.
			m = g.byInstance(*lm.InstanceID)
			switch {
			case m == nil:
				err = kerr.UnknownMemberID
			case lm.MemberID != "" && m.id != lm.MemberID:
				err = kerr.FencedInstanceID
			case m.classic == nil:
				err = kerr.UnknownMemberID
			default:
				out.MemberID = m.id
			}
		}
		if err != nil {
			out.ErrorCode = err.Code
		} else {
			c.dropConsumerMember(g, m)
			removed = true
		}
		appendLeaveResult(req, resp, out)
	}
	if removed {
		c.bumpGroupEpoch(g)
	}
}

// dropConsumerMember writes m's tombstones and forgets it, without bumping
// the group epoch.
func (c *Coordinator) dropConsumerMember(g *consumerGroup, m *consumerMember) {
	c.cancelConsumerTimers(g.id, m.id)
	c.record(g.id, encodeMemberKey(RecordConsumerGroupCurrentMember, g.id, m.id), nil)
	c.record(g.id, encodeMemberKey(RecordConsumerGroupTargetMember, g.id, m.id), nil)
	c.record(g.id, encodeMemberKey(RecordConsumerGroupMemberMetadata, g.id, m.id), nil)
	delete(g.members, m.id)
	delete(g.target, m.id)
}

// upgradeForHeartbeat handles a ConsumerGroupHeartbeat to a non-empty
// classic group: with epoch 0 and the upgrade allowed the group is
// converted; otherwise the request fails as Kafka's
// getOrMaybeCreateConsumerGroup.
func (c *Coordinator) upgradeForHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest, cl *classicGroup) (*consumerGroup, *kerr.Error, string) {
	if req.MemberEpoch != 0 || !c.validateOnlineUpgrade(cl) {
		return nil, kerr.GroupIDNotFound, fmt.Sprintf("Group %s is not a consumer group.", req.Group)
	}
	if len(cl.members) >= c.cfg.ConsumerMaxSize {
		// The joining member would not fit: Kafka discards the
		// conversion with the failed request.
		return nil, kerr.GroupMaxSizeReached, fmt.Sprintf("The consumer group has reached its maximum capacity of %d members.", c.cfg.ConsumerMaxSize)
	}
	g, ok := c.convertToConsumerGroup(cl)
	if !ok {
		return nil, kerr.GroupIDNotFound, fmt.Sprintf("Cannot upgrade the classic group %s to consumer group because the embedded consumer protocol is malformed.", req.Group)
	}
	return g, nil, ""
}

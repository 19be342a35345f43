package group

import (
	"bytes"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicState is a classic group's state, as Kafka's ClassicGroupState.
type classicState int8

const (
	stateEmpty classicState = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

func (s classicState) String() string {
	return [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}[s]
}

// parked is a request whose answer waits for the group (JoinGroup until the
// join phase completes, SyncGroup until the leader's assignment).
type parked struct {
	id      uint64
	version int16
}

type protocol struct {
	name string
	meta []byte
}

type classicMember struct {
	id               string
	instanceID       *string
	clientID         string
	clientHost       string
	rebalanceTimeout int32
	sessionTimeout   int32
	protocolType     string
	protocols        []protocol
	assignment       []byte
	join             *parked
	sync             *parked
	isNew            bool
}

func (m *classicMember) metadata(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			return p.meta
		}
	}
	return nil
}

// classicGroup mirrors Kafka's ClassicGroup.
type classicGroup struct {
	id             string
	state          classicState
	prevState      classicState
	stateTs        int64
	protocolType   *string
	protocol       *string
	generation     int32
	leader         *string
	members        map[string]*classicMember
	order          []string // member ids in join order
	pending        map[string]bool
	pendingSync    map[string]bool
	static         map[string]string // group.instance.id → member id
	newMemberAdded bool
}

func newClassicGroup(id string, nowMs int64) *classicGroup {
	return &classicGroup{
		id:          id,
		stateTs:     nowMs,
		members:     map[string]*classicMember{},
		pending:     map[string]bool{},
		pendingSync: map[string]bool{},
		static:      map[string]string{},
	}
}

func (g *classicGroup) transition(s classicState, nowMs int64) {
	g.prevState = g.state
	g.state = s
	g.stateTs = nowMs
}

func (g *classicGroup) rebalanceTimeout() time.Duration {
	var max int32
	for _, m := range g.members {
		if m.rebalanceTimeout > max {
			max = m.rebalanceTimeout
		}
	}
	return time.Duration(max) * time.Millisecond
}

func (g *classicGroup) awaitingJoin() int {
	n := 0
	for _, m := range g.members {
		if m.join != nil {
			n++
		}
	}
	return n
}

func (g *classicGroup) hasAllMembersJoined() bool {
	return len(g.members) == g.awaitingJoin() && len(g.pending) == 0
}

// candidateProtocols returns the protocols every member supports.
func (g *classicGroup) candidateProtocols() map[string]bool {
	var out map[string]bool
	for _, id := range g.order {
		set := map[string]bool{}
		for _, p := range g.members[id].protocols {
			if out == nil || out[p.name] {
				set[p.name] = true
			}
		}
		out = set
	}
	return out
}

// supportsProtocols is Kafka's ClassicGroup.supportsProtocols.
func (g *classicGroup) supportsProtocols(protocolType string, protos []kmsg.JoinGroupRequestProtocol) bool {
	if g == nil || len(g.members) == 0 {
		return protocolType != "" && len(protos) > 0
	}
	if deref(g.protocolType) != protocolType {
		return false
	}
	cand := g.candidateProtocols()
	for _, p := range protos {
		if cand[p.Name] {
			return true
		}
	}
	return false
}

// selectProtocol picks the candidate most members list first, as Kafka's
// ClassicGroup.selectProtocol; ties go to the one listed first by the
// earliest member.
func (g *classicGroup) selectProtocol() string {
	cand := g.candidateProtocols()
	votes := map[string]int{}
	var rank []string
	for _, id := range g.order {
		for _, p := range g.members[id].protocols {
			if cand[p.name] {
				if votes[p.name] == 0 {
					rank = append(rank, p.name)
				}
				votes[p.name]++
				break
			}
		}
	}
	best := ""
	for _, name := range rank {
		if best == "" || votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

func joinKey(g string) string                    { return "join/" + g }
func syncKey(g string) string                    { return "sync/" + g }
func hbKey(g, m string) string                   { return "hb/" + g + "/" + m }
func pendingKey(g, m string) string              { return "pending/" + g + "/" + m }
func sessionKey(g, m string) string              { return "session/" + g + "/" + m }
func revokeKey(g, m string) string               { return "revoke/" + g + "/" + m }
func ms(v int32) time.Duration                   { return time.Duration(v) * time.Millisecond }
func code(err *kerr.Error) int16                 { return err.Code }
func sameBytes(a, b []byte) bool                 { return bytes.Equal(a, b) }
func joinReason(r *kmsg.JoinGroupRequest) string { return deref(r.Reason) }

func joinError(r *kmsg.JoinGroupRequest, memberID string, errCode int16) *kmsg.JoinGroupResponse {
	resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode = errCode
	resp.Generation = -1
	resp.MemberID = memberID
	return resp
}

func (c *Coordinator) joinGroup(r Request, req *kmsg.JoinGroupRequest) {
	fail := func(err *kerr.Error) { c.reply(r.ID, joinError(req, req.MemberID, err.Code)) }
	rebalance := req.RebalanceTimeoutMillis
	if req.Version == 0 {
		rebalance = req.SessionTimeoutMillis
	}
	switch {
	case req.Group == "":
		fail(kerr.InvalidGroupID)
		return
	case req.InstanceID != nil && *req.InstanceID == "":
		fail(kerr.InvalidRequest)
		return
	case ms(req.SessionTimeoutMillis) < c.cfg.MinSessionTimeout || ms(req.SessionTimeoutMillis) > c.cfg.MaxSessionTimeout:
		fail(kerr.InvalidSessionTimeout)
		return
	}
	if cg := c.consumer[req.Group]; cg != nil {
		if len(cg.members) > 0 {
			// KIP-848 online migration: the consumer group serves the
			// classic member.
			c.classicJoinToConsumer(r, req, cg, rebalance)
			return
		}
		c.deleteConsumerGroup(cg)
	}
	g := c.classic[req.Group]
	if req.MemberID == "" {
		if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
			fail(kerr.InconsistentGroupProtocol)
			return
		}
		if g == nil {
			g = newClassicGroup(req.Group, c.nowMs())
			c.classic[req.Group] = g
		}
		c.unknownMemberJoin(r, req, g, rebalance)
		return
	}
	if g == nil {
		fail(kerr.UnknownMemberID)
		return
	}
	c.knownMemberJoin(r, req, g, rebalance)
}

func (c *Coordinator) unknownMemberJoin(r Request, req *kmsg.JoinGroupRequest, g *classicGroup, rebalance int32) {
	if g.state == stateDead {
		c.reply(r.ID, joinError(req, "", kerr.CoordinatorNotAvailable.Code))
		return
	}
	if req.InstanceID == nil && len(g.members)+len(g.pending) >= c.cfg.MaxGroupSize {
		c.reply(r.ID, joinError(req, "", kerr.GroupMaxSizeReached.Code))
		return
	}
	newID := c.newID(r.ClientID)
	if req.InstanceID != nil {
		if old, ok := g.static[*req.InstanceID]; ok {
			c.replaceStaticMember(r, req, g, old, newID, rebalance)
			return
		}
		if len(g.members) >= c.cfg.MaxGroupSize {
			c.reply(r.ID, joinError(req, "", kerr.GroupMaxSizeReached.Code))
			return
		}
		c.addMemberAndRebalance(r, req, g, newID, rebalance)
		return
	}
	if req.Version >= 4 {
		// KIP-394: the member must come back with the id it is given.
		g.pending[newID] = true
		gid := g.id
		c.schedule(pendingKey(g.id, newID), ms(req.SessionTimeoutMillis), func() { c.expirePending(gid, newID) })
		c.reply(r.ID, joinError(req, newID, kerr.MemberIDRequired.Code))
		return
	}
	c.addMemberAndRebalance(r, req, g, newID, rebalance)
}

func (c *Coordinator) knownMemberJoin(r Request, req *kmsg.JoinGroupRequest, g *classicGroup, rebalance int32) {
	fail := func(err *kerr.Error) { c.reply(r.ID, joinError(req, req.MemberID, err.Code)) }
	if g.state == stateDead {
		fail(kerr.CoordinatorNotAvailable)
		return
	}
	if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
		fail(kerr.InconsistentGroupProtocol)
		return
	}
	if g.pending[req.MemberID] {
		delete(g.pending, req.MemberID)
		c.cancel(pendingKey(g.id, req.MemberID))
		c.addMemberAndRebalance(r, req, g, req.MemberID, rebalance)
		return
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		fail(err)
		return
	}
	m := g.members[req.MemberID]
	switch g.state {
	case statePreparingRebalance:
		c.updateMemberAndRebalance(r, req, g, m, rebalance)
	case stateCompletingRebalance:
		if m.matches(req) {
			// The member did not see the join response: send it again.
			c.reply(r.ID, c.joinResponse(g, m, req.Version, false))
			return
		}
		c.updateMemberAndRebalance(r, req, g, m, rebalance)
	case stateStable:
		if (g.leader != nil && *g.leader == m.id) || !m.matches(req) {
			c.updateMemberAndRebalance(r, req, g, m, rebalance)
			return
		}
		c.reply(r.ID, c.joinResponse(g, m, req.Version, false))
	default: // Empty
		fail(kerr.UnknownMemberID)
	}
}

// validateMember is Kafka's ClassicGroup.validateMember.
func (g *classicGroup) validateMember(memberID string, instanceID *string) *kerr.Error {
	if instanceID != nil {
		existing, ok := g.static[*instanceID]
		if !ok {
			return kerr.UnknownMemberID
		}
		if existing != memberID {
			return kerr.FencedInstanceID
		}
		return nil
	}
	if g.members[memberID] == nil {
		return kerr.UnknownMemberID
	}
	return nil
}

// matches reports whether a rejoin carries the member's current protocols.
func (m *classicMember) matches(req *kmsg.JoinGroupRequest) bool {
	if len(m.protocols) != len(req.Protocols) {
		return false
	}
	for i, p := range req.Protocols {
		if m.protocols[i].name != p.Name || !sameBytes(m.protocols[i].meta, p.Metadata) {
			return false
		}
	}
	return true
}

func (m *classicMember) update(req *kmsg.JoinGroupRequest, rebalance int32) {
	m.protocols = m.protocols[:0]
	for _, p := range req.Protocols {
		m.protocols = append(m.protocols, protocol{name: p.Name, meta: append([]byte(nil), p.Metadata...)})
	}
	m.rebalanceTimeout = rebalance
	m.sessionTimeout = req.SessionTimeoutMillis
}

func (c *Coordinator) addMemberAndRebalance(r Request, req *kmsg.JoinGroupRequest, g *classicGroup, id string, rebalance int32) {
	m := &classicMember{
		id:           id,
		instanceID:   req.InstanceID,
		clientID:     r.ClientID,
		clientHost:   r.ClientHost,
		protocolType: req.ProtocolType,
		isNew:        true,
		join:         &parked{id: r.ID, version: req.Version},
	}
	m.update(req, rebalance)
	if len(g.members) == 0 {
		g.protocolType = strp(req.ProtocolType)
	}
	g.members[id] = m
	g.order = append(g.order, id)
	if req.InstanceID != nil {
		g.static[*req.InstanceID] = id
	}
	if g.leader == nil {
		g.leader = strp(id)
	}
	// As Kafka's addMemberThenRebalanceOrCompleteJoin: only a member that
	// arrives during the initial delay extends it. The member that starts
	// the initial rebalance finds the group Empty and does not.
	if g.state == statePreparingRebalance && g.prevState == stateEmpty {
		g.newMemberAdded = true
	}
	// A new member has no generation yet, so it cannot heartbeat, and it
	// can expire even while it waits in JoinGroup
	// (ClassicGroupMember.hasSatisfiedHeartbeat). As Kafka, it waits up
	// to the new member join timeout, not its session timeout: the join
	// phase it waits for, an initial delay extended by later arrivals,
	// can outlast the session timeout.
	c.scheduleClassicTimeout(g, m, c.cfg.NewMemberJoinTimeout)
	c.maybePrepareRebalanceOrCompleteJoin(g)
}

func (c *Coordinator) updateMemberAndRebalance(r Request, req *kmsg.JoinGroupRequest, g *classicGroup, m *classicMember, rebalance int32) {
	m.update(req, rebalance)
	m.join = &parked{id: r.ID, version: req.Version}
	c.maybePrepareRebalanceOrCompleteJoin(g)
}

// replaceStaticMember gives a restarted static member (KIP-345) the identity
// of its previous incarnation. In a Stable group whose protocol does not
// change the member gets the current generation back without a rebalance.
func (c *Coordinator) replaceStaticMember(r Request, req *kmsg.JoinGroupRequest, g *classicGroup, oldID, newID string, rebalance int32) {
	m := g.members[oldID]
	if m.join != nil {
		c.reply(m.join.id, &kmsg.JoinGroupResponse{Version: m.join.version, ErrorCode: kerr.FencedInstanceID.Code, Generation: -1, MemberID: oldID})
		m.join = nil
	}
	if m.sync != nil {
		c.reply(m.sync.id, &kmsg.SyncGroupResponse{Version: m.sync.version, ErrorCode: kerr.FencedInstanceID.Code})
		m.sync = nil
	}
	c.cancel(hbKey(g.id, oldID))
	delete(g.members, oldID)
	m.id = newID
	m.clientID, m.clientHost = r.ClientID, r.ClientHost
	g.members[newID] = m
	for i, id := range g.order {
		if id == oldID {
			g.order[i] = newID
		}
	}
	g.static[*req.InstanceID] = newID
	if g.pendingSync[oldID] {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = true
	}
	currentLeader := deref(g.leader)
	if currentLeader == oldID {
		g.leader = strp(newID)
	}
	c.scheduleClassicHeartbeat(g, m)
	m.update(req, rebalance)
	m.join = &parked{id: r.ID, version: req.Version}
	if g.state == stateStable && deref(g.protocol) == g.selectProtocol() {
		c.storeGroup(g)
		resp := c.joinResponse(g, m, req.Version, true)
		if req.Version < 9 {
			resp.LeaderID = currentLeader
			resp.Members = nil
		}
		m.join = nil
		c.reply(r.ID, resp)
		return
	}
	c.maybePrepareRebalanceOrCompleteJoin(g)
}

// joinResponse is the successful JoinGroup answer for m in the current
// generation. skip sets SkipAssignment for the leader (KIP-814, v9+).
func (c *Coordinator) joinResponse(g *classicGroup, m *classicMember, version int16, skip bool) *kmsg.JoinGroupResponse {
	resp := &kmsg.JoinGroupResponse{
		Version:      version,
		Generation:   g.generation,
		ProtocolType: g.protocolType,
		Protocol:     g.protocol,
		LeaderID:     deref(g.leader),
		MemberID:     m.id,
	}
	if g.leader != nil && *g.leader == m.id {
		resp.SkipAssignment = skip && version >= 9
		for _, id := range g.order {
			o := g.members[id]
			resp.Members = append(resp.Members, kmsg.JoinGroupResponseMember{
				MemberID:         o.id,
				InstanceID:       o.instanceID,
				ProtocolMetadata: o.metadata(deref(g.protocol)),
			})
		}
	}
	return resp
}

func (c *Coordinator) maybePrepareRebalanceOrCompleteJoin(g *classicGroup) {
	switch g.state {
	case stateStable, stateCompletingRebalance, stateEmpty:
		c.prepareRebalance(g)
	case statePreparingRebalance:
		c.maybeCompleteJoin(g)
	}
}

func (c *Coordinator) prepareRebalance(g *classicGroup) {
	if g.state == stateCompletingRebalance {
		c.resetAssignments(g, kerr.RebalanceInProgress.Code)
	}
	c.cancel(syncKey(g.id))
	gid := g.id
	initial := g.state == stateEmpty
	g.transition(statePreparingRebalance, c.nowMs())
	if initial {
		delay := c.cfg.InitialRebalanceDelay
		remaining := max(g.rebalanceTimeout()-delay, 0)
		c.schedule(joinKey(gid), delay, func() { c.tryCompleteInitialJoin(gid, delay, remaining) })
		return
	}
	if g.hasAllMembersJoined() {
		c.completeJoin(g)
		return
	}
	c.schedule(joinKey(gid), g.rebalanceTimeout(), func() { c.completeJoinByID(gid) })
}

// tryCompleteInitialJoin is Kafka's InitialDelayedJoin: while new members
// keep arriving the join phase of an empty group is extended by
// group.initial.rebalance.delay.ms, up to the rebalance timeout.
func (c *Coordinator) tryCompleteInitialJoin(gid string, delay, remaining time.Duration) {
	g := c.classic[gid]
	if g == nil {
		return
	}
	if g.newMemberAdded && remaining != 0 {
		g.newMemberAdded = false
		newDelay := min(c.cfg.InitialRebalanceDelay, remaining)
		newRemaining := max(remaining-delay, 0)
		c.schedule(joinKey(gid), newDelay, func() { c.tryCompleteInitialJoin(gid, newDelay, newRemaining) })
		return
	}
	c.completeJoin(g)
}

func (c *Coordinator) maybeCompleteJoin(g *classicGroup) {
	if g.state == statePreparingRebalance && g.hasAllMembersJoined() && g.prevState != stateEmpty {
		c.completeJoin(g)
	}
}

func (c *Coordinator) completeJoinByID(gid string) {
	if g := c.classic[gid]; g != nil {
		c.completeJoin(g)
	}
}

// completeJoin is Kafka's completeClassicGroupJoin.
func (c *Coordinator) completeJoin(g *classicGroup) {
	c.cancel(joinKey(g.id))
	for _, id := range append([]string(nil), g.order...) {
		m := g.members[id]
		if m.join == nil && m.instanceID == nil {
			c.removeClassicMember(g, m, kerr.UnknownMemberID.Code)
		}
	}
	if g.state == stateDead {
		return
	}
	if !g.electJoinedLeader() && len(g.members) > 0 {
		gid := g.id
		c.schedule(joinKey(gid), g.rebalanceTimeout(), func() { c.completeJoinByID(gid) })
		return
	}
	g.generation++
	if len(g.members) == 0 {
		g.protocol = nil
		g.transition(stateEmpty, c.nowMs())
		c.storeGroup(g)
		return
	}
	g.protocol = strp(g.selectProtocol())
	g.transition(stateCompletingRebalance, c.nowMs())
	for _, id := range g.order {
		m := g.members[id]
		if m.join != nil {
			c.reply(m.join.id, c.joinResponse(g, m, m.join.version, false))
			m.join = nil
		}
		m.isNew = false
		c.scheduleClassicHeartbeat(g, m)
		g.pendingSync[id] = true
	}
	gid, gen := g.id, g.generation
	c.schedule(syncKey(gid), g.rebalanceTimeout(), func() { c.expirePendingSync(gid, gen) })
}

// electJoinedLeader is Kafka's ClassicGroup.maybeElectNewJoinedLeader.
func (g *classicGroup) electJoinedLeader() bool {
	if g.leader == nil {
		return false
	}
	if l := g.members[*g.leader]; l != nil && l.join != nil {
		return true
	}
	for _, id := range g.order {
		if g.members[id].join != nil {
			g.leader = strp(id)
			return true
		}
	}
	return false
}

// resetAssignments drops the assignments of a rebalance that is being
// restarted and answers parked SyncGroups with errCode.
func (c *Coordinator) resetAssignments(g *classicGroup, errCode int16) {
	for _, id := range g.order {
		m := g.members[id]
		m.assignment = nil
		if m.sync != nil {
			c.reply(m.sync.id, &kmsg.SyncGroupResponse{Version: m.sync.version, ErrorCode: errCode})
			m.sync = nil
			c.scheduleClassicHeartbeat(g, m)
		}
	}
	g.pendingSync = map[string]bool{}
}

func (c *Coordinator) expirePendingSync(gid string, gen int32) {
	g := c.classic[gid]
	if g == nil || g.generation != gen || len(g.pendingSync) == 0 {
		return
	}
	if g.state != stateCompletingRebalance && g.state != stateStable {
		return
	}
	for _, id := range append([]string(nil), g.order...) {
		if g.pendingSync[id] {
			c.removeClassicMember(g, g.members[id], kerr.UnknownMemberID.Code)
		}
	}
	g.pendingSync = map[string]bool{}
	c.prepareRebalance(g)
}

func (c *Coordinator) scheduleClassicHeartbeat(g *classicGroup, m *classicMember) {
	c.scheduleClassicTimeout(g, m, ms(m.sessionTimeout))
}

// scheduleClassicTimeout expires m after d unless it is heard from again,
// as Kafka's rescheduleClassicGroupMemberHeartbeat.
func (c *Coordinator) scheduleClassicTimeout(g *classicGroup, m *classicMember, d time.Duration) {
	gid, mid := g.id, m.id
	c.schedule(hbKey(gid, mid), d, func() { c.expireHeartbeat(gid, mid) })
}

func (c *Coordinator) expireHeartbeat(gid, mid string) {
	g := c.classic[gid]
	if g == nil || g.state == stateDead {
		return
	}
	m := g.members[mid]
	if m == nil {
		return
	}
	// Members awaiting a rebalance satisfy heartbeats, unless they are new
	// (ClassicGroupMember.hasSatisfiedHeartbeat).
	if !m.isNew && (m.join != nil || m.sync != nil) {
		return
	}
	c.removeClassicMember(g, m, kerr.UnknownMemberID.Code)
	// As Kafka's removeMemberAndUpdateClassicGroup: unlike a LeaveGroup,
	// an expiry completes a join phase whose remaining members have all
	// joined even while the initial delay runs.
	switch g.state {
	case stateStable, stateCompletingRebalance:
		c.maybePrepareRebalanceOrCompleteJoin(g)
	case statePreparingRebalance:
		if g.hasAllMembersJoined() {
			c.completeJoin(g)
		}
	}
}

// expirePending drops a member that was given its id (MEMBER_ID_REQUIRED)
// and did not come back within its session timeout. As Kafka's
// removePendingMemberAndUpdateClassicGroup, a join phase that only waited
// for it completes, initial delay or not.
func (c *Coordinator) expirePending(gid, mid string) {
	g := c.classic[gid]
	if g == nil || !g.pending[mid] {
		return
	}
	delete(g.pending, mid)
	if g.state == statePreparingRebalance && g.hasAllMembersJoined() {
		c.completeJoin(g)
	}
}

// removeClassicMember takes m out of g; its parked requests are answered
// with errCode. As Kafka's removeMemberAndUpdateClassicGroup and
// removeCurrentMemberFromClassicGroup, the parked JoinGroup's answer
// carries no member id, so the client joins again as a new member.
func (c *Coordinator) removeClassicMember(g *classicGroup, m *classicMember, errCode int16) {
	if m.join != nil {
		c.reply(m.join.id, &kmsg.JoinGroupResponse{Version: m.join.version, ErrorCode: errCode, Generation: -1})
		m.join = nil
	}
	if m.sync != nil {
		c.reply(m.sync.id, &kmsg.SyncGroupResponse{Version: m.sync.version, ErrorCode: errCode})
		m.sync = nil
	}
	c.cancel(hbKey(g.id, m.id))
	delete(g.members, m.id)
	delete(g.pendingSync, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	for i, id := range g.order {
		if id == m.id {
			g.order = append(g.order[:i], g.order[i+1:]...)
			break
		}
	}
	if g.leader != nil && *g.leader == m.id {
		g.leader = nil
		if len(g.order) > 0 {
			g.leader = strp(g.order[0])
		}
	}
}

// afterMemberRemoved is the tail of Kafka's classicGroupLeave: a join phase
// completes only as maybeCompleteJoinPhase allows, not during the initial
// delay.
func (c *Coordinator) afterMemberRemoved(g *classicGroup) {
	switch g.state {
	case stateStable, stateCompletingRebalance:
		c.maybePrepareRebalanceOrCompleteJoin(g)
	case statePreparingRebalance:
		c.maybeCompleteJoin(g)
	}
}

// storeGroup writes the group's GroupMetadataValue with each member's
// current assignment.
func (c *Coordinator) storeGroup(g *classicGroup) {
	v := GroupMetadataValue{
		ProtocolType:          deref(g.protocolType),
		Generation:            g.generation,
		Protocol:              g.protocol,
		Leader:                g.leader,
		CurrentStateTimestamp: g.stateTs,
	}
	if len(g.members) == 0 {
		v.Leader = nil
	}
	for _, id := range g.order {
		m := g.members[id]
		v.Members = append(v.Members, MemberMetadata{
			MemberID:         m.id,
			GroupInstanceID:  m.instanceID,
			ClientID:         m.clientID,
			ClientHost:       m.clientHost,
			RebalanceTimeout: m.rebalanceTimeout,
			SessionTimeout:   m.sessionTimeout,
			Subscription:     nonNil(m.metadata(deref(g.protocol))),
			Assignment:       nonNil(m.assignment),
		})
	}
	c.record(g.id, encodeGroupKey(RecordGroupMetadata, g.id), EncodeGroupMetadataValue(v))
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func (c *Coordinator) syncGroup(r Request, req *kmsg.SyncGroupRequest) {
	fail := func(err *kerr.Error) {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = err.Code
		c.reply(r.ID, resp)
	}
	if cg := c.consumer[req.Group]; cg != nil {
		c.classicSyncToConsumer(r, req, cg)
		return
	}
	g := c.classic[req.Group]
	if g == nil {
		fail(kerr.UnknownMemberID)
		return
	}
	if g.state == stateDead {
		fail(kerr.CoordinatorNotAvailable)
		return
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		fail(err)
		return
	}
	if req.Generation != g.generation {
		fail(kerr.IllegalGeneration)
		return
	}
	if (req.ProtocolType != nil && *req.ProtocolType != deref(g.protocolType)) ||
		(req.Protocol != nil && *req.Protocol != deref(g.protocol)) {
		fail(kerr.InconsistentGroupProtocol)
		return
	}
	m := g.members[req.MemberID]
	switch g.state {
	case stateEmpty:
		fail(kerr.UnknownMemberID)
	case statePreparingRebalance:
		fail(kerr.RebalanceInProgress)
	case stateCompletingRebalance:
		delete(g.pendingSync, m.id)
		m.sync = &parked{id: r.ID, version: req.Version}
		if g.leader == nil || *g.leader != m.id {
			return
		}
		given := map[string][]byte{}
		for _, a := range req.GroupAssignment {
			given[a.MemberID] = a.MemberAssignment
		}
		for _, id := range g.order {
			g.members[id].assignment = nonNil(given[id])
		}
		c.storeGroup(g)
		g.transition(stateStable, c.nowMs())
		for _, id := range g.order {
			o := g.members[id]
			if o.sync != nil {
				c.reply(o.sync.id, c.syncResponse(g, o, o.sync.version))
				o.sync = nil
				// As Kafka's propagateAssignment: a session that ran
				// out while the member waited in SyncGroup was
				// ignored (hasSatisfiedHeartbeat) and left no timer,
				// so the member's session starts again with its
				// answer.
				c.scheduleClassicHeartbeat(g, o)
			}
		}
	case stateStable:
		delete(g.pendingSync, m.id)
		c.reply(r.ID, c.syncResponse(g, m, req.Version))
	}
}

func (c *Coordinator) syncResponse(g *classicGroup, m *classicMember, version int16) *kmsg.SyncGroupResponse {
	return &kmsg.SyncGroupResponse{
		Version:          version,
		ProtocolType:     g.protocolType,
		Protocol:         g.protocol,
		MemberAssignment: nonNil(m.assignment),
	}
}

func (c *Coordinator) heartbeat(r Request, req *kmsg.HeartbeatRequest) {
	if cg := c.consumer[req.Group]; cg != nil {
		c.classicHeartbeatToConsumer(r, req, cg)
		return
	}
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	defer c.reply(r.ID, resp)
	g := c.classic[req.Group]
	if g == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return
	}
	if g.state == stateDead {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		resp.ErrorCode = err.Code
		return
	}
	if req.Generation != g.generation {
		resp.ErrorCode = kerr.IllegalGeneration.Code
		return
	}
	switch g.state {
	case stateEmpty:
		resp.ErrorCode = kerr.UnknownMemberID.Code
	case statePreparingRebalance:
		c.scheduleClassicHeartbeat(g, g.members[req.MemberID])
		resp.ErrorCode = kerr.RebalanceInProgress.Code
	default:
		c.scheduleClassicHeartbeat(g, g.members[req.MemberID])
	}
}

func (c *Coordinator) leaveGroup(r Request, req *kmsg.LeaveGroupRequest) {
	if cg := c.consumer[req.Group]; cg != nil {
		c.classicLeaveToConsumer(r, req, cg)
		return
	}
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	defer c.reply(r.ID, resp)
	g := c.classic[req.Group]
	if g == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return
	}
	if g.state == stateDead {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return
	}
	removed := false
	for _, lm := range leaveMembers(req) {
		out := kmsg.LeaveGroupResponseMember{MemberID: lm.MemberID, InstanceID: lm.InstanceID}
		switch {
		case lm.InstanceID != nil:
			id, ok := g.static[*lm.InstanceID]
			switch {
			case !ok:
				out.ErrorCode = kerr.UnknownMemberID.Code
			case lm.MemberID != "" && lm.MemberID != id:
				out.ErrorCode = kerr.FencedInstanceID.Code
			default:
				c.removeClassicMember(g, g.members[id], kerr.UnknownMemberID.Code)
				removed = true
			}
		case g.pending[lm.MemberID]:
			delete(g.pending, lm.MemberID)
			c.cancel(pendingKey(g.id, lm.MemberID))
			removed = true
		case g.members[lm.MemberID] != nil:
			c.removeClassicMember(g, g.members[lm.MemberID], kerr.UnknownMemberID.Code)
			removed = true
		default:
			out.ErrorCode = kerr.UnknownMemberID.Code
		}
		appendLeaveResult(req, resp, out)
	}
	if removed {
		c.afterMemberRemoved(g)
	}
}

// leaveMembers returns the members a LeaveGroup removes: below v3, the one
// MemberID of the request (no batch, KIP-345); from v3, its Members.
func leaveMembers(req *kmsg.LeaveGroupRequest) []kmsg.LeaveGroupRequestMember {
	if req.Version < 3 {
		return []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	return req.Members
}

// appendLeaveResult records one member's answer of a LeaveGroup: below v3,
// which leaves a single member (no batch, KIP-345), the member's error is
// the response's; from v3 it is one entry of Members.
func appendLeaveResult(req *kmsg.LeaveGroupRequest, resp *kmsg.LeaveGroupResponse, out kmsg.LeaveGroupResponseMember) {
	if req.Version < 3 {
		resp.ErrorCode = out.ErrorCode
		return
	}
	resp.Members = append(resp.Members, out)
}

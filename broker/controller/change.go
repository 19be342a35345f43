package controller

import (
	"slices"

	"github.com/cascade-kafka/cascade/broker/metadata"
)

// election is the kind of leader election a change may run, as Kafka's
// PartitionChangeBuilder.Election.
type election int

const (
	// electOnline keeps a valid leader, else takes the first valid
	// replica.
	electOnline election = iota
	// electPreferred prefers the first replica.
	electPreferred
	// electUnclean is electOnline, then any acceptable replica outside the
	// ISR when none in it is.
	electUnclean
)

// change builds one PartitionChangeRecord as Kafka's PartitionChangeBuilder
// does (Kafka 4.1 and later, useLastKnownLeaderInBalancedRecovery on). It
// elects a leader from the target ISR, or from the eligible leader replicas
// when the ISR is empty, or the last known leader when both are, or
// (uncleanly) any acceptable replica, and reports nothing when nothing
// changes. With eligible leader replicas (KIP-966) an ISR shrinking below
// min.insync.replicas keeps its departed members as ELR and may empty;
// without them the last ISR member stays, leaderless.
type change struct {
	topic      *metadata.Topic
	index      int32
	part       metadata.Partition
	acceptable func(int32) bool
	election   election
	// elr enables eligible leader replicas; minISR is the topic's
	// effective min.insync.replicas.
	elr    bool
	minISR int
	// uncleanShutdown are replicas that may not stay eligible: their log
	// may have lost what the high watermark covered.
	uncleanShutdown []int32

	targetISR []int32
	targetELR []int32
	targetLRS int8
	// targetReplicas, targetAdding and targetRemoving are the assignment
	// the change leads to; a reassignment sets them.
	targetReplicas []int32
	targetAdding   []int32
	targetRemoving []int32
}

// newChange starts a change of partition index of t as img has it.
func (c *Controller) newChange(img *metadata.Image, t *metadata.Topic, index int32, acceptable func(int32) bool) *change {
	return c.changeOf(img, t, index, t.Partitions[index], acceptable)
}

// changeOf starts a change of partition index of t from state p.
func (c *Controller) changeOf(img *metadata.Image, t *metadata.Topic, index int32, p metadata.Partition, acceptable func(int32) bool) *change {
	return &change{topic: t, index: index, part: p, acceptable: acceptable,
		elr: c.cfg.EligibleLeaderReplicas, minISR: c.minISR(img, t),
		targetISR: p.ISR, targetELR: p.ELR, targetLRS: p.LeaderRecoveryState,
		targetReplicas: p.Replicas, targetAdding: p.AddingReplicas, targetRemoving: p.RemovingReplicas}
}

// validLeader is PartitionChangeBuilder.isValidNewLeader: in the target
// ISR, or in the ELR when the ISR is empty, and acceptable.
func (c *change) validLeader(r int32) bool {
	return (slices.Contains(c.targetISR, r) || (len(c.targetISR) == 0 && slices.Contains(c.targetELR, r))) && c.acceptable(r)
}

// canElectLastKnownLeader is PartitionChangeBuilder.canElectLastKnownLeader
// as Kafka 4.1 fixed it (KAFKA-19522): with nothing in the ISR or ELR, the
// one last known leader, if acceptable.
func (c *change) canElectLastKnownLeader() bool {
	return c.elr && len(c.targetISR) == 0 && len(c.targetELR) == 0 &&
		len(c.part.LastKnownELR) == 1 && c.acceptable(c.part.LastKnownELR[0])
}

// elect returns the new leader and whether it was elected uncleanly.
func (c *change) elect() (int32, bool) {
	replicas := c.targetReplicas
	if c.election == electPreferred {
		if len(replicas) > 0 && c.validLeader(replicas[0]) {
			return replicas[0], false
		}
		if c.validLeader(c.part.Leader) {
			return c.part.Leader, false
		}
		for _, r := range replicas[min(1, len(replicas)):] {
			if c.validLeader(r) {
				return r, false
			}
		}
		if c.canElectLastKnownLeader() {
			return c.part.LastKnownELR[0], true
		}
		return metadata.NoLeader, false
	}
	if c.validLeader(c.part.Leader) {
		return c.part.Leader, false
	}
	for _, r := range replicas {
		if c.validLeader(r) {
			return r, false
		}
	}
	if c.canElectLastKnownLeader() {
		return c.part.LastKnownELR[0], true
	}
	if c.election == electUnclean {
		for _, r := range replicas {
			if c.acceptable(r) {
				return r, true
			}
		}
	}
	return metadata.NoLeader, false
}

// populateTargetELR is PartitionChangeBuilder.maybePopulateTargetElr: an ISR
// at min ISR clears the ELR; a smaller one moves the members it loses into
// the ELR, except replicas that shut down uncleanly. (Kafka also gathers a
// last known ELR here, which it uses only without the last known leader;
// Cascade always uses the last known leader, so it has no use for it.)
func (c *change) populateTargetELR() {
	if !c.elr {
		return
	}
	if len(c.targetISR) >= c.minISR {
		c.targetELR = []int32{}
		return
	}
	candidates := slices.Clone(c.targetELR)
	for _, r := range c.part.ISR {
		if !slices.Contains(candidates, r) {
			candidates = append(candidates, r)
		}
	}
	slices.Sort(candidates) // Kafka's is a hash set: any order will do
	elr := []int32{}
	for _, r := range candidates {
		// A replica a completed reassignment removes is no longer
		// eligible: the ELR stays within the replicas.
		if !slices.Contains(c.targetISR, r) && !slices.Contains(c.uncleanShutdown, r) && slices.Contains(c.targetReplicas, r) {
			elr = append(elr, r)
		}
	}
	c.targetELR = elr
}

// tryElection is PartitionChangeBuilder.tryElection: a leader taken from
// the ELR becomes the ISR alone and leaves the ELR; an unclean leader is
// the ISR alone and must recover (KIP-704).
func (c *change) tryElection(rec *metadata.PartitionChangeRecord) {
	leader, unclean := c.elect()
	if leader == c.part.Leader {
		return
	}
	if slices.Contains(c.targetELR, leader) {
		c.targetISR = []int32{leader}
		c.targetELR = slices.DeleteFunc(slices.Clone(c.targetELR), func(r int32) bool { return r == leader })
	}
	rec.Leader = leader
	if unclean {
		rec.ISR = []int32{leader}
		if c.part.LeaderRecoveryState != metadata.LeaderRecovering {
			rec.LeaderRecoveryState = metadata.LeaderRecovering
		}
	}
}

// updateRecordELR is PartitionChangeBuilder.maybeUpdateRecordElr with the
// last known leader in use: an unclean election or ELR off clears the ELR.
func (c *change) updateRecordELR(rec *metadata.PartitionChangeRecord) {
	if rec.ISR != nil || !c.elr {
		c.targetELR = []int32{}
	}
	if !slices.Equal(c.targetELR, c.part.ELR) {
		rec.ELR = append([]int32{}, c.targetELR...)
	}
}

// updateLastKnownLeader is PartitionChangeBuilder.maybeUpdateLastKnownLeader:
// an ISR emptying records the leader it had, the first time; a partition
// that will have (or keeps) a leader forgets it.
func (c *change) updateLastKnownLeader(rec *metadata.PartitionChangeRecord) {
	if !c.elr {
		return
	}
	p := c.part
	switch {
	case rec.ISR != nil && len(rec.ISR) == 0 && (len(p.LastKnownELR) != 1 || p.LastKnownELR[0] != p.Leader):
		rec.LastKnownELR = []int32{p.Leader}
	case (rec.Leader >= 0 || (p.Leader != metadata.NoLeader && rec.Leader != metadata.NoLeader)) && len(p.LastKnownELR) > 0:
		rec.LastKnownELR = []int32{}
	}
}

// completeReassignment is PartitionChangeBuilder.completeReassignmentIfNeeded
// with PartitionReassignmentReplicas.maybeCompleteReassignment: once the
// target ISR, less the replicas being removed, is not empty and holds every
// replica that stays, the removed replicas leave the replicas and the ISR
// and the reassignment is over.
func (c *change) completeReassignment() {
	if len(c.targetAdding) == 0 && len(c.targetRemoving) == 0 {
		return
	}
	isr, replicas := c.targetISR, c.targetReplicas
	if len(c.targetRemoving) > 0 {
		removing := func(r int32) bool { return slices.Contains(c.targetRemoving, r) }
		isr = slices.DeleteFunc(slices.Clone(isr), removing)
		replicas = slices.DeleteFunc(slices.Clone(replicas), removing)
		if len(isr) == 0 || len(replicas) == 0 {
			return
		}
	}
	for _, r := range replicas {
		if !slices.Contains(isr, r) {
			return
		}
	}
	c.targetISR, c.targetReplicas = isr, replicas
	c.targetAdding, c.targetRemoving = []int32{}, []int32{}
}

// bumpEpochForReassignment is PartitionChangeBuilder's
// triggerLeaderEpochBumpForReplicaReassignmentIfNeeded: a change that drops
// a replica names the leader, so the leader epoch grows and the dropped
// replica's requests are fenced.
func (c *change) bumpEpochForReassignment(rec *metadata.PartitionChangeRecord) {
	if rec.Leader != metadata.NoLeaderChange {
		return
	}
	for _, r := range c.part.Replicas {
		if !slices.Contains(c.targetReplicas, r) {
			rec.Leader = c.part.Leader
			return
		}
	}
}

// setAssignmentChanges is PartitionChangeBuilder.setAssignmentChanges.
func (c *change) setAssignmentChanges(rec *metadata.PartitionChangeRecord) {
	if len(c.targetReplicas) > 0 && !slices.Equal(c.targetReplicas, c.part.Replicas) {
		rec.Replicas = append([]int32{}, c.targetReplicas...)
	}
	if !slices.Equal(c.targetRemoving, c.part.RemovingReplicas) {
		rec.RemovingReplicas = append([]int32{}, c.targetRemoving...)
	}
	if !slices.Equal(c.targetAdding, c.part.AddingReplicas) {
		rec.AddingReplicas = append([]int32{}, c.targetAdding...)
	}
}

// build returns the change record, or false when it would change nothing,
// in PartitionChangeBuilder.build's order.
func (c *change) build() (metadata.PartitionChangeRecord, bool) {
	rec := metadata.PartitionChangeRecord{TopicID: c.topic.ID, Partition: c.index,
		Leader: metadata.NoLeaderChange, LeaderRecoveryState: metadata.LeaderRecoveryNoChange}
	c.completeReassignment()
	c.populateTargetELR()
	c.tryElection(&rec)
	c.bumpEpochForReassignment(&rec)
	c.updateRecordELR(&rec)
	// Without ELR an empty target ISR leaves the ISR as it is: the last
	// member stays, so the partition can come back when it does. With ELR
	// the ISR may empty: its members wait in the ELR.
	if rec.ISR == nil && (len(c.targetISR) > 0 || c.elr) && !slices.Equal(c.targetISR, c.part.ISR) {
		rec.ISR = append([]int32{}, c.targetISR...)
	}
	c.updateLastKnownLeader(&rec)
	c.setAssignmentChanges(&rec)
	if c.targetLRS != c.part.LeaderRecoveryState {
		rec.LeaderRecoveryState = c.targetLRS
	}
	noop := rec.ISR == nil && rec.Leader == metadata.NoLeaderChange && rec.Replicas == nil &&
		rec.LeaderRecoveryState == metadata.LeaderRecoveryNoChange && rec.ELR == nil && rec.LastKnownELR == nil &&
		rec.AddingReplicas == nil && rec.RemovingReplicas == nil
	return rec, !noop
}

// moveAway proposes, for every partition whose ISR holds broker remove, the
// change that takes it out of the ISR and elects a leader among the others,
// as ReplicationControlManager.generateLeaderAndIsrUpdates with
// brokerToRemove. Used for fencing and controlled shutdown, where the
// broker stays an eligible leader of partitions whose ISR falls below min
// ISR.
func (c *Controller) moveAway(b *batch, remove int32) error {
	return c.removeReplica(b, remove, inISR(remove), nil)
}

// removeReplica is moveAway over the partitions that match; a broker in
// ineligible is also taken out of every ELR it would join or holds.
func (c *Controller) removeReplica(b *batch, remove int32, match func(*metadata.Partition) bool, ineligible []int32) error {
	img := b.img
	acceptable := func(r int32) bool { return r != remove && active(img, r) }
	var recs []metadata.Record
	for _, ref := range partitionsWhere(img, match) {
		ch := c.newChange(img, ref.topic, ref.index, acceptable)
		if c.uncleanAllowed(img, ref.topic) {
			ch.election = electUnclean
		}
		ch.uncleanShutdown = ineligible
		ch.targetISR = slices.DeleteFunc(slices.Clone(ch.part.ISR), func(r int32) bool { return r == remove })
		if rec, ok := ch.build(); ok {
			recs = append(recs, rec)
		}
	}
	return b.add(recs...)
}

// electLeaderless proposes a leader for every partition without one, as
// generateLeaderAndIsrUpdates over partitionsWithNoLeader when a broker is
// unfenced. The batch's image already shows the broker unfenced.
func (c *Controller) electLeaderless(b *batch) error {
	img := b.img
	acceptable := func(r int32) bool { return active(img, r) }
	var recs []metadata.Record
	for _, ref := range partitionsWhere(img, func(p *metadata.Partition) bool { return p.Leader == metadata.NoLeader }) {
		ch := c.newChange(img, ref.topic, ref.index, acceptable)
		if c.uncleanAllowed(img, ref.topic) {
			ch.election = electUnclean
		}
		if rec, ok := ch.build(); ok {
			recs = append(recs, rec)
		}
	}
	return b.add(recs...)
}

// fence proposes fencing broker id: leaderships moved away and the broker
// removed from ISRs, then the registration change, as
// ReplicationControlManager.handleBrokerFenced. An already fenced broker
// changes nothing.
func (c *Controller) fence(b *batch, id int32) error {
	reg, ok := b.img.Broker(id)
	if !ok || reg.Fenced {
		return nil
	}
	if err := c.moveAway(b, id); err != nil {
		return err
	}
	return b.add(metadata.BrokerRegistrationChangeRecord{BrokerID: id, BrokerEpoch: reg.Epoch, Fenced: metadata.FenceBroker})
}

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
// does with eligible leader replicas off (Kafka 4's default): it elects a
// leader from the target ISR (or, uncleanly, from the replicas), never
// empties the ISR (the last member stays, leaderless), and reports nothing
// when nothing changes.
type change struct {
	topic      *metadata.Topic
	index      int32
	part       metadata.Partition
	acceptable func(int32) bool
	election   election
	targetISR  []int32
	targetLRS  int8
}

func newChange(t *metadata.Topic, index int32, acceptable func(int32) bool) *change {
	p := t.Partitions[index]
	return &change{topic: t, index: index, part: p, acceptable: acceptable,
		targetISR: p.ISR, targetLRS: p.LeaderRecoveryState}
}

// validLeader is PartitionChangeBuilder.isValidNewLeader without ELR.
func (c *change) validLeader(r int32) bool {
	return slices.Contains(c.targetISR, r) && c.acceptable(r)
}

// elect returns the new leader and whether it was elected uncleanly.
func (c *change) elect() (int32, bool) {
	replicas := c.part.Replicas
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
	if c.election == electUnclean {
		for _, r := range replicas {
			if c.acceptable(r) {
				return r, true
			}
		}
	}
	return metadata.NoLeader, false
}

// build returns the change record, or false when it would change nothing.
func (c *change) build() (metadata.PartitionChangeRecord, bool) {
	rec := metadata.PartitionChangeRecord{TopicID: c.topic.ID, Partition: c.index,
		Leader: metadata.NoLeaderChange, LeaderRecoveryState: metadata.LeaderRecoveryNoChange}
	if leader, unclean := c.elect(); leader != c.part.Leader {
		rec.Leader = leader
		if unclean {
			// The new leader's log is all there is: it alone is in sync,
			// and it must confirm recovery (KIP-704).
			rec.ISR = []int32{leader}
			if c.part.LeaderRecoveryState != metadata.LeaderRecovering {
				rec.LeaderRecoveryState = metadata.LeaderRecovering
			}
		}
	}
	// With ELR off an empty target ISR leaves the ISR as it is: the last
	// member stays, so the partition can come back when it does.
	if rec.ISR == nil && len(c.targetISR) > 0 && !slices.Equal(c.targetISR, c.part.ISR) {
		rec.ISR = slices.Clone(c.targetISR)
	}
	if c.targetLRS != c.part.LeaderRecoveryState {
		rec.LeaderRecoveryState = c.targetLRS
	}
	noop := rec.ISR == nil && rec.Leader == metadata.NoLeaderChange && rec.Replicas == nil &&
		rec.LeaderRecoveryState == metadata.LeaderRecoveryNoChange
	return rec, !noop
}

// moveAway proposes, for every partition whose ISR holds broker remove, the
// change that takes it out of the ISR and elects a leader among the others,
// as ReplicationControlManager.generateLeaderAndIsrUpdates with
// brokerToRemove. Used for fencing and controlled shutdown.
func (c *Controller) moveAway(b *batch, remove int32) error {
	img := b.img
	acceptable := func(r int32) bool { return r != remove && active(img, r) }
	var recs []metadata.Record
	for _, ref := range partitionsWhere(img, inISR(remove)) {
		ch := newChange(ref.topic, ref.index, acceptable)
		if c.uncleanAllowed(img, ref.topic) {
			ch.election = electUnclean
		}
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
		ch := newChange(ref.topic, ref.index, acceptable)
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

package controller

import (
	"fmt"
	"slices"

	"github.com/cascade-kafka/cascade/broker/metadata"
)

// BrokerState is one member of an AlterPartition's new ISR with the broker
// epoch the leader knows it by (-1 to skip the check), as AlterPartition v3.
type BrokerState struct {
	BrokerID    int32
	BrokerEpoch int64
}

// AlterPartitionRequest is AlterPartitionRequest v3's content.
type AlterPartitionRequest struct {
	BrokerID    int32
	BrokerEpoch int64
	Topics      []AlterPartitionTopic
}

// AlterPartitionTopic is one topic of an AlterPartition request.
type AlterPartitionTopic struct {
	TopicID    metadata.UUID
	Partitions []AlterPartitionData
}

// AlterPartitionData is one partition's proposed state.
type AlterPartitionData struct {
	Partition           int32
	LeaderEpoch         int32
	NewISR              []BrokerState
	LeaderRecoveryState int8
	PartitionEpoch      int32
}

// AlterPartitionResult is one partition's answer: on success the state
// after the change.
type AlterPartitionResult struct {
	TopicID             metadata.UUID
	Partition           int32
	Err                 error
	Leader              int32
	ISR                 []int32
	LeaderEpoch         int32
	PartitionEpoch      int32
	LeaderRecoveryState int8
}

// AlterPartition applies a leader's ISR changes, as Kafka's
// ReplicationControlManager.alterPartition with AlterPartition v3
// semantics. The request's broker epoch must be the leader's
// (STALE_BROKER_EPOCH for the whole request). Per partition: epochs ahead of
// the controller's are NOT_CONTROLLER (this controller is behind; the
// caller may have lost leadership); an older leader epoch is
// FENCED_LEADER_EPOCH; a sender that is not the leader, or an ISR outside
// the replicas or without the leader, is INVALID_REQUEST; an older
// partition epoch is INVALID_UPDATE_VERSION; a new ISR member that is
// unregistered, fenced, shutting down or of another epoch is
// INELIGIBLE_REPLICA.
func (c *Controller) AlterPartition(img *metadata.Image, req AlterPartitionRequest) ([]metadata.Record, []AlterPartitionResult, error) {
	reg, ok := img.Broker(req.BrokerID)
	if !ok || reg.Epoch != req.BrokerEpoch {
		return nil, nil, newErr(ErrStaleBrokerEpoch, "Broker %d epoch %d is not the registered one", req.BrokerID, req.BrokerEpoch)
	}
	// Partitions are planned against the image plus this request's own
	// earlier changes (a partition named twice sees its first change),
	// and the records applied once at the end.
	type key struct {
		topic metadata.UUID
		index int32
	}
	changed := map[key]metadata.Partition{}
	acceptable := func(r int32) bool { return active(img, r) }
	var recs []metadata.Record
	var out []AlterPartitionResult
	for _, td := range req.Topics {
		for _, pd := range td.Partitions {
			res := AlterPartitionResult{TopicID: td.TopicID, Partition: pd.Partition}
			t, ok := img.TopicByID(td.TopicID)
			if !ok {
				res.Err = codeErr(ErrUnknownTopicID)
				out = append(out, res)
				continue
			}
			if pd.Partition < 0 || int(pd.Partition) >= len(t.Partitions) {
				res.Err = codeErr(ErrUnknownTopicOrPartition)
				out = append(out, res)
				continue
			}
			k := key{t.ID, pd.Partition}
			p, seen := changed[k]
			if !seen {
				p = t.Partitions[pd.Partition]
			}
			if err := validateAlterPartition(img, req.BrokerID, p, pd); err != nil {
				res.Err = err
				out = append(out, res)
				continue
			}
			ch := c.changeOf(img, t, pd.Partition, p, acceptable)
			if c.uncleanAllowed(img, t) {
				ch.election = electUnclean
			}
			ch.targetISR = make([]int32, 0, len(pd.NewISR))
			for _, m := range pd.NewISR {
				ch.targetISR = append(ch.targetISR, m.BrokerID)
			}
			ch.targetLRS = pd.LeaderRecoveryState
			if rec, ok := ch.build(); ok {
				merged, err := metadata.MergePartition(p, rec)
				if err != nil {
					return nil, nil, fmt.Errorf("controller: planned change does not apply: %w", err)
				}
				recs = append(recs, rec)
				changed[k], p = merged, merged
				if rec.Leader != metadata.NoLeaderChange && rec.Leader != req.BrokerID {
					res.Err = codeErr(ErrNewLeaderElected)
					out = append(out, res)
					continue
				}
			}
			res.Leader, res.ISR, res.LeaderEpoch, res.PartitionEpoch, res.LeaderRecoveryState =
				p.Leader, p.ISR, p.LeaderEpoch, p.PartitionEpoch, p.LeaderRecoveryState
			out = append(out, res)
		}
	}
	b := &batch{img: img}
	if err := b.add(recs...); err != nil {
		return nil, nil, err
	}
	return b.recs, out, nil
}

// validateAlterPartition is ReplicationControlManager.validateAlterPartitionData,
// in its order.
func validateAlterPartition(img *metadata.Image, sender int32, p metadata.Partition, pd AlterPartitionData) error {
	switch {
	case pd.LeaderEpoch > p.LeaderEpoch, pd.PartitionEpoch > p.PartitionEpoch:
		return codeErr(ErrNotController)
	case pd.LeaderEpoch < p.LeaderEpoch:
		return codeErr(ErrFencedLeaderEpoch)
	case sender != p.Leader:
		return codeErr(ErrInvalidRequest)
	case pd.PartitionEpoch < p.PartitionEpoch:
		return codeErr(ErrInvalidUpdateVersion)
	}
	seen := map[int32]bool{}
	for _, m := range pd.NewISR {
		// As Replicas.validateIsr: members distinct, all replicas.
		if seen[m.BrokerID] || !slices.Contains(p.Replicas, m.BrokerID) {
			return codeErr(ErrInvalidRequest)
		}
		seen[m.BrokerID] = true
	}
	if !seen[p.Leader] {
		return codeErr(ErrInvalidRequest) // the ISR must hold the leader
	}
	switch pd.LeaderRecoveryState {
	case metadata.LeaderRecovered:
	case metadata.LeaderRecovering:
		if len(pd.NewISR) > 1 || p.LeaderRecoveryState == metadata.LeaderRecovered {
			return codeErr(ErrInvalidRequest)
		}
	default:
		return codeErr(ErrInvalidRequest)
	}
	for _, m := range pd.NewISR {
		reg, ok := img.Broker(m.BrokerID)
		if !ok || reg.InControlledShutdown || reg.Fenced || (m.BrokerEpoch != -1 && m.BrokerEpoch != reg.Epoch) {
			return codeErr(ErrIneligibleReplica)
		}
	}
	return nil
}

// Election types of ElectLeaders, numbered as Kafka's ElectionType.
const (
	ElectPreferred int8 = 0
	ElectUnclean   int8 = 1
)

// ElectTopic names partitions of one topic for ElectLeaders.
type ElectTopic struct {
	Topic      string
	Partitions []int32
}

// ElectResult is one partition's answer to ElectLeaders.
type ElectResult struct {
	Topic     string
	Partition int32
	Err       error
}

// ElectLeaders runs preferred or unclean elections, as Kafka's
// ReplicationControlManager.electLeaders. A nil topics list means every
// partition, and then partitions needing no election are left out of the
// answer. Preferred elects the first replica if it is in the ISR and active
// (else PREFERRED_LEADER_NOT_AVAILABLE); unclean elects only for a
// leaderless partition, from the ISR if it can, else any active replica
// (else ELIGIBLE_LEADERS_NOT_AVAILABLE). An administrator's unclean
// election needs no unclean.leader.election.enable.
func (c *Controller) ElectLeaders(img *metadata.Image, typ int8, topics []ElectTopic) ([]metadata.Record, []ElectResult, error) {
	if typ != ElectPreferred && typ != ElectUnclean {
		return nil, nil, newErr(ErrInvalidRequest, "Unknown election type %d", typ)
	}
	b := &batch{img: img}
	var out []ElectResult
	all := topics == nil
	if all {
		for _, t := range img.Topics() {
			et := ElectTopic{Topic: t.Name}
			for i := range t.Partitions {
				et.Partitions = append(et.Partitions, int32(i))
			}
			topics = append(topics, et)
		}
	}
	var recs []metadata.Record
	for _, et := range topics {
		for _, p := range et.Partitions {
			rec, err := c.electOne(img, et.Topic, p, typ)
			if all && isKind(err, ErrElectionNotNeeded) {
				continue
			}
			if err == nil {
				recs = append(recs, rec)
			}
			out = append(out, ElectResult{Topic: et.Topic, Partition: p, Err: err})
		}
	}
	if err := b.add(recs...); err != nil {
		return nil, nil, err
	}
	return b.recs, out, nil
}

// electOne is ReplicationControlManager.electLeader: it plans one
// partition's election against img.
func (c *Controller) electOne(img *metadata.Image, topic string, index int32, typ int8) (metadata.Record, error) {
	t, ok := img.Topic(topic)
	if !ok {
		return nil, newErr(ErrUnknownTopicOrPartition, "No such topic as %s", topic)
	}
	if index < 0 || int(index) >= len(t.Partitions) {
		return nil, newErr(ErrUnknownTopicOrPartition, "No such partition as %s-%d", topic, index)
	}
	p := t.Partitions[index]
	if (typ == ElectPreferred && p.Leader == p.PreferredLeader()) || (typ == ElectUnclean && p.Leader != metadata.NoLeader) {
		return nil, codeErr(ErrElectionNotNeeded)
	}
	ch := c.newChange(img, t, index, func(r int32) bool { return active(img, r) })
	ch.election = electPreferred
	if typ == ElectUnclean {
		ch.election = electUnclean
	}
	rec, ok := ch.build()
	if !ok {
		if typ == ElectPreferred {
			return nil, codeErr(ErrPreferredLeaderNotAvailable)
		}
		return nil, codeErr(ErrEligibleLeadersNotAvailable)
	}
	return rec, nil
}

// balance runs preferred elections for partitions not led by their
// preferred replica, at most limit, as maybeBalancePartitionLeaders.
func (c *Controller) balance(b *batch, limit int) (int, error) {
	img := b.img
	acceptable := func(r int32) bool { return active(img, r) }
	var recs []metadata.Record
	for _, ref := range partitionsWhere(img, func(p *metadata.Partition) bool { return p.Leader != p.PreferredLeader() }) {
		if len(recs) >= limit {
			break
		}
		ch := c.newChange(img, ref.topic, ref.index, acceptable)
		ch.election = electPreferred
		if rec, ok := ch.build(); ok {
			recs = append(recs, rec)
		}
	}
	return len(recs), b.add(recs...)
}

// electUnclean elects leaders for leaderless partitions of topics that
// allow unclean election, as maybeElectUncleanLeaders.
func (c *Controller) electUnclean(b *batch) (int, error) {
	var recs []metadata.Record
	for _, ref := range partitionsWhere(b.img, func(p *metadata.Partition) bool { return p.Leader == metadata.NoLeader }) {
		if len(recs) >= maxElectionsPerTick {
			break
		}
		if !c.uncleanAllowed(b.img, ref.topic) {
			continue
		}
		rec, err := c.electOne(b.img, ref.topic.Name, ref.index, ElectUnclean)
		switch {
		case err == nil:
			recs = append(recs, rec)
		case isKind(err, ErrEligibleLeadersNotAvailable):
		default:
			return 0, err
		}
	}
	return len(recs), b.add(recs...)
}

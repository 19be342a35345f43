package controller

import (
	"errors"
	"slices"

	"github.com/cascade-kafka/cascade/broker/metadata"
)

// ErrNoReassignmentInProgress is a cancellation of a partition that is not
// being reassigned (NO_REASSIGNMENT_IN_PROGRESS).
var ErrNoReassignmentInProgress = errors.New("NO_REASSIGNMENT_IN_PROGRESS")

// Errors a reassignment shares with topic creation.
var (
	ErrInvalidReplicaAssignment = metadata.ErrInvalidReplicaAssignment
	ErrInvalidReplicationFactor = metadata.ErrInvalidReplicationFactor
)

// ReassignTopic names partitions of one topic for
// AlterPartitionReassignments.
type ReassignTopic struct {
	Topic      string
	Partitions []ReassignPartition
}

// ReassignPartition is one partition's target replicas; nil Replicas
// cancels its reassignment.
type ReassignPartition struct {
	Partition int32
	Replicas  []int32
}

// ReassignResult is one partition's answer to AlterPartitionReassignments.
type ReassignResult struct {
	Topic     string
	Partition int32
	Err       error
}

// AlterPartitionReassignments starts, changes or cancels reassignments, as
// Kafka's ReplicationControlManager.alterPartitionReassignments (KIP-455).
// A target that adds replicas puts them in the replica set with the
// replicas it removes, which stay until every target replica has joined the
// ISR (the leader adds them as they catch up, with AlterPartition); a target
// the ISR already covers completes at once. Cancelling takes out the
// replicas being added and keeps those being removed. Without
// allowRFChange (KIP-860) a target must keep the replication factor the
// partition is headed for. Each partition is answered on its own, and is
// planned against the changes of the partitions before it.
func (c *Controller) AlterPartitionReassignments(img *metadata.Image, topics []ReassignTopic, allowRFChange bool) ([]metadata.Record, []ReassignResult, error) {
	b := &batch{img: img}
	var out []ReassignResult
	for _, rt := range topics {
		for _, rp := range rt.Partitions {
			rec, ok, err := c.reassignOne(b.img, rt.Topic, rp, allowRFChange)
			if err == nil && ok {
				if aerr := b.add(rec); aerr != nil {
					return nil, nil, aerr
				}
			}
			out = append(out, ReassignResult{Topic: rt.Topic, Partition: rp.Partition, Err: err})
		}
	}
	return b.recs, out, nil
}

// reassignOne is ReplicationControlManager.alterPartitionReassignment:
// the change of one partition, or false when nothing changes.
func (c *Controller) reassignOne(img *metadata.Image, topic string, rp ReassignPartition, allowRFChange bool) (metadata.PartitionChangeRecord, bool, error) {
	t, ok := img.Topic(topic)
	if !ok {
		return metadata.PartitionChangeRecord{}, false, newErr(ErrUnknownTopicOrPartition, "Unable to find a topic named %s.", topic)
	}
	if rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions) {
		return metadata.PartitionChangeRecord{}, false, newErr(ErrUnknownTopicOrPartition, "Unable to find partition %s:%d.", topic, rp.Partition)
	}
	p := t.Partitions[rp.Partition]
	ch := c.newChange(img, t, rp.Partition, func(r int32) bool { return active(img, r) })
	if rp.Replicas == nil {
		if err := c.planCancel(img, t, ch); err != nil {
			return metadata.PartitionChangeRecord{}, false, err
		}
	} else {
		if err := metadata.ValidateReassignment(img, rp.Replicas); err != nil {
			return metadata.PartitionChangeRecord{}, false, err
		}
		if !allowRFChange {
			if from := headedFor(p); from != len(rp.Replicas) {
				return metadata.PartitionChangeRecord{}, false, newErr(ErrInvalidReplicationFactor, "The replication factor is changed from %d to %d", from, len(rp.Replicas))
			}
		}
		// As PartitionReassignmentReplicas: the target followed by the
		// current replicas it drops; adding and removing are the
		// differences, each in broker id order. As Kafka, an empty
		// difference keeps the list of a reassignment in progress, so
		// the two may then share a replica.
		removing := difference(p.Replicas, rp.Replicas)
		ch.targetReplicas = append(slices.Clone(rp.Replicas), removing...)
		if len(removing) > 0 {
			ch.targetRemoving = removing
		}
		if adding := difference(rp.Replicas, p.Replicas); len(adding) > 0 {
			ch.targetAdding = adding
		}
	}
	rec, ok := ch.build()
	return rec, ok, nil
}

// planCancel sets ch to revert an ongoing reassignment, as
// ReplicationControlManager.cancelPartitionReassignment with
// PartitionReassignmentRevert: the replicas being added leave the replicas
// and the ISR; an ISR that would empty keeps the first remaining replica,
// which is an unclean election the topic must allow.
func (c *Controller) planCancel(img *metadata.Image, t *metadata.Topic, ch *change) error {
	p := ch.part
	if !p.Reassigning() {
		return codeErr(ErrNoReassignmentInProgress)
	}
	adding := func(r int32) bool { return slices.Contains(p.AddingReplicas, r) }
	replicas := slices.DeleteFunc(slices.Clone(p.Replicas), adding)
	isr := slices.DeleteFunc(slices.Clone(p.ISR), adding)
	unclean := c.uncleanAllowed(img, t)
	if len(isr) == 0 {
		if len(replicas) == 0 {
			return newErr(ErrInvalidReplicaAssignment, "Invalid replica assignment: addingReplicas contains all replicas.")
		}
		if !unclean {
			return newErr(ErrInvalidReplicaAssignment, "Unable to revert partition assignment for %s:%d because it would require an unclean leader election.", t.Name, ch.index)
		}
		isr = []int32{replicas[0]}
	}
	if unclean {
		ch.election = electUnclean
	}
	ch.targetISR, ch.targetReplicas = isr, replicas
	ch.targetAdding, ch.targetRemoving = []int32{}, []int32{}
	return nil
}

// headedFor is the replication factor a partition is headed for, as
// validatePartitionReplicationFactorUnchanged counts it: its replicas, or
// during a reassignment the replicas and those being added less those
// being removed.
func headedFor(p metadata.Partition) int {
	if !p.Reassigning() {
		return len(p.Replicas)
	}
	set := map[int32]bool{}
	for _, r := range p.Replicas {
		set[r] = true
	}
	for _, r := range p.AddingReplicas {
		set[r] = true
	}
	for _, r := range p.RemovingReplicas {
		delete(set, r)
	}
	return len(set)
}

// difference returns the members of a not in b, in increasing order (as
// PartitionReassignmentReplicas.calculateDifference's TreeSet).
func difference(a, b []int32) []int32 {
	var out []int32
	for _, r := range a {
		if !slices.Contains(b, r) && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

// ListReassignmentsTopic names partitions of one topic for
// ListPartitionReassignments.
type ListReassignmentsTopic struct {
	Topic      string
	Partitions []int32
}

// OngoingReassignment is one partition being reassigned.
type OngoingReassignment struct {
	Topic            string
	Partition        int32
	Replicas         []int32
	AddingReplicas   []int32
	RemovingReplicas []int32
}

// ListPartitionReassignments returns the reassignments in progress, as
// ReplicationControlManager.listPartitionReassignments: of every topic
// when topics is nil (in topic name order), else of the named partitions
// that exist and are being reassigned, in the order named.
func ListPartitionReassignments(img *metadata.Image, topics []ListReassignmentsTopic) []OngoingReassignment {
	if topics == nil {
		for _, t := range img.Topics() {
			lt := ListReassignmentsTopic{Topic: t.Name}
			for i := range t.Partitions {
				lt.Partitions = append(lt.Partitions, int32(i))
			}
			topics = append(topics, lt)
		}
	}
	var out []OngoingReassignment
	for _, lt := range topics {
		t, ok := img.Topic(lt.Topic)
		if !ok {
			continue
		}
		for _, i := range lt.Partitions {
			if i < 0 || int(i) >= len(t.Partitions) || !t.Partitions[i].Reassigning() {
				continue
			}
			p := t.Partitions[i]
			out = append(out, OngoingReassignment{Topic: t.Name, Partition: i, Replicas: slices.Clone(p.Replicas),
				AddingReplicas: slices.Clone(p.AddingReplicas), RemovingReplicas: slices.Clone(p.RemovingReplicas)})
		}
	}
	return out
}

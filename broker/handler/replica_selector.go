package handler

import (
	"fmt"

	"github.com/cascade-kafka/cascade/broker/replication"
)

// RackAwareReplicaSelectorClass is the replica.selector.class of Kafka's
// RackAwareReplicaSelector, the one selector Cascade has.
const RackAwareReplicaSelectorClass = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

// ReplicaView is one replica a consumer may read from, as Kafka's
// ReplicaView: its broker, that broker's rack, its log end offset and how
// long ago it last caught up with the leader.
type ReplicaView struct {
	replication.ReadReplica
	Rack string // "" for none
}

// ReplicaSelector picks the replica a consumer fetches a partition from
// (replica.selector.class, KIP-392), as Kafka's ReplicaSelector.select:
// clientRack is the Fetch request's rack id, leader is this node and
// replicas holds the leader and every follower eligible to serve.
type ReplicaSelector interface {
	Select(clientRack string, leader ReplicaView, replicas []ReplicaView) ReplicaView
}

// NewReplicaSelector returns the selector of class: nil for "" (consumers
// read from the leader), Kafka's RackAwareReplicaSelector, and an error
// for any other class, which Cascade cannot load.
func NewReplicaSelector(class string) (ReplicaSelector, error) {
	switch class {
	case "":
		return nil, nil
	case RackAwareReplicaSelectorClass:
		return RackAwareReplicaSelector{}, nil
	}
	return nil, fmt.Errorf("replica.selector.class %s: only %s is supported", class, RackAwareReplicaSelectorClass)
}

// RackAwareReplicaSelector is Kafka's RackAwareReplicaSelector: a client
// without a rack, or with none of the replicas in its rack, reads from the
// leader; the leader is kept when it is in the client's rack; otherwise the
// most caught-up replica of the rack is chosen (the largest log end offset,
// then the shortest time since it caught up; Cascade breaks a remaining tie
// by the lower broker id where Kafka takes whichever its set yields).
type RackAwareReplicaSelector struct{}

// Select implements ReplicaSelector.
func (RackAwareReplicaSelector) Select(clientRack string, leader ReplicaView, replicas []ReplicaView) ReplicaView {
	if clientRack == "" {
		return leader
	}
	var best *ReplicaView
	for i := range replicas {
		r := &replicas[i]
		if r.Rack != clientRack {
			continue
		}
		if r.ID == leader.ID {
			return leader
		}
		if best == nil || better(r, best) {
			best = r
		}
	}
	if best == nil {
		return leader
	}
	return *best
}

// better is ReplicaView.comparator's order, ties to the lower id.
func better(a, b *ReplicaView) bool {
	if a.LogEndOffset != b.LogEndOffset {
		return a.LogEndOffset > b.LogEndOffset
	}
	if a.SinceCaughtUp != b.SinceCaughtUp {
		return a.SinceCaughtUp < b.SinceCaughtUp
	}
	return a.ID < b.ID
}

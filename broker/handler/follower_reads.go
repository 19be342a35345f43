package handler

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/partition"
)

// This file is what lets a consumer read from a follower (KIP-392): which
// requests a follower answers, and which replica a leader names.

// replicaCode is notLeaderCode for a request any replica of the partition
// may answer when anyReplica is set (a consumer's Fetch from v11, a
// ListOffsets with the debugging replica id): a follower holding the
// partition passes, as Kafka's Partition.localLogWithEpochOrThrow without
// requireLeader; one holding none is still NOT_LEADER_OR_FOLLOWER.
func (env *Env) replicaCode(topic string, part int32, p *partition.Partition, anyReplica bool) int16 {
	code := env.notLeaderCode(topic, part, p)
	if code == kerr.NotLeaderForPartition.Code && anyReplica && p != nil {
		return 0
	}
	return code
}

// preferredReadReplica is Kafka's ReplicaManager.findPreferredReadReplica
// for a consumer fetch of tp at fetchOffset with the request's rack id: -1
// unless a selector is configured, this node leads tp and the selector
// picks a live follower other than itself. Only replicas on a live
// (registered, unfenced) broker with a client endpoint can be chosen, as
// Kafka leaves out replicas without an endpoint on the request's listener.
func (env *Env) preferredReadReplica(tp log.TopicPartition, fetchOffset int64, clientRack string) int32 {
	if env.ReplicaSelector == nil || env.Replication == nil || env.Cluster == nil {
		return -1
	}
	leader, followers, ok := env.Replication.ReadReplicas(tp, fetchOffset)
	if !ok {
		return -1
	}
	racks := map[int32]string{}
	for _, b := range env.Cluster.LiveBrokers() {
		racks[b.ID] = b.Rack
	}
	lv := ReplicaView{ReadReplica: leader, Rack: racks[leader.ID]}
	views := []ReplicaView{lv}
	for _, f := range followers {
		if rack, live := racks[f.ID]; live {
			views = append(views, ReplicaView{ReadReplica: f, Rack: rack})
		}
	}
	if sel := env.ReplicaSelector.Select(clientRack, lv, views); sel.ID != leader.ID {
		return sel.ID
	}
	return -1
}

package handler

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/metadata"
	"github.com/cascade-kafka/cascade/broker/partition"
)

// Cluster is what the handlers of a node in a multi-node cluster need
// beyond the single node's Env: the live brokers Metadata, DescribeCluster
// and FindCoordinator list and the active controller. Partition leaders,
// and so the group and transaction coordinators (the leaders of the
// internal topics' partitions), come from the metadata image. Env.Cluster
// nil is the single node, which names itself for all of them.
type Cluster interface {
	// LiveBrokers returns the unfenced registered brokers with the
	// advertised endpoint of the client listener, in id order.
	LiveBrokers() []BrokerAddr
	// ControllerID returns the node Metadata and DescribeCluster name as
	// controller: a live broker, the active controller when it is one;
	// -1 when no active controller is known.
	ControllerID() int32
	// WriteTxnMarkers sends markers to live broker id, the leader of
	// their partitions (Kafka's TransactionMarkerChannelManager).
	WriteTxnMarkers(ctx context.Context, id int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error)
	// AddPartitionsToTxn sends a verification, or a transactions v2
	// add, to live broker id, a transactional id's coordinator (Kafka's
	// AddPartitionsToTxnManager).
	AddPartitionsToTxn(ctx context.Context, id int32, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error)
}

// BrokerAddr is one broker as Metadata lists it.
type BrokerAddr struct {
	ID   int32
	Host string
	Port int32
	Rack string // "" for none
}

func init() { registerErrorCode(metadata.ErrNotController, kerr.NotController.Code) }

// brokers returns the brokers Metadata and DescribeCluster list: the live
// brokers of the cluster, or this node alone.
func (env *Env) brokers() []BrokerAddr {
	if env.Cluster == nil {
		return []BrokerAddr{{ID: env.NodeID, Host: env.Host, Port: env.Port}}
	}
	return env.Cluster.LiveBrokers()
}

// controllerID is the id Metadata and DescribeCluster give as controller:
// a live broker, as Kafka 4 brokers name (Cluster.ControllerID), or this
// node alone.
func (env *Env) controllerID() int32 {
	if env.Cluster == nil {
		return env.NodeID
	}
	return env.Cluster.ControllerID()
}

// notLeaderCode checks, on a node of a cluster, that this node leads the
// topic-partition in the latest image, as Kafka's ReplicaManager does
// before Produce, Fetch and ListOffsets: a partition of the image led
// elsewhere, or by no one, is NOT_LEADER_OR_FOLLOWER (the client refreshes
// its metadata); one the image does not have is UNKNOWN_TOPIC_OR_PARTITION.
// p is this node's replica, nil when it has none. On a single node it
// returns UNKNOWN_TOPIC_OR_PARTITION for a nil p and 0 otherwise, as
// before clusters existed.
func (env *Env) notLeaderCode(topic string, part int32, p *partition.Partition) int16 {
	if env.Cluster == nil {
		if p == nil {
			return kerr.UnknownTopicOrPartition.Code
		}
		return 0
	}
	t, ok := env.Meta.Image().Topic(topic)
	if !ok || part < 0 || int(part) >= len(t.Partitions) {
		return kerr.UnknownTopicOrPartition.Code
	}
	if t.Partitions[part].Leader != env.NodeID || p == nil {
		return kerr.NotLeaderForPartition.Code
	}
	return 0
}

// currentLeader returns the leader and leader epoch of a partition in the
// latest image, for KIP-951's CurrentLeader field of a
// NOT_LEADER_OR_FOLLOWER answer; ok is false when the partition has no
// live leader to name.
func (env *Env) currentLeader(topic string, part int32) (id, epoch int32, ok bool) {
	if env.Cluster == nil {
		return -1, -1, false // a single node leads all it has
	}
	t, found := env.Meta.Image().Topic(topic)
	if !found || part < 0 || int(part) >= len(t.Partitions) || t.Partitions[part].Leader < 0 {
		return -1, -1, false
	}
	p := t.Partitions[part]
	return p.Leader, p.LeaderEpoch, true
}

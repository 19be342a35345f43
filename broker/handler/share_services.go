package handler

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/share"
)

// SharePersister reaches the share coordinator that keeps a
// share-partition's durable state in __share_group_state (Kafka's
// Persister): on a single node the local share coordinator, in a cluster
// the node that leads the __share_group_state partition of the key
// "group:topicId:partition" (FindCoordinator key type 2). A request names
// one group and any number of its share-partitions; an error is a
// transport failure, the per-partition error codes are in the response.
type SharePersister interface {
	InitializeState(ctx context.Context, req *kmsg.InitializeShareGroupStateRequest) (*kmsg.InitializeShareGroupStateResponse, error)
	ReadState(ctx context.Context, req *kmsg.ReadShareGroupStateRequest) (*kmsg.ReadShareGroupStateResponse, error)
	WriteState(ctx context.Context, req *kmsg.WriteShareGroupStateRequest) (*kmsg.WriteShareGroupStateResponse, error)
	ReadStateSummary(ctx context.Context, req *kmsg.ReadShareGroupStateSummaryRequest) (*kmsg.ReadShareGroupStateSummaryResponse, error)
	DeleteState(ctx context.Context, req *kmsg.DeleteShareGroupStateRequest) (*kmsg.DeleteShareGroupStateResponse, error)
}

// ShareGroupConfigs gives the settings of one share group's
// share-partitions: the broker's group.share.* defaults overridden by the
// group's dynamic configs (share.record.lock.duration.ms,
// share.auto.offset.reset, share.isolation.level,
// share.delivery.count.limit, ...), read when a share-partition loads.
type ShareGroupConfigs interface {
	PartitionConfig(group string) share.PartitionConfig
}

// ShareFetchers is the partition-leader side of share groups
// (SharePartitionManager in Kafka): what the group side tells it.
type ShareFetchers interface {
	// MemberLeft releases the records the member holds in every
	// share-partition of the group that this node leads.
	MemberLeft(group, member string)
	// GroupDeleted forgets the group's share-partitions on this node.
	GroupDeleted(group string)
	// Reset reloads the named share-partitions from the persister after
	// AlterShareGroupOffsets or DeleteShareGroupOffsets changed them.
	Reset(group string, topicID [16]byte, partitions []int32)
}

package handler

import (
	"log/slog"
	"time"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/logging"
	"github.com/cascade-kafka/cascade/broker/metadata"
	"github.com/cascade-kafka/cascade/broker/metrics"
	"github.com/cascade-kafka/cascade/broker/partition"
)

// Env is the set of services the handlers use. The composition root
// (broker.Start) builds one per broker; handlers read it and never replace
// its fields.
type Env struct {
	// NodeID is node.id.
	NodeID int32
	// Host and Port are the advertised address Metadata publishes for this
	// node (the first advertised listener).
	Host string
	Port int32
	// Config is the validated broker configuration.
	Config *config.Broker
	// Meta is the durable metadata store: topics, partitions, configs,
	// producer ids.
	Meta *metadata.Store
	// Partitions maps topic-partitions to this broker's replicas.
	Partitions *partition.Manager
	// Txn is the transaction coordinator (txn_coordinator.go); nil
	// answers transactional requests COORDINATOR_NOT_AVAILABLE.
	Txn *TxnCoordinator
	// Groups is the group coordinator (group_coordinator.go); nil answers
	// group requests COORDINATOR_NOT_AVAILABLE.
	Groups *GroupCoordinator
	// FetchSessions is the KIP-227 fetch session cache.
	FetchSessions *FetchSessions
	// Metrics records request counts, errors and latencies; may be nil.
	Metrics *metrics.Metrics
	// Now is the clock; tests inject a fake one.
	Now func() time.Time
	// Logger receives the handlers' logs.
	Logger *slog.Logger
	// Cluster is the cluster this node belongs to; nil is a single node
	// (see cluster.go).
	Cluster Cluster
	// Replication replicates the partitions with replicas on other
	// brokers (replica_fetch.go); nil on a single node.
	Replication Replication
	// ReplicaSelector picks the replica a consumer with a rack reads from
	// (replica.selector.class, KIP-392; replica_selector.go); nil: the
	// leader serves its consumers.
	ReplicaSelector ReplicaSelector
	// Loggers holds the broker's named loggers and their levels, which
	// DescribeConfigs and IncrementalAlterConfigs of a BROKER_LOGGER
	// resource read and change (KIP-412); nil refuses that resource type.
	Loggers *logging.Levels
	// Authorizer checks each request's ACLs (authorizer.class.name,
	// authorize.go); nil authorizes everything, as Kafka without an
	// authorizer.
	Authorizer *acl.Authorizer
}

func (env *Env) now() time.Time {
	if env.Now == nil {
		return time.Now()
	}
	return env.Now()
}

func (env *Env) logger() *slog.Logger {
	if env.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return env.Logger
}

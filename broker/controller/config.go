package controller

import (
	"fmt"
	"math/rand"
	"time"

	"github.com/cascade-kafka/cascade/broker/config"
)

// Config configures a Controller. Fields carry Kafka's configuration keys;
// DefaultConfig has Kafka's defaults.
type Config struct {
	// NodeID is node.id of this controller.
	NodeID int32
	// SessionTimeout is broker.session.timeout.ms: a broker not heard from
	// for longer is fenced.
	SessionTimeout time.Duration
	// HeartbeatInterval is broker.heartbeat.interval.ms, the interval
	// brokers heartbeat at; it must be below the session timeout, as Kafka
	// requires, or every broker would be fenced between heartbeats.
	HeartbeatInterval time.Duration
	// DefaultReplicationFactor is default.replication.factor, for
	// CreateTopics with a replication factor of -1.
	DefaultReplicationFactor int16
	// NumPartitions is num.partitions, for CreateTopics with -1.
	NumPartitions int32
	// UncleanLeaderElection is the cluster's
	// unclean.leader.election.enable; a topic's override wins.
	UncleanLeaderElection bool
	// UncleanLeaderElectionInterval is unclean.leader.election.interval.ms:
	// how often Tick elects leaders uncleanly for leaderless partitions of
	// topics that allow it.
	UncleanLeaderElectionInterval time.Duration
	// EligibleLeaderReplicas is the eligible.leader.replicas.version
	// feature at level 1 (KIP-966), which Kafka 4.1 and later finalize in
	// every new cluster: an ISR may shrink below min.insync.replicas,
	// even to nothing, keeping the replicas it loses as eligible leaders.
	EligibleLeaderReplicas bool
	// AutoLeaderRebalance is auto.leader.rebalance.enable: Tick moves
	// leadership back to preferred replicas.
	AutoLeaderRebalance bool
	// LeaderImbalanceCheckInterval is
	// leader.imbalance.check.interval.seconds: how often Tick looks for
	// partitions not led by their preferred replica.
	LeaderImbalanceCheckInterval time.Duration
	// Broker validates topic config overrides; nil means config.Default().
	Broker *config.Broker
	// Rand is the source of topic ids and replica placement. Required:
	// seed it, and a run replays exactly.
	Rand *rand.Rand
}

// DefaultConfig returns Kafka's defaults, for node id and a seeded source.
func DefaultConfig(nodeID int32, r *rand.Rand) Config {
	return Config{
		NodeID:                        nodeID,
		SessionTimeout:                9 * time.Second,
		HeartbeatInterval:             2 * time.Second,
		DefaultReplicationFactor:      1,
		NumPartitions:                 1,
		UncleanLeaderElection:         false,
		UncleanLeaderElectionInterval: 300 * time.Second,
		EligibleLeaderReplicas:        true,
		AutoLeaderRebalance:           true,
		LeaderImbalanceCheckInterval:  300 * time.Second,
		Rand:                          r,
	}
}

// Validate checks the configuration as Kafka's KafkaConfig does for these
// keys.
func (c *Config) Validate() error {
	switch {
	case c.NodeID < 0:
		return fmt.Errorf("controller: node.id %d is negative", c.NodeID)
	case c.SessionTimeout <= 0:
		return fmt.Errorf("controller: broker.session.timeout.ms must be positive")
	case c.HeartbeatInterval <= 0 || c.HeartbeatInterval > c.SessionTimeout:
		return fmt.Errorf("controller: broker.heartbeat.interval.ms (%d) must be positive and at most broker.session.timeout.ms (%d)",
			c.HeartbeatInterval.Milliseconds(), c.SessionTimeout.Milliseconds())
	case c.DefaultReplicationFactor < 1:
		return fmt.Errorf("controller: default.replication.factor must be at least 1")
	case c.NumPartitions < 1:
		return fmt.Errorf("controller: num.partitions must be at least 1")
	case c.UncleanLeaderElectionInterval <= 0:
		return fmt.Errorf("controller: unclean.leader.election.interval.ms must be positive")
	case c.LeaderImbalanceCheckInterval <= 0:
		return fmt.Errorf("controller: leader.imbalance.check.interval.seconds must be positive")
	case c.Rand == nil:
		return fmt.Errorf("controller: a seeded random source is required")
	}
	return nil
}

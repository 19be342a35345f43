package controller

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/metadata"
)

// maxElectionsPerTick bounds the leader elections one Tick proposes for
// rebalancing or unclean recovery, as Kafka's maxElectionsPerImbalance.
const maxElectionsPerTick = 1000

// Controller is the active controller's state machine. It holds only what
// Kafka's active controller keeps outside the log: each broker's session
// (last heartbeat, metadata offset, registration offset, controlled
// shutdown offset) and the rebalance schedule. Everything else is read from
// the image the caller passes in, which must be the latest image including
// every batch this controller has proposed. A Controller serves one term of
// leadership: a node that becomes the active controller makes a new one,
// and every registered broker then counts as heard from at the first
// operation that sees it (as Kafka's BrokerHeartbeatManager on activation).
//
// No method does I/O, reads a clock or starts a goroutine; a Controller is
// not safe for concurrent use.
type Controller struct {
	cfg       Config
	sessions  map[int32]*session
	rebalance periodic // preferred-leader elections
	unclean   periodic // unclean elections of leaderless partitions
}

// periodic schedules a task of Tick as Kafka's controller schedules its
// periodic tasks: first one interval after the controller's first Tick,
// then every interval.
type periodic struct{ next time.Time }

// due reports whether the task runs at now, and if so schedules the next.
func (p *periodic) due(now time.Time, every time.Duration) bool {
	if p.next.IsZero() {
		p.next = now.Add(every)
		return false
	}
	if now.Before(p.next) {
		return false
	}
	p.next = now.Add(every)
	return true
}

// session is one broker's heartbeat state (Kafka's BrokerHeartbeatState).
type session struct {
	epoch       int64 // the registration epoch this session belongs to
	lastContact time.Time
	// metadataOffset is the broker's last reported metadata offset; -1
	// before its first heartbeat.
	metadataOffset int64
	// registerOffset is the offset of the broker's latest
	// RegisterBrokerRecord: it is fenced until it has caught up to it.
	registerOffset int64
	// shutdownOffset is the offset of the batch that began its
	// controlled shutdown, -1 when not shutting down.
	shutdownOffset int64
}

// New returns a controller, or an error for an invalid configuration.
func New(cfg Config) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Controller{cfg: cfg, sessions: map[int32]*session{}}, nil
}

// Config returns the controller's configuration.
func (c *Controller) Config() Config { return c.cfg }

// session returns broker b's session, starting one (heard from now) when
// none exists for its current epoch. A session from before the controller
// saw the registration takes the epoch as the registration offset, which
// is where Kafka puts a new incarnation's record.
func (c *Controller) session(b *metadata.BrokerRegistration, now time.Time) *session {
	s, ok := c.sessions[b.ID]
	if !ok || s.epoch != b.Epoch {
		s = &session{epoch: b.Epoch, lastContact: now, metadataOffset: -1, registerOffset: b.Epoch, shutdownOffset: -1}
		c.sessions[b.ID] = s
	}
	return s
}

// forget drops sessions of brokers no longer registered.
func (c *Controller) forget(img *metadata.Image) {
	for id := range c.sessions {
		if _, ok := img.Broker(id); !ok {
			delete(c.sessions, id)
		}
	}
}

// batch accumulates the records of one operation and the image they lead
// to, so each step plans against the effects of the steps before it. A
// step that changes many independent partitions adds its records at once:
// one Apply copies a topic's partitions once, where one per record would
// make fencing a broker quadratic in the partitions it holds.
type batch struct {
	img  *metadata.Image
	recs []metadata.Record
}

// add applies recs to the working image and keeps them. An Apply failure is
// a controller bug: the records it plans always fit the image.
func (b *batch) add(recs ...metadata.Record) error {
	if len(recs) == 0 {
		return nil
	}
	next, err := metadata.Apply(b.img, recs)
	if err != nil {
		return fmt.Errorf("controller: planned records do not apply: %w", err)
	}
	b.img = next
	b.recs = append(b.recs, recs...)
	return nil
}

// active reports whether broker id may lead and join ISRs in img.
func active(img *metadata.Image, id int32) bool {
	b, ok := img.Broker(id)
	return ok && b.Active()
}

// uncleanAllowed reports whether a topic allows unclean leader election:
// its override, else the cluster-wide dynamic default, else the static
// setting (Kafka's
// ConfigurationControlManager.uncleanLeaderElectionEnabledForTopic).
func (c *Controller) uncleanAllowed(img *metadata.Image, t *metadata.Topic) bool {
	const key = "unclean.leader.election.enable"
	if v, ok := t.Configs[key]; ok {
		return v == "true"
	}
	if v, ok := img.BrokerConfigs("")[key]; ok {
		return v == "true"
	}
	return c.cfg.UncleanLeaderElection
}

// minISR returns a topic's effective min.insync.replicas: its override,
// else the cluster-wide dynamic default, else the static setting, at most
// the replication factor (ReplicationControlManager.getTopicEffectiveMinIsr).
func (c *Controller) minISR(img *metadata.Image, t *metadata.Topic) int {
	const key = "min.insync.replicas"
	v, ok := t.Configs[key]
	if !ok {
		v, ok = img.BrokerConfigs("")[key]
	}
	n, err := strconv.Atoi(v)
	if !ok || err != nil {
		broker := c.cfg.Broker
		if broker == nil {
			broker = config.Default()
		}
		n = int(broker.MinInsyncReplicas)
	}
	return min(n, int(t.ReplicationFactor()))
}

// partitionRef names one partition of an image.
type partitionRef struct {
	topic *metadata.Topic
	index int32
}

// partitionsWhere returns the partitions of img that match, in topic name
// then partition order.
func partitionsWhere(img *metadata.Image, match func(*metadata.Partition) bool) []partitionRef {
	var out []partitionRef
	for _, t := range img.Topics() {
		for i := range t.Partitions {
			if match(&t.Partitions[i]) {
				out = append(out, partitionRef{t, int32(i)})
			}
		}
	}
	return out
}

// inISR matches the partitions whose ISR holds broker id.
func inISR(id int32) func(*metadata.Partition) bool {
	return func(p *metadata.Partition) bool { return slices.Contains(p.ISR, id) }
}

// inISROrELR matches the partitions whose ISR or ELR holds broker id.
func inISROrELR(id int32) func(*metadata.Partition) bool {
	return func(p *metadata.Partition) bool { return slices.Contains(p.ISR, id) || slices.Contains(p.ELR, id) }
}

// leads reports whether broker id leads any partition of img.
func leads(img *metadata.Image, id int32) bool {
	return len(partitionsWhere(img, func(p *metadata.Partition) bool { return p.Leader == id })) > 0
}

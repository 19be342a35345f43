package handler

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/cascade-kafka/cascade/broker/group"
	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/metadata"
	"github.com/cascade-kafka/cascade/broker/partition"
	"github.com/cascade-kafka/cascade/broker/txn"
)

// On a cluster node the group and transaction coordinators follow the
// leadership of their internal topic's partitions, as Kafka 4's
// CoordinatorRuntime and TransactionStateManager do: a partition this node
// comes to lead in the metadata image is loaded (its coordinator answers
// COORDINATOR_LOAD_IN_PROGRESS meanwhile), one it stops leading is
// unloaded, and a group or transactional id whose partition it does not
// lead is NOT_COORDINATOR. The coordinator epoch is the partition's leader
// epoch. The partitions are replicated as any topic's, so the load reads
// the node's own replica, which as leader taken from the ISR holds every
// write a coordinator answered (coordinator_acks.go). This file holds what
// both coordinators and FindCoordinator share.

// offsetsTopicSpec is __consumer_offsets as Kafka's
// GroupCoordinator.groupMetadataTopicConfigs creates it: compacted, 100 MiB
// segments.
func (env *Env) offsetsTopicSpec() metadata.CreateTopic {
	cfg := env.Config
	rf := cfg.OffsetsTopicReplicationFactor
	if env.Cluster != nil {
		rf = cfg.Cluster.Replication.OffsetsTopicReplicationFactor
	}
	compact := "compact"
	segment := strconv.Itoa(100 << 20)
	return metadata.CreateTopic{
		Name:              consumerOffsetsTopic,
		NumPartitions:     cfg.OffsetsTopicNumPartitions,
		ReplicationFactor: rf,
		Configs:           map[string]*string{"cleanup.policy": &compact, "segment.bytes": &segment},
	}
}

// txnStateTopicSpec is __transaction_state as Kafka's
// TransactionStateManager.transactionTopicConfigs creates it, except
// compression.type: Cascade keeps the producer's codec, and the coordinator
// writes uncompressed batches itself.
func (env *Env) txnStateTopicSpec() metadata.CreateTopic {
	cfg := env.Config
	rf, isr := cfg.TransactionStateLogRF, cfg.TransactionStateLogMinISR
	if env.Cluster != nil {
		rf, isr = cfg.Cluster.Replication.TransactionStateLogRF, cfg.Cluster.Replication.TransactionStateLogMinISR
	}
	compact := "compact"
	segment := strconv.Itoa(100 << 20)
	minISR := strconv.Itoa(int(isr))
	return metadata.CreateTopic{
		Name:              TransactionStateTopic,
		NumPartitions:     cfg.TransactionStateLogNumPartitions,
		ReplicationFactor: rf,
		Configs: map[string]*string{"cleanup.policy": &compact,
			"segment.bytes": &segment, "min.insync.replicas": &minISR},
	}
}

// createInternalTopic creates an internal topic; one that already exists
// is no error. On a cluster its partitions are placed over the registered
// brokers as any topic's, with the configured replication factor, so that
// the group and transaction coordinators spread with their leadership and
// fail over with it. As Kafka's AutoTopicCreationManager, a factor above
// the number of registered brokers fails (INVALID_REPLICATION_FACTOR),
// which FindCoordinator answers COORDINATOR_NOT_AVAILABLE until enough
// brokers have registered.
func (env *Env) createInternalTopic(t metadata.CreateTopic) error {
	res := env.Meta.CreateTopics([]metadata.CreateTopic{t}, false)[0]
	if res.Err != nil && !errors.Is(res.Err, metadata.ErrTopicExists) {
		return fmt.Errorf("creating %s: %w", t.Name, res.Err)
	}
	return nil
}

// clusterCoordinator answers FindCoordinator for one key on a cluster node:
// the live leader of the key's partition of its internal topic (group keys:
// __consumer_offsets, by group.PartitionFor; transactional ids:
// __transaction_state, by txn.PartitionFor), creating the topic on first
// use as Kafka's AutoTopicCreationManager does. No live leader, or a topic
// that cannot be created, is COORDINATOR_NOT_AVAILABLE.
func (env *Env) clusterCoordinator(coordinatorType int8, key string) (BrokerAddr, int16) {
	spec, partitionFor := env.offsetsTopicSpec(), group.PartitionFor
	if coordinatorType == 1 {
		spec, partitionFor = env.txnStateTopicSpec(), txn.PartitionFor
	}
	t, ok := env.Meta.Image().Topic(spec.Name)
	if !ok {
		if err := env.createInternalTopic(spec); err != nil {
			env.logger().Warn("coordinator unavailable", "topic", spec.Name, "err", err)
			return BrokerAddr{}, kerr.CoordinatorNotAvailable.Code
		}
		if t, ok = env.Meta.Image().Topic(spec.Name); !ok {
			return BrokerAddr{}, kerr.CoordinatorNotAvailable.Code
		}
	}
	if len(t.Partitions) == 0 {
		return BrokerAddr{}, kerr.CoordinatorNotAvailable.Code
	}
	leader := t.Partitions[partitionFor(key, int32(len(t.Partitions)))].Leader
	for _, b := range env.Cluster.LiveBrokers() {
		if b.ID == leader {
			return b, 0
		}
	}
	return BrokerAddr{}, kerr.CoordinatorNotAvailable.Code
}

// partitionLead is one internal-topic partition a cluster node's
// coordinator serves because this node leads it.
type partitionLead struct {
	epoch   int32  // the leader epoch, which is the coordinator epoch
	gen     uint64 // the load's generation: a load finishing for another is stale
	loading bool   // replaying the partition; requests get COORDINATOR_LOAD_IN_PROGRESS
}

// leadership is how a cluster node's coordinator follows the leaders of its
// internal topic's partitions: the partitions it serves or loads, and the
// signal of a new image. It is owned by the coordinator's loop goroutine.
type leadership struct {
	topic string
	// reloadOnNewEpoch: a partition still led here at a new leader epoch
	// is unloaded and loaded again, as Kafka's TransactionStateManager
	// reloads at the new coordinator epoch; otherwise only its epoch
	// changes, as Kafka's CoordinatorRuntime keeps a loaded shard.
	reloadOnNewEpoch bool
	changed          chan struct{} // a new image to follow (subscribe)
	led              map[int32]partitionLead
	gen              uint64
}

func newLeadership(topic string, reloadOnNewEpoch bool) leadership {
	return leadership{topic: topic, reloadOnNewEpoch: reloadOnNewEpoch, changed: make(chan struct{}, 1),
		led: map[int32]partitionLead{}}
}

// subscribe signals l.changed on every commit of env's image (at most one
// signal pending), for the coordinator's loop to call follow. Subscribers
// run in the order they subscribed, so the partition manager has opened
// the partitions of an image by the time its signal is sent.
func (l *leadership) subscribe(env *Env) (cancel func()) {
	return env.Meta.Subscribe(func(_, _ *metadata.Image) {
		select {
		case l.changed <- struct{}{}:
		default:
		}
	})
}

// follow compares the partitions this node leads in the latest image with
// those served: unload is called for each it no longer leads (or leads at
// a new leader epoch, with reloadOnNewEpoch), and load for each it has
// come to lead, now marked loading at generation gen with its leader
// epoch. A partition whose replica the partition manager has not opened
// yet is left for the next image's signal.
func (l *leadership) follow(env *Env, unload func(n int32), load func(n int32, p *partition.Partition, gen uint64, epoch int32)) {
	want := map[int32]int32{}
	t, ok := env.Meta.Image().Topic(l.topic)
	if ok {
		for _, p := range t.Partitions {
			if p.Leader == env.NodeID {
				want[p.Partition] = p.LeaderEpoch
			}
		}
	}
	for _, n := range slices.Sorted(maps.Keys(l.led)) {
		e, ok := want[n]
		switch {
		case ok && e == l.led[n].epoch:
		case ok && !l.reloadOnNewEpoch:
			p := l.led[n]
			p.epoch = e
			l.led[n] = p
		default:
			delete(l.led, n)
			unload(n)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(want)) {
		if _, ok := l.led[n]; ok {
			continue
		}
		p := env.Partitions.Get(log.TopicPartition{Topic: l.topic, Partition: n})
		if p == nil {
			continue
		}
		l.gen++
		l.led[n] = partitionLead{epoch: want[n], gen: l.gen, loading: true}
		load(n, p, l.gen, want[n])
	}
}

// pending calls follow when a signal is waiting, so that a request sees at
// least the leadership of the image its FindCoordinator answer came from.
func (l *leadership) pending(follow func()) {
	select {
	case <-l.changed:
		follow()
	default:
	}
}

// loaded marks partition n served once the load of generation gen is
// done; false when that load is stale (the partition was unloaded, or
// reloaded at a new epoch, meanwhile).
func (l *leadership) loaded(n int32, gen uint64) (partitionLead, bool) {
	p, ok := l.led[n]
	if !ok || p.gen != gen {
		return p, false
	}
	p.loading = false
	l.led[n] = p
	return p, true
}

// stale reports whether the load of generation gen of partition n was given
// up.
func (l *leadership) stale(n int32, gen uint64) bool {
	p, ok := l.led[n]
	return !ok || p.gen != gen
}

// code returns the serving state of partition n as a Kafka error code: 0
// served, COORDINATOR_LOAD_IN_PROGRESS loading, NOT_COORDINATOR not led.
func (l *leadership) code(n int32) int16 {
	p, ok := l.led[n]
	switch {
	case !ok:
		return kerr.NotCoordinator.Code
	case p.loading:
		return kerr.CoordinatorLoadInProgress.Code
	}
	return 0
}

// loadingAny returns a partition still loading, ok false when none is.
func (l *leadership) loadingAny() (n int32, ok bool) {
	for n, p := range l.led {
		if p.loading {
			return n, true
		}
	}
	return 0, false
}

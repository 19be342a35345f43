package partition

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cascade-kafka/cascade/broker/log"
)

// LogManager creates, opens and deletes partition logs; *log.Manager
// implements it through a small adapter in the composition root.
type LogManager interface {
	// Open returns the log of tp, creating it (with its partition.metadata
	// holding topicID) if it does not exist.
	Open(tp log.TopicPartition, topicID [16]byte, cfg log.Config) (Log, error)
	// Delete closes the log of tp and removes its directory.
	Delete(tp log.TopicPartition) error
}

// Spec is one partition this broker should host, as the metadata image says.
type Spec struct {
	TP          log.TopicPartition
	TopicID     [16]byte
	LeaderEpoch int32
	Config      log.Config
	// Replicated is set when the partition has replicas on other brokers:
	// its high watermark then moves only from the replication shell
	// (Partition.SetReplicated), from the moment it is opened.
	Replicated bool
}

// Manager maps topic-partitions and topic ids to this broker's partitions and
// keeps them in step with the metadata image through Sync.
type Manager struct {
	logs LogManager

	mu    sync.RWMutex
	parts map[log.TopicPartition]*Partition
	cfgs  map[log.TopicPartition]log.Config
	ids   map[[16]byte]string
	// failed holds why a wanted partition's log could not be opened at the
	// last Sync; it is retried at the next one.
	failed map[log.TopicPartition]error
}

// NewManager returns an empty manager over logs.
func NewManager(logs LogManager) *Manager {
	return &Manager{
		logs:   logs,
		parts:  map[log.TopicPartition]*Partition{},
		cfgs:   map[log.TopicPartition]log.Config{},
		ids:    map[[16]byte]string{},
		failed: map[log.TopicPartition]error{},
	}
}

// OpenError returns why the log of tp, which the metadata says this broker
// hosts, could not be opened at the last Sync (a storage error: Kafka's
// offline replica, answered KAFKA_STORAGE_ERROR), or nil.
func (m *Manager) OpenError(tp log.TopicPartition) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.failed[tp]
}

// Get returns the partition tp, or nil if this broker does not host it.
func (m *Manager) Get(tp log.TopicPartition) *Partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.parts[tp]
}

// TopicName returns the name of the topic with id, if hosted here.
func (m *Manager) TopicName(id [16]byte) (string, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	name, ok := m.ids[id]
	return name, ok
}

// All returns every hosted partition, in no particular order.
func (m *Manager) All() []*Partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*Partition, 0, len(m.parts))
	for _, p := range m.parts {
		out = append(out, p)
	}
	return out
}

// Sync makes the hosted set equal to want: missing partitions are opened (or
// created), partitions not wanted are fenced and their logs deleted, changed
// configs and leader epochs are applied. As Kafka's ReplicaManager.applyDelta
// it continues past a failing partition and returns every error joined.
func (m *Manager) Sync(want []Spec) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	keep := make(map[log.TopicPartition]struct{}, len(want))
	ids := make(map[[16]byte]string, len(m.ids))
	for _, s := range want {
		keep[s.TP] = struct{}{}
		ids[s.TopicID] = s.TP.Topic
		p := m.parts[s.TP]
		if p != nil && p.topicID != s.TopicID {
			// The topic was deleted and re-created under the same
			// name between two images: drop the old incarnation.
			if err := m.removeLocked(s.TP); err != nil {
				errs = append(errs, err)
				continue
			}
			p = nil
		}
		if p == nil {
			lg, err := m.logs.Open(s.TP, s.TopicID, s.Config)
			if err != nil {
				err = fmt.Errorf("partition: open %s-%d: %w", s.TP.Topic, s.TP.Partition, err)
				m.failed[s.TP] = err
				errs = append(errs, err)
				continue
			}
			delete(m.failed, s.TP)
			p = New(s.TP, s.TopicID, s.LeaderEpoch, lg)
			p.SetReplicated(s.Replicated)
			if !s.Replicated {
				// The leader alone is the ISR: everything it has is
				// committed, whatever a checkpoint says.
				p.AdvanceHighWatermark(lg.LogEndOffset())
			}
			m.parts[s.TP] = p
			m.cfgs[s.TP] = s.Config
			continue
		}
		p.SetLeaderEpoch(s.LeaderEpoch)
		p.SetReplicated(s.Replicated)
		if m.cfgs[s.TP] != s.Config {
			p.log.SetConfig(s.Config)
			m.cfgs[s.TP] = s.Config
		}
	}
	for tp := range m.parts {
		if _, ok := keep[tp]; !ok {
			if err := m.removeLocked(tp); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for tp := range m.failed {
		if _, ok := keep[tp]; !ok {
			delete(m.failed, tp)
		}
	}
	m.ids = ids
	return errors.Join(errs...)
}

func (m *Manager) removeLocked(tp log.TopicPartition) error {
	p := m.parts[tp]
	delete(m.parts, tp)
	delete(m.cfgs, tp)
	p.markDeleted()
	// Wait out an in-flight append before the log goes away.
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if err := m.logs.Delete(tp); err != nil {
		return fmt.Errorf("partition: delete %s-%d: %w", tp.Topic, tp.Partition, err)
	}
	return nil
}

package metadata

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/config"
)

// Writer carries a replica store's writes to the cluster's active
// controller, which plans them, proposes them to the metadata quorum and
// answers once they are committed. The store's image then changes only
// through ApplyCommitted, in the order of the quorum's log.
type Writer interface {
	CreateTopics(reqs []CreateTopic, validateOnly bool) []CreateResult
	DeleteTopics(reqs []DeleteTopic) []DeleteResult
	CreatePartitions(reqs []CreatePartitions, validateOnly bool) []CreatePartitionsResult
	IncrementalAlterTopicConfigs(topic string, ops []ConfigOp, validateOnly bool) error
	AlterTopicConfigs(topic string, configs map[string]*string, validateOnly bool) error
	// AllocateProducerIDs reserves a block of producer ids and returns
	// its first id and size (AllocateProducerIds).
	AllocateProducerIDs() (first int64, size int64, err error)
	// CreateACLs and DeleteACLs are CreateAcls and DeleteAcls, planned
	// as PlanCreateACLs and PlanDeleteACLs on the controller's image.
	CreateACLs(bindings []acl.Binding) ([]error, error)
	DeleteACLs(filters []acl.Filter) ([]DeleteACLsResult, error)
}

// ErrNotController is the kind of a write sent to a controller that is not
// the active one (Kafka's NOT_CONTROLLER): the sender finds the new active
// controller and retries.
var ErrNotController = errors.New("NOT_CONTROLLER")

// NewReplica returns a store whose image is built from the batches a
// metadata quorum commits (ApplyCommitted, RestoreSnapshot) rather than from
// a journal of its own, and whose writes go to w. It starts from the empty
// image; until the quorum replays its log the store knows no topics.
func NewReplica(w Writer, opts Options) *Store {
	if opts.Broker == nil {
		opts.Broker = config.Default()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Store{opts: opts, writer: w, subs: map[int]func(prev, next *Image){}}
	s.img.Store(Empty())
	return s
}

// ApplyCommitted applies one batch the metadata quorum committed at offset
// (its log index), publishes the new image, whose Offset is offset, and
// calls the subscribers. Batches must come in log order: the quorum's
// Application.Apply calls it from its one goroutine. A batch that does not
// decode or apply is an error and changes nothing: every replica applies
// the same batches, so a failure here is a bug, not a fork.
func (s *Store) ApplyCommitted(offset int64, batch []byte) error {
	recs, err := DecodeBatch(batch)
	if err != nil {
		return fmt.Errorf("metadata: committed batch at %d: %w", offset, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.img.Load()
	next, err := Apply(prev, recs)
	if err != nil {
		return fmt.Errorf("metadata: committed batch at %d: %w", offset, err)
	}
	next.Offset = offset
	s.publishLocked(prev, next)
	return nil
}

// RestoreSnapshot replaces the image with a snapshot of the quorum's (one
// batch of Image.Records) taken at offset.
func (s *Store) RestoreSnapshot(offset int64, batch []byte) error {
	recs, err := DecodeBatch(batch)
	if err != nil {
		return fmt.Errorf("metadata: snapshot at %d: %w", offset, err)
	}
	next, err := Apply(Empty(), recs)
	if err != nil {
		return fmt.Errorf("metadata: snapshot at %d: %w", offset, err)
	}
	next.Offset = offset
	s.mu.Lock()
	defer s.mu.Unlock()
	s.publishLocked(s.img.Load(), next)
	return nil
}

// publishLocked stores next as the image and calls the subscribers in the
// order they subscribed. Called with s.mu held.
func (s *Store) publishLocked(prev, next *Image) {
	s.img.Store(next)
	for _, id := range slices.Sorted(maps.Keys(s.subs)) {
		s.subs[id](prev, next)
	}
}

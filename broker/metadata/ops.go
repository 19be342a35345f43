package metadata

import (
	"errors"
	"fmt"
	"strings"
)

// MetadataTopic is Kafka's Topic.CLUSTER_METADATA_TOPIC_NAME, which no
// client may create.
const MetadataTopic = "__cluster_metadata"

// maxTopicNameLength is Kafka's Topic.MAX_NAME_LENGTH.
const maxTopicNameLength = 249

// MaxPartitionsPerRequest bounds the partitions one create request may add,
// as Kafka's controller bounds a batch (MAX_RECORDS_PER_USER_OP), so a
// request cannot make the broker allocate without limit.
const MaxPartitionsPerRequest = 10000

// ValidateTopicName applies Kafka's Topic.validate, with its messages.
func ValidateTopicName(name string) error {
	var reason string
	switch {
	case name == "":
		reason = "the empty string is not allowed"
	case name == ".":
		reason = "'.' is not allowed"
	case name == "..":
		reason = "'..' is not allowed"
	case len(name) > maxTopicNameLength:
		reason = fmt.Sprintf("the length of '%s' is longer than the max allowed length %d", name, maxTopicNameLength)
	default:
		for i := 0; i < len(name); i++ {
			c := name[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				reason = fmt.Sprintf("'%s' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'", name)
				break
			}
		}
	}
	if reason == "" {
		return nil
	}
	return newErr(ErrInvalidTopic, "Topic name is invalid: %s", reason)
}

// unifyCollision maps '.' to '_' as Kafka's Topic.unifyCollisionChars: two
// names equal after it collide in metric names and may not coexist.
func unifyCollision(name string) string { return strings.ReplaceAll(name, ".", "_") }

// CreateTopic is one topic of a CreateTopics call.
type CreateTopic struct {
	Name string
	// NumPartitions -1 means num.partitions.
	NumPartitions int32
	// ReplicationFactor -1 means default.replication.factor.
	ReplicationFactor int16
	// Assignments is a manual replica assignment; it requires
	// NumPartitions and ReplicationFactor of -1.
	Assignments []Assignment
	// Configs are the topic's config overrides; a nil value is refused.
	Configs map[string]*string
}

// Assignment is the manual replica assignment of one new partition.
type Assignment struct {
	Partition int32
	Replicas  []int32
}

// CreateResult is the outcome for one topic.
type CreateResult struct {
	Name string
	// Err is nil or an *Error.
	Err error
	// Topic is the created topic; on validate-only it is the topic as it
	// would be, with the random ID it would have had (as Kafka answers).
	Topic *Topic
}

// CreateTopics creates topics, each valid one in its own durable batch, as
// Kafka's ReplicationControlManager.createTopics validates each topic on
// its own. With validateOnly nothing is written.
func (s *Store) CreateTopics(reqs []CreateTopic, validateOnly bool) []CreateResult {
	if s.writer != nil {
		return s.writer.CreateTopics(reqs, validateOnly)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]CreateResult, len(reqs))
	budget := MaxPartitionsPerRequest
	for i, req := range reqs {
		out[i].Name = req.Name
		recs, topic, err := s.planner().CreateTopic(s.img.Load(), req, &budget)
		if err != nil {
			out[i].Err = err
			continue
		}
		if validateOnly {
			out[i].Topic = topic
			continue
		}
		if err := s.commit(recs); err != nil {
			out[i].Err = asError(err)
			continue
		}
		out[i].Topic, _ = s.img.Load().Topic(req.Name)
	}
	return out
}

// EnsureTopic returns the topic named name, creating it with the broker's
// defaults when it does not exist: auto-creation by Metadata and Produce.
// The caller checks auto.create.topics.enable.
func (s *Store) EnsureTopic(name string) (*Topic, error) {
	if t, ok := s.img.Load().Topic(name); ok {
		return t, nil
	}
	res := s.CreateTopics([]CreateTopic{{Name: name, NumPartitions: -1, ReplicationFactor: -1}}, false)[0]
	if errors.Is(res.Err, ErrTopicExists) {
		if t, ok := s.img.Load().Topic(name); ok {
			return t, nil
		}
	}
	return res.Topic, res.Err
}

func asError(err error) error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Kind: ErrStorage, Message: err.Error()}
}

// DeleteTopic names one topic to delete: by ID when ID is non-zero, else by
// Name.
type DeleteTopic struct {
	Name string
	ID   UUID
}

// DeleteResult is the outcome for one topic.
type DeleteResult struct {
	Name string
	ID   UUID
	Err  error
}

// DeleteTopics deletes topics, each in its own durable batch. The caller
// checks delete.topic.enable.
func (s *Store) DeleteTopics(reqs []DeleteTopic) []DeleteResult {
	if s.writer != nil {
		return s.writer.DeleteTopics(reqs)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]DeleteResult, len(reqs))
	for i, req := range reqs {
		out[i].Name, out[i].ID = req.Name, req.ID
		t, rec, err := ResolveDeleteTopic(s.img.Load(), req)
		if err != nil {
			out[i].Err = err
			continue
		}
		out[i].Name, out[i].ID = t.Name, t.ID
		if err := s.commit([]Record{rec}); err != nil {
			out[i].Err = asError(err)
		}
	}
	return out
}

// CreatePartitions is one topic of a CreatePartitions call.
type CreatePartitions struct {
	Name  string
	Count int32
	// Assignments, when given, has one replica list per new partition.
	Assignments [][]int32
}

// CreatePartitionsResult is the outcome for one topic.
type CreatePartitionsResult struct {
	Name string
	Err  error
}

// CreatePartitions raises topics' partition counts, as
// ReplicationControlManager.createPartitions: a count may only grow.
func (s *Store) CreatePartitions(reqs []CreatePartitions, validateOnly bool) []CreatePartitionsResult {
	if s.writer != nil {
		return s.writer.CreatePartitions(reqs, validateOnly)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]CreatePartitionsResult, len(reqs))
	budget := MaxPartitionsPerRequest
	for i, req := range reqs {
		out[i].Name = req.Name
		recs, err := s.planner().CreatePartitions(s.img.Load(), req, &budget)
		if err != nil {
			out[i].Err = err
			continue
		}
		if validateOnly {
			continue
		}
		if err := s.commit(recs); err != nil {
			out[i].Err = asError(err)
		}
	}
	return out
}

// Incremental config operations, numbered as IncrementalAlterConfigs'
// OpType.
const (
	OpSet      int8 = 0
	OpDelete   int8 = 1
	OpAppend   int8 = 2
	OpSubtract int8 = 3
)

// ConfigOp is one IncrementalAlterConfigs operation.
type ConfigOp struct {
	Name  string
	Op    int8
	Value *string
}

// IncrementalAlterTopicConfigs applies ops to a topic's config overrides,
// as ConfigurationControlManager.incrementalAlterConfigResource: SET and
// DELETE on any config, APPEND and SUBTRACT only on LIST configs (starting
// from the effective value), then validates the result as a whole.
func (s *Store) IncrementalAlterTopicConfigs(topic string, ops []ConfigOp, validateOnly bool) error {
	if s.writer != nil {
		return s.writer.IncrementalAlterTopicConfigs(topic, ops, validateOnly)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	recs, err := s.planner().IncrementalAlterTopicConfigs(s.img.Load(), topic, ops)
	if err != nil {
		return err
	}
	return s.commitConfigs(recs, validateOnly)
}

// AlterTopicConfigs replaces a topic's overrides with configs, as the legacy
// AlterConfigs does: configs not named are removed.
func (s *Store) AlterTopicConfigs(topic string, configs map[string]*string, validateOnly bool) error {
	if s.writer != nil {
		return s.writer.AlterTopicConfigs(topic, configs, validateOnly)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	recs, err := s.planner().AlterTopicConfigs(s.img.Load(), topic, configs)
	if err != nil {
		return err
	}
	return s.commitConfigs(recs, validateOnly)
}

// commitConfigs commits a config change unless it is validate-only or
// changes nothing. Called with s.mu held.
func (s *Store) commitConfigs(recs []Record, validateOnly bool) error {
	if validateOnly || len(recs) == 0 {
		return nil
	}
	if err := s.commit(recs); err != nil {
		return asError(err)
	}
	return nil
}

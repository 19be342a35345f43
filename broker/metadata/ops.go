package metadata

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cascade-kafka/cascade/broker/config"
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
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]CreateResult, len(reqs))
	budget := MaxPartitionsPerRequest
	for i, req := range reqs {
		out[i].Name = req.Name
		recs, topic, err := s.planCreate(req, &budget)
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

// planCreate validates one topic against the current image and returns its
// records. Called with s.mu held.
func (s *Store) planCreate(req CreateTopic, budget *int) ([]Record, *Topic, error) {
	b := s.opts.Broker
	img := s.img.Load()
	if err := ValidateTopicName(req.Name); err != nil {
		return nil, nil, err
	}
	if req.Name == MetadataTopic {
		// As ControllerApis.createTopics, which refuses it this way; here
		// its log directory is also the metadata journal's.
		return nil, nil, newErr(ErrTopicAuthorization, "Authorization failed.")
	}
	if _, ok := img.topics[req.Name]; ok {
		return nil, nil, newErr(ErrTopicExists, "Topic '%s' already exists.", req.Name)
	}
	unified := unifyCollision(req.Name)
	for name := range img.topics {
		if unifyCollision(name) == unified {
			return nil, nil, newErr(ErrInvalidTopic, "Topic '%s' collides with existing topic: %s", req.Name, name)
		}
	}
	// Configs are checked before the layout, as ReplicationControlManager
	// validates them in computeConfigChanges before createTopic.
	configs := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(req.Configs)) {
		v := req.Configs[k]
		if v == nil {
			return nil, nil, newErr(ErrInvalidConfig, "Null value not supported for topic configs: %s", k)
		}
		configs[k] = *v
	}
	if err := config.ValidateTopic(b, configs); err != nil {
		return nil, nil, &Error{Kind: ErrInvalidConfig, Message: configMessage(err)}
	}
	var assignment [][]int32
	if len(req.Assignments) > 0 {
		if req.ReplicationFactor != -1 {
			return nil, nil, newErr(ErrInvalidRequest, "A manual partition assignment was specified, but replication factor was not set to -1.")
		}
		if req.NumPartitions != -1 {
			return nil, nil, newErr(ErrInvalidRequest, "A manual partition assignment was specified, but numPartitions was not set to -1.")
		}
		if len(req.Assignments) > *budget {
			return nil, nil, newErr(ErrPolicyViolation, "Excessively large number of partitions per request.")
		}
		byPartition := make(map[int32][]int32, len(req.Assignments))
		rf := -1
		for _, a := range req.Assignments {
			if _, dup := byPartition[a.Partition]; dup {
				return nil, nil, newErr(ErrInvalidReplicaAssignment, "Found multiple manual partition assignments for partition %d", a.Partition)
			}
			if err := s.validateReplicas(a.Replicas, rf); err != nil {
				return nil, nil, err
			}
			rf = len(a.Replicas)
			byPartition[a.Partition] = a.Replicas
		}
		for p := int32(0); int(p) < len(byPartition); p++ {
			replicas, ok := byPartition[p]
			if !ok {
				return nil, nil, newErr(ErrInvalidReplicaAssignment, "partitions should be a consecutive 0-based integer sequence")
			}
			assignment = append(assignment, replicas)
		}
	} else {
		// As createTopic: the replication factor is checked first.
		if req.ReplicationFactor < -1 || req.ReplicationFactor == 0 {
			return nil, nil, newErr(ErrInvalidReplicationFactor, "Replication factor must be larger than 0, or -1 to use the default value.")
		}
		if req.NumPartitions < -1 || req.NumPartitions == 0 {
			return nil, nil, newErr(ErrInvalidPartitions, "Number of partitions was set to an invalid non-positive value.")
		}
		n := req.NumPartitions
		if n == -1 {
			n = b.NumPartitions
		}
		rf := req.ReplicationFactor
		if rf == -1 {
			rf = b.DefaultReplicationFactor
		}
		if rf > 1 {
			// StripedReplicaPlacer's words (Kafka 4.4, which names log
			// directory cordoning, KIP-1066), behind createTopic's prefix.
			return nil, nil, newErr(ErrInvalidReplicationFactor,
				"Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only 1 broker(s) are registered or some brokers have all their log directories cordoned.", rf, rf)
		}
		if int(n) > *budget {
			return nil, nil, newErr(ErrPolicyViolation, "Excessively large number of partitions per request.")
		}
		for range n {
			assignment = append(assignment, []int32{b.NodeID})
		}
	}
	*budget -= len(assignment)
	id, err := newUUID(s.opts.Rand)
	if err != nil {
		return nil, nil, &Error{Kind: ErrStorage, Message: err.Error()}
	}
	recs := []Record{TopicRecord{Name: req.Name, ID: id}}
	topic := &Topic{Name: req.Name, ID: id, Configs: configs}
	for p, replicas := range assignment {
		pr := PartitionRecord{TopicID: id, Partition: int32(p), Replicas: replicas, ISR: replicas,
			Leader: replicas[0]}
		recs = append(recs, pr)
		topic.Partitions = append(topic.Partitions, Partition{Partition: pr.Partition, Replicas: replicas,
			ISR: replicas, Leader: pr.Leader})
	}
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		v := configs[k]
		recs = append(recs, ConfigRecord{ResourceType: ResourceTopic, ResourceName: req.Name, Name: k, Value: &v})
	}
	return recs, topic, nil
}

// configMessage strips the Go wrapping of a config error down to Kafka's
// message.
func configMessage(err error) string {
	msg := err.Error()
	for _, suffix := range []string{": " + config.ErrUnknown.Error(), ": " + config.ErrInvalid.Error()} {
		msg = strings.TrimSuffix(msg, suffix)
	}
	return msg
}

// validateReplicas checks one partition's manual assignment on this single
// node cluster, as ReplicationControlManager.validateManualPartitionAssignment:
// replicas sorted, each registered and named once, and as many as the
// previous partitions have (rf, or -1 for none).
func (s *Store) validateReplicas(replicas []int32, rf int) error {
	if len(replicas) == 0 {
		return newErr(ErrInvalidReplicaAssignment, "The manual partition assignment includes an empty replica list.")
	}
	sorted := slices.Sorted(slices.Values(replicas))
	for i, r := range sorted {
		if r != s.opts.Broker.NodeID {
			return newErr(ErrInvalidReplicaAssignment, "The manual partition assignment includes broker %d, but no broker with that ID is registered.", r)
		}
		if i > 0 && sorted[i-1] == r {
			return newErr(ErrInvalidReplicaAssignment, "The manual partition assignment includes the broker %d more than once.", r)
		}
	}
	if rf >= 0 && len(replicas) != rf {
		return newErr(ErrInvalidReplicaAssignment, "The manual partition assignment includes a partition with %d replica(s), but this is not consistent with previous partitions, which have %d replica(s).", len(replicas), rf)
	}
	return nil
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
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]DeleteResult, len(reqs))
	for i, req := range reqs {
		img := s.img.Load()
		out[i].Name, out[i].ID = req.Name, req.ID
		var t *Topic
		var ok bool
		if !req.ID.IsZero() {
			if t, ok = img.byID[req.ID]; !ok {
				out[i].Err = &Error{Kind: ErrUnknownTopicID} // Kafka sends no message
				continue
			}
		} else if t, ok = img.topics[req.Name]; !ok {
			out[i].Err = &Error{Kind: ErrUnknownTopic}
			continue
		}
		out[i].Name, out[i].ID = t.Name, t.ID
		if err := s.commit([]Record{RemoveTopicRecord{TopicID: t.ID}}); err != nil {
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
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]CreatePartitionsResult, len(reqs))
	budget := MaxPartitionsPerRequest
	for i, req := range reqs {
		out[i].Name = req.Name
		t, ok := s.img.Load().topics[req.Name]
		if !ok {
			out[i].Err = &Error{Kind: ErrUnknownTopic} // Kafka sends no message
			continue
		}
		have := int32(len(t.Partitions))
		switch {
		case req.Count < have:
			out[i].Err = newErr(ErrInvalidPartitions, "The topic %s currently has %d partition(s); %d would not be an increase.", req.Name, have, req.Count)
			continue
		case req.Count == have:
			out[i].Err = newErr(ErrInvalidPartitions, "Topic already has %d partition(s).", have)
			continue
		case int(req.Count-have) > budget:
			out[i].Err = newErr(ErrPolicyViolation, "Excessively large number of partitions per request.")
			continue
		}
		add := int(req.Count - have)
		if req.Assignments != nil && len(req.Assignments) != add {
			out[i].Err = newErr(ErrInvalidReplicaAssignment, "Attempted to add %d additional partition(s), but only %d assignment(s) were specified.", add, len(req.Assignments))
			continue
		}
		rf := int(t.ReplicationFactor())
		var recs []Record
		var bad error
		for k := 0; k < add; k++ {
			replicas := []int32{s.opts.Broker.NodeID}
			if req.Assignments != nil {
				replicas = req.Assignments[k]
				if err := s.validateReplicas(replicas, rf); err != nil {
					bad = err
					break
				}
			}
			recs = append(recs, PartitionRecord{TopicID: t.ID, Partition: have + int32(k), Replicas: replicas,
				ISR: replicas, Leader: replicas[0]})
		}
		if bad != nil {
			out[i].Err = bad
			continue
		}
		budget -= add
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
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.alterableTopic(topic)
	if err != nil {
		return err
	}
	next := maps.Clone(t.Configs)
	for _, op := range ops {
		def, known := config.TopicDef(op.Name)
		switch op.Op {
		case OpSet:
			if op.Value == nil {
				return newErr(ErrInvalidRequest, "Null value not supported for : %s", op.Name)
			}
			next[op.Name] = *op.Value
		case OpDelete:
			delete(next, op.Name)
		case OpAppend, OpSubtract:
			// As ConfigurationControlManager.incrementalAlterConfigResource:
			// only LIST configs, starting from the override or else the
			// config's default.
			if !known || def.Type != config.TypeList {
				return newErr(ErrInvalidConfig, "Can't %s to key %s because its type is not LIST.", opName(op.Op), op.Name)
			}
			cur, ok := next[op.Name]
			if !ok {
				cur = def.Default
			}
			parts := splitList(cur)
			var items []string
			if op.Value != nil {
				items = strings.Split(*op.Value, ",")
			}
			for _, it := range items {
				if op.Op == OpAppend && it != "" && !slices.Contains(parts, it) {
					parts = append(parts, it)
				}
				if op.Op == OpSubtract {
					if i := slices.Index(parts, it); i >= 0 {
						parts = slices.Delete(parts, i, i+1)
					}
				}
			}
			next[op.Name] = strings.Join(parts, ",")
		default:
			return newErr(ErrInvalidRequest, "Unknown operation type %d", op.Op)
		}
	}
	return s.replaceConfigs(t, next, validateOnly)
}

// AlterTopicConfigs replaces a topic's overrides with configs, as the legacy
// AlterConfigs does: configs not named are removed.
func (s *Store) AlterTopicConfigs(topic string, configs map[string]*string, validateOnly bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.alterableTopic(topic)
	if err != nil {
		return err
	}
	next := map[string]string{}
	for k, v := range configs {
		if v == nil {
			return newErr(ErrInvalidRequest, "Null value not supported for : %s", k)
		}
		next[k] = *v
	}
	return s.replaceConfigs(t, next, validateOnly)
}

// alterableTopic checks a TOPIC config resource as Kafka's
// ControllerConfigurationValidator and existence checker do.
func (s *Store) alterableTopic(name string) (*Topic, error) {
	if name == "" {
		return nil, newErr(ErrInvalidRequest, "Default topic resources are not allowed.")
	}
	if err := ValidateTopicName(name); err != nil {
		return nil, err
	}
	t, ok := s.img.Load().topics[name]
	if !ok {
		return nil, newErr(ErrUnknownTopic, "The topic '%s' does not exist.", name)
	}
	return t, nil
}

// replaceConfigs validates next as the topic's whole override set and
// commits the difference. Called with s.mu held.
func (s *Store) replaceConfigs(t *Topic, next map[string]string, validateOnly bool) error {
	if err := config.ValidateTopic(s.opts.Broker, next); err != nil {
		return &Error{Kind: ErrInvalidConfig, Message: configMessage(err)}
	}
	var recs []Record
	for _, k := range slices.Sorted(maps.Keys(t.Configs)) {
		if _, keep := next[k]; !keep {
			recs = append(recs, ConfigRecord{ResourceType: ResourceTopic, ResourceName: t.Name, Name: k})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(next)) {
		if old, ok := t.Configs[k]; ok && old == next[k] {
			continue
		}
		v := next[k]
		recs = append(recs, ConfigRecord{ResourceType: ResourceTopic, ResourceName: t.Name, Name: k, Value: &v})
	}
	if validateOnly || len(recs) == 0 {
		return nil
	}
	if err := s.commit(recs); err != nil {
		return asError(err)
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func opName(op int8) string {
	if op == OpAppend {
		return "APPEND"
	}
	return "SUBTRACT"
}

package metadata

import (
	"io"
	"maps"
	"math/rand"
	"slices"
	"strings"

	"github.com/cascade-kafka/cascade/broker/config"
)

// Cluster is the view of the brokers that topic planning validates manual
// assignments against and places replicas on. The single-node Store's view
// is itself; the controller's is the image's broker registrations.
type Cluster interface {
	// Registered reports whether broker id is registered.
	Registered(id int32) bool
	// Active reports whether broker id may join an ISR and lead: unfenced
	// and not in controlled shutdown.
	Active(id int32) bool
	// Usable returns the brokers replicas may be placed on, in id order.
	Usable() []UsableBroker
}

// SingleNode is the Cluster of a broker that is the whole cluster.
type SingleNode int32

// Registered reports whether id is the node.
func (n SingleNode) Registered(id int32) bool { return id == int32(n) }

// Active reports whether id is the node.
func (n SingleNode) Active(id int32) bool { return id == int32(n) }

// Usable returns the node.
func (n SingleNode) Usable() []UsableBroker { return []UsableBroker{{ID: int32(n)}} }

// Registrations is the Cluster of an image's broker registrations.
type Registrations struct{ Image *Image }

// Registered reports whether id has a registration.
func (c Registrations) Registered(id int32) bool { _, ok := c.Image.brokers[id]; return ok }

// Active reports whether id is registered, unfenced and not shutting down.
func (c Registrations) Active(id int32) bool {
	b, ok := c.Image.brokers[id]
	return ok && b.Active()
}

// Usable returns the registered brokers not in controlled shutdown, as
// Kafka's BrokerHeartbeatManager.usableBrokers.
func (c Registrations) Usable() []UsableBroker {
	var out []UsableBroker
	for _, b := range c.Image.Brokers() {
		if !b.InControlledShutdown {
			out = append(out, UsableBroker{ID: b.ID, Rack: b.Rack, Fenced: b.Fenced})
		}
	}
	return out
}

// Planner turns topic operations into the records that perform them,
// validating against an image, as Kafka's ReplicationControlManager and
// ConfigurationControlManager do. It is pure given its sources of
// randomness, and writes nothing: the single-node Store commits what it
// returns to its journal, the controller proposes it to the quorum.
type Planner struct {
	// Broker validates topic config overrides; nil means config.Default().
	Broker *config.Broker
	// NumPartitions and ReplicationFactor are num.partitions and
	// default.replication.factor, used for -1 in a request.
	NumPartitions     int32
	ReplicationFactor int16
	Cluster           Cluster
	// IDs is the source of topic ids; nil means crypto/rand.
	IDs io.Reader
	// Placement drives replica placement (StripedReplicaPlacer's random).
	Placement *rand.Rand
}

func (p *Planner) broker() *config.Broker {
	if p.Broker == nil {
		return config.Default()
	}
	return p.Broker
}

// CreateTopic validates one topic against img and returns its records and
// the topic as it will be (with the random id it will have), as
// ReplicationControlManager.createTopic. budget is the number of partitions
// the request may still add; it is reduced by this topic's.
func (p *Planner) CreateTopic(img *Image, req CreateTopic, budget *int) ([]Record, *Topic, error) {
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
	if err := config.ValidateTopic(p.broker(), configs); err != nil {
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
			if err := p.validateReplicas(a.Replicas, rf); err != nil {
				return nil, nil, err
			}
			if !slices.ContainsFunc(a.Replicas, p.Cluster.Active) {
				return nil, nil, newErr(ErrInvalidReplicaAssignment, "All brokers specified in the manual partition assignment for partition %d are fenced or in controlled shutdown.", a.Partition)
			}
			rf = len(a.Replicas)
			byPartition[a.Partition] = a.Replicas
		}
		for i := int32(0); int(i) < len(byPartition); i++ {
			replicas, ok := byPartition[i]
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
			n = p.NumPartitions
		}
		rf := req.ReplicationFactor
		if rf == -1 {
			rf = p.ReplicationFactor
		}
		usable := p.Cluster.Usable()
		if err := checkPlacement(usable, int(rf)); err != nil {
			return nil, nil, newErr(ErrInvalidReplicationFactor, "Unable to replicate the partition %d time(s): %s", rf, err)
		}
		if int(n) > *budget {
			return nil, nil, newErr(ErrPolicyViolation, "Excessively large number of partitions per request.")
		}
		placed, err := Place(p.Placement, usable, int(n), int(rf))
		if err != nil {
			return nil, nil, newErr(ErrInvalidReplicationFactor, "Unable to replicate the partition %d time(s): %s", rf, err)
		}
		for _, replicas := range placed {
			if !slices.ContainsFunc(replicas, p.Cluster.Active) {
				// As createTopic, consistent with the placer.
				return nil, nil, newErr(ErrInvalidReplicationFactor, "Unable to replicate the partition %d time(s): All brokers are currently fenced or in controlled shutdown.", rf)
			}
		}
		assignment = placed
	}
	*budget -= len(assignment)
	id, err := newUUID(p.IDs)
	if err != nil {
		return nil, nil, &Error{Kind: ErrStorage, Message: err.Error()}
	}
	recs := []Record{TopicRecord{Name: req.Name, ID: id}}
	topic := &Topic{Name: req.Name, ID: id, Configs: configs}
	for i, replicas := range assignment {
		pr := p.newPartition(id, int32(i), replicas)
		recs = append(recs, pr)
		topic.Partitions = append(topic.Partitions, Partition{Partition: pr.Partition, Replicas: pr.Replicas,
			ISR: pr.ISR, Leader: pr.Leader})
	}
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		v := configs[k]
		recs = append(recs, ConfigRecord{ResourceType: ResourceTopic, ResourceName: req.Name, Name: k, Value: &v})
	}
	return recs, topic, nil
}

// newPartition is ReplicationControlManager.buildPartitionRegistration: the
// ISR is the active replicas, the leader the first of them, both epochs 0.
// The caller has checked that one replica is active.
func (p *Planner) newPartition(topic UUID, partition int32, replicas []int32) PartitionRecord {
	isr := make([]int32, 0, len(replicas))
	for _, r := range replicas {
		if p.Cluster.Active(r) {
			isr = append(isr, r)
		}
	}
	if len(isr) == len(replicas) {
		isr = replicas // one backing array, as the single-node records always had
	}
	return PartitionRecord{TopicID: topic, Partition: partition, Replicas: replicas, ISR: isr, Leader: isr[0]}
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

// validateReplicas checks one partition's manual assignment, as
// ReplicationControlManager.validateManualPartitionAssignment: replicas
// each registered and named once, and as many as the previous partitions
// have (rf, or -1 for none).
func (p *Planner) validateReplicas(replicas []int32, rf int) error {
	return validateAssignment(replicas, rf, p.Cluster.Registered)
}

// ValidateReassignment checks a reassignment's target replicas as
// ReplicationControlManager.changePartitionReassignment does, with
// validateManualPartitionAssignment and no replication factor: not empty,
// each broker registered in img and named once.
func ValidateReassignment(img *Image, replicas []int32) error {
	return validateAssignment(replicas, -1, func(id int32) bool { _, ok := img.Broker(id); return ok })
}

func validateAssignment(replicas []int32, rf int, registered func(int32) bool) error {
	if len(replicas) == 0 {
		return newErr(ErrInvalidReplicaAssignment, "The manual partition assignment includes an empty replica list.")
	}
	sorted := slices.Sorted(slices.Values(replicas))
	for i, r := range sorted {
		if !registered(r) {
			return newErr(ErrInvalidReplicaAssignment, "The manual partition assignment includes broker %d, but no such broker is registered.", r)
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

// WellFormedAssignments reports whether a manual assignment passes the
// checks of validateManualPartitionAssignment that need no broker
// registrations: partitions named once, replica lists non-empty, without a
// broker named twice, and all of one length. A caller that refuses a topic
// for its replication factor does so only for a well-formed assignment,
// leaving the others to the planner, which refuses them as Kafka does
// (INVALID_REPLICA_ASSIGNMENT).
func WellFormedAssignments(as []Assignment) bool {
	seen := map[int32]bool{}
	for _, a := range as {
		sorted := slices.Sorted(slices.Values(a.Replicas))
		if seen[a.Partition] || len(a.Replicas) == 0 || len(slices.Compact(sorted)) != len(a.Replicas) ||
			len(a.Replicas) != len(as[0].Replicas) {
			return false
		}
		seen[a.Partition] = true
	}
	return true
}

// ResolveDeleteTopic finds the topic a DeleteTopic names and returns its
// RemoveTopicRecord.
func ResolveDeleteTopic(img *Image, req DeleteTopic) (*Topic, Record, error) {
	var t *Topic
	var ok bool
	if !req.ID.IsZero() {
		if t, ok = img.byID[req.ID]; !ok {
			return nil, nil, &Error{Kind: ErrUnknownTopicID} // Kafka sends no message
		}
	} else if t, ok = img.topics[req.Name]; !ok {
		return nil, nil, &Error{Kind: ErrUnknownTopic}
	}
	return t, RemoveTopicRecord{TopicID: t.ID}, nil
}

// CreatePartitions validates raising one topic's partition count and
// returns the new partitions' records, as
// ReplicationControlManager.createPartitions: a count may only grow, new
// partitions keep the topic's replication factor. budget is reduced by the
// partitions added.
func (p *Planner) CreatePartitions(img *Image, req CreatePartitions, budget *int) ([]Record, error) {
	t, ok := img.topics[req.Name]
	if !ok {
		return nil, &Error{Kind: ErrUnknownTopic} // Kafka sends no message
	}
	have := int32(len(t.Partitions))
	switch {
	case req.Count < have:
		return nil, newErr(ErrInvalidPartitions, "The topic %s currently has %d partition(s); %d would not be an increase.", req.Name, have, req.Count)
	case req.Count == have:
		return nil, newErr(ErrInvalidPartitions, "Topic already has %d partition(s).", have)
	case int(req.Count-have) > *budget:
		return nil, newErr(ErrPolicyViolation, "Excessively large number of partitions per request.")
	}
	add := int(req.Count - have)
	if req.Assignments != nil && len(req.Assignments) != add {
		return nil, newErr(ErrInvalidReplicaAssignment, "Attempted to add %d additional partition(s), but only %d assignment(s) were specified.", add, len(req.Assignments))
	}
	rf := int(t.ReplicationFactor())
	var assignment [][]int32
	if req.Assignments != nil {
		for k, replicas := range req.Assignments {
			if err := p.validateReplicas(replicas, rf); err != nil {
				return nil, err
			}
			if !slices.ContainsFunc(replicas, p.Cluster.Active) {
				return nil, newErr(ErrInvalidReplicaAssignment, "All brokers specified in the manual partition assignment for partition %d are fenced or in controlled shutdown.", int(have)+k)
			}
		}
		assignment = req.Assignments
	} else {
		placed, err := Place(p.Placement, p.Cluster.Usable(), add, rf)
		if err != nil {
			return nil, newErr(ErrInvalidReplicationFactor, "%s", err)
		}
		for _, replicas := range placed {
			if !slices.ContainsFunc(replicas, p.Cluster.Active) {
				return nil, newErr(ErrInvalidReplicationFactor, "Unable to replicate the partition %d time(s): All brokers are currently fenced or in controlled shutdown.", rf)
			}
		}
		assignment = placed
	}
	recs := make([]Record, 0, add)
	for k, replicas := range assignment {
		recs = append(recs, p.newPartition(t.ID, have+int32(k), replicas))
	}
	*budget -= add
	return recs, nil
}

// IncrementalAlterTopicConfigs returns the records that apply ops to a
// topic's config overrides, as
// ConfigurationControlManager.incrementalAlterConfigResource: SET and
// DELETE on any config, APPEND and SUBTRACT only on LIST configs (starting
// from the effective value), then the result validated as a whole.
func (p *Planner) IncrementalAlterTopicConfigs(img *Image, topic string, ops []ConfigOp) ([]Record, error) {
	t, err := alterableTopic(img, topic)
	if err != nil {
		return nil, err
	}
	next := maps.Clone(t.Configs)
	if next == nil {
		next = map[string]string{}
	}
	for _, op := range ops {
		def, known := config.TopicDef(op.Name)
		switch op.Op {
		case OpSet:
			if op.Value == nil {
				return nil, newErr(ErrInvalidRequest, "Null value not supported for : %s", op.Name)
			}
			next[op.Name] = *op.Value
		case OpDelete:
			delete(next, op.Name)
		case OpAppend, OpSubtract:
			// Only LIST configs, starting from the override or else the
			// config's default.
			if !known || def.Type != config.TypeList {
				return nil, newErr(ErrInvalidConfig, "Can't %s to key %s because its type is not LIST.", opName(op.Op), op.Name)
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
			return nil, newErr(ErrInvalidRequest, "Unknown operation type %d", op.Op)
		}
	}
	return p.replaceConfigs(t, next)
}

// AlterTopicConfigs returns the records that replace a topic's overrides
// with configs, as the legacy AlterConfigs does: configs not named are
// removed.
func (p *Planner) AlterTopicConfigs(img *Image, topic string, configs map[string]*string) ([]Record, error) {
	t, err := alterableTopic(img, topic)
	if err != nil {
		return nil, err
	}
	next := map[string]string{}
	for k, v := range configs {
		if v == nil {
			return nil, newErr(ErrInvalidRequest, "Null value not supported for : %s", k)
		}
		next[k] = *v
	}
	return p.replaceConfigs(t, next)
}

// alterableTopic checks a TOPIC config resource as Kafka's
// ControllerConfigurationValidator and existence checker do.
func alterableTopic(img *Image, name string) (*Topic, error) {
	if name == "" {
		return nil, newErr(ErrInvalidRequest, "Default topic resources are not allowed.")
	}
	if err := ValidateTopicName(name); err != nil {
		return nil, err
	}
	t, ok := img.topics[name]
	if !ok {
		return nil, newErr(ErrUnknownTopic, "The topic '%s' does not exist.", name)
	}
	return t, nil
}

// replaceConfigs validates next as the topic's whole override set and
// returns the records of the difference (none when nothing changes).
func (p *Planner) replaceConfigs(t *Topic, next map[string]string) ([]Record, error) {
	if err := config.ValidateTopic(p.broker(), next); err != nil {
		return nil, &Error{Kind: ErrInvalidConfig, Message: configMessage(err)}
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
	return recs, nil
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

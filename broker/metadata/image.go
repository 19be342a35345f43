package metadata

import (
	"fmt"

	"github.com/cascade-kafka/cascade/broker/acl"
	"maps"
	"slices"
	"sort"

	"github.com/cascade-kafka/cascade/broker/security/sasl"
)

// Image is the cluster metadata at one point of the metadata log. An Image
// is immutable: Apply returns a new one sharing what did not change, so
// readers hold one without locks.
type Image struct {
	// Offset counts the batches applied since the journal began; a
	// compaction at Open restarts the count, so compare Offsets only
	// within one run. A replica store (NewReplica) sets it to the raft
	// index of the last batch applied, the same on every node.
	Offset    int64
	ClusterID string
	// NextProducerID is the first producer id not yet handed out.
	NextProducerID int64
	topics         map[string]*Topic
	byID           map[UUID]*Topic
	brokerConfigs  map[string]map[string]string
	features       map[string]int16
	brokers        map[int32]*BrokerRegistration
	// acls are the ACLs of AccessControlEntryRecords, indexed for checks;
	// nil is none.
	acls *acl.Index
	// scram holds the SCRAM credentials (UserScramCredentialRecord).
	scram map[scramKey]sasl.ScramCredential
}

// BrokerRegistration is one registered broker of an Image (Kafka's
// BrokerRegistration). Callers must not modify it.
type BrokerRegistration struct {
	ID            int32
	IncarnationID UUID
	// Epoch is the broker epoch the controller assigned at registration.
	Epoch     int64
	Endpoints []Endpoint
	Features  []BrokerFeature
	// Rack is "" when the broker has none.
	Rack                 string
	Fenced               bool
	InControlledShutdown bool
}

// Active reports whether the broker may lead and join ISRs: unfenced and not
// in controlled shutdown, as Kafka's ClusterControlManager.isActive.
func (b *BrokerRegistration) Active() bool { return !b.Fenced && !b.InControlledShutdown }

// Topic is one topic of an Image. Callers must not modify it.
type Topic struct {
	Name       string
	ID         UUID
	Partitions []Partition // indexed by partition number
	// Configs are the topic's config overrides (DYNAMIC_TOPIC_CONFIG).
	Configs map[string]string
}

// Partition is one partition's replica state.
type Partition struct {
	Partition      int32
	Replicas       []int32
	ISR            []int32
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	// LeaderRecoveryState is LeaderRecovering after an unclean election
	// until the leader reports it recovered.
	LeaderRecoveryState int8
	// ELR are the eligible leader replicas (KIP-966): replicas that left an
	// ISR smaller than min.insync.replicas while caught up to the high
	// watermark, so a leader may be elected cleanly from them when the ISR
	// is empty. Disjoint from the ISR.
	ELR []int32
	// LastKnownELR holds the last leader of a partition whose ISR emptied
	// (Kafka's lastKnownElr with useLastKnownLeaderInBalancedRecovery):
	// the one replica that may take it back once nothing else is
	// eligible.
	LastKnownELR []int32
	// AddingReplicas and RemovingReplicas are an ongoing reassignment's
	// (KIP-455): Replicas holds the target replicas followed by those
	// being removed; the reassignment completes when every target replica
	// is in the ISR. Both empty when none is in progress.
	AddingReplicas   []int32
	RemovingReplicas []int32
}

// Reassigning reports whether a reassignment of the partition is in
// progress, as PartitionReassignmentReplicas.isReassignmentInProgress.
func (p *Partition) Reassigning() bool {
	return len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0
}

// PreferredLeader returns the first replica, or NoLeader without replicas.
func (p *Partition) PreferredLeader() int32 {
	if len(p.Replicas) == 0 {
		return NoLeader
	}
	return p.Replicas[0]
}

// ReplicationFactor returns the number of replicas of partition 0.
func (t *Topic) ReplicationFactor() int16 {
	if len(t.Partitions) == 0 {
		return 0
	}
	return int16(len(t.Partitions[0].Replicas))
}

// Empty returns the image of an empty metadata log.
func Empty() *Image {
	return &Image{
		topics:        map[string]*Topic{},
		byID:          map[UUID]*Topic{},
		brokerConfigs: map[string]map[string]string{},
		features:      map[string]int16{},
		brokers:       map[int32]*BrokerRegistration{},
	}
}

// Broker returns the registration of broker id.
func (img *Image) Broker(id int32) (*BrokerRegistration, bool) {
	b, ok := img.brokers[id]
	return b, ok
}

// Brokers returns every registered broker in id order.
func (img *Image) Brokers() []*BrokerRegistration {
	out := make([]*BrokerRegistration, 0, len(img.brokers))
	for _, id := range slices.Sorted(maps.Keys(img.brokers)) {
		out = append(out, img.brokers[id])
	}
	return out
}

// Topic returns the topic named name.
func (img *Image) Topic(name string) (*Topic, bool) {
	t, ok := img.topics[name]
	return t, ok
}

// TopicByID returns the topic with id.
func (img *Image) TopicByID(id UUID) (*Topic, bool) {
	t, ok := img.byID[id]
	return t, ok
}

// Topics returns every topic in name order.
func (img *Image) Topics() []*Topic {
	out := make([]*Topic, 0, len(img.topics))
	for _, t := range img.topics {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// NumTopics returns the number of topics.
func (img *Image) NumTopics() int { return len(img.topics) }

// BrokerConfigs returns the dynamic configs of a broker resource ("" is the
// cluster-wide default). Callers must not modify the map.
func (img *Image) BrokerConfigs(resource string) map[string]string {
	return img.brokerConfigs[resource]
}

// Feature returns a finalized feature level.
func (img *Image) Feature(name string) (int16, bool) {
	l, ok := img.features[name]
	return l, ok
}

// Features returns every finalized feature level. The map is the caller's.
func (img *Image) Features() map[string]int16 { return maps.Clone(img.features) }

// Apply returns the image after one batch of records. It is pure: no I/O,
// no clock, no randomness, so replaying a log (or a Raft log) always
// rebuilds the same image. A record that does not fit the image (a partition
// of an unknown topic, a duplicate name) is an error and nothing is applied.
func Apply(img *Image, recs []Record) (*Image, error) {
	next := *img
	next.Offset++
	// Copy-on-write: maps are cloned once per batch on first change.
	var topicsCloned, configsCloned, featuresCloned, brokersCloned, scramCloned bool
	var acls map[acl.ID]acl.Binding // this batch's copy, once an ACL record is seen
	cloneBrokers := func() {
		if !brokersCloned {
			next.brokers = maps.Clone(next.brokers)
			if next.brokers == nil {
				next.brokers = map[int32]*BrokerRegistration{}
			}
			brokersCloned = true
		}
	}
	cloneTopics := func() {
		if !topicsCloned {
			next.topics = maps.Clone(next.topics)
			next.byID = maps.Clone(next.byID)
			topicsCloned = true
		}
	}
	// A topic touched in this batch is copied once, then changed in place.
	touched := map[UUID]*Topic{}
	cfgCloned := map[UUID]bool{} // topics whose Configs map is this batch's own
	mutable := func(id UUID) (*Topic, error) {
		if t, ok := touched[id]; ok {
			return t, nil
		}
		old, ok := next.byID[id]
		if !ok {
			return nil, fmt.Errorf("metadata: record for unknown topic id %s", id)
		}
		cloneTopics()
		t := &Topic{Name: old.Name, ID: old.ID, Partitions: slices.Clone(old.Partitions), Configs: old.Configs}
		next.topics[t.Name] = t
		next.byID[t.ID] = t
		touched[id] = t
		return t, nil
	}
	for _, rec := range recs {
		switch r := rec.(type) {
		case TopicRecord:
			if r.ID.IsZero() {
				return nil, fmt.Errorf("metadata: topic %q with zero id", r.Name)
			}
			if _, dup := next.topics[r.Name]; dup {
				return nil, fmt.Errorf("metadata: topic %q created twice", r.Name)
			}
			if _, dup := next.byID[r.ID]; dup {
				return nil, fmt.Errorf("metadata: topic id %s used twice", r.ID)
			}
			cloneTopics()
			t := &Topic{Name: r.Name, ID: r.ID, Configs: map[string]string{}}
			next.topics[r.Name] = t
			next.byID[r.ID] = t
			touched[r.ID] = t
			cfgCloned[r.ID] = true
		case PartitionRecord:
			t, err := mutable(r.TopicID)
			if err != nil {
				return nil, err
			}
			p := Partition{Partition: r.Partition, Replicas: slices.Clone(r.Replicas), ISR: slices.Clone(r.ISR),
				Leader: r.Leader, LeaderEpoch: r.LeaderEpoch, PartitionEpoch: r.PartitionEpoch,
				LeaderRecoveryState: r.LeaderRecoveryState, ELR: slices.Clone(r.ELR), LastKnownELR: slices.Clone(r.LastKnownELR),
				AddingReplicas: slices.Clone(r.AddingReplicas), RemovingReplicas: slices.Clone(r.RemovingReplicas)}
			if err := checkReplicaSets(p); err != nil {
				return nil, fmt.Errorf("metadata: topic %q partition %d: %w", t.Name, r.Partition, err)
			}
			switch {
			case int(r.Partition) < len(t.Partitions) && r.Partition >= 0:
				t.Partitions[r.Partition] = p
			case int(r.Partition) == len(t.Partitions):
				t.Partitions = append(t.Partitions, p)
			default:
				return nil, fmt.Errorf("metadata: topic %q: partition %d after %d partitions", t.Name, r.Partition, len(t.Partitions))
			}
		case ConfigRecord:
			switch r.ResourceType {
			case ResourceTopic:
				old, ok := next.topics[r.ResourceName]
				if !ok {
					return nil, fmt.Errorf("metadata: config for unknown topic %q", r.ResourceName)
				}
				t, err := mutable(old.ID)
				if err != nil {
					return nil, err
				}
				if !cfgCloned[old.ID] {
					t.Configs = maps.Clone(t.Configs)
					if t.Configs == nil {
						t.Configs = map[string]string{}
					}
					cfgCloned[old.ID] = true
				}
				setOrDelete(t.Configs, r.Name, r.Value)
			case ResourceBroker:
				if !configsCloned {
					next.brokerConfigs = maps.Clone(next.brokerConfigs)
					configsCloned = true
				}
				m := maps.Clone(next.brokerConfigs[r.ResourceName])
				if m == nil {
					m = map[string]string{}
				}
				setOrDelete(m, r.Name, r.Value)
				if len(m) == 0 {
					delete(next.brokerConfigs, r.ResourceName)
				} else {
					next.brokerConfigs[r.ResourceName] = m
				}
			default:
				return nil, fmt.Errorf("metadata: config for resource type %d", r.ResourceType)
			}
		case RemoveTopicRecord:
			t, ok := next.byID[r.TopicID]
			if !ok {
				return nil, fmt.Errorf("metadata: removing unknown topic id %s", r.TopicID)
			}
			cloneTopics()
			delete(next.topics, t.Name)
			delete(next.byID, t.ID)
			delete(touched, t.ID)
		case ProducerIDsRecord:
			if r.NextProducerID < next.NextProducerID {
				return nil, fmt.Errorf("metadata: producer id block moves back from %d to %d", next.NextProducerID, r.NextProducerID)
			}
			next.NextProducerID = r.NextProducerID
		case FeatureLevelRecord:
			if !featuresCloned {
				next.features = maps.Clone(next.features)
				featuresCloned = true
			}
			next.features[r.Name] = r.Level
		case PartitionChangeRecord:
			t, err := mutable(r.TopicID)
			if err != nil {
				return nil, err
			}
			if r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
				return nil, fmt.Errorf("metadata: change of topic %q partition %d of %d", t.Name, r.Partition, len(t.Partitions))
			}
			p, err := MergePartition(t.Partitions[r.Partition], r)
			if err != nil {
				return nil, fmt.Errorf("metadata: topic %q partition %d: %w", t.Name, r.Partition, err)
			}
			t.Partitions[r.Partition] = p
		case RegisterBrokerRecord:
			if r.BrokerID < 0 {
				return nil, fmt.Errorf("metadata: registering broker id %d", r.BrokerID)
			}
			cloneBrokers()
			next.brokers[r.BrokerID] = &BrokerRegistration{ID: r.BrokerID, IncarnationID: r.IncarnationID,
				Epoch: r.BrokerEpoch, Endpoints: slices.Clone(r.Endpoints), Features: slices.Clone(r.Features),
				Rack: r.Rack, Fenced: r.Fenced, InControlledShutdown: r.InControlledShutdown}
		case UnregisterBrokerRecord:
			// As ClusterControlManager.replay(UnregisterBrokerRecord).
			b, ok := next.brokers[r.BrokerID]
			if !ok || b.Epoch != r.BrokerEpoch {
				return nil, fmt.Errorf("metadata: unregistering broker %d epoch %d, not registered at that epoch", r.BrokerID, r.BrokerEpoch)
			}
			cloneBrokers()
			delete(next.brokers, r.BrokerID)
		case BrokerRegistrationChangeRecord:
			b, ok := next.brokers[r.BrokerID]
			if !ok || b.Epoch != r.BrokerEpoch {
				return nil, fmt.Errorf("metadata: registration change of broker %d epoch %d, not registered at that epoch", r.BrokerID, r.BrokerEpoch)
			}
			nb := *b
			switch r.Fenced {
			case Unfence:
				nb.Fenced = false
			case FenceBroker:
				nb.Fenced = true
			case FenceNone:
			default:
				return nil, fmt.Errorf("metadata: broker %d: fencing change %d", r.BrokerID, r.Fenced)
			}
			switch r.InControlledShutdown {
			case 1:
				nb.InControlledShutdown = true
			case 0:
			default:
				return nil, fmt.Errorf("metadata: broker %d: controlled shutdown change %d", r.BrokerID, r.InControlledShutdown)
			}
			cloneBrokers()
			next.brokers[r.BrokerID] = &nb
		case ClusterIDRecord:
			if next.ClusterID != "" && next.ClusterID != r.ClusterID {
				return nil, fmt.Errorf("metadata: cluster id changes from %s to %s", next.ClusterID, r.ClusterID)
			}
			next.ClusterID = r.ClusterID
		case AccessControlEntryRecord, RemoveAccessControlEntryRecord:
			if acls == nil {
				acls = next.acls.Bindings()
			}
			if err := applyACL(acls, rec); err != nil {
				return nil, err
			}
		default:
			if handled, err := applyScram(&next, rec, &scramCloned); handled {
				if err != nil {
					return nil, err
				}
				continue
			}
			return nil, fmt.Errorf("metadata: cannot apply %T", rec)
		}
	}
	if acls != nil {
		// Built once per batch, as StandardAuthorizerData swaps in a new
		// AclCache: readers of the old image keep the old index.
		next.acls = acl.NewIndex(acls)
	}
	return &next, nil
}

// MergePartition applies a change as Kafka's PartitionRegistration.merge:
// the partition epoch always grows, the leader epoch when the leader is
// named (even the same leader, which is how Kafka fences a leader's old
// requests). The result must keep the ISR within the replicas and the
// leader among them.
func MergePartition(p Partition, r PartitionChangeRecord) (Partition, error) {
	if r.Replicas != nil {
		p.Replicas = slices.Clone(r.Replicas)
	}
	if r.ISR != nil {
		p.ISR = slices.Clone(r.ISR)
	}
	if r.ELR != nil {
		p.ELR = slices.Clone(r.ELR)
	}
	if r.LastKnownELR != nil {
		p.LastKnownELR = slices.Clone(r.LastKnownELR)
	}
	if r.AddingReplicas != nil {
		p.AddingReplicas = slices.Clone(r.AddingReplicas)
	}
	if r.RemovingReplicas != nil {
		p.RemovingReplicas = slices.Clone(r.RemovingReplicas)
	}
	if r.Leader != NoLeaderChange {
		if r.Leader < NoLeader {
			return p, fmt.Errorf("leader %d", r.Leader)
		}
		p.Leader = r.Leader
		p.LeaderEpoch++
	}
	switch r.LeaderRecoveryState {
	case LeaderRecoveryNoChange:
	case LeaderRecovered, LeaderRecovering:
		p.LeaderRecoveryState = r.LeaderRecoveryState
	default:
		return p, fmt.Errorf("leader recovery state %d", r.LeaderRecoveryState)
	}
	p.PartitionEpoch++
	return p, checkReplicaSets(p)
}

// checkReplicaSets checks that the ISR and ELR lie within the replicas and
// share no member (as ReplicationControlManager.updatePartitionInfo's
// validation), that the leader is a replica, and that a reassignment's
// adding and removing replicas are replicas.
func checkReplicaSets(p Partition) error {
	for _, id := range p.ISR {
		if !slices.Contains(p.Replicas, id) {
			return fmt.Errorf("ISR %v not within replicas %v", p.ISR, p.Replicas)
		}
	}
	for _, id := range p.ELR {
		if !slices.Contains(p.Replicas, id) || slices.Contains(p.ISR, id) {
			return fmt.Errorf("ELR %v not within replicas %v outside ISR %v", p.ELR, p.Replicas, p.ISR)
		}
	}
	if p.Leader != NoLeader && !slices.Contains(p.Replicas, p.Leader) {
		return fmt.Errorf("leader %d not among replicas %v", p.Leader, p.Replicas)
	}
	// The adding and removing replicas may share a member: a reassignment
	// changed while one is in progress keeps the lists it does not set,
	// as Kafka's changePartitionReassignment.
	for _, id := range slices.Concat(p.AddingReplicas, p.RemovingReplicas) {
		if !slices.Contains(p.Replicas, id) {
			return fmt.Errorf("adding %v and removing %v replicas not within replicas %v", p.AddingReplicas, p.RemovingReplicas, p.Replicas)
		}
	}
	return nil
}

func setOrDelete(m map[string]string, k string, v *string) {
	if v == nil {
		delete(m, k)
	} else {
		m[k] = *v
	}
}

// Records returns records that rebuild img from an empty image: the
// snapshot written when the metadata log is compacted.
func (img *Image) Records() []Record {
	var recs []Record
	if img.ClusterID != "" {
		recs = append(recs, ClusterIDRecord{ClusterID: img.ClusterID})
	}
	names := slices.Sorted(maps.Keys(img.features))
	for _, n := range names {
		recs = append(recs, FeatureLevelRecord{Name: n, Level: img.features[n]})
	}
	if img.NextProducerID > 0 {
		recs = append(recs, ProducerIDsRecord{BrokerID: -1, NextProducerID: img.NextProducerID})
	}
	for _, b := range img.Brokers() {
		recs = append(recs, RegisterBrokerRecord{BrokerID: b.ID, IncarnationID: b.IncarnationID, BrokerEpoch: b.Epoch,
			Endpoints: b.Endpoints, Features: b.Features, Rack: b.Rack, Fenced: b.Fenced,
			InControlledShutdown: b.InControlledShutdown})
	}
	for _, res := range slices.Sorted(maps.Keys(img.brokerConfigs)) {
		m := img.brokerConfigs[res]
		for _, k := range slices.Sorted(maps.Keys(m)) {
			v := m[k]
			recs = append(recs, ConfigRecord{ResourceType: ResourceBroker, ResourceName: res, Name: k, Value: &v})
		}
	}
	recs = append(recs, img.aclRecords()...)
	recs = append(recs, img.scramRecords()...)
	for _, t := range img.Topics() {
		recs = append(recs, TopicRecord{Name: t.Name, ID: t.ID})
		for _, p := range t.Partitions {
			recs = append(recs, PartitionRecord{TopicID: t.ID, Partition: p.Partition, Replicas: p.Replicas,
				ISR: p.ISR, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
				LeaderRecoveryState: p.LeaderRecoveryState, ELR: p.ELR, LastKnownELR: p.LastKnownELR,
				AddingReplicas: p.AddingReplicas, RemovingReplicas: p.RemovingReplicas})
		}
		for _, k := range slices.Sorted(maps.Keys(t.Configs)) {
			v := t.Configs[k]
			recs = append(recs, ConfigRecord{ResourceType: ResourceTopic, ResourceName: t.Name, Name: k, Value: &v})
		}
	}
	return recs
}

package metadata

// The cluster records: broker registrations and partition changes, as
// Kafka's RegisterBrokerRecord, UnregisterBrokerRecord,
// BrokerRegistrationChangeRecord and PartitionChangeRecord. Kafka's older
// FenceBrokerRecord and UnfenceBrokerRecord are not used: Kafka writes
// BrokerRegistrationChangeRecord for fencing from metadata.version 3.3-IV2
// on, and Cascade's metadata.version (MetadataVersion) is far above it, so
// one record carries both fencing and controlled shutdown.

// Partition leader sentinels, as Kafka's LeaderConstants.
const (
	// NoLeader is a partition without a leader.
	NoLeader int32 = -1
	// NoLeaderChange in a PartitionChangeRecord keeps the leader (and its
	// epoch).
	NoLeaderChange int32 = -2
)

// Leader recovery states, as Kafka's LeaderRecoveryState (KIP-704).
const (
	// LeaderRecovered is a leader elected from the ISR, or one that has
	// finished recovering from an unclean election.
	LeaderRecovered int8 = 0
	// LeaderRecovering is a leader elected uncleanly that has not yet
	// confirmed its log to the controller (AlterPartition).
	LeaderRecovering int8 = 1
	// LeaderRecoveryNoChange in a PartitionChangeRecord keeps the state.
	LeaderRecoveryNoChange int8 = -1
)

// Fencing changes of a BrokerRegistrationChangeRecord, as Kafka's
// BrokerRegistrationFencingChange.
const (
	Unfence     int8 = -1
	FenceNone   int8 = 0
	FenceBroker int8 = 1
)

// Security protocols of an Endpoint, numbered as Kafka's SecurityProtocol.
const (
	ProtocolPlaintext     int16 = 0
	ProtocolSSL           int16 = 1
	ProtocolSASLPlaintext int16 = 2
	ProtocolSASLSSL       int16 = 3
)

// Endpoint is one listener of a registered broker (RegisterBrokerRecord's
// BrokerEndpoint).
type Endpoint struct {
	Name             string
	Host             string
	Port             uint16
	SecurityProtocol int16
}

// BrokerFeature is a feature range a broker supports (RegisterBrokerRecord's
// BrokerFeature).
type BrokerFeature struct {
	Name                string
	MinSupportedVersion int16
	MaxSupportedVersion int16
}

// RegisterBrokerRecord registers a broker incarnation, replacing any earlier
// registration of the same id. Rack "" is Kafka's null rack. Kafka's
// IsMigratingZkBroker and LogDirs are not carried: Cascade has no ZooKeeper
// mode and one log directory set per broker.
type RegisterBrokerRecord struct {
	BrokerID             int32
	IncarnationID        UUID
	BrokerEpoch          int64
	Endpoints            []Endpoint
	Features             []BrokerFeature
	Rack                 string
	Fenced               bool
	InControlledShutdown bool
}

// UnregisterBrokerRecord removes a broker's registration of the given epoch.
type UnregisterBrokerRecord struct {
	BrokerID    int32
	BrokerEpoch int64
}

// BrokerRegistrationChangeRecord changes a registration's fencing (Fenced:
// Unfence, FenceNone or FenceBroker) or puts it in controlled shutdown
// (InControlledShutdown 1; 0 is no change). BrokerEpoch must match the
// registration.
type BrokerRegistrationChangeRecord struct {
	BrokerID             int32
	BrokerEpoch          int64
	Fenced               int8
	InControlledShutdown int8
}

// PartitionChangeRecord changes one partition. A nil ISR or Replicas keeps
// the current one; Leader NoLeaderChange keeps the leader and
// LeaderRecoveryState LeaderRecoveryNoChange keeps the state; a nil ELR or
// LastKnownELR keeps them (KIP-966, tagged fields of Kafka's record).
// Applying it bumps the partition epoch, and the leader epoch when Leader is
// not NoLeaderChange, as Kafka's PartitionRegistration.merge. A nil
// AddingReplicas or RemovingReplicas keeps the reassignment's (KIP-455).
// Kafka's Directories are not carried: Cascade has one directory set per
// broker.
type PartitionChangeRecord struct {
	TopicID             UUID
	Partition           int32
	ISR                 []int32
	Leader              int32
	Replicas            []int32
	LeaderRecoveryState int8
	ELR                 []int32
	LastKnownELR        []int32
	AddingReplicas      []int32
	RemovingReplicas    []int32
}

const (
	typeRegisterBroker           uint8 = 0
	typeUnregisterBroker         uint8 = 1
	typePartitionChange          uint8 = 5
	typeBrokerRegistrationChange uint8 = 17
)

func (RegisterBrokerRecord) recordType() uint8           { return typeRegisterBroker }
func (UnregisterBrokerRecord) recordType() uint8         { return typeUnregisterBroker }
func (BrokerRegistrationChangeRecord) recordType() uint8 { return typeBrokerRegistrationChange }
func (PartitionChangeRecord) recordType() uint8          { return typePartitionChange }

// encodeCluster encodes the body of a cluster record; ok is false for
// another record type.
func encodeCluster(body *writer, r Record) bool {
	switch r := r.(type) {
	case RegisterBrokerRecord:
		body.varint(int64(r.BrokerID))
		body.uuid(r.IncarnationID)
		body.varint(r.BrokerEpoch)
		body.uvarint(uint64(len(r.Endpoints)))
		for _, e := range r.Endpoints {
			body.str(e.Name)
			body.str(e.Host)
			body.uvarint(uint64(e.Port))
			body.varint(int64(e.SecurityProtocol))
		}
		body.uvarint(uint64(len(r.Features)))
		for _, f := range r.Features {
			body.str(f.Name)
			body.varint(int64(f.MinSupportedVersion))
			body.varint(int64(f.MaxSupportedVersion))
		}
		body.str(r.Rack)
		body.bool(r.Fenced)
		body.bool(r.InControlledShutdown)
	case UnregisterBrokerRecord:
		body.varint(int64(r.BrokerID))
		body.varint(r.BrokerEpoch)
	case BrokerRegistrationChangeRecord:
		body.varint(int64(r.BrokerID))
		body.varint(r.BrokerEpoch)
		body.varint(int64(r.Fenced))
		body.varint(int64(r.InControlledShutdown))
	default:
		return false
	}
	return true
}

// encodePartitionChange encodes a PartitionChangeRecord at the lowest
// version that holds its values and returns that version.
func encodePartitionChange(body *writer, r PartitionChangeRecord) uint8 {
	body.uuid(r.TopicID)
	body.varint(int64(r.Partition))
	body.nullableInt32s(r.ISR)
	body.varint(int64(r.Leader))
	body.nullableInt32s(r.Replicas)
	body.varint(int64(r.LeaderRecoveryState))
	reassign := r.AddingReplicas != nil || r.RemovingReplicas != nil
	if r.ELR == nil && r.LastKnownELR == nil && !reassign {
		return recordVersion
	}
	body.nullableInt32s(r.ELR)
	body.nullableInt32s(r.LastKnownELR)
	if !reassign {
		return partitionChangeRecordV1
	}
	body.nullableInt32s(r.AddingReplicas)
	body.nullableInt32s(r.RemovingReplicas)
	return partitionChangeRecordV2
}

// decodeCluster decodes the body of a cluster record; ok is false for
// another record type.
func decodeCluster(typ, ver uint8, body *reader) (Record, bool) {
	switch typ {
	case typeRegisterBroker:
		var r RegisterBrokerRecord
		r.BrokerID = body.int32()
		r.IncarnationID = body.uuid()
		r.BrokerEpoch = body.varint()
		n := body.count(4) // name, host, port, protocol: a byte each at least
		for i := uint64(0); i < n && body.err == nil; i++ {
			r.Endpoints = append(r.Endpoints, Endpoint{Name: body.str(), Host: body.str(),
				Port: body.uint16(), SecurityProtocol: body.int16()})
		}
		n = body.count(3)
		for i := uint64(0); i < n && body.err == nil; i++ {
			r.Features = append(r.Features, BrokerFeature{Name: body.str(),
				MinSupportedVersion: body.int16(), MaxSupportedVersion: body.int16()})
		}
		r.Rack = body.str()
		r.Fenced = body.bool()
		r.InControlledShutdown = body.bool()
		return r, true
	case typeUnregisterBroker:
		return UnregisterBrokerRecord{BrokerID: body.int32(), BrokerEpoch: body.varint()}, true
	case typeBrokerRegistrationChange:
		return BrokerRegistrationChangeRecord{BrokerID: body.int32(), BrokerEpoch: body.varint(),
			Fenced: body.int8(), InControlledShutdown: body.int8()}, true
	case typePartitionChange:
		var r PartitionChangeRecord
		r.TopicID = body.uuid()
		r.Partition = body.int32()
		r.ISR = body.nullableInt32s()
		r.Leader = body.int32()
		r.Replicas = body.nullableInt32s()
		r.LeaderRecoveryState = body.int8()
		if ver >= partitionChangeRecordV1 {
			r.ELR = body.nullableInt32s()
			r.LastKnownELR = body.nullableInt32s()
		}
		if ver >= partitionChangeRecordV2 {
			r.AddingReplicas = body.nullableInt32s()
			r.RemovingReplicas = body.nullableInt32s()
		}
		return r, true
	}
	return nil, false
}

func (w *writer) bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

// nullableInt32s writes nil as 0 and a list as its length plus one, so nil
// ("no change") and empty stay distinct.
func (w *writer) nullableInt32s(v []int32) {
	if v == nil {
		w.uvarint(0)
		return
	}
	w.uvarint(uint64(len(v)) + 1)
	w.int32Elems(v)
}

func (r *reader) nullableInt32s() []int32 {
	n := r.uvarint()
	if r.err != nil || n == 0 {
		return nil
	}
	return r.int32sOf(n - 1)
}

// count reads a list length and checks it against the bytes left, each
// element taking at least min bytes.
func (r *reader) count(min uint64) uint64 {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b))/min {
		r.fail()
		return 0
	}
	return n
}

func (r *reader) bool() bool {
	switch r.byte1() {
	case 0:
		return false
	case 1:
		return true
	}
	r.fail()
	return false
}

func (r *reader) int8() int8   { return int8(r.signed(8)) }
func (r *reader) int16() int16 { return int16(r.signed(16)) }

func (r *reader) uint16() uint16 {
	v := r.uvarint()
	if v > 1<<16-1 {
		r.fail()
		return 0
	}
	return uint16(v)
}

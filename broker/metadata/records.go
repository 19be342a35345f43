package metadata

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// UUID is a Kafka Uuid (topic ids). The zero UUID is Kafka's Uuid.ZERO_UUID
// and never names a topic.
type UUID [16]byte

// String renders the id as Kafka's Uuid.toString does: URL-safe base64
// without padding.
func (u UUID) String() string { return base64.RawURLEncoding.EncodeToString(u[:]) }

// IsZero reports whether u is the zero UUID.
func (u UUID) IsZero() bool { return u == UUID{} }

// newUUID returns a random version 4 UUID that is neither zero nor Kafka's
// reserved METADATA_TOPIC_ID (all zeros but a final 1), and whose string
// form does not start with '-' (as Kafka's Uuid.randomUuid ensures).
func newUUID(r io.Reader) (UUID, error) {
	if r == nil {
		r = rand.Reader
	}
	for {
		var u UUID
		if _, err := io.ReadFull(r, u[:]); err != nil {
			return UUID{}, fmt.Errorf("metadata: reading random topic id: %w", err)
		}
		u[6] = u[6]&0x0f | 0x40 // version 4
		u[8] = u[8]&0x3f | 0x80 // IETF variant
		if u.IsZero() || u == (UUID{15: 1}) || u.String()[0] == '-' {
			continue
		}
		return u, nil
	}
}

// Resource types of ConfigRecord, numbered as Kafka's ConfigResource.Type.
const (
	ResourceTopic  int8 = 2
	ResourceBroker int8 = 4
)

// Record is one metadata record. The set mirrors the records of Kafka's
// __cluster_metadata log (TopicRecord, PartitionRecord, ...), so a Raft log
// can carry the same values later.
type Record interface {
	recordType() uint8
}

// TopicRecord creates a topic.
type TopicRecord struct {
	Name string
	ID   UUID
}

// PartitionRecord creates a partition or replaces its whole state.
type PartitionRecord struct {
	TopicID        UUID
	Partition      int32
	Replicas       []int32
	ISR            []int32
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	// LeaderRecoveryState is LeaderRecovered or LeaderRecovering.
	LeaderRecoveryState int8
	// ELR and LastKnownELR are the partition's eligible leader replicas
	// and last known leader (KIP-966; tagged fields of Kafka's
	// PartitionRecord), empty when there are none.
	ELR          []int32
	LastKnownELR []int32
	// AddingReplicas and RemovingReplicas are an ongoing reassignment's,
	// empty when there is none.
	AddingReplicas   []int32
	RemovingReplicas []int32
}

// ConfigRecord sets (Value non-nil) or deletes (Value nil) one config of a
// resource.
type ConfigRecord struct {
	ResourceType int8
	ResourceName string
	Name         string
	Value        *string
}

// RemoveTopicRecord deletes a topic with its partitions and configs.
type RemoveTopicRecord struct {
	TopicID UUID
}

// ProducerIDsRecord reserves producer ids: every id below NextProducerID has
// been handed out (Kafka's ProducerIdsRecord).
type ProducerIDsRecord struct {
	BrokerID       int32
	BrokerEpoch    int64
	NextProducerID int64
}

// FeatureLevelRecord sets a feature's finalized level (e.g. metadata.version).
type FeatureLevelRecord struct {
	Name  string
	Level int16
}

// ClusterIDRecord is Cascade's: the first record of a new metadata log
// fixes the cluster id (Kafka keeps it in meta.properties).
type ClusterIDRecord struct {
	ClusterID string
}

const (
	typeTopic        uint8 = 2 // numbered as Kafka's MetadataRecordType where one exists
	typePartition    uint8 = 3
	typeConfig       uint8 = 4
	typeRemoveTopic  uint8 = 9
	typeProducerIDs  uint8 = 15
	typeFeatureLevel uint8 = 12
	typeClusterID    uint8 = 200 // Cascade's own
)

func (TopicRecord) recordType() uint8        { return typeTopic }
func (PartitionRecord) recordType() uint8    { return typePartition }
func (ConfigRecord) recordType() uint8       { return typeConfig }
func (RemoveTopicRecord) recordType() uint8  { return typeRemoveTopic }
func (ProducerIDsRecord) recordType() uint8  { return typeProducerIDs }
func (FeatureLevelRecord) recordType() uint8 { return typeFeatureLevel }
func (ClusterIDRecord) recordType() uint8    { return typeClusterID }

// recordVersion is the encoding version of every record type but
// PartitionRecord; a decoder refuses versions it does not know.
const recordVersion = 0

// partitionRecordV1 is the PartitionRecord version that adds
// LeaderRecoveryState. A record is written at the lowest version that holds
// its values, so a log without unclean elections stays readable by a
// binary that knows only version 0.
const partitionRecordV1 = 1

// partitionRecordV2 adds ELR and LastKnownELR after LeaderRecoveryState;
// it is written only when either is non-empty, as Kafka writes tagged
// fields only when set.
const partitionRecordV2 = 2

// partitionRecordV3 adds AddingReplicas and RemovingReplicas after
// LastKnownELR, written only during a reassignment.
const partitionRecordV3 = 3

// partitionChangeRecordV1 adds ELR and LastKnownELR (nil for no change)
// to PartitionChangeRecord, written only when either changes.
const partitionChangeRecordV1 = 1

// partitionChangeRecordV2 adds AddingReplicas and RemovingReplicas (nil
// for no change) after LastKnownELR, written only when either changes.
const partitionChangeRecordV2 = 2

// knownVersion reports whether a decoder knows version ver of record type
// typ.
func knownVersion(typ, ver uint8) bool {
	switch typ {
	case typePartition:
		return ver <= partitionRecordV3
	case typePartitionChange:
		return ver <= partitionChangeRecordV2
	}
	return ver == recordVersion
}

// ErrCorruptRecord is returned when a batch that passed its checksum does
// not decode: a bug or a newer format, never a torn write.
var ErrCorruptRecord = errors.New("metadata: undecodable record")

// EncodeBatch encodes records as one batch: uvarint count, then per record
// its type, version, uvarint body length and body.
func EncodeBatch(recs []Record) []byte {
	var w writer
	w.uvarint(uint64(len(recs)))
	for _, r := range recs {
		var body writer
		ver := uint8(recordVersion)
		switch r := r.(type) {
		case TopicRecord:
			body.str(r.Name)
			body.uuid(r.ID)
		case PartitionRecord:
			body.uuid(r.TopicID)
			body.varint(int64(r.Partition))
			body.int32s(r.Replicas)
			body.int32s(r.ISR)
			body.varint(int64(r.Leader))
			body.varint(int64(r.LeaderEpoch))
			body.varint(int64(r.PartitionEpoch))
			switch {
			case len(r.AddingReplicas) > 0 || len(r.RemovingReplicas) > 0:
				ver = partitionRecordV3
				body.varint(int64(r.LeaderRecoveryState))
				body.int32s(r.ELR)
				body.int32s(r.LastKnownELR)
				body.int32s(r.AddingReplicas)
				body.int32s(r.RemovingReplicas)
			case len(r.ELR) > 0 || len(r.LastKnownELR) > 0:
				ver = partitionRecordV2
				body.varint(int64(r.LeaderRecoveryState))
				body.int32s(r.ELR)
				body.int32s(r.LastKnownELR)
			case r.LeaderRecoveryState != LeaderRecovered:
				ver = partitionRecordV1
				body.varint(int64(r.LeaderRecoveryState))
			}
		case ConfigRecord:
			body.varint(int64(r.ResourceType))
			body.str(r.ResourceName)
			body.str(r.Name)
			if r.Value == nil {
				body.b = append(body.b, 0)
			} else {
				body.b = append(body.b, 1)
				body.str(*r.Value)
			}
		case RemoveTopicRecord:
			body.uuid(r.TopicID)
		case ProducerIDsRecord:
			body.varint(int64(r.BrokerID))
			body.varint(r.BrokerEpoch)
			body.varint(r.NextProducerID)
		case FeatureLevelRecord:
			body.str(r.Name)
			body.varint(int64(r.Level))
		case ClusterIDRecord:
			body.str(r.ClusterID)
		case PartitionChangeRecord:
			ver = encodePartitionChange(&body, r)
		default:
			if !encodeCluster(&body, r) && !encodeACL(&body, r) && !encodeScram(&body, r) {
				panic(fmt.Sprintf("metadata: cannot encode %T", r))
			}
		}
		w.b = append(w.b, r.recordType(), ver)
		w.uvarint(uint64(len(body.b)))
		w.b = append(w.b, body.b...)
	}
	return w.b
}

// DecodeBatch decodes a batch written by EncodeBatch. Every length is checked
// against the bytes present before anything is allocated.
func DecodeBatch(b []byte) ([]Record, error) {
	rd := reader{b: b}
	n := rd.uvarint()
	// Each record takes at least 3 bytes, which bounds the count.
	if rd.err != nil || n > uint64(len(rd.b))/3 {
		return nil, fmt.Errorf("%w: bad record count", ErrCorruptRecord)
	}
	recs := make([]Record, 0, n)
	for i := uint64(0); i < n; i++ {
		if len(rd.b) < 2 {
			return nil, fmt.Errorf("%w: truncated record header", ErrCorruptRecord)
		}
		typ, ver := rd.b[0], rd.b[1]
		rd.b = rd.b[2:]
		if !knownVersion(typ, ver) {
			return nil, fmt.Errorf("%w: record type %d version %d", ErrCorruptRecord, typ, ver)
		}
		size := rd.uvarint()
		if rd.err != nil || size > uint64(len(rd.b)) {
			return nil, fmt.Errorf("%w: bad record length", ErrCorruptRecord)
		}
		body := reader{b: rd.b[:size]}
		rd.b = rd.b[size:]
		var rec Record
		switch typ {
		case typeTopic:
			rec = TopicRecord{Name: body.str(), ID: body.uuid()}
		case typePartition:
			var p PartitionRecord
			p.TopicID = body.uuid()
			p.Partition = body.int32()
			p.Replicas = body.int32s()
			p.ISR = body.int32s()
			p.Leader = body.int32()
			p.LeaderEpoch = body.int32()
			p.PartitionEpoch = body.int32()
			if ver >= partitionRecordV1 {
				p.LeaderRecoveryState = body.int8()
			}
			if ver >= partitionRecordV2 {
				p.ELR = body.int32s()
				p.LastKnownELR = body.int32s()
			}
			if ver >= partitionRecordV3 {
				p.AddingReplicas = body.int32s()
				p.RemovingReplicas = body.int32s()
			}
			rec = p
		case typeConfig:
			var c ConfigRecord
			c.ResourceType = int8(body.int32())
			c.ResourceName = body.str()
			c.Name = body.str()
			if body.byte1() == 1 {
				v := body.str()
				c.Value = &v
			}
			rec = c
		case typeRemoveTopic:
			rec = RemoveTopicRecord{TopicID: body.uuid()}
		case typeProducerIDs:
			rec = ProducerIDsRecord{BrokerID: body.int32(), BrokerEpoch: body.varint(), NextProducerID: body.varint()}
		case typeFeatureLevel:
			rec = FeatureLevelRecord{Name: body.str(), Level: int16(body.int32())}
		case typeClusterID:
			rec = ClusterIDRecord{ClusterID: body.str()}
		default:
			var ok bool
			if rec, ok = decodeCluster(typ, ver, &body); !ok {
				rec, ok = decodeACL(typ, &body)
				if !ok {
					rec, ok = decodeScram(typ, &body)
				}
			}
			if !ok {
				return nil, fmt.Errorf("%w: unknown record type %d", ErrCorruptRecord, typ)
			}
		}
		if body.err != nil || len(body.b) != 0 {
			return nil, fmt.Errorf("%w: record type %d: malformed body", ErrCorruptRecord, typ)
		}
		recs = append(recs, rec)
	}
	if len(rd.b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrCorruptRecord, len(rd.b))
	}
	return recs, nil
}

type writer struct{ b []byte }

func (w *writer) uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *writer) varint(v int64)   { w.b = binary.AppendVarint(w.b, v) }
func (w *writer) str(s string)     { w.uvarint(uint64(len(s))); w.b = append(w.b, s...) }
func (w *writer) uuid(u UUID)      { w.b = append(w.b, u[:]...) }
func (w *writer) int32s(v []int32) {
	w.uvarint(uint64(len(v)))
	w.int32Elems(v)
}

// int32Elems writes a list's elements, each a varint.
func (w *writer) int32Elems(v []int32) {
	for _, x := range v {
		w.varint(int64(x))
	}
}

// reader decodes with a sticky error; after an error every read returns zero.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = ErrCorruptRecord
	}
	r.b = nil
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) int32() int32 { return int32(r.signed(32)) }

// signed reads a varint that must fit in a signed integer of bits bits.
func (r *reader) signed(bits uint) int64 {
	v := r.varint()
	if lim := int64(1) << (bits - 1); v < -lim || v >= lim {
		r.fail()
		return 0
	}
	return v
}

func (r *reader) byte1() byte {
	if len(r.b) < 1 {
		r.fail()
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) str() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail()
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) uuid() UUID {
	var u UUID
	if len(r.b) < 16 {
		r.fail()
		return u
	}
	copy(u[:], r.b)
	r.b = r.b[16:]
	return u
}

func (r *reader) int32s() []int32 { return r.int32sOf(r.uvarint()) }

// int32sOf reads n int32s, refusing a count the bytes left cannot hold.
func (r *reader) int32sOf(n uint64) []int32 {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) { // each element takes at least one byte
		r.fail()
		return nil
	}
	out := make([]int32, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		out = append(out, r.int32())
	}
	return out
}

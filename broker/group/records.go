package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Record types of __consumer_offsets keys. Since Kafka 4.0 the int16 that
// opens a key is the record type (the "apiKey" of the coordinator-key JSON
// schemas in group-coordinator/src/main/resources/common/message); types 0
// and 1 are both offset commits, 2 is classic group metadata.
const (
	RecordLegacyOffsetCommit           int16 = 0
	RecordOffsetCommit                 int16 = 1
	RecordGroupMetadata                int16 = 2
	RecordConsumerGroupMetadata        int16 = 3
	RecordConsumerGroupPartitionMeta   int16 = 4
	RecordConsumerGroupMemberMetadata  int16 = 5
	RecordConsumerGroupTargetMetadata  int16 = 6
	RecordConsumerGroupTargetMember    int16 = 7
	RecordConsumerGroupCurrentMember   int16 = 8
	RecordConsumerGroupRegexResolution int16 = 16
)

// Value versions Cascade writes, as Kafka 4.x does: OffsetCommitValue v3
// (v1 when the commit carries an explicit expire timestamp, OffsetCommit
// v2-v4 retention), GroupMetadataValue v3, and v0 for the KIP-848 records.
const (
	offsetCommitValueVersion       int16 = 3
	offsetCommitValueExpireVersion int16 = 1
	groupMetadataValueVersion      int16 = 3
)

// ErrBadRecord reports a __consumer_offsets key or value Cascade cannot decode.
var ErrBadRecord = errors.New("group: malformed __consumer_offsets record")

// Record is one key/value pair to append to a __consumer_offsets partition.
// A nil Value is a tombstone. A record of a TxnOffsetCommit is Transactional:
// it must be written in a transactional batch of ProducerID and
// ProducerEpoch.
type Record struct {
	Partition     int32
	Key           []byte
	Value         []byte
	Transactional bool
	ProducerID    int64
	ProducerEpoch int16
}

// OffsetCommitKey is the key of an offset commit (record type 1).
type OffsetCommitKey struct {
	Group     string
	Topic     string
	Partition int32
}

// OffsetCommitValue is Kafka's OffsetCommitValue (versions 0-4).
type OffsetCommitValue struct {
	Offset          int64
	LeaderEpoch     int32 // v3+, -1 when absent
	Metadata        string
	CommitTimestamp int64
	ExpireTimestamp int64 // v1 only, -1 when absent
}

// GroupMetadataValue is Kafka's GroupMetadataValue (versions 0-4) for a
// classic group.
type GroupMetadataValue struct {
	ProtocolType          string
	Generation            int32
	Protocol              *string
	Leader                *string
	CurrentStateTimestamp int64 // v2+, -1 when absent
	Members               []MemberMetadata
}

// MemberMetadata is one member of a GroupMetadataValue.
type MemberMetadata struct {
	MemberID         string
	GroupInstanceID  *string // v3+
	ClientID         string
	ClientHost       string
	RebalanceTimeout int32 // v1+, -1 when absent
	SessionTimeout   int32
	Subscription     []byte
	Assignment       []byte
}

// ConsumerMemberValue is Kafka's ConsumerGroupMemberMetadataValue v0.
// Classic is its tagged field 0, ClassicMemberMetadata: set for a member
// that uses the classic protocol in a consumer group (KIP-848 online
// migration), nil (not written) for a consumer protocol member.
type ConsumerMemberValue struct {
	InstanceID         *string
	RackID             *string
	ClientID           string
	ClientHost         string
	SubscribedTopics   []string
	SubscribedRegex    *string
	RebalanceTimeoutMs int32
	ServerAssignor     *string
	Classic            *ClassicMemberMetadata
}

// ClassicMemberMetadata is the session timeout and JoinGroup protocols of a
// classic member of a consumer group.
type ClassicMemberMetadata struct {
	SessionTimeoutMs   int32
	SupportedProtocols []ClassicProtocol
}

// ClassicProtocol is one protocol a classic member listed in its JoinGroup.
type ClassicProtocol struct {
	Name     string
	Metadata []byte
}

// TopicPartitions is one topic's partitions in a KIP-848 assignment record.
type TopicPartitions struct {
	TopicID    [16]byte
	Partitions []int32
	// AssignmentEpochs is tagged field 0 of a current assignment record
	// (Kafka 4.4): the member epoch at which each of Partitions was
	// assigned, nil when not written. Target assignment records leave it
	// nil.
	AssignmentEpochs []int32
}

// CurrentAssignmentValue is Kafka's ConsumerGroupCurrentMemberAssignmentValue v0.
type CurrentAssignmentValue struct {
	MemberEpoch         int32
	PreviousMemberEpoch int32
	State               int8
	Assigned            []TopicPartitions
	PendingRevocation   []TopicPartitions
}

// ---- encoding ----

type enc struct{ b []byte }

func (e *enc) i8(v int8)   { e.b = append(e.b, byte(v)) }
func (e *enc) i16(v int16) { e.b = binary.BigEndian.AppendUint16(e.b, uint16(v)) }
func (e *enc) i32(v int32) { e.b = binary.BigEndian.AppendUint32(e.b, uint32(v)) }
func (e *enc) i64(v int64) { e.b = binary.BigEndian.AppendUint64(e.b, uint64(v)) }
func (e *enc) uv(v uint64) { e.b = binary.AppendUvarint(e.b, v) }

// str writes a non-flexible string (int16 length).
func (e *enc) str(s string) { e.i16(int16(len(s))); e.b = append(e.b, s...) }

// nstr writes a non-flexible nullable string.
func (e *enc) nstr(s *string) {
	if s == nil {
		e.i16(-1)
		return
	}
	e.str(*s)
}

// bytes writes non-flexible bytes (int32 length).
func (e *enc) bytes(p []byte) { e.i32(int32(len(p))); e.b = append(e.b, p...) }

// cstr writes a compact string (uvarint length+1).
func (e *enc) cstr(s string) { e.uv(uint64(len(s)) + 1); e.b = append(e.b, s...) }

// cnstr writes a compact nullable string.
func (e *enc) cnstr(s *string) {
	if s == nil {
		e.uv(0)
		return
	}
	e.cstr(*s)
}

func (e *enc) uuid(id [16]byte) { e.b = append(e.b, id[:]...) }
func (e *enc) noTags()          { e.uv(0) }

type dec struct {
	b   []byte
	err error
}

func (d *dec) need(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = fmt.Errorf("%w: truncated", ErrBadRecord)
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *dec) i8() int8 {
	p := d.need(1)
	if p == nil {
		return 0
	}
	return int8(p[0])
}

func (d *dec) i16() int16 {
	p := d.need(2)
	if p == nil {
		return 0
	}
	return int16(binary.BigEndian.Uint16(p))
}

func (d *dec) i32() int32 {
	p := d.need(4)
	if p == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(p))
}

func (d *dec) i64() int64 {
	p := d.need(8)
	if p == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(p))
}

func (d *dec) uv() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = fmt.Errorf("%w: bad varint", ErrBadRecord)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) str() string {
	n := d.i16()
	if n < 0 {
		d.fail("null string")
		return ""
	}
	return string(d.need(int(n)))
}

func (d *dec) nstr() *string {
	n := d.i16()
	if n < 0 {
		return nil
	}
	s := string(d.need(int(n)))
	return &s
}

func (d *dec) bytes() []byte {
	n := d.i32()
	if n < 0 {
		return nil
	}
	return append([]byte(nil), d.need(int(n))...)
}

// clen reads a compact length; -1 means null.
func (d *dec) clen() int {
	v := d.uv()
	if v > math.MaxInt32 {
		d.fail("length overflow")
		return 0
	}
	return int(v) - 1
}

func (d *dec) cstr() string {
	n := d.clen()
	if n < 0 {
		d.fail("null compact string")
		return ""
	}
	return string(d.need(n))
}

func (d *dec) cnstr() *string {
	n := d.clen()
	if n < 0 {
		return nil
	}
	s := string(d.need(n))
	return &s
}

func (d *dec) uuid() (id [16]byte) {
	copy(id[:], d.need(16))
	return id
}

// skipTags skips a tagged-field section, ignoring every tag: tags Cascade
// does not write carry nothing it acts on.
func (d *dec) skipTags() {
	n := d.uv()
	for i := uint64(0); i < n && d.err == nil; i++ {
		d.uv() // tag
		size := d.uv()
		if size > uint64(len(d.b)) {
			d.fail("tag size")
			return
		}
		d.need(int(size))
	}
}

func (d *dec) fail(why string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrBadRecord, why)
	}
}

// count reads an array length and bounds it by the bytes left, assuming each
// element takes at least min bytes, so a corrupt length cannot force a huge
// allocation.
func (d *dec) count(n int, min int) int {
	if n < 0 {
		return 0
	}
	if d.err == nil && n*min > len(d.b) {
		d.fail("array length")
	}
	if d.err != nil {
		return 0
	}
	return n
}

func (d *dec) done() error {
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrBadRecord, len(d.b))
	}
	return nil
}

// ---- keys ----

// EncodeOffsetCommitKey returns the key bytes of an offset commit.
func EncodeOffsetCommitKey(k OffsetCommitKey) []byte {
	e := enc{}
	e.i16(RecordOffsetCommit)
	e.str(k.Group)
	e.str(k.Topic)
	e.i32(k.Partition)
	return e.b
}

// encodeGroupKey returns a key made of the record type and the group id:
// GroupMetadataKey and the per-group KIP-848 keys.
func encodeGroupKey(typ int16, group string) []byte {
	e := enc{}
	e.i16(typ)
	e.str(group)
	return e.b
}

// encodeMemberKey returns a key made of the record type, group and member id.
func encodeMemberKey(typ int16, group, member string) []byte {
	e := enc{}
	e.i16(typ)
	e.str(group)
	e.str(member)
	return e.b
}

// Key is a decoded __consumer_offsets key.
type Key struct {
	Type      int16
	Group     string
	Topic     string // offset commits
	Partition int32  // offset commits
	Member    string // KIP-848 member records
	Regex     string // regex resolution records
}

// DecodeKey decodes any __consumer_offsets key of a type Cascade knows.
func DecodeKey(b []byte) (Key, error) {
	d := dec{b: b}
	k := Key{Type: d.i16()}
	switch k.Type {
	case RecordLegacyOffsetCommit, RecordOffsetCommit:
		k.Group, k.Topic, k.Partition = d.str(), d.str(), d.i32()
	case RecordGroupMetadata, RecordConsumerGroupMetadata, RecordConsumerGroupPartitionMeta, RecordConsumerGroupTargetMetadata:
		k.Group = d.str()
	case RecordConsumerGroupMemberMetadata, RecordConsumerGroupTargetMember, RecordConsumerGroupCurrentMember:
		k.Group, k.Member = d.str(), d.str()
	case RecordConsumerGroupRegexResolution:
		k.Group, k.Regex = d.str(), d.str()
	default:
		if d.err == nil {
			return k, fmt.Errorf("%w: unknown record type %d", ErrUnknownRecordType, k.Type)
		}
	}
	return k, d.done()
}

// ErrUnknownRecordType reports a key of a record type Cascade does not
// interpret (share and streams groups); replay skips such records.
var ErrUnknownRecordType = errors.New("group: unknown __consumer_offsets record type")

// ---- classic values ----

// EncodeOffsetCommitValue encodes v at version 3, or version 1 when it carries
// an expire timestamp, as Kafka's GroupCoordinatorRecordHelpers does.
func EncodeOffsetCommitValue(v OffsetCommitValue) []byte {
	e := enc{}
	if v.ExpireTimestamp >= 0 {
		e.i16(offsetCommitValueExpireVersion)
		e.i64(v.Offset)
		e.str(v.Metadata)
		e.i64(v.CommitTimestamp)
		e.i64(v.ExpireTimestamp)
		return e.b
	}
	e.i16(offsetCommitValueVersion)
	e.i64(v.Offset)
	e.i32(v.LeaderEpoch)
	e.str(v.Metadata)
	e.i64(v.CommitTimestamp)
	return e.b
}

// DecodeOffsetCommitValue decodes any version (0-4) of an OffsetCommitValue.
func DecodeOffsetCommitValue(b []byte) (OffsetCommitValue, error) {
	d := dec{b: b}
	ver := d.i16()
	v := OffsetCommitValue{LeaderEpoch: -1, ExpireTimestamp: -1}
	if d.err == nil && (ver < 0 || ver > 4) {
		return v, fmt.Errorf("%w: OffsetCommitValue version %d", ErrBadRecord, ver)
	}
	v.Offset = d.i64()
	if ver >= 3 {
		v.LeaderEpoch = d.i32()
	}
	if ver >= 4 {
		v.Metadata = d.cstr()
	} else {
		v.Metadata = d.str()
	}
	v.CommitTimestamp = d.i64()
	if ver == 1 {
		v.ExpireTimestamp = d.i64()
	}
	if ver >= 4 {
		d.skipTags()
	}
	return v, d.done()
}

// EncodeGroupMetadataValue encodes v at version 3.
func EncodeGroupMetadataValue(v GroupMetadataValue) []byte {
	e := enc{}
	e.i16(groupMetadataValueVersion)
	e.str(v.ProtocolType)
	e.i32(v.Generation)
	e.nstr(v.Protocol)
	e.nstr(v.Leader)
	e.i64(v.CurrentStateTimestamp)
	e.i32(int32(len(v.Members)))
	for _, m := range v.Members {
		e.str(m.MemberID)
		e.nstr(m.GroupInstanceID)
		e.str(m.ClientID)
		e.str(m.ClientHost)
		e.i32(m.RebalanceTimeout)
		e.i32(m.SessionTimeout)
		e.bytes(m.Subscription)
		e.bytes(m.Assignment)
	}
	return e.b
}

// DecodeGroupMetadataValue decodes any version (0-4) of a GroupMetadataValue.
func DecodeGroupMetadataValue(b []byte) (GroupMetadataValue, error) {
	d := dec{b: b}
	ver := d.i16()
	v := GroupMetadataValue{CurrentStateTimestamp: -1}
	if d.err == nil && (ver < 0 || ver > 4) {
		return v, fmt.Errorf("%w: GroupMetadataValue version %d", ErrBadRecord, ver)
	}
	flex := ver >= 4
	s := func() string {
		if flex {
			return d.cstr()
		}
		return d.str()
	}
	ns := func() *string {
		if flex {
			return d.cnstr()
		}
		return d.nstr()
	}
	bs := func() []byte {
		if !flex {
			return d.bytes()
		}
		n := d.clen()
		if n < 0 {
			return nil
		}
		return append([]byte(nil), d.need(n)...)
	}
	v.ProtocolType = s()
	v.Generation = d.i32()
	v.Protocol = ns()
	v.Leader = ns()
	if ver >= 2 {
		v.CurrentStateTimestamp = d.i64()
	}
	var n int
	if flex {
		n = d.clen()
	} else {
		n = int(d.i32())
	}
	n = d.count(n, 14)
	for i := 0; i < n && d.err == nil; i++ {
		m := MemberMetadata{RebalanceTimeout: -1}
		m.MemberID = s()
		if ver >= 3 {
			m.GroupInstanceID = ns()
		}
		m.ClientID = s()
		m.ClientHost = s()
		if ver >= 1 {
			m.RebalanceTimeout = d.i32()
		}
		m.SessionTimeout = d.i32()
		m.Subscription = bs()
		m.Assignment = bs()
		if flex {
			d.skipTags()
		}
		v.Members = append(v.Members, m)
	}
	if flex {
		d.skipTags()
	}
	return v, d.done()
}

// ---- KIP-848 values (all flexible, version 0) ----

// value0 checks the version prefix of a KIP-848 value.
func value0(d *dec, name string) error {
	if ver := d.i16(); d.err == nil && ver != 0 {
		return fmt.Errorf("%w: %s version %d", ErrBadRecord, name, ver)
	}
	return d.err
}

// encodeEpochValue encodes ConsumerGroupMetadataValue or
// ConsumerGroupTargetAssignmentMetadataValue: one int32 epoch.
func encodeEpochValue(epoch int32) []byte {
	e := enc{}
	e.i16(0)
	e.i32(epoch)
	e.noTags()
	return e.b
}

func decodeEpochValue(b []byte) (int32, error) {
	d := dec{b: b}
	if err := value0(&d, "epoch value"); err != nil {
		return 0, err
	}
	ep := d.i32()
	d.skipTags()
	return ep, d.done()
}

// EncodeConsumerMemberValue encodes a ConsumerGroupMemberMetadataValue v0.
func EncodeConsumerMemberValue(v ConsumerMemberValue) []byte {
	e := enc{}
	e.i16(0)
	e.cnstr(v.InstanceID)
	e.cnstr(v.RackID)
	e.cstr(v.ClientID)
	e.cstr(v.ClientHost)
	e.uv(uint64(len(v.SubscribedTopics)) + 1)
	for _, t := range v.SubscribedTopics {
		e.cstr(t)
	}
	e.cnstr(v.SubscribedRegex)
	e.i32(v.RebalanceTimeoutMs)
	e.cnstr(v.ServerAssignor)
	if v.Classic == nil {
		e.noTags()
		return e.b
	}
	// Tag 0 holds the nullable struct: a presence byte, then the struct.
	f := enc{}
	f.i8(1)
	f.i32(v.Classic.SessionTimeoutMs)
	f.uv(uint64(len(v.Classic.SupportedProtocols)) + 1)
	for _, p := range v.Classic.SupportedProtocols {
		f.cstr(p.Name)
		f.uv(uint64(len(p.Metadata)) + 1)
		f.b = append(f.b, p.Metadata...)
		f.noTags()
	}
	f.noTags()
	e.uv(1)
	e.uv(0)
	e.uv(uint64(len(f.b)))
	e.b = append(e.b, f.b...)
	return e.b
}

// DecodeConsumerMemberValue decodes a ConsumerGroupMemberMetadataValue v0.
func DecodeConsumerMemberValue(b []byte) (ConsumerMemberValue, error) {
	d := dec{b: b}
	var v ConsumerMemberValue
	if err := value0(&d, "ConsumerGroupMemberMetadataValue"); err != nil {
		return v, err
	}
	v.InstanceID = d.cnstr()
	v.RackID = d.cnstr()
	v.ClientID = d.cstr()
	v.ClientHost = d.cstr()
	n := d.count(d.clen(), 1)
	for i := 0; i < n && d.err == nil; i++ {
		v.SubscribedTopics = append(v.SubscribedTopics, d.cstr())
	}
	v.SubscribedRegex = d.cnstr()
	v.RebalanceTimeoutMs = d.i32()
	v.ServerAssignor = d.cnstr()
	n = int(d.uv())
	for i := 0; i < n && d.err == nil; i++ {
		tag := d.uv()
		size := d.uv()
		if size > uint64(len(d.b)) {
			d.fail("tag size")
			break
		}
		body := d.need(int(size))
		if tag != 0 {
			continue
		}
		f := dec{b: body}
		if f.i8() >= 0 {
			cm := &ClassicMemberMetadata{SessionTimeoutMs: f.i32()}
			np := f.count(f.clen(), 3)
			for j := 0; j < np && f.err == nil; j++ {
				p := ClassicProtocol{Name: f.cstr()}
				if ml := f.clen(); ml >= 0 {
					p.Metadata = append([]byte{}, f.need(ml)...)
				}
				f.skipTags()
				cm.SupportedProtocols = append(cm.SupportedProtocols, p)
			}
			f.skipTags()
			v.Classic = cm
		}
		if err := f.done(); err != nil && d.err == nil {
			d.err = fmt.Errorf("ClassicMemberMetadata: %w", err)
		}
	}
	return v, d.done()
}

func encodeTopicPartitions(e *enc, tps []TopicPartitions) {
	e.uv(uint64(len(tps)) + 1)
	for _, tp := range tps {
		e.uuid(tp.TopicID)
		e.uv(uint64(len(tp.Partitions)) + 1)
		for _, p := range tp.Partitions {
			e.i32(p)
		}
		if tp.AssignmentEpochs == nil {
			e.noTags()
			continue
		}
		f := enc{}
		f.uv(uint64(len(tp.AssignmentEpochs)) + 1)
		for _, ep := range tp.AssignmentEpochs {
			f.i32(ep)
		}
		e.uv(1) // one tagged field
		e.uv(0) // tag 0: AssignmentEpochs
		e.uv(uint64(len(f.b)))
		e.b = append(e.b, f.b...)
	}
}

func decodeTopicPartitions(d *dec) []TopicPartitions {
	n := d.count(d.clen(), 18)
	var out []TopicPartitions
	for i := 0; i < n && d.err == nil; i++ {
		tp := TopicPartitions{TopicID: d.uuid()}
		np := d.count(d.clen(), 4)
		for j := 0; j < np && d.err == nil; j++ {
			tp.Partitions = append(tp.Partitions, d.i32())
		}
		ntags := d.uv()
		for k := uint64(0); k < ntags && d.err == nil; k++ {
			tag, size := d.uv(), d.uv()
			if size > uint64(len(d.b)) {
				d.fail("tag size")
				break
			}
			body := d.need(int(size))
			if tag != 0 || d.err != nil {
				continue
			}
			f := dec{b: body}
			if n := f.clen(); n >= 0 {
				tp.AssignmentEpochs = make([]int32, 0, f.count(n, 4))
				for j := 0; j < n && f.err == nil; j++ {
					tp.AssignmentEpochs = append(tp.AssignmentEpochs, f.i32())
				}
			}
			if err := f.done(); err != nil {
				d.fail("AssignmentEpochs: " + err.Error())
			} else if len(tp.AssignmentEpochs) != len(tp.Partitions) {
				d.fail("AssignmentEpochs length differs from Partitions")
			}
		}
		out = append(out, tp)
	}
	return out
}

// EncodeTargetMemberValue encodes a ConsumerGroupTargetAssignmentMemberValue v0.
func EncodeTargetMemberValue(tps []TopicPartitions) []byte {
	e := enc{}
	e.i16(0)
	encodeTopicPartitions(&e, tps)
	e.noTags()
	return e.b
}

// DecodeTargetMemberValue decodes a ConsumerGroupTargetAssignmentMemberValue v0.
func DecodeTargetMemberValue(b []byte) ([]TopicPartitions, error) {
	d := dec{b: b}
	if err := value0(&d, "ConsumerGroupTargetAssignmentMemberValue"); err != nil {
		return nil, err
	}
	tps := decodeTopicPartitions(&d)
	d.skipTags()
	return tps, d.done()
}

// EncodeCurrentAssignmentValue encodes a
// ConsumerGroupCurrentMemberAssignmentValue v0.
func EncodeCurrentAssignmentValue(v CurrentAssignmentValue) []byte {
	e := enc{}
	e.i16(0)
	e.i32(v.MemberEpoch)
	e.i32(v.PreviousMemberEpoch)
	e.i8(v.State)
	encodeTopicPartitions(&e, v.Assigned)
	encodeTopicPartitions(&e, v.PendingRevocation)
	e.noTags()
	return e.b
}

// DecodeCurrentAssignmentValue decodes a
// ConsumerGroupCurrentMemberAssignmentValue v0.
func DecodeCurrentAssignmentValue(b []byte) (CurrentAssignmentValue, error) {
	d := dec{b: b}
	var v CurrentAssignmentValue
	if err := value0(&d, "ConsumerGroupCurrentMemberAssignmentValue"); err != nil {
		return v, err
	}
	v.MemberEpoch = d.i32()
	v.PreviousMemberEpoch = d.i32()
	v.State = d.i8()
	v.Assigned = decodeTopicPartitions(&d)
	v.PendingRevocation = decodeTopicPartitions(&d)
	d.skipTags()
	return v, d.done()
}

// RegexValue is Kafka's ConsumerGroupRegularExpressionValue v0: the topics
// a group's regular expression matched, the version of the metadata it
// was resolved against and when.
type RegexValue struct {
	Topics    []string
	Version   int64
	Timestamp int64
}

// encodeRegexKey returns the key of a ConsumerGroupRegularExpression
// record: the record type, the group id and the regex.
func encodeRegexKey(group, regex string) []byte {
	return encodeMemberKey(RecordConsumerGroupRegexResolution, group, regex)
}

func encodeRegexValue(v RegexValue) []byte {
	e := enc{}
	e.i16(0)
	e.uv(uint64(len(v.Topics)) + 1)
	for _, t := range v.Topics {
		e.cstr(t)
	}
	e.i64(v.Version)
	e.i64(v.Timestamp)
	e.noTags()
	return e.b
}

// DecodeRegexValue decodes a ConsumerGroupRegularExpressionValue v0.
func DecodeRegexValue(b []byte) (RegexValue, error) {
	d := dec{b: b}
	var v RegexValue
	if err := value0(&d, "ConsumerGroupRegularExpressionValue"); err != nil {
		return v, err
	}
	n := d.count(d.clen(), 1)
	for i := 0; i < n && d.err == nil; i++ {
		v.Topics = append(v.Topics, d.cstr())
	}
	v.Version = d.i64()
	v.Timestamp = d.i64()
	d.skipTags()
	return v, d.done()
}

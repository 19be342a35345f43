package share

import "fmt"

// Record types of the share group records of __consumer_offsets: the
// "apiKey" of Kafka's group-coordinator JSON schemas
// (group-coordinator/src/main/resources/common/message). Type 9,
// ShareGroupPartitionMetadata, was dropped in Kafka 4.1 and is skipped by
// Replay; type 15, ShareGroupStatePartitionMetadata, belongs to the
// initialization of share state, which this package does not write.
const (
	RecordShareGroupMemberMetadata      int16 = 10
	RecordShareGroupMetadata            int16 = 11
	RecordShareGroupTargetMetadata      int16 = 12
	RecordShareGroupTargetMember        int16 = 13
	RecordShareGroupCurrentMember       int16 = 14
	RecordShareGroupStatePartitionMeta  int16 = 15
	recordShareGroupPartitionMetaLegacy int16 = 9
)

// GroupRecord is one key/value pair to append to the __consumer_offsets
// partition of its group. A nil Value is a tombstone.
type GroupRecord struct {
	Partition int32
	Key       []byte
	Value     []byte
}

// GroupKey is a decoded share group key: the record type, the group, and
// the member for the member-scoped types.
type GroupKey struct {
	Type   int16
	Group  string
	Member string
}

// MemberMetadataValue is Kafka's ShareGroupMemberMetadataValue v0.
type MemberMetadataValue struct {
	RackID           *string
	ClientID         string
	ClientHost       string
	SubscribedTopics []string
}

// TopicPartitions is one topic's partitions in an assignment record.
type TopicPartitions struct {
	TopicID    [16]byte
	Partitions []int32
}

// CurrentAssignmentValue is Kafka's ShareGroupCurrentMemberAssignmentValue
// v0.
type CurrentAssignmentValue struct {
	MemberEpoch         int32
	PreviousMemberEpoch int32
	State               int8
	Assigned            []TopicPartitions
}

func memberScoped(typ int16) bool {
	return typ == RecordShareGroupMemberMetadata || typ == RecordShareGroupTargetMember || typ == RecordShareGroupCurrentMember
}

// EncodeGroupKey encodes a share group key: the record type, GroupId, and
// MemberId for the member-scoped types.
func EncodeGroupKey(k GroupKey) []byte {
	var w writer
	w.int16(k.Type)
	w.keyString(k.Group)
	if memberScoped(k.Type) {
		w.keyString(k.Member)
	}
	return w
}

// DecodeGroupKey decodes a share group key; ok is false for a
// __consumer_offsets key of another kind of group.
func DecodeGroupKey(b []byte) (k GroupKey, ok bool, err error) {
	r := reader{b: b}
	k.Type = r.int16()
	if r.err != nil {
		return k, false, r.err
	}
	if k.Type < recordShareGroupPartitionMetaLegacy || k.Type > RecordShareGroupStatePartitionMeta {
		return k, false, nil
	}
	k.Group = r.keyString()
	if memberScoped(k.Type) {
		k.Member = r.keyString()
	}
	return k, true, r.end()
}

// GroupMetadataValue is Kafka's ShareGroupMetadataValue v0: the group
// epoch and the hash of the subscribed topics' metadata (KIP-1101), both
// plain fields.
type GroupMetadataValue struct {
	Epoch        int32
	MetadataHash int64
}

// TargetMetadataValue is Kafka's ShareGroupTargetAssignmentMetadataValue
// v0; AssignmentTimestamp (KIP-1263, Kafka 4.3) is its tagged field 0,
// not written when 0.
type TargetMetadataValue struct {
	AssignmentEpoch     int32
	AssignmentTimestamp int64
}

// The two epoch values are an int32 and an int64, plain in the group
// metadata and tagged in the target metadata, so one codec serves both.

func encodeEpochValue(epoch int32, x int64, tagged bool) []byte {
	var w, tag writer
	w.int16(0)
	w.int32(epoch)
	switch {
	case !tagged:
		w.int64(x)
	case x != 0:
		tag.int64(x)
	}
	w.tag0(tag)
	return w
}

func decodeEpochValue(b []byte, name string, tagged bool) (epoch int32, x int64, err error) {
	r := reader{b: b}
	r.version(name)
	epoch = r.int32()
	if !tagged {
		x = r.int64()
	}
	r.tags(func(tag int, body *reader) {
		if tagged && tag == 0 {
			x = body.int64()
			body.err = body.end()
		}
	})
	return epoch, x, r.end()
}

// EncodeGroupMetadataValue encodes a ShareGroupMetadataValue v0.
func EncodeGroupMetadataValue(v GroupMetadataValue) []byte {
	return encodeEpochValue(v.Epoch, v.MetadataHash, false)
}

// DecodeGroupMetadataValue decodes a ShareGroupMetadataValue v0.
func DecodeGroupMetadataValue(b []byte) (GroupMetadataValue, error) {
	e, h, err := decodeEpochValue(b, "ShareGroupMetadataValue", false)
	return GroupMetadataValue{Epoch: e, MetadataHash: h}, err
}

// EncodeTargetMetadataValue encodes a
// ShareGroupTargetAssignmentMetadataValue v0.
func EncodeTargetMetadataValue(v TargetMetadataValue) []byte {
	return encodeEpochValue(v.AssignmentEpoch, v.AssignmentTimestamp, true)
}

// DecodeTargetMetadataValue decodes a
// ShareGroupTargetAssignmentMetadataValue v0.
func DecodeTargetMetadataValue(b []byte) (TargetMetadataValue, error) {
	e, ts, err := decodeEpochValue(b, "ShareGroupTargetAssignmentMetadataValue", true)
	return TargetMetadataValue{AssignmentEpoch: e, AssignmentTimestamp: ts}, err
}

// EncodeMemberMetadataValue encodes a ShareGroupMemberMetadataValue v0.
func EncodeMemberMetadataValue(v MemberMetadataValue) []byte {
	var w writer
	w.int16(0)
	w.compactString(v.RackID)
	w.compactString(&v.ClientID)
	w.compactString(&v.ClientHost)
	w.arrayLen(len(v.SubscribedTopics))
	for i := range v.SubscribedTopics {
		w.compactString(&v.SubscribedTopics[i])
	}
	w.uvarint(0)
	return w
}

// DecodeMemberMetadataValue decodes a ShareGroupMemberMetadataValue v0.
func DecodeMemberMetadataValue(b []byte) (MemberMetadataValue, error) {
	r := reader{b: b}
	r.version("ShareGroupMemberMetadataValue")
	var v MemberMetadataValue
	v.RackID = r.compactString()
	v.ClientID = deref(r.compactString())
	v.ClientHost = deref(r.compactString())
	v.SubscribedTopics = readArray(&r, 1, func(r *reader) string { return deref(r.compactString()) })
	r.tags(nil)
	return v, r.end()
}

func writeTopicPartitions(w *writer, tps []TopicPartitions) {
	w.arrayLen(len(tps))
	for _, tp := range tps {
		w.raw(tp.TopicID[:])
		w.int32s(tp.Partitions)
		w.uvarint(0)
	}
}

func readTopicPartitions(r *reader) []TopicPartitions {
	return readArray(r, 18, func(r *reader) TopicPartitions {
		tp := TopicPartitions{TopicID: r.uuid(), Partitions: r.int32s()}
		r.tags(nil)
		return tp
	})
}

// EncodeTargetMemberValue encodes a ShareGroupTargetAssignmentMemberValue
// v0.
func EncodeTargetMemberValue(tps []TopicPartitions) []byte {
	var w writer
	w.int16(0)
	writeTopicPartitions(&w, tps)
	w.uvarint(0)
	return w
}

// DecodeTargetMemberValue decodes a ShareGroupTargetAssignmentMemberValue
// v0.
func DecodeTargetMemberValue(b []byte) ([]TopicPartitions, error) {
	r := reader{b: b}
	r.version("ShareGroupTargetAssignmentMemberValue")
	tps := readTopicPartitions(&r)
	r.tags(nil)
	return tps, r.end()
}

// EncodeCurrentAssignmentValue encodes a
// ShareGroupCurrentMemberAssignmentValue v0.
func EncodeCurrentAssignmentValue(v CurrentAssignmentValue) []byte {
	var w writer
	w.int16(0)
	w.int32(v.MemberEpoch)
	w.int32(v.PreviousMemberEpoch)
	w.int8(v.State)
	writeTopicPartitions(&w, v.Assigned)
	w.uvarint(0)
	return w
}

// DecodeCurrentAssignmentValue decodes a
// ShareGroupCurrentMemberAssignmentValue v0.
func DecodeCurrentAssignmentValue(b []byte) (CurrentAssignmentValue, error) {
	r := reader{b: b}
	r.version("ShareGroupCurrentMemberAssignmentValue")
	v := CurrentAssignmentValue{MemberEpoch: r.int32(), PreviousMemberEpoch: r.int32(), State: r.int8()}
	v.Assigned = readTopicPartitions(&r)
	r.tags(nil)
	return v, r.end()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func badType(typ int16) error { return fmt.Errorf("%w: share group record type %d", ErrBadRecord, typ) }

// TopicPartitionsInfo is one topic of a ShareGroupStatePartitionMetadata
// record: its id, name and partitions.
type TopicPartitionsInfo struct {
	TopicID    [16]byte
	TopicName  string
	Partitions []int32
}

// StatePartitionMetadataValue is Kafka's
// ShareGroupStatePartitionMetadataValue v0: the share-partitions of a group
// whose state is being initialized, those initialized, and the topics
// whose state is being deleted.
type StatePartitionMetadataValue struct {
	Initializing []TopicPartitionsInfo
	Initialized  []TopicPartitionsInfo
	Deleting     []TopicPartitionsInfo // partitions unused
}

func writeTopicInfos(w *writer, ts []TopicPartitionsInfo, withPartitions bool) {
	w.arrayLen(len(ts))
	for _, t := range ts {
		w.raw(t.TopicID[:])
		w.compactString(&t.TopicName)
		if withPartitions {
			w.int32s(t.Partitions)
		}
		w.uvarint(0)
	}
}

func readTopicInfos(r *reader, withPartitions bool) []TopicPartitionsInfo {
	return readArray(r, 18, func(r *reader) TopicPartitionsInfo {
		t := TopicPartitionsInfo{TopicID: r.uuid(), TopicName: deref(r.compactString())}
		if withPartitions {
			t.Partitions = r.int32s()
		}
		r.tags(nil)
		return t
	})
}

// EncodeStatePartitionMetadataValue encodes a
// ShareGroupStatePartitionMetadataValue v0.
func EncodeStatePartitionMetadataValue(v StatePartitionMetadataValue) []byte {
	var w writer
	w.int16(0)
	writeTopicInfos(&w, v.Initializing, true)
	writeTopicInfos(&w, v.Initialized, true)
	writeTopicInfos(&w, v.Deleting, false)
	w.uvarint(0)
	return w
}

// DecodeStatePartitionMetadataValue decodes a
// ShareGroupStatePartitionMetadataValue v0.
func DecodeStatePartitionMetadataValue(b []byte) (StatePartitionMetadataValue, error) {
	r := reader{b: b}
	r.version("ShareGroupStatePartitionMetadataValue")
	v := StatePartitionMetadataValue{Initializing: readTopicInfos(&r, true), Initialized: readTopicInfos(&r, true), Deleting: readTopicInfos(&r, false)}
	r.tags(nil)
	return v, r.end()
}

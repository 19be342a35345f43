package share

import "fmt"

// Record types of __share_group_state keys: the int16 that opens a key is
// the "apiKey" of Kafka's share-coordinator JSON schemas
// (share-coordinator/src/main/resources/common/message): ShareSnapshotKey
// is 0 and ShareUpdateKey 1.
const (
	RecordShareSnapshot int16 = 0
	RecordShareUpdate   int16 = 1
)

// tagDeliveryCompleteCount is the tag of DeliveryCompleteCount (KIP-1226,
// Kafka 4.2) in ShareSnapshotValue and ShareUpdateValue.
const tagDeliveryCompleteCount = 0 // written by writer.tag0

// StateKey names one share-partition: a share group's state of one
// topic-partition. It is the body of ShareSnapshotKey and ShareUpdateKey.
type StateKey struct {
	Group     string
	TopicID   [16]byte
	Partition int32
}

// StateBatch is a run of offsets with one delivery state and count, as
// the StateBatches of Kafka's share state records and
// WriteShareGroupState carry it. DeliveryState is 0 (Available), 2
// (Acknowledged) or 4 (Archived).
type StateBatch struct {
	FirstOffset   int64
	LastOffset    int64
	DeliveryState int8
	DeliveryCount int16
}

// SnapshotValue is Kafka's ShareSnapshotValue v0: the whole state of a
// share-partition.
type SnapshotValue struct {
	SnapshotEpoch int32
	StateEpoch    int32
	LeaderEpoch   int32
	StartOffset   int64
	// DeliveryCompleteCount is tagged field 0; -1 (the default) is not
	// written.
	DeliveryCompleteCount int32
	CreateTimestamp       int64
	WriteTimestamp        int64
	StateBatches          []StateBatch
}

// UpdateValue is Kafka's ShareUpdateValue v0: the batches one
// WriteShareGroupState changed, applied over the last snapshot.
type UpdateValue struct {
	SnapshotEpoch         int32
	LeaderEpoch           int32
	StartOffset           int64 // -1 when the write did not move it
	DeliveryCompleteCount int32 // tagged field 0, -1 when absent
	StateBatches          []StateBatch
}

// EncodeStateKey encodes a ShareSnapshotKey (typ RecordShareSnapshot) or
// ShareUpdateKey (RecordShareUpdate): the record type, then GroupId,
// TopicId and Partition, non-flexible.
func EncodeStateKey(typ int16, k StateKey) []byte {
	var w writer
	w.int16(typ)
	w.keyString(k.Group)
	w.raw(k.TopicID[:])
	w.int32(k.Partition)
	return w
}

// DecodeStateKey decodes a __share_group_state key.
func DecodeStateKey(b []byte) (typ int16, k StateKey, err error) {
	r := reader{b: b}
	typ = r.int16()
	if r.err == nil && typ != RecordShareSnapshot && typ != RecordShareUpdate {
		return typ, k, fmt.Errorf("%w: __share_group_state record type %d", ErrBadRecord, typ)
	}
	k.Group = r.keyString()
	k.TopicID = r.uuid()
	k.Partition = r.int32()
	return typ, k, r.end()
}

func writeStateBatches(w *writer, bs []StateBatch) {
	w.arrayLen(len(bs))
	for _, b := range bs {
		w.int64(b.FirstOffset)
		w.int64(b.LastOffset)
		w.int8(b.DeliveryState)
		w.int16(b.DeliveryCount)
		w.uvarint(0)
	}
}

func readStateBatches(r *reader) []StateBatch {
	return readArray(r, 20, func(r *reader) StateBatch {
		b := StateBatch{FirstOffset: r.int64(), LastOffset: r.int64(), DeliveryState: r.int8(), DeliveryCount: r.int16()}
		r.tags(nil)
		return b
	})
}

// writeCompleteCount writes the tagged-field section of a share state
// value: DeliveryCompleteCount when it is not the default -1.
func writeCompleteCount(w *writer, n int32) {
	var body writer
	if n != -1 {
		body.int32(n)
	}
	w.tag0(body)
}

func readCompleteCount(r *reader) int32 {
	n := int32(-1)
	r.tags(func(tag int, body *reader) {
		if tag == tagDeliveryCompleteCount {
			n = body.int32()
			if err := body.end(); err != nil {
				body.err = err
			}
		}
	})
	return n
}

// The two share state values differ only in that a snapshot carries the
// state epoch and timestamps, so one codec serves both.

func encodeStateValue(v SnapshotValue, snapshot bool) []byte {
	var w writer
	w.int16(0)
	w.int32(v.SnapshotEpoch)
	if snapshot {
		w.int32(v.StateEpoch)
	}
	w.int32(v.LeaderEpoch)
	w.int64(v.StartOffset)
	if snapshot {
		w.int64(v.CreateTimestamp)
		w.int64(v.WriteTimestamp)
	}
	writeStateBatches(&w, v.StateBatches)
	writeCompleteCount(&w, v.DeliveryCompleteCount)
	return w
}

func decodeStateValue(b []byte, snapshot bool) (SnapshotValue, error) {
	r := reader{b: b}
	var v SnapshotValue
	r.version(map[bool]string{true: "ShareSnapshotValue", false: "ShareUpdateValue"}[snapshot])
	v.SnapshotEpoch = r.int32()
	if snapshot {
		v.StateEpoch = r.int32()
	}
	v.LeaderEpoch, v.StartOffset = r.int32(), r.int64()
	if snapshot {
		v.CreateTimestamp, v.WriteTimestamp = r.int64(), r.int64()
	}
	v.StateBatches = readStateBatches(&r)
	v.DeliveryCompleteCount = readCompleteCount(&r)
	return v, r.end()
}

// EncodeSnapshotValue encodes a ShareSnapshotValue v0.
func EncodeSnapshotValue(v SnapshotValue) []byte { return encodeStateValue(v, true) }

// DecodeSnapshotValue decodes a ShareSnapshotValue v0.
func DecodeSnapshotValue(b []byte) (SnapshotValue, error) { return decodeStateValue(b, true) }

// EncodeUpdateValue encodes a ShareUpdateValue v0.
func EncodeUpdateValue(u UpdateValue) []byte {
	return encodeStateValue(SnapshotValue{SnapshotEpoch: u.SnapshotEpoch, LeaderEpoch: u.LeaderEpoch, StartOffset: u.StartOffset,
		DeliveryCompleteCount: u.DeliveryCompleteCount, StateBatches: u.StateBatches}, false)
}

// DecodeUpdateValue decodes a ShareUpdateValue v0.
func DecodeUpdateValue(b []byte) (UpdateValue, error) {
	v, err := decodeStateValue(b, false)
	return UpdateValue{SnapshotEpoch: v.SnapshotEpoch, LeaderEpoch: v.LeaderEpoch, StartOffset: v.StartOffset,
		DeliveryCompleteCount: v.DeliveryCompleteCount, StateBatches: v.StateBatches}, err
}

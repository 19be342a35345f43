package txn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// This file encodes and decodes the records of __transaction_state in Apache
// Kafka's schemas (transaction-coordinator TransactionLogKey.json and
// TransactionLogValue.json, written by Kafka's TransactionLog):
//
//	key:   int16 version (0, the coordinator record type), string TransactionalId
//	value: int16 version (0 or 1), ProducerId int64, ProducerEpoch int16,
//	       TransactionTimeoutMs int32, TransactionStatus int8,
//	       TransactionPartitions nullable [ {Topic string, PartitionIds []int32} ],
//	       TransactionLastUpdateTimestampMs int64, TransactionStartTimestampMs int64
//	       v1 (flexible) tags: 0 PreviousProducerId int64 (default -1),
//	       1 NextProducerId int64 (default -1), 2 ClientTransactionVersion int16
//	       (default 0), 3 NextProducerEpoch int16 (default -1)
//
// A record with a null value is a tombstone: the transactional id expired.

// ErrBadRecord is returned by DecodeKey and DecodeValue for bytes that are not
// a well-formed __transaction_state record.
var ErrBadRecord = errors.New("txn: malformed __transaction_state record")

// maxDecodedPartitions bounds the partitions one value may list, so that a
// corrupt length never allocates without bound.
const maxDecodedPartitions = 1 << 20

// Value is the decoded value of one __transaction_state record (Kafka's
// TransactionLogValue).
type Value struct {
	Version                  int16
	ProducerID               int64
	PreviousProducerID       int64 // v1 tag 0
	NextProducerID           int64 // v1 tag 1
	ProducerEpoch            int16
	NextProducerEpoch        int16 // v1 tag 3
	TimeoutMs                int32
	State                    State
	Partitions               []TopicPartition // sorted; nil for Empty
	LastUpdateMs             int64
	StartMs                  int64
	ClientTransactionVersion int16 // v1 tag 2
}

// EncodeKey returns the key of transactionalID's records.
func EncodeKey(transactionalID string) []byte {
	b := make([]byte, 0, 4+len(transactionalID))
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(len(transactionalID)))
	return append(b, transactionalID...)
}

// DecodeKey returns the transactional id of a record key. A key of another
// version is ErrBadRecord, as Kafka's TransactionLog.read reports an unknown
// key version.
func DecodeKey(key []byte) (string, error) {
	r := reader{b: key}
	v := r.i16()
	if r.err == nil && v != 0 {
		return "", fmt.Errorf("%w: key version %d", ErrBadRecord, v)
	}
	id := r.str16()
	if r.err != nil {
		return "", r.err
	}
	if len(r.b) != 0 {
		return "", fmt.Errorf("%w: %d trailing key bytes", ErrBadRecord, len(r.b))
	}
	return id, nil
}

// groupPartitions returns ps grouped by topic, topics and partitions sorted,
// so that encoded values are deterministic.
func groupPartitions(ps []TopicPartition) (topics []string, parts map[string][]int32) {
	parts = make(map[string][]int32)
	for _, tp := range ps {
		if _, ok := parts[tp.Topic]; !ok {
			topics = append(topics, tp.Topic)
		}
		parts[tp.Topic] = append(parts[tp.Topic], tp.Partition)
	}
	sort.Strings(topics)
	for _, t := range topics {
		p := parts[t]
		sort.Slice(p, func(i, j int) bool { return p[i] < p[j] })
	}
	return topics, parts
}

// EncodeValue returns the record value for v at v.Version (0 or 1). As
// Kafka's TransactionLog.valueToBytes, an Empty transaction writes a null
// partition list.
func EncodeValue(v Value) ([]byte, error) {
	if v.Version != 0 && v.Version != 1 {
		return nil, fmt.Errorf("txn: cannot encode value version %d", v.Version)
	}
	if v.State == Empty && len(v.Partitions) > 0 {
		return nil, fmt.Errorf("txn: Empty transaction with %d partitions", len(v.Partitions))
	}
	flex := v.Version >= 1
	b := make([]byte, 0, 64)
	b = binary.BigEndian.AppendUint16(b, uint16(v.Version))
	b = binary.BigEndian.AppendUint64(b, uint64(v.ProducerID))
	b = binary.BigEndian.AppendUint16(b, uint16(v.ProducerEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(v.TimeoutMs))
	b = append(b, byte(v.State))
	if v.State == Empty {
		b = appendLen(b, -1, flex)
	} else {
		topics, parts := groupPartitions(v.Partitions)
		b = appendLen(b, len(topics), flex)
		for _, t := range topics {
			b = appendString(b, t, flex)
			b = appendLen(b, len(parts[t]), flex)
			for _, p := range parts[t] {
				b = binary.BigEndian.AppendUint32(b, uint32(p))
			}
			if flex {
				b = append(b, 0) // no tagged fields in PartitionsSchema
			}
		}
	}
	b = binary.BigEndian.AppendUint64(b, uint64(v.LastUpdateMs))
	b = binary.BigEndian.AppendUint64(b, uint64(v.StartMs))
	if flex {
		type tag struct {
			id  uint64
			val []byte
		}
		var tags []tag
		if v.PreviousProducerID != -1 {
			tags = append(tags, tag{0, binary.BigEndian.AppendUint64(nil, uint64(v.PreviousProducerID))})
		}
		if v.NextProducerID != -1 {
			tags = append(tags, tag{1, binary.BigEndian.AppendUint64(nil, uint64(v.NextProducerID))})
		}
		if v.ClientTransactionVersion != 0 {
			tags = append(tags, tag{2, binary.BigEndian.AppendUint16(nil, uint16(v.ClientTransactionVersion))})
		}
		if v.NextProducerEpoch != -1 {
			tags = append(tags, tag{3, binary.BigEndian.AppendUint16(nil, uint16(v.NextProducerEpoch))})
		}
		b = binary.AppendUvarint(b, uint64(len(tags)))
		for _, t := range tags {
			b = binary.AppendUvarint(b, t.id)
			b = binary.AppendUvarint(b, uint64(len(t.val)))
			b = append(b, t.val...)
		}
	}
	return b, nil
}

// DecodeValue decodes a record value of version 0 or 1. Unknown tagged
// fields are skipped, as Kafka's generated readers do.
func DecodeValue(b []byte) (Value, error) {
	r := reader{b: b}
	v := Value{PreviousProducerID: -1, NextProducerID: -1, NextProducerEpoch: -1}
	v.Version = r.i16()
	if r.err != nil {
		return Value{}, r.err
	}
	if v.Version != 0 && v.Version != 1 {
		return Value{}, fmt.Errorf("%w: value version %d", ErrBadRecord, v.Version)
	}
	flex := v.Version >= 1
	v.ProducerID = r.i64()
	v.ProducerEpoch = r.i16()
	v.TimeoutMs = r.i32()
	v.State = State(r.i8())
	if r.err == nil && !v.State.valid() {
		return Value{}, fmt.Errorf("%w: transaction status %d", ErrBadRecord, v.State)
	}
	nTopics := r.arrayLen(flex)
	total := 0
	for i := 0; i < nTopics && r.err == nil; i++ {
		topic := r.str(flex)
		n := r.arrayLen(flex)
		total += max(n, 0)
		if total > maxDecodedPartitions {
			r.fail("too many partitions")
		}
		for j := 0; j < n && r.err == nil; j++ {
			v.Partitions = append(v.Partitions, TopicPartition{Topic: topic, Partition: r.i32()})
		}
		if flex {
			r.skipTags(nil)
		}
	}
	v.LastUpdateMs = r.i64()
	v.StartMs = r.i64()
	if flex {
		r.skipTags(func(tag uint64, val []byte) {
			vr := reader{b: val}
			switch tag {
			case 0:
				v.PreviousProducerID = vr.i64()
			case 1:
				v.NextProducerID = vr.i64()
			case 2:
				v.ClientTransactionVersion = vr.i16()
			case 3:
				v.NextProducerEpoch = vr.i16()
			default:
				return
			}
			if vr.err != nil || len(vr.b) != 0 {
				r.fail(fmt.Sprintf("bad tagged field %d", tag))
			}
		})
	}
	if r.err != nil {
		return Value{}, r.err
	}
	if len(r.b) != 0 {
		return Value{}, fmt.Errorf("%w: %d trailing value bytes", ErrBadRecord, len(r.b))
	}
	if v.State == Empty {
		// As Kafka's TransactionLog.read: partitions of an Empty
		// transaction are ignored.
		v.Partitions = nil
	}
	sortPartitions(v.Partitions)
	return v, nil
}

func appendLen(b []byte, n int, flex bool) []byte {
	if flex {
		return binary.AppendUvarint(b, uint64(n+1))
	}
	return binary.BigEndian.AppendUint32(b, uint32(int32(n)))
}

func appendString(b []byte, s string, flex bool) []byte {
	if flex {
		b = binary.AppendUvarint(b, uint64(len(s)+1))
	} else {
		b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	}
	return append(b, s...)
}

// reader is a bounds-checked big-endian reader with a sticky error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(why string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrBadRecord, why)
	}
	r.b = nil
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.fail("truncated")
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) i8() int8 {
	if p := r.take(1); p != nil {
		return int8(p[0])
	}
	return 0
}

func (r *reader) i16() int16 {
	if p := r.take(2); p != nil {
		return int16(binary.BigEndian.Uint16(p))
	}
	return 0
}

func (r *reader) i32() int32 {
	if p := r.take(4); p != nil {
		return int32(binary.BigEndian.Uint32(p))
	}
	return 0
}

func (r *reader) i64() int64 {
	if p := r.take(8); p != nil {
		return int64(binary.BigEndian.Uint64(p))
	}
	return 0
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// arrayLen reads an array length; a null array reads as 0 elements. A length
// larger than the remaining bytes could hold is rejected before allocation.
func (r *reader) arrayLen(flex bool) int {
	var n int64
	if flex {
		n = int64(r.uvarint()) - 1
	} else {
		n = int64(r.i32())
	}
	if r.err != nil || n < 0 {
		if n < -1 {
			r.fail("negative array length")
		}
		return 0
	}
	if n > int64(len(r.b)) {
		r.fail("array longer than record")
		return 0
	}
	return int(n)
}

func (r *reader) str16() string {
	n := r.i16()
	if n < 0 {
		r.fail("null string")
		return ""
	}
	return string(r.take(int(n)))
}

func (r *reader) str(flex bool) string {
	if !flex {
		return r.str16()
	}
	n := int64(r.uvarint()) - 1
	if r.err == nil && (n < 0 || n > int64(len(r.b))) {
		r.fail("bad compact string length")
		return ""
	}
	return string(r.take(int(n)))
}

// skipTags reads a tagged-field section, passing each field to fn when set.
func (r *reader) skipTags(fn func(tag uint64, val []byte)) {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("too many tagged fields")
		return
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		tag := r.uvarint()
		size := r.uvarint()
		if size > uint64(len(r.b)) {
			r.fail("tagged field longer than record")
			return
		}
		val := r.take(int(size))
		if fn != nil && r.err == nil {
			fn(tag, val)
		}
	}
}

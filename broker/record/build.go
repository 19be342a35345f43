package record

import (
	"encoding/binary"
	"errors"
)

// Rec is one record to build. Timestamp is absolute (ms); OffsetDelta is the
// record's offset relative to the batch base offset.
type Rec struct {
	OffsetDelta int32
	Timestamp   int64
	Key         []byte // nil for a null key
	Value       []byte // nil for a null value (a tombstone)
	Headers     []Header
}

// Spec describes a batch to build.
type Spec struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	Codec                Codec
	LogAppendTime        bool
	Transactional        bool
	Control              bool
	ProducerID           int64 // -1 for none
	ProducerEpoch        int16 // -1 for none
	BaseSequence         int32 // -1 for none
	// LastOffsetDelta overrides the last record's delta when >= 0; the log
	// cleaner uses it to keep a batch's offset range after removing records.
	LastOffsetDelta int32
	// BaseTimestamp is used for an empty batch, or as the delete horizon
	// when DeleteHorizon is set (KIP-534).
	BaseTimestamp int64
	DeleteHorizon bool
	Records       []Rec
}

// NewSpec returns a Spec with "none" producer fields and no override.
func NewSpec(records ...Rec) Spec {
	for i := range records {
		records[i].OffsetDelta = int32(i)
	}
	return Spec{
		PartitionLeaderEpoch: NoPartitionLeaderEpoch,
		ProducerID:           NoProducerID,
		ProducerEpoch:        NoProducerEpoch,
		BaseSequence:         NoSequence,
		LastOffsetDelta:      -1,
		BaseTimestamp:        NoTimestamp,
		Records:              records,
	}
}

// AppendVarint appends the zig-zag varint encoding of v, as Kafka's
// ByteUtils.writeVarlong.
func AppendVarint(dst []byte, v int64) []byte { return binary.AppendVarint(dst, v) }

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return AppendVarint(dst, -1)
	}
	dst = AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

// AppendRecord appends one encoded record (DefaultRecord.writeTo).
func AppendRecord(dst []byte, r Rec, baseTimestamp int64) []byte {
	var body []byte
	body = append(body, 0) // attributes: unused, always 0
	body = AppendVarint(body, r.Timestamp-baseTimestamp)
	body = AppendVarint(body, int64(r.OffsetDelta))
	body = appendBytes(body, r.Key)
	body = appendBytes(body, r.Value)
	body = AppendVarint(body, int64(len(r.Headers)))
	for _, h := range r.Headers {
		body = appendBytes(body, h.Key)
		body = appendBytes(body, h.Value)
	}
	dst = AppendVarint(dst, int64(len(body)))
	return append(dst, body...)
}

// Build encodes a complete batch with a correct CRC.
func Build(s Spec) (Batch, error) {
	if s.Control && len(s.Records) != 1 {
		return nil, errors.New("record: a control batch holds exactly one record")
	}
	base, maxTS := s.BaseTimestamp, int64(NoTimestamp)
	if len(s.Records) > 0 && !s.DeleteHorizon {
		base = s.Records[0].Timestamp
	}
	for _, r := range s.Records {
		maxTS = max(maxTS, r.Timestamp)
	}
	if len(s.Records) == 0 {
		maxTS = base
	}
	lastDelta := s.LastOffsetDelta
	if lastDelta < 0 && len(s.Records) > 0 {
		lastDelta = s.Records[len(s.Records)-1].OffsetDelta
	}
	lastDelta = max(lastDelta, 0)
	var payload []byte
	for _, r := range s.Records {
		payload = AppendRecord(payload, r, base)
	}
	payload, err := Compress(s.Codec, payload)
	if err != nil {
		return nil, err
	}
	b := make(Batch, HeaderSize+len(payload))
	copy(b[HeaderSize:], payload)
	attrs := uint16(s.Codec) & compressionMask
	if s.LogAppendTime {
		attrs |= timestampTypeMask
	}
	if s.Transactional {
		attrs |= transactionalMask
	}
	if s.Control {
		attrs |= controlMask
	}
	if s.DeleteHorizon {
		attrs |= deleteHorizonMask
	}
	be := binary.BigEndian
	be.PutUint64(b[baseOffsetPos:], uint64(s.BaseOffset))
	be.PutUint32(b[batchLengthPos:], uint32(len(b)-LogOverhead))
	be.PutUint32(b[partitionLeaderEpochPos:], uint32(s.PartitionLeaderEpoch))
	b[magicPos] = 2
	be.PutUint16(b[attributesPos:], attrs)
	be.PutUint32(b[lastOffsetDeltaPos:], uint32(lastDelta))
	be.PutUint64(b[baseTimestampPos:], uint64(base))
	be.PutUint64(b[maxTimestampPos:], uint64(maxTS))
	be.PutUint64(b[producerIDPos:], uint64(s.ProducerID))
	be.PutUint16(b[producerEpochPos:], uint16(s.ProducerEpoch))
	be.PutUint32(b[baseSequencePos:], uint32(s.BaseSequence))
	be.PutUint32(b[recordCountPos:], uint32(len(s.Records)))
	b.UpdateCRC()
	return b, nil
}

// ControlBatch builds a transaction marker batch as Kafka's
// MemoryRecords.withEndTransactionMarker writes it: transactional and
// control attributes, the producer's id and epoch, no sequence, one record
// whose key is (version 0, type) and value is (version 0, coordinatorEpoch).
func ControlBatch(producerID int64, epoch int16, commit bool, coordinatorEpoch int32, timestamp int64) Batch {
	typ := ControlAbort
	if commit {
		typ = ControlCommit
	}
	key := make([]byte, 4)
	binary.BigEndian.PutUint16(key[2:], uint16(typ))
	value := make([]byte, 6)
	binary.BigEndian.PutUint32(value[2:], uint32(coordinatorEpoch))
	s := NewSpec(Rec{Timestamp: timestamp, Key: key, Value: value})
	s.Transactional, s.Control = true, true
	s.ProducerID, s.ProducerEpoch = producerID, epoch
	b, err := Build(s)
	if err != nil {
		// Build fails only for an unknown codec or a bad control spec,
		// neither of which can happen here.
		panic(err)
	}
	return b
}

package record

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Record is one record decoded from a batch. Key, Value and the header bytes
// alias the batch (or its decompressed payload); a null key or value is nil.
type Record struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	Key            []byte
	Value          []byte
	NumHeaders     int
	headers        []byte
}

// Header is one record header; a null value is nil.
type Header struct {
	Key   []byte
	Value []byte
}

// Headers decodes the record's headers. Bounds were checked by the iterator.
func (r Record) Headers() []Header {
	hs := make([]Header, 0, r.NumHeaders)
	p := r.headers
	for i := 0; i < r.NumHeaders; i++ {
		var k, v []byte
		k, p, _ = readBytes(p)
		v, p, _ = readBytes(p)
		hs = append(hs, Header{Key: k, Value: v})
	}
	return hs
}

// Iter walks the varint-encoded records of a batch payload (Kafka's
// DefaultRecord.readFrom). It checks every length against the buffer, so a
// malformed payload ends the iteration with Err set instead of panicking.
type Iter struct {
	data  []byte
	left  int32
	index int32
	err   error
}

// NewIter iterates over count records in data (an uncompressed payload).
func NewIter(data []byte, count int32) Iter { return Iter{data: data, left: count} }

// Err returns the first decoding error. After Next returned false with no
// error, it also reports bytes left over after the declared count.
func (it *Iter) Err() error { return it.err }

// Next decodes the next record. It returns false at the end or on error.
func (it *Iter) Next() (Record, bool) {
	if it.err != nil {
		return Record{}, false
	}
	if it.left <= 0 {
		if len(it.data) != 0 {
			it.err = fmt.Errorf("%w: %d bytes after the last record", ErrRecords, len(it.data))
		}
		return Record{}, false
	}
	r, rest, err := readRecord(it.data)
	if err != nil {
		it.err = fmt.Errorf("%w: record %d: %v", ErrRecords, it.index, err)
		return Record{}, false
	}
	it.data = rest
	it.left--
	it.index++
	return r, true
}

func readVarint(p []byte) (int64, []byte, error) {
	if len(p) > 0 && p[0] < 0x80 { // one-byte zig-zag varint, the common case
		u := int64(p[0])
		return (u >> 1) ^ -(u & 1), p[1:], nil
	}
	v, n := binary.Varint(p)
	if n <= 0 {
		return 0, nil, fmt.Errorf("bad varint")
	}
	return v, p[n:], nil
}

func readVarint32(p []byte) (int32, []byte, error) {
	v, rest, err := readVarint(p)
	if err != nil {
		return 0, nil, err
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, nil, fmt.Errorf("varint %d overflows int32", v)
	}
	return int32(v), rest, nil
}

// readBytes reads a varint length then that many bytes; -1 means null.
func readBytes(p []byte) ([]byte, []byte, error) {
	n, p, err := readVarint32(p)
	if err != nil {
		return nil, nil, err
	}
	if n == -1 {
		return nil, p, nil
	}
	if n < 0 || int(n) > len(p) {
		return nil, nil, fmt.Errorf("length %d out of range", n)
	}
	return p[:n:n], p[n:], nil
}

func readRecord(p []byte) (Record, []byte, error) {
	var r Record
	size, p, err := readVarint32(p)
	if err != nil {
		return r, nil, err
	}
	if size < 0 || int(size) > len(p) {
		return r, nil, fmt.Errorf("record size %d out of range", size)
	}
	if err := parseBody(&r, p[:size], size); err != nil {
		return r, nil, err
	}
	return r, p[size:], nil
}

// parseBody decodes a record body of size bytes (DefaultRecord.readFrom
// after the length): every field must lie within it and fill it exactly.
func parseBody(r *Record, body []byte, size int32) error {
	if len(body) < 1 {
		return fmt.Errorf("empty record")
	}
	var err error
	r.Attributes = int8(body[0])
	body = body[1:]
	if r.TimestampDelta, body, err = readVarint(body); err != nil {
		return err
	}
	if r.OffsetDelta, body, err = readVarint32(body); err != nil {
		return err
	}
	if r.Key, body, err = readBytes(body); err != nil {
		return err
	}
	if r.Value, body, err = readBytes(body); err != nil {
		return err
	}
	n, body, err := readVarint32(body)
	if err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("negative header count %d", n)
	}
	// Each header takes at least two bytes, which bounds n by the body.
	if int(n) > len(body)/2 {
		return fmt.Errorf("header count %d exceeds the record", n)
	}
	r.NumHeaders = int(n)
	hdrStart := body
	for i := int32(0); i < n; i++ {
		var k []byte
		if k, body, err = readBytes(body); err != nil {
			return err
		}
		if k == nil {
			return fmt.Errorf("null header key")
		}
		if _, body, err = readBytes(body); err != nil {
			return err
		}
	}
	r.headers = hdrStart[:len(hdrStart)-len(body)]
	if len(body) != 0 {
		return fmt.Errorf("record size %d leaves %d unread bytes", size, len(body))
	}
	return nil
}

// Records returns an iterator over the batch's records, decompressing the
// payload if needed. limit caps the decompressed size in bytes; scratch, if
// large enough, is reused for the decompressed bytes.
func (b Batch) Records(limit int, scratch []byte) (Iter, error) {
	if b.Codec() == CodecNone {
		return NewIter(b.Payload(), b.RecordCount()), nil
	}
	data, err := Decompress(b.Codec(), b.Payload(), limit, scratch)
	if err != nil {
		return Iter{}, err
	}
	return NewIter(data, b.RecordCount()), nil
}

// ValidateRecords checks the records inside the batch as Kafka's
// LogValidator does (see Check, which it calls without record checks):
// each record parses within its declared size, offset deltas run 0,1,2,...
// without gaps, the number of records equals recordCount, and a control
// batch holds exactly one well-formed control record. limit caps the
// decompressed size; a compressed payload is streamed, never inflated whole.
func (b Batch) ValidateRecords(limit int) error {
	_, err := b.Check(Checks{Limits: Limits{MaxBytes: limit}})
	return err
}

// ControlType is the type of a control record (Kafka's ControlRecordType).
type ControlType int16

// Control record types.
const (
	ControlAbort  ControlType = 0
	ControlCommit ControlType = 1
)

// Control is a decoded transaction marker (Kafka's EndTransactionMarker).
type Control struct {
	Type             ControlType
	CoordinatorEpoch int32
}

// ParseControl decodes a control record: the key is version int16 and type
// int16; for commit and abort the value is version int16 and coordinator
// epoch int32. Other types (such as KRaft's) are returned with epoch -1.
func ParseControl(r Record) (Control, error) {
	if len(r.Key) < 4 {
		return Control{}, fmt.Errorf("%w: key of %d bytes", ErrControl, len(r.Key))
	}
	if v := int16(binary.BigEndian.Uint16(r.Key)); v < 0 {
		return Control{}, fmt.Errorf("%w: key version %d", ErrControl, v)
	}
	c := Control{Type: ControlType(binary.BigEndian.Uint16(r.Key[2:])), CoordinatorEpoch: -1}
	if c.Type == ControlAbort || c.Type == ControlCommit {
		if len(r.Value) < 6 {
			return Control{}, fmt.Errorf("%w: marker value of %d bytes", ErrControl, len(r.Value))
		}
		c.CoordinatorEpoch = int32(binary.BigEndian.Uint32(r.Value[2:]))
	}
	return c, nil
}

// ControlOf decodes the marker of a control batch.
func (b Batch) ControlOf() (Control, error) {
	if !b.Control() {
		return Control{}, fmt.Errorf("%w: not a control batch", ErrControl)
	}
	it, err := b.Records(1<<16, nil)
	if err != nil {
		return Control{}, err
	}
	r, ok := it.Next()
	if !ok {
		if it.Err() != nil {
			return Control{}, it.Err()
		}
		return Control{}, fmt.Errorf("%w: empty control batch", ErrControl)
	}
	return ParseControl(r)
}

package share

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrBadRecord reports a __share_group_state or share group
// __consumer_offsets key or value that Cascade cannot decode.
var ErrBadRecord = errors.New("share: malformed record")

// writer appends Kafka's primitive types: keys use the non-flexible
// encodings (int16-prefixed strings), values the flexible ones (compact
// strings and arrays, tagged fields).
type writer []byte

func (w *writer) int8(v int8)   { *w = append(*w, byte(v)) }
func (w *writer) int16(v int16) { *w = binary.BigEndian.AppendUint16(*w, uint16(v)) }
func (w *writer) int32(v int32) { *w = binary.BigEndian.AppendUint32(*w, uint32(v)) }
func (w *writer) int64(v int64) { *w = binary.BigEndian.AppendUint64(*w, uint64(v)) }
func (w *writer) uvarint(v int) { *w = binary.AppendUvarint(*w, uint64(v)) }
func (w *writer) raw(p []byte)  { *w = append(*w, p...) }

// keyString is a non-flexible STRING: int16 length, bytes.
func (w *writer) keyString(s string) { w.int16(int16(len(s))); w.raw([]byte(s)) }

// compactString is a flexible COMPACT_STRING: uvarint length+1, bytes;
// nil writes the null string (length 0).
func (w *writer) compactString(s *string) {
	if s == nil {
		w.uvarint(0)
		return
	}
	w.uvarint(len(*s) + 1)
	w.raw([]byte(*s))
}

// arrayLen opens a COMPACT_ARRAY of n elements.
func (w *writer) arrayLen(n int) { w.uvarint(n + 1) }

// int32s writes a COMPACT_ARRAY of int32.
func (w *writer) int32s(vs []int32) {
	w.arrayLen(len(vs))
	for _, v := range vs {
		w.int32(v)
	}
}

// tag0 writes a tagged-field section: empty when body is nil, else tag 0
// holding body. Every share record has at most that one tagged field.
func (w *writer) tag0(body writer) {
	if body == nil {
		w.uvarint(0)
		return
	}
	w.uvarint(1)
	w.uvarint(0)
	w.uvarint(len(body))
	w.raw(body)
}

// reader decodes what writer encodes; the first failure sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = fmt.Errorf("%w: %d bytes wanted, %d left", ErrBadRecord, n, len(r.b))
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) int8() int8 {
	if p := r.take(1); p != nil {
		return int8(p[0])
	}
	return 0
}

func (r *reader) int16() int16 {
	if p := r.take(2); p != nil {
		return int16(binary.BigEndian.Uint16(p))
	}
	return 0
}

func (r *reader) int32() int32 {
	if p := r.take(4); p != nil {
		return int32(binary.BigEndian.Uint32(p))
	}
	return 0
}

func (r *reader) int64() int64 {
	if p := r.take(8); p != nil {
		return int64(binary.BigEndian.Uint64(p))
	}
	return 0
}

func (r *reader) uvarint() int {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > uint64(len(r.b))+1 {
		// No length in these records can exceed what is left.
		r.err = fmt.Errorf("%w: bad varint", ErrBadRecord)
		return 0
	}
	r.b = r.b[n:]
	return int(v)
}

func (r *reader) uuid() (id [16]byte) {
	copy(id[:], r.take(16))
	return id
}

func (r *reader) keyString() string {
	n := r.int16()
	return string(r.take(int(n)))
}

func (r *reader) compactString() *string {
	n := r.uvarint()
	if n == 0 || r.err != nil {
		return nil
	}
	s := string(r.take(n - 1))
	return &s
}

// arrayLen reads a non-null COMPACT_ARRAY length whose elements take at
// least min bytes each, so a forged length cannot allocate more than the
// record holds.
func (r *reader) arrayLen(min int) int {
	n := r.uvarint() - 1
	if r.err == nil && (n < 0 || n*min > len(r.b)) {
		r.err = fmt.Errorf("%w: array of %d", ErrBadRecord, n)
	}
	if r.err != nil {
		return 0
	}
	return n
}

// int32s reads a COMPACT_ARRAY of int32.
func (r *reader) int32s() []int32 { return readArray(r, 4, (*reader).int32) }

// readArray reads a COMPACT_ARRAY whose elements take at least min bytes,
// each with elem, stopping at the first failure.
func readArray[T any](r *reader, min int, elem func(*reader) T) []T {
	n := r.arrayLen(min)
	out := make([]T, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		out = append(out, elem(r))
	}
	return out
}

// tags reads a tagged-field section, handing each field to f (which may be
// nil); unknown tags are skipped, as Kafka's generated readers do.
func (r *reader) tags(f func(tag int, body *reader)) {
	n := r.uvarint()
	for i := 0; i < n && r.err == nil; i++ {
		tag := r.uvarint()
		size := r.uvarint()
		body := &reader{b: r.take(size)}
		if r.err == nil && f != nil {
			f(tag, body)
			if body.err != nil {
				r.err = body.err
			}
		}
	}
}

// version reads a value's int16 version and checks it is 0, the only
// version of every share record value.
func (r *reader) version(name string) {
	if v := r.int16(); r.err == nil && v != 0 {
		r.err = fmt.Errorf("%w: %s version %d", ErrBadRecord, name, v)
	}
}

// end reports the sticky error, or trailing bytes.
func (r *reader) end() error {
	if r.err == nil && len(r.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrBadRecord, len(r.b))
	}
	return r.err
}

package wire

import (
	"encoding/binary"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/record"
)

// ReservationSlack is added to every reservation: the request struct, the
// header's client id and the handler's own small allocations.
const ReservationSlack = 16 << 10

// MinAPIFrameCap is the least per-API frame cap: whatever an API's
// amplification, frames up to this size are read (if socket.request.max.bytes
// allows them).
const MinAPIFrameCap = 1 << 20

// DecodeAmplification returns the most bytes decoding a frame of key at
// version may allocate per frame byte, frame buffer included, as measured by
// TestDecodeAmplification. Flexible versions amplify most, through unknown
// tagged fields, which kmsg keeps in a map.
func DecodeAmplification(key, version int16) int {
	a, ok := decodeAmplification[key]
	if !ok {
		return maxAmplification
	}
	if isFlexible(key, version) {
		return a[1]
	}
	return a[0]
}

// maxAmplification is the factor assumed for a key missing from the table.
var maxAmplification = func() int {
	m := 1
	for _, a := range decodeAmplification {
		m = max(m, a[0], a[1])
	}
	return m
}()

func isFlexible(key, version int16) bool {
	req := kmsg.RequestForKey(key)
	if req == nil {
		return false
	}
	req.SetVersion(min(version, req.MaxVersion()))
	return req.IsFlexible()
}

// sizeScanned reports whether the server sizes key's requests by scanning
// their body (sizeEstimate) rather than by the worst-case factor alone. These
// are the APIs whose legitimate requests may be as large as
// socket.request.max.bytes: Produce and Metadata, and the decodeCapped APIs
// (scan.go).
func sizeScanned(key int16) bool {
	return key == produceKey || key == metadataKey || decodeCapped(key)
}

// APIFrameCap returns the largest frame of key the server reads when
// socket.request.max.bytes is maxRequest. Produce, Metadata and the
// decodeCapped APIs (offset commits, ListOffsets, DescribeConfigs,
// CreateTopics, JoinGroup, SyncGroup) may use all of it, as in Kafka. Every
// other API is capped so that its worst-case decode (frame × amplification)
// stays within one maximum-size frame, but never below MinAPIFrameCap: their
// legitimate requests are far smaller.
func APIFrameCap(key, version int16, maxRequest int32) int32 {
	if sizeScanned(key) {
		return maxRequest
	}
	c := max(int32(MinAPIFrameCap), maxRequest/int32(DecodeAmplification(key, version)))
	return min(c, maxRequest)
}

// Reservation returns the bytes reserved from the Budget before a frame of n
// bytes of key at version is read: enough for its frame buffer and the
// worst-case decode of any frame of that size.
func Reservation(key, version int16, n int32) int64 {
	return int64(n)*int64(DecodeAmplification(key, version)) + ReservationSlack
}

// readReservation returns the bytes the server reserves before reading a
// frame of n bytes of key at version when socket.request.max.bytes is
// maxRequest: Reservation, except that a decodeCapped API never reserves
// more than decodeCap(maxRequest). clipped reports that the reservation is
// below Reservation; the scan must then show that decoding fits in it, or
// the connection is closed (see decodeCapped).
func readReservation(key, version int16, n, maxRequest int32) (r int64, clipped bool) {
	r = Reservation(key, version, n)
	if decodeCapped(key) {
		if c := decodeCap(maxRequest); c < r {
			return c, true
		}
	}
	return r, false
}

// decodeCap is the most a request of a decodeCapped API may decode to when
// socket.request.max.bytes is maxRequest: twice the largest frame, plus
// slack. A well-formed request decodes to about its frame (which the byte
// fields alias), a copy of its strings (at most the frame again) and its
// structs, so the string-heavy requests that grow large (offset metadata,
// group assignments and subscriptions, topic configs) all fit up to
// socket.request.max.bytes, as they do in Kafka; only requests made of
// millions of near-empty elements, which no client sends, exceed it.
func decodeCap(maxRequest int32) int64 {
	return 2*int64(maxRequest) + ReservationSlack
}

const (
	produceKey  = 0
	metadataKey = 3
)

// Per-element costs of a decoded request, for sizeEstimate. Slices are
// allocated whole, strings are copied, and each unknown tagged field costs a
// map entry (measured at about 125 bytes with map growth).
const (
	stringCost = 32  // string header in a *string, plus size-class rounding
	tagCost    = 160 // one unknown tagged field
)

// sizeEstimate returns an upper bound of what decoding body (a request of a
// sizeScanned key at version, after the header) allocates, frame buffer
// included, by walking its arrays. ok is false when the body is not a
// well-formed request; kmsg then rejects it and the worst-case reservation
// stays in place.
func sizeEstimate(key, version int16, body []byte) (int64, bool) {
	s := scanner{b: body, flexible: isFlexible(key, version)}
	var est int64
	switch key {
	case produceKey:
		est = s.produce(version)
	case metadataKey:
		est = s.metadata(version)
	default:
		var ok bool
		if est, ok = s.scanBody(key, version); !ok {
			return 0, false
		}
	}
	if s.bad {
		return 0, false
	}
	return int64(len(body)) + est + ReservationSlack, true
}

// produceDecompression returns the most decoder memory validating one of
// a Produce body's record sets may hold (a zstd window, LZ4 blocks, a
// snappy block), read from the batch headers alone: the handler validates
// the sets one after another while the request is served, so a Produce
// holds this much beside its frame until its answer is built. A body that
// does not scan returns 0: it is refused before anything is validated.
func produceDecompression(version int16, body []byte, limits record.Limits) int64 {
	s := scanner{b: body, flexible: isFlexible(produceKey, version), limits: &limits}
	s.produce(version)
	if s.bad {
		return 0
	}
	return s.decompress
}

// scanner walks a request body the way kmsg's generated decoders do.
type scanner struct {
	b        []byte
	flexible bool
	bad      bool
	// limits, when set, are the record limits Produce's batches are
	// validated under, and decompress becomes the most decoder memory
	// (record.SetDecodeMemory) any of its record sets needs: they are
	// validated one at a time.
	limits     *record.Limits
	decompress int64
}

func (s *scanner) skip(n int) {
	if s.bad || n < 0 || n > len(s.b) {
		s.bad = true
		s.b = nil
		return
	}
	s.b = s.b[n:]
}

func (s *scanner) uvarint() uint64 {
	if s.bad {
		return 0
	}
	v, n := binary.Uvarint(s.b)
	if n <= 0 {
		s.bad = true
		return 0
	}
	s.b = s.b[n:]
	return v
}

func (s *scanner) int16() int16 {
	if s.bad || len(s.b) < 2 {
		s.bad = true
		return 0
	}
	v := int16(binary.BigEndian.Uint16(s.b))
	s.b = s.b[2:]
	return v
}

func (s *scanner) int32() int32 {
	if s.bad || len(s.b) < 4 {
		s.bad = true
		return 0
	}
	v := int32(binary.BigEndian.Uint32(s.b))
	s.b = s.b[4:]
	return v
}

// length reads a string, bytes or array length: int16 or int32 when not
// flexible (by wide), uvarint-1 when flexible. -1 is null.
func (s *scanner) length(wide bool) int {
	if s.flexible {
		v := s.uvarint()
		if v > 1<<31 {
			s.bad = true
			return 0
		}
		return int(v) - 1
	}
	if wide {
		return int(s.int32())
	}
	return int(s.int16())
}

// str skips a (nullable) string and returns its decoded cost.
func (s *scanner) str() int64 {
	n := s.length(false)
	if n <= 0 {
		return stringCost
	}
	s.skip(n)
	return int64(n) + stringCost
}

// array reads an array length and returns the element count (0 for null).
func (s *scanner) array() int {
	n := s.length(true)
	if n < 0 {
		return 0
	}
	if n > len(s.b) {
		s.bad = true
		return 0
	}
	return n
}

// tags skips a tagged-field section and returns its decoded cost.
func (s *scanner) tags() int64 {
	if !s.flexible {
		return 0
	}
	var cost int64
	for n := s.uvarint(); n > 0 && !s.bad; n-- {
		s.uvarint()
		s.skip(int(min(s.uvarint(), 1<<31)))
		cost += tagCost
	}
	return cost
}

func sliceCost(n int, elem uintptr) int64 {
	// Size-class rounding wastes at most an eighth of a large slice.
	return int64(n) * int64(elem) * 9 / 8
}

func (s *scanner) produce(version int16) int64 {
	var cost int64
	if version >= 3 {
		cost += s.str() // TransactionalID
	}
	s.int16() // Acks
	s.int32() // TimeoutMillis
	topics := s.array()
	cost += sliceCost(topics, unsafe.Sizeof(kmsg.ProduceRequestTopic{}))
	for i := 0; i < topics && !s.bad; i++ {
		if version >= 13 {
			s.skip(16)
		} else {
			cost += s.str()
		}
		parts := s.array()
		cost += sliceCost(parts, unsafe.Sizeof(kmsg.ProduceRequestTopicPartition{}))
		for j := 0; j < parts && !s.bad; j++ {
			s.int32()                       // Partition
			if n := s.length(true); n > 0 { // Records alias the frame
				if s.limits != nil && n <= len(s.b) {
					// A set validation would refuse holds what its
					// batches before the bad one need, at most.
					mem, _ := record.SetDecodeMemory(s.b[:n], *s.limits)
					s.decompress = max(s.decompress, int64(mem))
				}
				s.skip(n)
			}
			cost += s.tags()
		}
		cost += s.tags()
	}
	cost += s.tags()
	return cost
}

func (s *scanner) metadata(version int16) int64 {
	var cost int64
	topics := s.array()
	cost += sliceCost(topics, unsafe.Sizeof(kmsg.MetadataRequestTopic{}))
	for i := 0; i < topics && !s.bad; i++ {
		if version >= 10 {
			s.skip(16)
		}
		cost += s.str()
		cost += s.tags()
	}
	if version >= 4 {
		s.skip(1)
	}
	if version >= 8 && version <= 10 {
		s.skip(1)
	}
	if version >= 8 {
		s.skip(1)
	}
	cost += s.tags()
	return cost
}

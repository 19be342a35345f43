package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersionsKey is the one API whose response header is always v0 and whose
// unsupported versions are answered rather than disconnected (KIP-511).
const ApiVersionsKey = 18

// RequestHeader is a parsed request header (Kafka's RequestHeader v0-v2).
type RequestHeader struct {
	Key           int16
	Version       int16
	CorrelationID int32
	// ClientID is nil when the client sent a null client id (v1+), and
	// absent entirely in header v0 (ControlledShutdown v0 only).
	ClientID *string
	// Flexible reports whether the header carried tagged fields (v2).
	Flexible bool
}

// ParseRequestHeader parses the header at the front of frame and returns it
// with the remaining body. The header version follows from the key and
// version via kmsg: v2 (tagged fields) when the request is flexible, v1
// otherwise. An unknown key is an error; an unknown version of a known key is
// not (the dispatcher decides), and its header is parsed as the highest
// version's would be, which is what Kafka does for ApiVersions.
func ParseRequestHeader(frame []byte) (RequestHeader, []byte, error) {
	var h RequestHeader
	if len(frame) < 8 {
		return h, nil, ErrShortHeader
	}
	h.Key = int16(binary.BigEndian.Uint16(frame))
	h.Version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.CorrelationID = int32(binary.BigEndian.Uint32(frame[4:]))
	b := frame[8:]
	req := kmsg.RequestForKey(h.Key)
	if req == nil {
		return h, nil, fmt.Errorf("%w %d", ErrUnknownAPIKey, h.Key)
	}
	if h.Version < 0 {
		return h, nil, fmt.Errorf("wire: negative version %d for key %d", h.Version, h.Key)
	}
	// The client id is always a nullable non-compact string, flexible or not.
	if len(b) < 2 {
		return h, nil, ErrShortHeader
	}
	n := int16(binary.BigEndian.Uint16(b))
	b = b[2:]
	switch {
	case n == -1:
	case n < -1 || int(n) > len(b):
		return h, nil, fmt.Errorf("%w: client id length %d", ErrShortHeader, n)
	default:
		s := string(b[:n])
		h.ClientID = &s
		b = b[n:]
	}
	v := h.Version
	if v > req.MaxVersion() {
		v = req.MaxVersion()
	}
	req.SetVersion(v)
	h.Flexible = req.IsFlexible()
	if h.Version > req.MaxVersion() && h.Key == ApiVersionsKey {
		// KIP-511: a client newer than us sends a header we cannot know;
		// the body is ignored and answered with UNSUPPORTED_VERSION.
		return h, nil, nil
	}
	if h.Flexible {
		rest, err := skipTags(b)
		if err != nil {
			return h, nil, err
		}
		b = rest
	}
	return h, b, nil
}

// skipTags skips a tagged-field section: uvarint count, then per field a
// uvarint tag, a uvarint size and size bytes. Sizes are checked against the
// bytes present before anything is skipped.
func skipTags(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, ErrInvalidTags
	}
	b = b[n:]
	for i := uint64(0); i < count; i++ {
		if _, n = binary.Uvarint(b); n <= 0 {
			return nil, ErrInvalidTags
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, ErrInvalidTags
		}
		b = b[n+int(size):]
	}
	return b, nil
}

// ResponseHeaderFlexible reports whether the response to key at version uses
// response header v1 (tagged fields). ApiVersions always answers with v0 so a
// client can parse it before it knows what the broker supports.
func ResponseHeaderFlexible(key, version int16) bool {
	if key == ApiVersionsKey {
		return false
	}
	resp := kmsg.ResponseForKey(key)
	if resp == nil {
		return false
	}
	if version > resp.MaxVersion() {
		version = resp.MaxVersion()
	}
	resp.SetVersion(version)
	return resp.IsFlexible()
}

// AppendResponseHeader appends a response header: the correlation id, then an
// empty tagged-field section when flexible.
func AppendResponseHeader(dst []byte, correlationID int32, flexible bool) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if flexible {
		dst = append(dst, 0)
	}
	return dst
}

// AppendRequestHeader appends a request header; tests and tools use it to
// speak to a broker without a client library.
func AppendRequestHeader(dst []byte, h RequestHeader) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.Key))
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.Version))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.CorrelationID))
	if h.ClientID == nil {
		dst = binary.BigEndian.AppendUint16(dst, 0xffff)
	} else {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(*h.ClientID)))
		dst = append(dst, *h.ClientID...)
	}
	if h.Flexible {
		dst = append(dst, 0)
	}
	return dst
}

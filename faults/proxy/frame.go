package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxFrame bounds a frame in either direction, like Kafka's
// socket.request.max.bytes default (100 MiB) plus room for large fetch
// responses; a larger announced size closes the connection before the body
// is allocated.
const maxFrame = 256 << 20

var errFrame = errors.New("malformed kafka frame")

// readFrame reads one length-prefixed frame, returning it with its length.
func readFrame(r io.Reader) ([]byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(sz[:]))
	if n < 4 || n > maxFrame {
		return nil, fmt.Errorf("%w: size %d", errFrame, n)
	}
	b := make([]byte, 4+int(n))
	copy(b, sz[:])
	if _, err := io.ReadFull(r, b[4:]); err != nil {
		return nil, err
	}
	return b, nil
}

// parseRequest parses the request header of frame (v0-v2: key, version,
// correlation id, nullable client id, then tagged fields when the request
// is flexible). Body is left nil for keys kmsg does not know.
func parseRequest(frame []byte) (*Request, error) {
	b := frame[4:]
	if len(b) < 10 {
		return nil, fmt.Errorf("%w: short request header", errFrame)
	}
	r := &Request{
		Key:           int16(binary.BigEndian.Uint16(b)),
		Version:       int16(binary.BigEndian.Uint16(b[2:])),
		CorrelationID: int32(binary.BigEndian.Uint32(b[4:])),
	}
	cl := int16(binary.BigEndian.Uint16(b[8:]))
	b = b[10:]
	if cl > 0 {
		if int(cl) > len(b) {
			return nil, fmt.Errorf("%w: client id overruns frame", errFrame)
		}
		r.ClientID, b = string(b[:cl]), b[cl:]
	}
	req := kmsg.RequestForKey(r.Key)
	if req == nil {
		return r, nil
	}
	req.SetVersion(r.Version)
	if req.IsFlexible() {
		var err error
		if b, err = skipTags(b); err != nil {
			return nil, err
		}
	}
	r.Body = b
	return r, nil
}

// responseBody returns the body of a response frame to a request of key at
// version: after the correlation id and, when flexible (never for
// ApiVersions), the header's tagged fields.
func responseBody(frame []byte, key, version int16) (kmsg.Response, []byte, error) {
	resp := kmsg.ResponseForKey(key)
	if resp == nil {
		return nil, nil, fmt.Errorf("%w: unknown key %d", errFrame, key)
	}
	resp.SetVersion(version)
	b := frame[8:]
	if resp.IsFlexible() && key != 18 {
		var err error
		if b, err = skipTags(b); err != nil {
			return nil, nil, err
		}
	}
	return resp, b, nil
}

func uvarint(b []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, fmt.Errorf("%w: bad uvarint", errFrame)
	}
	return v, b[n:], nil
}

func skipTags(b []byte) ([]byte, error) {
	n, b, err := uvarint(b)
	if err != nil {
		return nil, err
	}
	for ; n > 0; n-- {
		if _, b, err = uvarint(b); err != nil {
			return nil, err
		}
		var sz uint64
		if sz, b, err = uvarint(b); err != nil {
			return nil, err
		}
		if sz > uint64(len(b)) {
			return nil, fmt.Errorf("%w: tag overruns header", errFrame)
		}
		b = b[sz:]
	}
	return b, nil
}

// expectsResponse reports whether a request gets an answer: everything but
// Produce with acks=0. The acks field follows the transactional id (v3+,
// compact from v9).
func expectsResponse(r *Request) bool {
	if r.Key != 0 || r.Body == nil {
		return true
	}
	b := r.Body
	switch {
	case r.Version >= 9:
		n, rest, err := uvarint(b)
		if err != nil {
			return true
		}
		b = rest
		if n > 1 {
			if n-1 > uint64(len(b)) {
				return true
			}
			b = b[n-1:]
		}
	case r.Version >= 3:
		if len(b) < 2 {
			return true
		}
		n := int16(binary.BigEndian.Uint16(b))
		b = b[2:]
		if n > 0 {
			if int(n) > len(b) {
				return true
			}
			b = b[n:]
		}
	}
	if len(b) < 2 {
		return true
	}
	return int16(binary.BigEndian.Uint16(b)) != 0
}

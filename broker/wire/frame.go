package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxRequestBytes is Kafka's default socket.request.max.bytes.
const DefaultMaxRequestBytes = 100 << 20

// Errors returned while reading frames and headers. Each one closes the
// connection: the Kafka protocol has no way to answer a request whose header
// cannot be understood.
var (
	ErrFrameTooLarge = errors.New("wire: frame larger than socket.request.max.bytes")
	ErrNegativeFrame = errors.New("wire: negative frame length")
	ErrShortHeader   = errors.New("wire: request header truncated")
	ErrUnknownAPIKey = errors.New("wire: unknown api key")
	ErrInvalidTags   = errors.New("wire: invalid tagged fields")
	ErrEmptyFrame    = errors.New("wire: empty frame")
)

// ReadFrame reads one int32-length-prefixed frame from r. As Kafka's
// NetworkReceive, a length above max is refused before any body byte is read
// or any buffer for it allocated. The returned slice is freshly allocated and
// owned by the caller.
func ReadFrame(r io.Reader, max int32) ([]byte, error) {
	var lenBuf [4]byte
	if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(lenBuf[:]))
	switch {
	case n < 0:
		return nil, fmt.Errorf("%w: %d", ErrNegativeFrame, n)
	case n == 0:
		return nil, ErrEmptyFrame
	case n > max:
		return nil, fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, n, max)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return body, nil
}

// AppendFrameLength appends a placeholder length and returns the new slice and
// the index to pass to FinishFrame.
func AppendFrameLength(dst []byte) ([]byte, int) {
	return append(dst, 0, 0, 0, 0), len(dst)
}

// FinishFrame writes the length of everything after the placeholder at at,
// plus extra bytes that will follow outside dst (zero-copy regions).
func FinishFrame(dst []byte, at int, extra int) {
	binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4+extra))
}

package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// FuzzReadFrame reads an arbitrary stream as frames: a length above the
// maximum is refused before any body byte is read, and every frame
// returned is exactly what the stream carried after its length.
func FuzzReadFrame(f *testing.F) {
	f.Add(frameOf([]byte{0, 18, 0, 3, 0, 0, 0, 1, 0xff, 0xff, 0}))
	f.Add(binary.BigEndian.AppendUint32(nil, 1<<30))
	f.Add(binary.BigEndian.AppendUint32(nil, 0x80000000))
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 5, 1, 2})
	const max = 1 << 12
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := &countingReader{r: bytes.NewReader(stream)}
		for range 64 {
			before := r.read
			frame, err := ReadFrame(r, max)
			if err != nil {
				if errors.Is(err, ErrFrameTooLarge) && r.read != before+4 {
					t.Fatalf("read %d body bytes of a refused frame", r.read-before-4)
				}
				return
			}
			if len(frame) > max || !bytes.Equal(frame, stream[before+4:r.read]) {
				t.Fatalf("frame of %d bytes differs from the stream", len(frame))
			}
		}
	})
}

// FuzzParseRequestHeader parses arbitrary frames as request headers. A
// header that parses is written again by AppendRequestHeader into the same
// bytes (less any tagged fields it carried, which are written empty) and
// parses to the same header and body.
func FuzzParseRequestHeader(f *testing.F) {
	id := "fuzz"
	for _, h := range []RequestHeader{
		{Key: 18, Version: 3, CorrelationID: 7, ClientID: &id, Flexible: true},
		{Key: 0, Version: 9, CorrelationID: -1, Flexible: true},
		{Key: 1, Version: 11, CorrelationID: 1, ClientID: &id},
		{Key: 3, Version: 1},
	} {
		f.Add(append(AppendRequestHeader(nil, h), 1, 2, 3))
	}
	f.Add([]byte{0, 18, 0x7f, 0xff, 0, 0, 0, 1, 0, 0})
	f.Add([]byte{0, 1, 0, 12, 0, 0, 0, 1, 0xff, 0xff, 5, 1, 2})
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, body, err := ParseRequestHeader(frame)
		if err != nil || body == nil {
			return
		}
		again := append(AppendRequestHeader(nil, h), body...)
		h2, body2, err := ParseRequestHeader(again)
		if err != nil {
			t.Fatalf("re-encoded header does not parse: %v", err)
		}
		same := h2.Key == h.Key && h2.Version == h.Version && h2.CorrelationID == h.CorrelationID &&
			h2.Flexible == h.Flexible && (h.ClientID == nil) == (h2.ClientID == nil) &&
			(h.ClientID == nil || *h.ClientID == *h2.ClientID)
		if !same || !bytes.Equal(body, body2) {
			t.Fatalf("header %+v body %x re-parsed as %+v body %x", h, body, h2, body2)
		}
	})
}

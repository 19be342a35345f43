package proxy

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func FuzzParseRequest(f *testing.F) {
	f.Add(request(1)[4:])
	f.Add(kmsgReq(f, 0, 9))
	f.Add(kmsgReq(f, 0, 3))
	f.Add([]byte{0, 0, 0, 12, 0, 0, 0, 1, 0, 5, 'a'})
	f.Fuzz(func(t *testing.T, body []byte) {
		frame := make([]byte, 4+len(body))
		binary.BigEndian.PutUint32(frame, uint32(len(body)))
		copy(frame[4:], body)
		if f, err := readFrame(bytes.NewReader(frame)); err == nil {
			frame = f
		}
		r, err := parseRequest(frame)
		if err != nil {
			return
		}
		expectsResponse(r)
		if canAnswerError(r.Key) {
			errorResponse(r, 6) // must not panic; errors are fine
		}
	})
}

func TestReadFrameBounds(t *testing.T) {
	for _, sz := range []int32{-1, 0, 3, maxFrame + 1} {
		b := make([]byte, 4)
		binary.BigEndian.PutUint32(b, uint32(sz))
		if _, err := readFrame(bytes.NewReader(b)); err == nil {
			t.Errorf("size %d accepted", sz)
		}
	}
}

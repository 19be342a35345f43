package wire

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetCommit returns an OffsetCommit v8 of parts partitions, each with
// metadata of mdLen bytes.
func offsetCommit(parts, mdLen int) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.SetVersion(8)
	r.Group = "g"
	md := strings.Repeat("m", mdLen)
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	for p := 0; p < parts; p++ {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Metadata = int32(p), &md
		rt.Partitions = append(rt.Partitions, rp)
	}
	r.Topics = append(r.Topics, rt)
	return r
}

// commitDispatcher decodes each OffsetCommit and answers every partition
// with error 0.
type commitDispatcher struct{}

func (commitDispatcher) Dispatch(ctx context.Context, req *Request) (Response, error) {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.SetVersion(req.Header.Version)
	if err := r.ReadFrom(req.Body); err != nil {
		return Response{}, err
	}
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	resp.SetVersion(req.Header.Version)
	for _, t := range r.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return Response{Msg: resp}, nil
}

// TestLargeWellFormedCommitAnswered checks that a well-formed, string-heavy
// OffsetCommit whose frame is 60% and then 99% of socket.request.max.bytes
// is decoded and answered, as Kafka answers it, holding a reservation of at
// most decodeCap, which every request gives back.
func TestLargeWellFormedCommitAnswered(t *testing.T) {
	const maxRequest = 8 << 20
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	budget := NewBudget(64 << 20)
	s := &Server{Dispatcher: commitDispatcher{}, MaxRequestBytes: maxRequest, Budget: budget}
	go s.Serve(ln)
	defer s.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	for i, parts := range []int{1200, 2050} {
		r := offsetCommit(parts, 4000)
		frame := frameOf(encodeRequest(r, int32(i+1), nil))
		if len(frame) > maxRequest {
			t.Fatalf("frame of %d bytes above the maximum", len(frame))
		}
		body := r.AppendTo(nil)
		size, clipped := readReservation(offsetCommitKey, 8, int32(len(frame)-4), maxRequest)
		est, ok := sizeEstimate(offsetCommitKey, 8, body)
		t.Logf("frame %d (%.0f%% of max), reservation %d clipped %v, estimate %d ok %v",
			len(frame), 100*float64(len(frame))/maxRequest, size, clipped, est, ok)
		if _, err := c.Write(frame); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFrame(c, 1<<20)
		if err != nil {
			t.Fatalf("commit of %d partitions (%d bytes): %v", parts, len(frame), err)
		}
		resp := kmsg.NewPtrOffsetCommitResponse()
		resp.SetVersion(8)
		if err := resp.ReadFrom(got[5:]); err != nil { // correlation id, tags
			t.Fatal(err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != parts {
			t.Fatalf("answer for %d partitions, want %d", len(resp.Topics[0].Partitions), parts)
		}
	}
	if p := budget.Peak(); p > decodeCap(maxRequest) {
		t.Fatalf("peak reservation %d above decodeCap %d", p, decodeCap(maxRequest))
	}
	deadline := time.Now().Add(5 * time.Second)
	for budget.InUse() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := budget.InUse(); n != 0 {
		t.Fatalf("%d bytes still reserved", n)
	}
}

// TestDecodeCapBounds checks where decodeCap falls for OffsetCommit at the
// default socket.request.max.bytes: a string-heavy commit of the largest
// frame fits, and so does a commit of empty metadata of a large part of
// it; a frame of near-empty elements of the whole maximum does not.
func TestDecodeCapBounds(t *testing.T) {
	const maxRequest = 8 << 20
	for _, tc := range []struct {
		parts, mdLen int
		fits         bool
	}{
		{2050, 4000, true}, // 99% of max, metadata strings
		{50000, 100, true}, // 6.6 MB, short metadata
		{120000, 0, true},  // 2.2 MB of empty metadata: 5.8× its frame
		{460000, 0, false}, // 8.3 MB of empty metadata
	} {
		body := offsetCommit(tc.parts, tc.mdLen).AppendTo(nil)
		if len(body) > maxRequest {
			t.Fatalf("body of %d bytes above the maximum", len(body))
		}
		est, ok := sizeEstimate(offsetCommitKey, 8, body)
		if !ok {
			t.Fatalf("%d partitions: scan failed", tc.parts)
		}
		if fits := est <= decodeCap(maxRequest); fits != tc.fits {
			t.Errorf("%d partitions of %d-byte metadata (frame %d): estimate %d, fits %v, want %v",
				tc.parts, tc.mdLen, len(body), est, fits, tc.fits)
		}
	}
}

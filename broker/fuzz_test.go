package broker_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/broker/wire"
)

// dataPlaneKeys are the APIs of the data plane; the fuzz test drives only
// these, so that group and admin handlers' own waits do not slow it down.
var dataPlaneKeys = map[int16]bool{0: true, 1: true, 2: true, 3: true, 18: true, 22: true, 23: true}

// FuzzDispatch feeds arbitrary frames through header parsing, the
// dispatcher and the real data-plane handlers of a running broker, then
// encodes whatever comes back. Bad input must end in an error (the
// connection closes) or a response, never a panic or a hang.
func FuzzDispatch(f *testing.F) {
	id := "fuzz"
	seed := func(req kmsg.Request) {
		h := wire.RequestHeader{Key: req.Key(), Version: req.GetVersion(), CorrelationID: 1, ClientID: &id, Flexible: req.IsFlexible()}
		f.Add(req.AppendTo(wire.AppendRequestHeader(nil, h)))
	}
	for _, v := range []int16{4, 12, 13, 17, 18} {
		seed(fetchReq(v, "fz", [16]byte{}, fetchPos{0, 0, 1000}))
	}
	for _, v := range []int16{3, 9, 12} {
		seed(produceReq(v, 1, "fz", 0, make([]byte, 70)))
	}
	seed(produceByID(13, 1, [16]byte{1}, 0, make([]byte, 70)))
	seed(listOffsetsReq(11, 0, "fz", 0, -6))
	for _, r := range []kmsg.Request{kmsg.NewPtrMetadataRequest(), kmsg.NewPtrListOffsetsRequest(), kmsg.NewPtrApiVersionsRequest(),
		kmsg.NewPtrInitProducerIDRequest(), kmsg.NewPtrOffsetForLeaderEpochRequest()} {
		r.SetVersion(r.MaxVersion() - 1)
		seed(r)
	}
	b := brokertest.Start(f)
	createTopicB(f, b, "fz", 2)
	env := b.Handlers()
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, body, err := wire.ParseRequestHeader(frame)
		if err != nil || !dataPlaneKeys[h.Key] {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		resp, err := env.Dispatch(ctx, &wire.Request{Header: h, Body: body})
		if err != nil {
			return
		}
		switch {
		case resp.Body != nil:
			if n, err := resp.Body.WriteTo(io.Discard); err != nil || int(n) != resp.Body.Len() {
				t.Fatalf("body wrote %d of %d: %v", n, resp.Body.Len(), err)
			}
			resp.Body.Release()
		case resp.Msg != nil:
			resp.Msg.AppendTo(nil)
		}
	})
}

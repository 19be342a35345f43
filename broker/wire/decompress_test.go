package wire

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/record"
)

// holdDispatcher decodes each request, as the broker's dispatcher does,
// then reports the budget in use and waits to be released.
type holdDispatcher struct {
	budget  *Budget
	inUse   chan int64
	release chan struct{}
}

func (d *holdDispatcher) Dispatch(ctx context.Context, req *Request) (Response, error) {
	req.Decoded()
	d.inUse <- d.budget.InUse()
	<-d.release
	return Response{}, nil
}

// TestProduceHoldsDecompressionMemory checks that a Produce whose batch
// declares a large zstd window holds that window's memory in the request
// budget while it is served, beside its small frame: validation will
// allocate it, so other connections must wait for it as for bytes read.
func TestProduceHoldsDecompressionMemory(t *testing.T) {
	spec := record.NewSpec(record.Rec{Timestamp: time.Now().UnixMilli(), Value: []byte("v")})
	spec.Codec = record.CodecZstd
	b, err := record.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	// A zstd frame header declaring a 64 MiB window, then one empty RLE
	// block: a few bytes that validation would decode with a 64 MiB
	// window.
	frame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 16 << 3, 0x03, 0x00, 0x00, 'x'}
	batch := append(append([]byte(nil), b[:record.HeaderSize]...), frame...)
	binary.BigEndian.PutUint32(batch[8:], uint32(len(batch)-12)) // batch length
	binary.BigEndian.PutUint32(batch[17:], record.Batch(batch).ComputeCRC())
	want, err := record.SetDecodeMemory(batch, record.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if want < 64<<20 {
		t.Fatalf("the crafted batch needs %d bytes of decoder memory, want at least 64 MiB", want)
	}

	budget := NewBudget(512 << 20)
	d := &holdDispatcher{budget: budget, inUse: make(chan int64, 1), release: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Dispatcher: d, MaxRequestBytes: 1 << 20, Budget: budget}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = 1, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	id := "d"
	body := req.AppendTo(AppendRequestHeader(nil, RequestHeader{Key: 0, Version: 9, CorrelationID: 1, ClientID: &id, Flexible: true}))
	if _, err := c.Write(frameOf(body)); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-d.inUse:
		if got < int64(want) {
			t.Errorf("a Produce being served holds %d bytes of the budget, want at least its decoder memory %d", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Produce was not dispatched")
	}
	close(d.release)
}

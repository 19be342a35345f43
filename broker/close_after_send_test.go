package broker_test

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

// TestRequestsBeforeCloseAreServed sends a burst of acks=0 Produce requests
// and closes the connection at once. Every request the client sent before
// closing is served, as Kafka's Selector serves the receives a closing
// channel has staged: an acks=0 producer that closes right after its last
// send loses nothing. Only the answers (here none) are dropped.
func TestRequestsBeforeCloseAreServed(t *testing.T) {
	b := brokertest.Start(t)
	createTopic(t, b, "closing", 1)
	c, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	var burst bytes.Buffer
	const n = 200
	for i := 0; i < n; i++ {
		burst.Write(hostileFrame(produceReq(9, 0, "closing", 0, batch(t, -1, -1, -1, "v")), int32(i+1)))
	}
	if _, err := c.Write(burst.Bytes()); err != nil {
		t.Fatal(err)
	}
	c.Close()
	p := b.Partitions().Get(tpOf("closing", 0))
	deadline := time.Now().Add(15 * time.Second)
	for p.LogEndOffset() < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if leo := p.LogEndOffset(); leo != n {
		t.Fatalf("log end offset %d after %d acks=0 produces sent before the close, want %d", leo, n, n)
	}
}

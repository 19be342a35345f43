package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// serveDispatcher answers ApiVersions and Produce, decoding each request
// as the handler dispatcher does, and parks a Fetch until its MaxWaitMillis
// or its connection's context ends, as a long poll with no data does.
type serveDispatcher struct {
	parked atomic.Int32 // fetches waiting now
	woken  atomic.Int32 // fetches ended by their context
	// panicClient makes a request whose client id equals it panic.
	panicClient string
}

func (d *serveDispatcher) Dispatch(ctx context.Context, req *Request) (Response, error) {
	if id := req.Header.ClientID; d.panicClient != "" && id != nil && *id == d.panicClient {
		var m map[string]int
		m["boom"]++ // a nil map write: a bug in a handler
	}
	msg := kmsg.RequestForKey(req.Header.Key)
	msg.SetVersion(req.Header.Version)
	if err := msg.ReadFrom(req.Body); err != nil {
		return Response{}, err
	}
	req.Decoded()
	switch r := msg.(type) {
	case *kmsg.ApiVersionsRequest:
		resp := r.ResponseKind().(*kmsg.ApiVersionsResponse)
		resp.SetVersion(r.Version)
		resp.ThrottleMillis = req.Header.CorrelationID
		return Response{Msg: resp}, nil
	case *kmsg.ProduceRequest:
		resp := r.ResponseKind().(*kmsg.ProduceResponse)
		resp.SetVersion(r.Version)
		return Response{Msg: resp}, nil
	case *kmsg.FetchRequest:
		d.parked.Add(1)
		defer d.parked.Add(-1)
		timer := time.NewTimer(time.Duration(r.MaxWaitMillis) * time.Millisecond)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			d.woken.Add(1)
			return Response{}, ctx.Err()
		}
		resp := r.ResponseKind().(*kmsg.FetchResponse)
		resp.SetVersion(r.Version)
		return Response{Msg: resp}, nil
	}
	return Response{}, errors.New("unexpected api")
}

// startWith serves s on a loopback listener and returns its address.
func startWith(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return ln.Addr().String()
}

func dialT(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func apiVersionsFrame(corr int32) []byte {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "t", "1"
	return frameOf(encodeRequest(req, corr, nil))
}

// answeredWithin sends frame on c and waits up to d for the response with
// the same correlation id.
func answeredWithin(t *testing.T, c net.Conn, frame []byte, d time.Duration) {
	t.Helper()
	corr := binary.BigEndian.Uint32(frame[8:])
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(d))
	resp, err := ReadFrame(c, 1<<20)
	if err != nil {
		t.Fatalf("request %d not answered within %v: %v", corr, d, err)
	}
	if got := binary.BigEndian.Uint32(resp); got != corr {
		t.Fatalf("answer to %d has correlation id %d", corr, got)
	}
}

// TestStalledFrameDoesNotBlockOthers opens a connection that announces a
// 100 MiB Produce and stalls after its header, and one that trickles a
// Produce one byte a second, and checks that another client's ApiVersions
// and small Produce are answered meanwhile: a connection reserves budget
// for the bytes it has delivered, not for what it announced.
func TestStalledFrameDoesNotBlockOthers(t *testing.T) {
	budget := NewBudget(1 << 30)
	addr := startWith(t, &Server{Dispatcher: &serveDispatcher{}, MaxRequestBytes: 100 << 20, Budget: budget})

	hdr := AppendRequestHeader(nil, RequestHeader{Key: produceKey, Version: 9, CorrelationID: 1, Flexible: true})
	stalled := dialT(t, addr)
	if _, err := stalled.Write(append(binary.BigEndian.AppendUint32(nil, 100<<20), hdr...)); err != nil {
		t.Fatal(err)
	}

	trickle := produceFrame(2, make([]byte, 1<<20))
	trickler := dialT(t, addr)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 60 && i < len(trickle); i++ {
			if _, err := trickler.Write(trickle[i : i+1]); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	// Let both reach the server before the bystander asks.
	time.Sleep(200 * time.Millisecond)
	c := dialT(t, addr)
	answeredWithin(t, c, apiVersionsFrame(10), 2*time.Second)
	answeredWithin(t, c, produceFrame(11, make([]byte, 1000)), 2*time.Second)
	if n := budget.InUse(); n >= budget.Limit() {
		t.Fatalf("%d bytes reserved by two connections that delivered almost nothing", n)
	}
}

// fetchFrame is a Fetch v12 of parts partitions with MaxWaitMillis of
// 2^31-1, as large as the many-partition long polls of a big consumer.
func fetchFrame(corr int32, parts int) []byte {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.MaxWaitMillis = 1<<31 - 1
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	topic := kmsg.NewFetchRequestTopic()
	topic.Topic = "long-poll"
	for i := range parts {
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition = int32(i)
		p.PartitionMaxBytes = 1 << 20
		topic.Partitions = append(topic.Partitions, p)
	}
	req.Topics = append(req.Topics, topic)
	return frameOf(encodeRequest(req, corr, nil))
}

// waitFor polls cond every few milliseconds for at most d.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// TestClosedLongPollsFreeTheBroker parks many large long-poll fetches,
// closes their connections, and checks that every parked fetch is woken
// and dropped, the budget is free again, and another client is served, all
// within the liveness bound: a closed connection cancels its context even
// while its request is being served.
func TestClosedLongPollsFreeTheBroker(t *testing.T) {
	const fetches = 11
	budget := NewBudget(256 << 20)
	d := &serveDispatcher{}
	addr := startWith(t, &Server{Dispatcher: d, MaxRequestBytes: 100 << 20, Budget: budget})
	frame := fetchFrame(1, 60000)
	if len(frame) < 1<<20 {
		t.Fatalf("fetch frame of %d bytes is not large", len(frame))
	}
	var conns []net.Conn
	for range fetches {
		c := dialT(t, addr)
		go c.Write(frame)
		conns = append(conns, c)
	}
	// As many as the budget lets in are parked; the rest wait to be read.
	if !waitFor(5*time.Second, func() bool { return d.parked.Load() > 0 }) {
		t.Fatal("no fetch parked")
	}
	for _, c := range conns {
		c.Close()
	}
	if !waitFor(2*time.Second, func() bool { return d.parked.Load() == 0 && budget.InUse() == 0 }) {
		t.Fatalf("1 s after the close: %d fetches parked (%d woken), %d bytes reserved",
			d.parked.Load(), d.woken.Load(), budget.InUse())
	}
	c := dialT(t, addr)
	answeredWithin(t, c, apiVersionsFrame(7), 2*time.Second)
}

// orderDispatcher answers ApiVersions after a delay that shrinks with the
// correlation id, and records how many requests of the connection ran at
// once.
type orderDispatcher struct {
	running, most atomic.Int32
}

func (d *orderDispatcher) Dispatch(ctx context.Context, req *Request) (Response, error) {
	n := d.running.Add(1)
	defer d.running.Add(-1)
	for {
		m := d.most.Load()
		if n <= m || d.most.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(time.Duration(10-req.Header.CorrelationID%10) * time.Millisecond)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(req.Header.Version)
	resp.ThrottleMillis = req.Header.CorrelationID
	return Response{Msg: resp}, nil
}

// TestPipelinedRequestsRunInOrder pipelines requests whose handlers take
// less time the later they come, and checks that they run one at a time
// and are answered in order.
func TestPipelinedRequestsRunInOrder(t *testing.T) {
	d := &orderDispatcher{}
	addr := startWith(t, &Server{Dispatcher: d, Budget: NewBudget(1 << 20)})
	c := dialT(t, addr)
	const n = 30
	var all []byte
	for i := int32(1); i <= n; i++ {
		all = append(all, apiVersionsFrame(i)...)
	}
	go c.Write(all)
	readInOrder(t, c, n)
	if m := d.most.Load(); m != 1 {
		t.Fatalf("%d requests of one connection ran at once", m)
	}
}

// TestPanicContainedToConnection sends a request that makes the dispatcher
// panic and checks that only its connection is closed: another connection
// opened before it and one opened after are served.
func TestPanicContainedToConnection(t *testing.T) {
	d := &serveDispatcher{panicClient: "boom"}
	obs := &countObserver{}
	addr := startWith(t, &Server{Dispatcher: d, Observer: obs})
	before := dialT(t, addr)
	answeredWithin(t, before, apiVersionsFrame(1), 2*time.Second)

	bad := dialT(t, addr)
	id := "boom"
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	bad.Write(frameOf(encodeRequest(req, 2, &id)))
	bad.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := bad.Read(make([]byte, 1)); err == nil {
		t.Fatal("the panicking connection was answered")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the panicking connection was not closed")
	}
	answeredWithin(t, before, apiVersionsFrame(3), 2*time.Second)
	after := dialT(t, addr)
	answeredWithin(t, after, apiVersionsFrame(4), 2*time.Second)
	if obs.count("panic") != 1 || obs.count("closed panic") != 1 {
		t.Fatalf("observed %v", obs.counts)
	}
}

func netDial(addr string) (net.Conn, error) { return net.Dial("tcp", addr) }

// TestPipelinedBehindLongPollStillWatched parks a long poll, pipelines two
// requests behind it (one queued, one held by the reader) and closes the
// connection: the close is still noticed at once and the long poll
// dropped.
func TestPipelinedBehindLongPollStillWatched(t *testing.T) {
	budget := NewBudget(64 << 20)
	d := &serveDispatcher{}
	addr := startWith(t, &Server{Dispatcher: d, Budget: budget})
	c := dialT(t, addr)
	if _, err := c.Write(fetchFrame(1, 1)); err != nil {
		t.Fatal(err)
	}
	if !waitFor(5*time.Second, func() bool { return d.parked.Load() == 1 }) {
		t.Fatal("fetch not parked")
	}
	if _, err := c.Write(append(apiVersionsFrame(2), apiVersionsFrame(3)...)); err != nil {
		t.Fatal(err)
	}
	// Both pipelined requests are read (and reserved) behind the fetch.
	if !waitFor(5*time.Second, func() bool { return budget.InUse() >= 2*ReservationSlack }) {
		t.Fatalf("pipelined requests not read: %d bytes reserved", budget.InUse())
	}
	time.Sleep(50 * time.Millisecond) // let the reader settle into its wait
	c.Close()
	if !waitFor(2*time.Second, func() bool { return d.woken.Load() == 1 && budget.InUse() == 0 }) {
		t.Fatalf("2 s after the close: %d parked, %d woken, %d bytes reserved", d.parked.Load(), d.woken.Load(), budget.InUse())
	}
}

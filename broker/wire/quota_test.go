package wire

import (
	"math"
	"net"
	"sync"
	"testing"
	"time"
)

// countObserver counts what a Server reports, by method and reason.
type countObserver struct {
	mu     sync.Mutex
	counts map[string]int
	waited map[string]time.Duration
}

func (o *countObserver) add(name string, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.counts == nil {
		o.counts, o.waited = map[string]int{}, map[string]time.Duration{}
	}
	o.counts[name]++
	o.waited[name] += d
}

func (o *countObserver) count(name string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.counts[name]
}

func (o *countObserver) BytesIn(int)                                    {}
func (o *countObserver) BytesOut(int)                                   {}
func (o *countObserver) Connection(open bool)                           {}
func (o *countObserver) FrameRefused(reason string)                     { o.add("refused "+reason, 0) }
func (o *countObserver) ConnectionClosed(reason string)                 { o.add("closed "+reason, 0) }
func (o *countObserver) AcceptError()                                   { o.add("accept error", 0) }
func (o *countObserver) ConnectionRefused(reason string)                { o.add("quota "+reason, 0) }
func (o *countObserver) AcceptorBlocked(reason string, d time.Duration) { o.add("blocked "+reason, d) }
func (o *countObserver) PanicRecovered(key int16)                       { o.add("panic", 0) }

func unlimited() *ConnectionQuotas {
	return &ConnectionQuotas{MaxConnections: math.MaxInt32, MaxConnectionsPerIP: math.MaxInt32, MaxCreationRate: math.MaxInt32}
}

// closedWithin reports whether the server closes c within d without
// answering.
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	ne, ok := err.(net.Error)
	return err != nil && !(ok && ne.Timeout())
}

// TestMaxConnections fills max.connections and checks that the next
// connection is not served until one closes, as Kafka's Acceptor waits for
// a connection slot.
func TestMaxConnections(t *testing.T) {
	q := unlimited()
	q.MaxConnections = 2
	obs := &countObserver{}
	s := &Server{Dispatcher: &serveDispatcher{}, Quotas: q, Observer: obs}
	addr := startWith(t, s)
	c1, c2 := dialT(t, addr), dialT(t, addr)
	answeredWithin(t, c1, apiVersionsFrame(1), 2*time.Second)
	answeredWithin(t, c2, apiVersionsFrame(2), 2*time.Second)
	c3 := dialT(t, addr) // completes in the kernel's backlog
	if _, err := c3.Write(apiVersionsFrame(3)); err != nil {
		t.Fatal(err)
	}
	c3.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := ReadFrame(c3, 1<<20); err == nil {
		t.Fatal("a third connection was served with max.connections=2")
	}
	if n := openConns(s); n != 2 {
		t.Fatalf("%d connections open", n)
	}
	c1.Close()
	c3.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := ReadFrame(c3, 1<<20); err != nil {
		t.Fatalf("waiting connection not served after a slot freed: %v", err)
	}
	if obs.count("blocked max_connections") != 1 {
		t.Fatalf("observed %v", obs.counts)
	}
}

// TestMaxConnectionsPerIP checks max.connections.per.ip and its overrides:
// a connection beyond its address's limit is closed at once, others stay.
func TestMaxConnectionsPerIP(t *testing.T) {
	for _, tc := range []struct {
		name      string
		perIP     int
		overrides map[string]int
		allowed   int
	}{
		{"default", 2, nil, 2},
		{"override address", 0, map[string]int{"127.0.0.1": 3}, 3},
		{"override host", 1, map[string]int{"localhost": 2}, 2},
		{"override elsewhere", 1, map[string]int{"192.0.2.1": 5}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := unlimited()
			q.MaxConnectionsPerIP, q.PerIPOverrides = tc.perIP, tc.overrides
			obs := &countObserver{}
			addr := startWith(t, &Server{Dispatcher: &serveDispatcher{}, Quotas: q, Observer: obs})
			var kept []net.Conn
			for i := range tc.allowed {
				c := dialT(t, addr)
				answeredWithin(t, c, apiVersionsFrame(int32(i)), 2*time.Second)
				kept = append(kept, c)
			}
			extra := dialT(t, addr)
			if !closedWithin(extra, 2*time.Second) {
				t.Fatalf("connection %d from one address not closed", tc.allowed+1)
			}
			for i, c := range kept {
				answeredWithin(t, c, apiVersionsFrame(int32(100+i)), 2*time.Second)
			}
			if obs.count("quota max_connections_per_ip") != 1 {
				t.Fatalf("observed %v", obs.counts)
			}
			// A closed connection frees its address's count.
			kept[0].Close()
			if !waitFor(2*time.Second, func() bool {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					return false
				}
				defer c.Close()
				c.Write(apiVersionsFrame(9))
				c.SetReadDeadline(time.Now().Add(time.Second))
				_, err = ReadFrame(c, 1<<20)
				return err == nil
			}) {
				t.Fatal("address count not freed by a close")
			}
		})
	}
}

// TestCreationRate checks the throttle of max.connection.creation.rate
// against Kafka's Rate over eleven 1 s samples, on a fixed clock.
func TestCreationRate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := &creationRate{bound: 5}
	// A young sensor is measured over at least ten windows: 50
	// connections at once are 5 a second, within the bound.
	for i := range 50 {
		if d := r.record(t0); d != 0 {
			t.Fatalf("connection %d throttled %v", i+1, d)
		}
	}
	// The 51st is 5.1 a second: (5.1-5)/5 × 10 s.
	if d := r.record(t0); d != 200*time.Millisecond {
		t.Fatalf("51st throttled %v", d)
	}
	// Far above the bound the throttle is capped at one window.
	for range 20 {
		r.record(t0)
	}
	if d := r.record(t0); d != time.Second {
		t.Fatalf("throttle %v, want the 1 s cap", d)
	}
	// Eleven windows later every old sample is obsolete.
	if d := r.record(t0.Add(12 * time.Second)); d != 0 {
		t.Fatalf("throttled %v after the samples expired", d)
	}
}

// TestCreationRateThrottlesAccept opens connections faster than
// max.connection.creation.rate on a frozen clock and checks that the
// acceptor waits out a throttle for each beyond the rate's burst, and that
// every connection is still served.
func TestCreationRateThrottlesAccept(t *testing.T) {
	q := unlimited()
	q.MaxCreationRate = 1
	obs := &countObserver{}
	t0 := time.Unix(1000, 0)
	addr := startWith(t, &Server{Dispatcher: &serveDispatcher{}, Quotas: q, Observer: obs,
		Now: func() time.Time { return t0 }})
	// Ten a second over ten windows are within a rate of 1; the 11th and
	// 12th are throttled (1.1 and 1.2 a second: 1 s each, capped).
	for i := range 12 {
		c := dialT(t, addr)
		answeredWithin(t, c, apiVersionsFrame(int32(i)), 4*time.Second)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if n, d := obs.counts["blocked max_connection_creation_rate"], obs.waited["blocked max_connection_creation_rate"]; n != 2 || d != 2*time.Second {
		t.Fatalf("throttled %d times for %v", n, d)
	}
}

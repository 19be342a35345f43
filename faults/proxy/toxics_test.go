package proxy

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// echoUpstream answers every request frame with a response frame carrying
// the request's correlation id and respSize bytes of body. It closes a
// connection when told to through closeAfter.
func echoUpstream(t *testing.T, respSize int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for {
					f, err := readFrame(c)
					if err != nil {
						return
					}
					resp := make([]byte, 8+respSize)
					binary.BigEndian.PutUint32(resp, uint32(4+respSize))
					copy(resp[4:8], f[8:12])
					if _, err := c.Write(resp); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// request returns an ApiVersions v0 request frame with correlation id corr.
func request(corr int32) []byte {
	b := make([]byte, 4+10)
	binary.BigEndian.PutUint32(b, 10)
	binary.BigEndian.PutUint16(b[4:], 18)
	binary.BigEndian.PutUint32(b[8:], uint32(corr))
	binary.BigEndian.PutUint16(b[12:], 0xffff) // null client id
	return b
}

func newTestProxy(t *testing.T, seed uint64, upstream string) (*Group, *Proxy) {
	t.Helper()
	g := NewGroup(Options{Seed: seed, NoDiscover: true})
	t.Cleanup(g.Close)
	p, err := g.Add("p", "127.0.0.1:0", upstream)
	if err != nil {
		t.Fatal(err)
	}
	return g, p
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip sends one request and reads its response.
func roundTrip(c net.Conn, corr int32) ([]byte, error) {
	if _, err := c.Write(request(corr)); err != nil {
		return nil, err
	}
	return readFrame(c)
}

func addToxic(t *testing.T, p *Proxy, name, typ, stream string, attrs any) {
	t.Helper()
	b, err := json.Marshal(attrs)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AddToxic(ToxicSpec{Name: name, Type: typ, Stream: stream, Attributes: b}); err != nil {
		t.Fatal(err)
	}
}

func TestPassThrough(t *testing.T) {
	_, p := newTestProxy(t, 1, echoUpstream(t, 100))
	c := dial(t, p)
	for i := int32(0); i < 10; i++ {
		f, err := roundTrip(c, i)
		if err != nil {
			t.Fatal(err)
		}
		if got := int32(binary.BigEndian.Uint32(f[4:])); got != i || len(f) != 108 {
			t.Fatalf("response %d: corr %d, %d bytes", i, got, len(f))
		}
	}
}

func TestLatency(t *testing.T) {
	_, p := newTestProxy(t, 1, echoUpstream(t, 10))
	addToxic(t, p, "lat", "latency", Downstream, map[string]any{"latency": 150, "jitter": 20})
	c := dial(t, p)
	start := time.Now()
	if _, err := roundTrip(c, 1); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 130*time.Millisecond {
		t.Fatalf("round trip took %v, want >= 130ms", d)
	}
	if err := p.RemoveToxic("lat"); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if _, err := roundTrip(c, 2); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("round trip after removal took %v", d)
	}
}

func TestRemovingLatencyReleasesHeldData(t *testing.T) {
	_, p := newTestProxy(t, 1, echoUpstream(t, 10))
	addToxic(t, p, "lat", "latency", Downstream, map[string]any{"latency": 5000})
	c := dial(t, p)
	go func() {
		time.Sleep(100 * time.Millisecond)
		p.RemoveToxic("lat")
	}()
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := roundTrip(c, 1); err != nil {
		t.Fatalf("held response lost when the toxic was removed: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("response took %v after removal", d)
	}
	if _, err := roundTrip(c, 2); err != nil {
		t.Fatalf("connection unusable after removal: %v", err)
	}
}

func TestRemovingResetPeerBeforeItFires(t *testing.T) {
	_, p := newTestProxy(t, 1, echoUpstream(t, 10))
	addToxic(t, p, "rp", "reset_peer", Downstream, map[string]any{"timeout": 300})
	c := dial(t, p)
	if _, err := roundTrip(c, 1); err != nil {
		t.Fatal(err)
	}
	if err := p.RemoveToxic("rp"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	if _, err := roundTrip(c, 2); err != nil {
		t.Fatalf("removed reset_peer still reset the connection: %v", err)
	}
}

func TestBandwidth(t *testing.T) {
	_, p := newTestProxy(t, 1, echoUpstream(t, 20_000))
	addToxic(t, p, "bw", "bandwidth", Downstream, map[string]any{"rate": 50}) // 50 KB/s
	c := dial(t, p)
	start := time.Now()
	if _, err := roundTrip(c, 1); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 350*time.Millisecond {
		t.Fatalf("20 kB at 50 KB/s took %v, want ~400ms", d)
	}
}

func TestSlowClose(t *testing.T) {
	// The upstream closes at once; the client sees the close late.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, p := newTestProxy(t, 1, ln.Addr().String())
	addToxic(t, p, "sc", "slow_close", Downstream, map[string]any{"delay": 200})
	c := dial(t, p)
	start := time.Now()
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("read data from a closed upstream")
	}
	if d := time.Since(start); d < 180*time.Millisecond {
		t.Fatalf("close seen after %v, want >= 200ms", d)
	}
}

func TestTimeoutClosesAfterTimeout(t *testing.T) {
	_, p := newTestProxy(t, 1, echoUpstream(t, 10))
	addToxic(t, p, "to", "timeout", Upstream, map[string]any{"timeout": 200})
	c := dial(t, p)
	start := time.Now()
	if _, err := roundTrip(c, 1); err == nil {
		t.Fatal("request passed a timeout toxic")
	}
	if d := time.Since(start); d < 180*time.Millisecond || d > 2*time.Second {
		t.Fatalf("connection closed after %v, want ~200ms", d)
	}
}

func TestTimeoutBlackholeUntilRemoved(t *testing.T) {
	_, p := newTestProxy(t, 1, echoUpstream(t, 10))
	c := dial(t, p)
	if _, err := roundTrip(c, 1); err != nil {
		t.Fatal(err)
	}
	addToxic(t, p, "bh", "timeout", Upstream, map[string]any{"timeout": 0})
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := roundTrip(c, 2); !isTimeout(err) {
		t.Fatalf("blackholed request: %v, want a read timeout", err)
	}
	if err := p.RemoveToxic("bh"); err != nil {
		t.Fatal(err)
	}
	// The connection lives on; a new request (3) is answered.
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	f, err := roundTrip(c, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := binary.BigEndian.Uint32(f[4:]); got != 3 {
		t.Fatalf("answer to %d, want 3", got)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestResetPeer(t *testing.T) {
	_, p := newTestProxy(t, 1, echoUpstream(t, 10))
	addToxic(t, p, "rp", "reset_peer", Downstream, map[string]any{"timeout": 100})
	c := dial(t, p)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := c.Read(make([]byte, 1))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read: %v, want connection reset", err)
	}
}

func TestLimitData(t *testing.T) {
	_, p := newTestProxy(t, 1, echoUpstream(t, 100))
	addToxic(t, p, "ld", "limit_data", Downstream, map[string]any{"bytes": 250})
	c := dial(t, p)
	for i := int32(0); i < 3; i++ {
		if _, err := c.Write(request(i)); err != nil {
			t.Fatal(err)
		}
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatal(err)
	}
	if len(b) != 250 {
		t.Fatalf("read %d bytes, want exactly 250", len(b))
	}
}

// collect runs one chunk through a toxic with a stub collecting what it
// passes on.
func collect(t *testing.T, tx Toxic, seed uint64, c Chunk) []Chunk {
	t.Helper()
	g := NewGroup(Options{Seed: seed})
	p := &Proxy{g: g, name: "unit"}
	cn := &conn{p: p, done: make(chan struct{})}
	var out []Chunk
	s := &Stub{Rand: p.toxicRand("t"), Done: make(chan struct{}), c: cn,
		next: func(c Chunk) error { out = append(out, c); return nil }}
	if st, ok := tx.(Stateful); ok {
		s.State = st.NewState()
	}
	if err := tx.Pipe(s, c); err != nil && !errors.Is(err, ErrClose) {
		t.Fatal(err)
	}
	return out
}

func TestSlicer(t *testing.T) {
	data := make([]byte, 1000)
	for i := range data {
		data[i] = byte(i)
	}
	tx := &SlicerToxic{AverageSize: 100, SizeVariation: 40, Delay: 10}
	out := collect(t, tx, 1, Chunk{Data: data, Time: time.Now()})
	var joined []byte
	for _, c := range out {
		if len(c.Data) < 60 || len(c.Data) > 140 {
			if len(joined)+len(c.Data) != len(data) { // the last piece may be short
				t.Fatalf("piece of %d bytes outside 100±40", len(c.Data))
			}
		}
		joined = append(joined, c.Data...)
	}
	if len(out) < 7 || string(joined) != string(data) {
		t.Fatalf("%d pieces, data intact %v", len(out), string(joined) == string(data))
	}
	// The same seed slices the same way.
	again := collect(t, tx, 1, Chunk{Data: data, Time: time.Now()})
	if len(again) != len(out) {
		t.Fatal("same seed sliced differently")
	}
	for i := range out {
		if len(out[i].Data) != len(again[i].Data) {
			t.Fatal("same seed sliced differently")
		}
	}
}

func TestToxicity(t *testing.T) {
	// A toxic with toxicity 0.5 applies to some connections, not all, and
	// to the same ones for the same seed.
	pattern := func(seed uint64) []bool {
		_, p := newTestProxy(t, seed, echoUpstream(t, 10))
		if err := p.AddToxic(ToxicSpec{Name: "lat", Type: "latency", Toxicity: 0.5, Attributes: json.RawMessage(`{"latency":100}`)}); err != nil {
			t.Fatal(err)
		}
		var got []bool
		for i := 0; i < 12; i++ {
			c := dial(t, p)
			start := time.Now()
			if _, err := roundTrip(c, 1); err != nil {
				t.Fatal(err)
			}
			got = append(got, time.Since(start) > 80*time.Millisecond)
			c.Close()
		}
		return got
	}
	a, b := pattern(42), pattern(42)
	some, all := false, true
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, different connections affected: %v vs %v", a, b)
		}
		some = some || a[i]
		all = all && a[i]
	}
	if !some || all {
		t.Fatalf("toxicity 0.5 affected %v", a)
	}
}

func TestBadToxics(t *testing.T) {
	_, p := newTestProxy(t, 1, echoUpstream(t, 10))
	for _, s := range []ToxicSpec{
		{Type: "nope"},
		{Type: "latency", Stream: "sideways"},
		{Type: "slicer", Attributes: json.RawMessage(`{"average_size":0}`)},
		{Type: "bandwidth", Attributes: json.RawMessage(`{"rate":0}`)},
		{Type: "kafka_error", Attributes: json.RawMessage(`{"api_key":0}`)},
		{Type: "kafka_error", Attributes: json.RawMessage(`{"api_key":0,"error_code":6,"trigger":"sometimes"}`)},
		{Type: "kafka_delay_response", Attributes: json.RawMessage(`{"api_key":0,"trigger":"nth"}`)},
		{Type: "latency", Toxicity: 2},
	} {
		if err := p.AddToxic(s); err == nil {
			t.Errorf("accepted %+v", s)
		}
	}
	addToxic(t, p, "x", "latency", Downstream, map[string]any{"latency": 1})
	if err := p.AddToxic(ToxicSpec{Name: "x", Type: "latency"}); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate toxic name: %v", err)
	}
}

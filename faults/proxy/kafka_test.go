package proxy

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkaSetup starts a kfake cluster of n brokers and a proxy group whose
// first proxy fronts broker 0; the others are discovered from metadata.
func kafkaSetup(t *testing.T, n int, seed uint64) (*kfake.Cluster, *Group, *Proxy) {
	t.Helper()
	cl, err := kfake.NewCluster(kfake.NumBrokers(n), kfake.SeedTopics(3, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	g := NewGroup(Options{Seed: seed})
	t.Cleanup(g.Close)
	p, err := g.Add("kafka-0", "127.0.0.1:0", cl.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	return cl, g, p
}

// dialLog records every address a client dials.
type dialLog struct {
	mu    sync.Mutex
	addrs map[string]bool
}

func (d *dialLog) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs[host] = true
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, network, host)
}

func client(t *testing.T, p *Proxy, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(p.Addr()), kgo.RequestRetries(20), kgo.MetadataMinAge(50 * time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond })}, opts...)
	c, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return c
}

// consumeAll reads partitions of "t" from the start until n records came.
func consumeAll(t *testing.T, p *Proxy, n int) []*kgo.Record {
	t.Helper()
	c := client(t, p, kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var recs []*kgo.Record
	cx := ctx(t)
	for len(recs) < n {
		fs := c.PollFetches(cx)
		if cx.Err() != nil {
			t.Fatalf("consumed %d of %d records", len(recs), n)
		}
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	}
	return recs
}

func TestMetadataRewriteKeepsClientsOnProxies(t *testing.T) {
	cl, g, p := kafkaSetup(t, 3, 1)
	d := &dialLog{addrs: map[string]bool{}}
	c := client(t, p, kgo.Dialer(d.dial), kgo.DefaultProduceTopic("t"), kgo.ConsumerGroup("grp"), kgo.ConsumeTopics("t"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for i := 0; i < 30; i++ {
		if err := c.ProduceSync(ctx(t), &kgo.Record{Partition: int32(i % 3), Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	cx := ctx(t)
	for got < 30 && cx.Err() == nil {
		got += c.PollFetches(cx).NumRecords()
	}
	if err := c.CommitUncommittedOffsets(ctx(t)); err != nil { // FindCoordinator, OffsetCommit
		t.Fatal(err)
	}
	proxied := map[string]bool{}
	for _, px := range g.Proxies() {
		proxied[px.Addr()] = true
	}
	if len(g.Proxies()) != 3 {
		t.Fatalf("%d proxies, want one per broker (3)", len(g.Proxies()))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for a := range d.addrs {
		if !proxied[a] {
			t.Fatalf("client dialed %s directly, bypassing the proxies %v", a, proxied)
		}
	}
	for _, a := range cl.ListenAddrs() {
		if d.addrs[a] {
			t.Fatalf("client dialed broker %s directly", a)
		}
	}
	if len(d.addrs) < 2 {
		t.Fatalf("client reached only %v", d.addrs)
	}
}

func TestInjectedError(t *testing.T) {
	_, _, p := kafkaSetup(t, 1, 1)
	c := client(t, p, kgo.DefaultProduceTopic("t"), kgo.DisableIdempotentWrite())
	if err := c.ProduceSync(ctx(t), &kgo.Record{Value: []byte("warm")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A retriable error once: the client retries and succeeds.
	addToxic(t, p, "nl", "kafka_error", Upstream, map[string]any{"api_key": 0, "error_code": kerr.NotLeaderForPartition.Code, "trigger": "once"})
	if err := c.ProduceSync(ctx(t), &kgo.Record{Value: []byte("a")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if n, _ := p.Fired("nl"); n != 1 {
		t.Fatalf("fired %d times, want 1", n)
	}
	p.RemoveToxic("nl")
	// A fatal error: the client reports exactly it.
	addToxic(t, p, "auth", "kafka_error", Upstream, map[string]any{"api_key": 0, "error_code": kerr.TopicAuthorizationFailed.Code})
	err := c.ProduceSync(ctx(t), &kgo.Record{Value: []byte("b")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce error %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}

func TestLostProduceAnswerNoDuplicate(t *testing.T) {
	if dups := lostAnswers(t, true); dups != 0 {
		t.Fatalf("idempotent producer wrote %d duplicates", dups)
	}
	// The same faults make a producer without idempotence write twice, so
	// the check above can fail.
	if dups := lostAnswers(t, false); dups == 0 {
		t.Fatal("lost answers caused no duplicate without idempotence; the fault did not bite")
	}
}

// lostAnswers produces 20 values with two answers lost and returns how many
// values were read more than once.
func lostAnswers(t *testing.T, idempotent bool) int {
	_, _, p := kafkaSetup(t, 1, 1)
	opts := []kgo.Opt{kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	if !idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	c := client(t, p, opts...)
	if err := c.ProduceSync(ctx(t), &kgo.Record{Value: []byte("v0")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The broker applies the next two produces, but their answers are lost
	// with the connection; the idempotent producer retries them.
	addToxic(t, p, "lost", "kafka_drop_response", Upstream, map[string]any{"api_key": 0, "trigger": "times", "n": 2})
	const n = 20
	for i := 1; i < n; i++ {
		if err := c.ProduceSync(ctx(t), &kgo.Record{Value: []byte(fmt.Sprintf("v%d", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if f, _ := p.Fired("lost"); f != 2 {
		t.Fatalf("dropped %d answers, want 2", f)
	}
	p.RemoveToxic("lost")
	recs := consumeAll(t, p, n)
	// Duplicates would sit beyond the first n records.
	more := client(t, p, kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	recs = recs[:0]
	cx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for cx.Err() == nil {
		more.PollFetches(cx).EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	}
	seen := map[string]int{}
	dups := 0
	for _, r := range recs {
		if seen[string(r.Value)]++; seen[string(r.Value)] == 2 {
			dups++
		}
	}
	if len(seen) != n {
		t.Fatalf("read %d distinct values, want %d", len(seen), n)
	}
	return dups
}

func TestDelayResponse(t *testing.T) {
	_, _, p := kafkaSetup(t, 1, 1)
	c := client(t, p, kgo.DefaultProduceTopic("t"))
	if err := c.ProduceSync(ctx(t), &kgo.Record{Value: []byte("warm")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	addToxic(t, p, "slow", "kafka_delay_response", Upstream, map[string]any{"api_key": 0, "delay": 300})
	start := time.Now()
	if err := c.ProduceSync(ctx(t), &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 280*time.Millisecond {
		t.Fatalf("produce answered in %v, want >= 300ms", d)
	}
}

func TestFetchCorrupt(t *testing.T) {
	_, _, p := kafkaSetup(t, 1, 1)
	pc := client(t, p, kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < 5; i++ {
		if err := pc.ProduceSync(ctx(t), &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("corrupt", func(t *testing.T) {
		addToxic(t, p, "crc", "kafka_fetch_corrupt", Downstream, map[string]any{"mode": "corrupt", "trigger": "once"})
		defer p.RemoveToxic("crc")
		c := client(t, p, kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		cx := ctx(t)
		var fetchErr error
		got := 0
		for got < 5 && cx.Err() == nil {
			fs := c.PollFetches(cx)
			for _, e := range fs.Errors() {
				if e.Err != context.DeadlineExceeded {
					fetchErr = e.Err
				}
			}
			got += fs.NumRecords()
		}
		if fetchErr == nil || !strings.Contains(strings.ToLower(fetchErr.Error()), "crc") {
			t.Fatalf("corrupt batch not detected: %v", fetchErr)
		}
	})
	t.Run("duplicate", func(t *testing.T) {
		addToxic(t, p, "dup", "kafka_fetch_corrupt", Downstream, map[string]any{"mode": "duplicate", "trigger": "once"})
		defer p.RemoveToxic("dup")
		recs := consumeAll(t, p, 5)
		if n, _ := p.Fired("dup"); n != 1 {
			t.Fatalf("fired %d times", n)
		}
		seen := map[int64]bool{}
		for _, r := range recs {
			if seen[r.Offset] {
				t.Fatalf("offset %d delivered twice", r.Offset)
			}
			seen[r.Offset] = true
		}
	})
}

func TestRefuseConnections(t *testing.T) {
	_, p := newTestProxy(t, 1, echoUpstream(t, 10))
	addToxic(t, p, "no", "kafka_refuse_connection", Upstream, map[string]any{"trigger": "times", "n": 2})
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", p.Addr())
		if err == nil {
			c.SetDeadline(time.Now().Add(2 * time.Second))
			_, err = roundTrip(c, 1)
			c.Close()
		}
		if refused := err != nil; refused != (i < 2) {
			t.Fatalf("connection %d: err %v", i, err)
		}
	}
}

// faultSequence sends n requests, one per connection when a connection is
// cut, and returns which were answered with an error.
func faultSequence(t *testing.T, seed uint64) string {
	_, p := newTestProxy(t, seed, echoUpstream(t, 10))
	addToxic(t, p, "coin", "kafka_drop_response", Upstream, map[string]any{"api_key": 18, "trigger": "probability", "p": 0.5})
	var b strings.Builder
	c := dial(t, p)
	for i := int32(0); i < 40; i++ {
		c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := roundTrip(c, i); err != nil {
			b.WriteByte('x')
			c = dial(t, p)
			continue
		}
		b.WriteByte('.')
	}
	return b.String()
}

func TestSameSeedSameFaults(t *testing.T) {
	a, b, other := faultSequence(t, 7), faultSequence(t, 7), faultSequence(t, 8)
	t.Logf("seed 7: %s\nseed 8: %s", a, other)
	if a != b {
		t.Fatalf("same seed, different faults:\n%s\n%s", a, b)
	}
	if a == other {
		t.Fatal("different seeds injected the same 40 faults")
	}
	if !strings.Contains(a, "x") || !strings.Contains(a, ".") {
		t.Fatalf("p=0.5 trigger gave %s", a)
	}
}

func TestErrorResponsesDecode(t *testing.T) {
	// Every key answered with a built error response decodes as that
	// key's response at the request's version.
	for _, tc := range []struct {
		key     int16
		version int16
	}{{0, 3}, {0, 9}, {1, 4}, {1, 12}, {2, 5}, {3, 1}, {3, 12}, {8, 2}, {8, 9}, {9, 1}, {9, 8}, {10, 2}, {10, 4}, {11, 5}, {22, 4}, {26, 3}} {
		r := &Request{Key: tc.key, Version: tc.version, CorrelationID: 77}
		req := kmsgReq(t, tc.key, tc.version)
		r.Body = req
		frame, err := errorResponse(r, kerr.CoordinatorNotAvailable.Code)
		if err != nil {
			t.Fatalf("key %d v%d: %v", tc.key, tc.version, err)
		}
		if int(binary.BigEndian.Uint32(frame)) != len(frame)-4 || int32(binary.BigEndian.Uint32(frame[4:])) != 77 {
			t.Fatalf("key %d v%d: bad framing", tc.key, tc.version)
		}
		resp, body, err := responseBody(frame, tc.key, tc.version)
		if err != nil {
			t.Fatal(err)
		}
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("key %d v%d: response does not decode: %v", tc.key, tc.version, err)
		}
	}
}

func TestHTTPAPI(t *testing.T) {
	g := NewGroup(Options{Seed: 1, NoDiscover: true})
	defer g.Close()
	srv := httptestServer(t, g)
	up := echoUpstream(t, 10)
	do := func(method, path, body string, want int) []byte {
		t.Helper()
		code, b := httpDo(t, method, srv+path, body)
		if code != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, code, b, want)
		}
		return b
	}
	do("GET", "/version", "", 200)
	do("POST", "/proxies", fmt.Sprintf(`{"name":"k","listen":"127.0.0.1:0","upstream":%q,"enabled":true}`, up), 201)
	do("POST", "/proxies", fmt.Sprintf(`{"name":"k","listen":"127.0.0.1:0","upstream":%q}`, up), 409)
	var proxies map[string]proxyJSON
	if err := json.Unmarshal(do("GET", "/proxies", "", 200), &proxies); err != nil || proxies["k"].Upstream != up {
		t.Fatalf("GET /proxies: %v %+v", err, proxies)
	}
	// toxiproxy-cli's body: no name, no toxicity.
	do("POST", "/proxies/k/toxics", `{"type":"latency","stream":"downstream","attributes":{"latency":120}}`, 200)
	var spec ToxicSpec
	if err := json.Unmarshal(do("GET", "/proxies/k/toxics/latency_downstream", "", 200), &spec); err != nil || spec.Toxicity != 1 {
		t.Fatalf("toxic: %v %+v", err, spec)
	}
	p := g.Get("k")
	c := dial(t, p)
	start := time.Now()
	if _, err := roundTrip(c, 1); err != nil || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("latency toxic via HTTP not applied: %v %v", err, time.Since(start))
	}
	do("POST", "/proxies/k/toxics/latency_downstream", `{"attributes":{"latency":5}}`, 200)
	do("POST", "/proxies/k/toxics", `{"name":"e","type":"kafka_error","toxicity":0,"attributes":{"api_key":3,"error_code":3}}`, 200)
	do("POST", "/proxies/k/toxics", `{"type":"kafka_error","attributes":{"api_key":3}}`, 400)
	do("DELETE", "/proxies/k/toxics/e", "", 204)
	do("DELETE", "/proxies/k/toxics/e", "", 404)
	do("POST", "/proxies/k", `{"enabled":false}`, 200)
	if _, err := net.Dial("tcp", p.Addr()); err == nil {
		t.Fatal("disabled proxy accepted a connection")
	}
	do("POST", "/reset", "", 204)
	if !p.Enabled() || len(p.Toxics()) != 0 {
		t.Fatal("reset left the proxy disabled or toxic")
	}
	do("DELETE", "/proxies/k", "", 204)
	do("GET", "/proxies/k", "", 404)
}

package broker_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/broker/record"
	"github.com/cascade-kafka/cascade/broker/wire"
)

// The bounds the hostile soak holds the broker to. The test process holds
// the broker, the ordinary clients and every attacker, so the memory and
// descriptor figures are the whole process's.
const (
	hostileDuration = 40 * time.Second
	// hostileProbeMax bounds how long a new connection's ApiVersions may
	// take at any moment of the soak. A stall the limits let through lasts
	// as long as its attacker (seconds to the whole soak); the process's
	// own collector pauses on two loaded cores have reached about a
	// second, so the bound is twice that.
	hostileProbeMax = 2 * time.Second
	// hostileP99Max bounds the ordinary producer's p99 acknowledgement
	// latency (acks=all, idempotent), on a loaded two-core machine.
	hostileP99Max = time.Second
	// hostilePeakRSS bounds the process's peak resident set (VmHWM).
	hostilePeakRSS = 1 << 30
	// hostileFDSlack is what the process may hold beyond one descriptor per
	// segment of the old-timestamp topic: sockets of the attackers and
	// clients, the other partitions' segments, the runtime's own.
	hostileFDSlack = 600
	// hostileSegments is how many segments the old-timestamp attacker
	// rolls, one per batch.
	hostileSegments = 3000
)

// hostileFrame encodes req as a request frame with correlation id corr;
// the raw-connection tests send theirs with it too.
func hostileFrame(req kmsg.Request, corr int32) []byte {
	id := "hostile"
	b := wire.AppendRequestHeader(nil, wire.RequestHeader{Key: req.Key(), Version: req.GetVersion(), CorrelationID: corr, ClientID: &id, Flexible: req.IsFlexible()})
	b = req.AppendTo(b)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// hostile runs the attackers until ctx ends; each counts what it sent.
type hostile struct {
	addr string
	sent sync.Map // attacker name -> *atomic.Int64
	wg   sync.WaitGroup
}

func (h *hostile) count(name string) {
	v, _ := h.sent.LoadOrStore(name, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// answer counts a produce answer by its error code (-1: no answer).
func (h *hostile) answer(what string, code int16) {
	name := what + " failed"
	if code >= 0 {
		name = fmt.Sprintf("%s answered %s", what, errName(code))
	}
	h.count(name)
}

func errName(code int16) string {
	if code == 0 {
		return "ok"
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return err.(*kerr.Error).Message
	}
	return strconv.Itoa(int(code))
}

func (h *hostile) dial(ctx context.Context) net.Conn {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", h.addr)
	if err != nil {
		return nil
	}
	return c
}

// every runs f every period until ctx ends.
func (h *hostile) every(ctx context.Context, period time.Duration, f func()) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			f()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// stall holds connections that announce a maximum-size Produce and then
// send its first kilobyte, or trickle one byte a second: neither may make
// another connection wait.
func (h *hostile) stall(ctx context.Context) {
	for i := 0; i < 4; i++ {
		trickle := i%2 == 1
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			for ctx.Err() == nil {
				c := h.dial(ctx)
				if c == nil {
					return
				}
				hdr := binary.BigEndian.AppendUint32(nil, 100<<20-1)
				hdr = binary.BigEndian.AppendUint16(hdr, 0) // Produce
				hdr = binary.BigEndian.AppendUint16(hdr, 9)
				c.Write(hdr)
				if !trickle {
					c.Write(make([]byte, 1024))
				}
				h.count("stalled frames")
				for ctx.Err() == nil {
					if _, err := c.Write([]byte{0}); err != nil {
						break // closed by the broker: start again
					}
					select {
					case <-ctx.Done():
					case <-time.After(time.Second):
					}
				}
				c.Close()
			}
		}()
	}
}

// abandonFetches sends long-poll fetches naming many partitions with the
// largest MaxWaitMs, then closes their connections.
func (h *hostile) abandonFetches(ctx context.Context, topic string) {
	req := fetchReq(12, topic, [16]byte{})
	req.MaxWaitMillis, req.MinBytes = 1<<31-1, 1<<30
	for p := int32(0); p < 20000; p++ {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p%3, 1<<40, 1<<20
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	}
	frame := hostileFrame(req, 1)
	h.every(ctx, 2*time.Second, func() {
		var cs []net.Conn
		for i := 0; i < 11; i++ {
			if c := h.dial(ctx); c != nil {
				c.Write(frame)
				cs = append(cs, c)
				h.count("abandoned long polls")
			}
		}
		time.Sleep(300 * time.Millisecond)
		for _, c := range cs {
			c.Close()
		}
	})
}

// floodSessions opens fetch sessions naming 25,000 partitions of topics
// that do not exist, each in a frame just under Fetch's 1 MiB frame cap, so
// that every request reaches the session cache.
func (h *hostile) floodSessions(ctx context.Context) {
	seq := 0
	h.every(ctx, time.Second, func() {
		c := h.dial(ctx)
		if c == nil {
			return
		}
		defer c.Close()
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.SessionID, req.SessionEpoch, req.MaxBytes = -1, 0, 0, 1<<20
		for tp := 0; tp < 25; tp++ {
			seq++
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = fmt.Sprintf("no-such-topic-%d", seq)
			for p := int32(0); p < 1000; p++ {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.PartitionMaxBytes = p, 1<<10
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(hostileFrame(req, 1)); err == nil {
			wire.ReadFrame(c, 256<<20)
		}
		h.count("session floods")
	})
}

// zstdBomb is a zstd frame of a few kilobytes that declares a 512 MiB
// window and holds RLE blocks of 128 KiB each.
func zstdBomb(blocks int) []byte {
	b := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 19 << 3} // magic, no checksum or size, window 2^29
	for i := 0; i < blocks; i++ {
		last := 0
		if i == blocks-1 {
			last = 1
		}
		hdr := uint32(128<<10)<<3 | 1<<1 | uint32(last) // RLE block of 128 KiB
		b = append(b, byte(hdr), byte(hdr>>8), byte(hdr>>16), 'x')
	}
	return b
}

// badBatches produces zstd window bombs, records whose own timestamp is
// far beyond message.timestamp.after.max.ms inside an honest header, and
// batches that each roll a segment (timestamps stepping by more than
// segment.ms), on raw connections.
func (h *hostile) badBatches(ctx context.Context, t *testing.T, oldTopic, bombTopic string) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		var c net.Conn
		corr := int32(0)
		// send writes req and reads its answer, and returns the answer's
		// partition error code, or -1 when the connection failed.
		send := func(req *kmsg.ProduceRequest) int16 {
			if c == nil {
				if c = h.dial(ctx); c == nil {
					return -1
				}
			}
			corr++
			c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write(hostileFrame(req, corr)); err != nil {
				c.Close()
				c = nil
				return -1
			}
			frame, err := wire.ReadFrame(c, 1<<20)
			if err != nil {
				c.Close()
				c = nil
				return -1
			}
			resp := req.ResponseKind().(*kmsg.ProduceResponse)
			resp.SetVersion(req.Version)
			body := frame[4:]
			if wire.ResponseHeaderFlexible(req.Key(), req.Version) {
				body = body[1:] // empty tag section
			}
			if err := resp.ReadFrom(body); err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				t.Errorf("produce answer does not decode: %v", err)
				return -1
			}
			return resp.Topics[0].Partitions[0].ErrorCode
		}
		defer func() {
			if c != nil {
				c.Close()
			}
		}()
		base := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
		bomb := zstdBomb(1000)
		for i := 0; ctx.Err() == nil; i++ {
			if i < hostileSegments {
				// One segment per batch: each is two hours after the
				// last, and the topic's segment.ms is one hour.
				old, err := record.Build(record.NewSpec(record.Rec{Timestamp: base + int64(i)*2*3600*1000, Value: []byte("old")}))
				if err != nil {
					t.Error(err)
					return
				}
				h.answer("segment-rolling batch", send(produceReq(9, 1, oldTopic, 0, old)))
			} else {
				time.Sleep(20 * time.Millisecond)
			}
			if i%5 == 0 {
				spec := record.NewSpec(record.Rec{Timestamp: time.Now().UnixMilli(), Value: []byte("bomb")})
				spec.Codec = record.CodecZstd
				b, err := record.Build(spec)
				if err != nil {
					t.Error(err)
					return
				}
				h.answer("zstd window bomb", send(produceReq(9, 1, bombTopic, 0, replaceRecords(b, bomb))))
				future, err := record.Build(record.NewSpec(
					record.Rec{Timestamp: time.Now().UnixMilli(), Value: []byte("now")},
					record.Rec{Timestamp: time.Now().Add(1000 * time.Hour).UnixMilli(), Value: []byte("future")}))
				if err != nil {
					t.Error(err)
					return
				}
				h.answer("future-timestamp record", send(produceReq(9, 1, bombTopic, 0, future)))
			}
		}
	}()
}

// randomRequests sends well-typed requests of every API at every version
// with some of their bytes changed.
func (h *hostile) randomRequests(ctx context.Context, seed int64) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		rng := rand.New(rand.NewSource(seed))
		var frames [][]byte
		for key := int16(0); key <= kmsg.MaxKey; key++ {
			req := kmsg.RequestForKey(key)
			if req == nil {
				continue
			}
			for v := int16(0); v <= req.MaxVersion(); v++ {
				r := kmsg.RequestForKey(key)
				r.SetVersion(v)
				frames = append(frames, hostileFrame(r, 1))
			}
		}
		var c net.Conn
		defer func() {
			if c != nil {
				c.Close()
			}
		}()
		for n := 0; n < 50000 && ctx.Err() == nil; n++ {
			if c == nil {
				if c = h.dial(ctx); c == nil {
					return
				}
			}
			f := append([]byte(nil), frames[rng.Intn(len(frames))]...)
			for k := rng.Intn(4); k > 0 && len(f) > 8; k-- {
				f[8+rng.Intn(len(f)-8)] = byte(rng.Intn(256))
			}
			// A request may have no answer (Produce with acks=0): move on soon.
			c.SetDeadline(time.Now().Add(300 * time.Millisecond))
			if _, err := c.Write(f); err != nil {
				c.Close()
				c = nil
				continue
			}
			if _, err := wire.ReadFrame(c, 64<<20); err != nil {
				c.Close()
				c = nil
			}
			h.count("random requests")
		}
	}()
}

// replaceRecords swaps a built batch's records section for raw and fixes
// the batch length and CRC, so that the header is honest and the payload
// is not.
func replaceRecords(batch, raw []byte) []byte {
	const recordsAt = 61
	out := append(append([]byte(nil), batch[:recordsAt]...), raw...)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], record.Batch(out).ComputeCRC())
	return out
}

// procStatus returns a field of /proc/self/status in bytes (kB fields).
func procStatus(t *testing.T, field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

func openFDs(t *testing.T) int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(es)
}

// TestHostileSoak runs every kind of hostile client at once against one
// broker while an ordinary idempotent producer and a consumer keep
// working: stalled and trickling large frames, abandoned long-poll
// fetches, fetch sessions naming tens of thousands of unknown partitions,
// zstd window bombs, records with timestamps beyond the allowed range,
// batches that roll a segment each, and randomly changed well-typed
// requests of every API. Throughout, a new connection's ApiVersions is
// answered within hostileProbeMax; at the end every acknowledged record
// was read exactly once, the producer's p99 stayed under hostileP99Max,
// and the process's peak RSS and descriptors stayed under their bounds.
func TestHostileSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("a soak of about a minute; skipped with -short")
	}
	b := brokertest.Start(t, map[string]string{"cascade.admin.listener": "127.0.0.1:0"})
	ordinary, old, bombs := "ordinary", "old-timestamps", "bombs"
	createTopic(t, b, ordinary, 3)
	createTopic(t, b, bombs, 1)
	createTopic(t, b, old, 1)
	forever, hour := "-1", "3600000"
	if err := b.Metadata().AlterTopicConfigs(old, map[string]*string{"retention.ms": &forever, "segment.ms": &hour}, false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hostileDuration)
	defer cancel()

	h := &hostile{addr: b.Addr()}
	h.stall(ctx)
	h.abandonFetches(ctx, ordinary)
	h.floodSessions(ctx)
	h.badBatches(ctx, t, old, bombs)
	for seed := int64(1); seed <= 2; seed++ {
		h.randomRequests(ctx, seed)
	}

	// The probe: a new connection's ApiVersions, every 200 ms.
	var probeMax, probeDial time.Duration
	var probes, probeFails int
	h.every(ctx, 200*time.Millisecond, func() {
		start := time.Now()
		c, err := net.DialTimeout("tcp", b.Addr(), 5*time.Second)
		dialed := time.Since(start)
		if err == nil {
			c.SetDeadline(time.Now().Add(5 * time.Second))
			req := kmsg.NewPtrApiVersionsRequest()
			req.SetVersion(3)
			req.ClientSoftwareName, req.ClientSoftwareVersion = "probe", "1"
			if _, err = c.Write(hostileFrame(req, 7)); err == nil {
				_, err = wire.ReadFrame(c, 1<<20)
			}
			c.Close()
		}
		took := time.Since(start)
		probes++
		if err != nil {
			probeFails++
			t.Logf("probe %d: %v after %v", probes, err, took)
		}
		if took > probeMax {
			probeMax, probeDial = took, dialed
		}
	})

	// The ordinary producer: idempotent, acks=all, one record at a time
	// per partition so that each acknowledgement is timed.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		kgo.ConsumeTopics(ordinary), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var (
		mu        sync.Mutex
		latencies []time.Duration
		acked     = map[string]bool{}
		produceWG sync.WaitGroup
	)
	produceWG.Add(1)
	go func() {
		defer produceWG.Done()
		for i := 0; ctx.Err() == nil; i++ {
			v := fmt.Sprintf("ordinary-%d", i)
			start := time.Now()
			r := cl.ProduceSync(ctx, &kgo.Record{Topic: ordinary, Value: []byte(v)})
			if err := r.FirstErr(); err != nil {
				if ctx.Err() == nil {
					t.Errorf("ordinary produce %d: %v", i, err)
				}
				return
			}
			mu.Lock()
			latencies = append(latencies, time.Since(start))
			acked[v] = true
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()

	var peakFDs int
	h.every(ctx, time.Second, func() { peakFDs = max(peakFDs, openFDs(t)) })
	<-ctx.Done()
	produceWG.Wait()
	h.wg.Wait()

	// Every acknowledged record, read once.
	seen := map[string]int{}
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	for len(seen) < len(acked) && rctx.Err() == nil {
		fs := cl.PollFetches(rctx)
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
	for v := range acked {
		if seen[v] != 1 {
			t.Errorf("acknowledged record %s read %d times", v, seen[v])
		}
	}

	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	if len(latencies) < 100 {
		t.Fatalf("the ordinary producer was acknowledged only %d times in %v", len(latencies), hostileDuration)
	}
	p99 := latencies[len(latencies)*99/100]
	segments := countSegments(t, b.Dir, old)
	rss := procStatus(t, "VmHWM")
	var report []string
	h.sent.Range(func(k, v any) bool {
		report = append(report, fmt.Sprintf("%s %d", k, v.(*atomic.Int64).Load()))
		return true
	})
	sort.Strings(report)
	t.Logf("sent: %s", strings.Join(report, ", "))
	t.Logf("ordinary producer: %d acknowledged, p50 %v, p99 %v, max %v; probes %d, slowest %v (%v of it connecting); peak RSS %d MiB; peak descriptors %d for %d segments",
		len(latencies), latencies[len(latencies)/2], p99, latencies[len(latencies)-1], probes, probeMax, probeDial, rss>>20, peakFDs, segments)
	limits := scrapeLimits(t, b.AdminAddr())
	t.Logf("what the limits did: %s", strings.Join(limits.lines, "; "))
	if limits.panics != 0 {
		t.Errorf("%v panics recovered: hostile input must get an error code or a closed connection, not a panic", limits.panics)
	}
	if limits.refused == 0 {
		t.Errorf("no frame refused by the broker's limits during the soak")
	}
	if probeFails > 0 || probeMax > hostileProbeMax {
		t.Errorf("ApiVersions on a new connection: %d of %d failed, slowest %v (bound %v)", probeFails, probes, probeMax, hostileProbeMax)
	}
	if p99 > hostileP99Max {
		t.Errorf("ordinary producer p99 %v, bound %v", p99, hostileP99Max)
	}
	if rss > hostilePeakRSS {
		t.Errorf("peak RSS %d MiB, bound %d MiB", rss>>20, hostilePeakRSS>>20)
	}
	if peakFDs > segments+hostileFDSlack {
		t.Errorf("peak descriptors %d for %d segments, bound %d", peakFDs, segments, segments+hostileFDSlack)
	}
}

func countSegments(t *testing.T, dir, topic string) int {
	es, err := os.ReadDir(dir + "/" + topic + "-0")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range es {
		if strings.HasSuffix(e.Name(), ".log") {
			n++
		}
	}
	return n
}

// limitMetrics is what the broker's metrics say its limits did.
type limitMetrics struct {
	lines                   []string
	panics, closed, refused float64
}

// scrapeLimits reads the admin listener's /metrics and keeps the series of
// the network, fetch-session, descriptor and panic metrics.
func scrapeLimits(t *testing.T, addr string) limitMetrics {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m limitMetrics
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "#") || !(strings.HasPrefix(line, "cascade_network_") || strings.HasPrefix(line, "cascade_fetch_session") ||
			strings.HasPrefix(line, "cascade_panics_") || strings.HasPrefix(line, "cascade_log_open_segment_files")) {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		if v == 0 {
			continue
		}
		m.lines = append(m.lines, line)
		switch {
		case strings.HasPrefix(name, "cascade_panics_recovered_total"):
			m.panics += v
		case strings.HasPrefix(name, "cascade_network_frames_refused_total"):
			m.refused += v
		}
	}
	return m
}

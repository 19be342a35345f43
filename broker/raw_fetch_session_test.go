package broker_test

import (
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

// sessionFetcher drives one fetch session over a raw connection.
type sessionFetcher struct {
	rc        *rawConn
	v         int16
	replicaID int32
	id, epoch int32
}

// full sends a full fetch (epoch 0) of req's partitions and records the
// session the broker answered with (0 for none).
func (f *sessionFetcher) full(req *kmsg.FetchRequest) *kmsg.FetchResponse {
	f.rc.t.Helper()
	req.SetVersion(f.v)
	req.ReplicaID = f.replicaID
	req.ReplicaState.ID, req.ReplicaState.Epoch = f.replicaID, -1
	req.SessionID, req.SessionEpoch = 0, 0
	resp := f.rc.do(req).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		f.rc.t.Fatalf("full fetch: error %d", resp.ErrorCode)
	}
	f.id, f.epoch = resp.SessionID, 1
	return resp
}

// incremental sends an incremental fetch naming no partitions.
func (f *sessionFetcher) incremental() *kmsg.FetchResponse {
	f.rc.t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(f.v)
	req.ReplicaID, req.MaxBytes = f.replicaID, 1<<20
	req.ReplicaState.ID, req.ReplicaState.Epoch = f.replicaID, -1
	req.SessionID, req.SessionEpoch = f.id, f.epoch
	resp := f.rc.do(req).(*kmsg.FetchResponse)
	if resp.ErrorCode == 0 {
		f.epoch++
	}
	return resp
}

// partsOf builds a fetch of partitions 0..n-1 of a topic.
func partsOf(v int16, topic string, id [16]byte, n int32) *kmsg.FetchRequest {
	var ps []fetchPos
	for i := int32(0); i < n; i++ {
		ps = append(ps, fetchPos{i, 0, 1 << 20})
	}
	return fetchReq(v, topic, id, ps...)
}

// scrape reads one sample of a metric from the admin listener.
func scrape(t *testing.T, b *brokertest.Broker, series string) float64 {
	t.Helper()
	body := httpGet(t, "http://"+b.AdminAddr()+"/metrics")
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("metric %s not exposed", series)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// unknownFlood is a full fetch of parts partitions of topics that do not
// exist: by name before v13, by random topic id from v13.
func unknownFlood(v int16, seed, parts int) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes = 1 << 20
	const perTopic = 1000
	for t := 0; t*perTopic < parts; t++ {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = fmt.Sprintf("ghost-%d-%d", seed, t)
		rt.TopicID = [16]byte{0xee, byte(seed), byte(seed >> 8), byte(t), byte(t >> 8), 1}
		for p := 0; p < perTopic && t*perTopic+p < parts; p++ {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes = int32(p), 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// TestFetchSessionFloodOfUnknownPartitions floods the broker with fetch
// sessions naming 400,000 partitions that do not exist: every one is
// answered with its error, none is cached (by the accounting and by the
// heap), and consumers holding sessions keep fetching throughout.
func TestFetchSessionFloodOfUnknownPartitions(t *testing.T) {
	b := brokertest.Start(t, map[string]string{"cascade.admin.listener": "127.0.0.1:0"})
	topic := createTopic(t, b, "live", 1)
	prod := dial(t, b)

	// A franz-go consumer in the background, and a raw one whose session
	// is checked after every flood request.
	kcl := b.Client(t, fastMeta, kgo.ConsumeTopics("live"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	raw := &sessionFetcher{rc: dial(t, b), v: 13}
	raw.full(fetchReq(13, "", topic.ID, fetchPos{0, 0, 1 << 20}))
	if raw.id == 0 {
		t.Fatal("no session for the consumer")
	}
	before := heapInUse()

	const sessions, perSession = 8, 50_000
	produced := 0
	for i := 0; i < sessions; i++ {
		v := int16(12 + i%2) // names and topic ids
		f := &sessionFetcher{rc: dial(t, b), v: v}
		resp := f.full(unknownFlood(v, i, perSession))
		want := kerr.UnknownTopicOrPartition.Code
		if v >= 13 {
			want = kerr.UnknownTopicID.Code
		}
		n := 0
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				if p.ErrorCode != want {
					t.Fatalf("flood v%d partition %s-%d: error %d, want %d", v, rt.Topic, p.Partition, p.ErrorCode, want)
				}
				n++
			}
		}
		if n != perSession {
			t.Fatalf("flood v%d answered %d of %d partitions", v, n, perSession)
		}
		if resp.SessionID != 0 {
			t.Errorf("flood v%d: session %d created for partitions that do not exist", v, resp.SessionID)
		}

		produceN(t, prod, "live", 0, 1)
		produced++
		got := raw.incremental()
		if got.ErrorCode != 0 || got.SessionID != raw.id || len(got.Topics) != 1 {
			t.Fatalf("consumer session during flood: error %d session %d (want %d), %d topics", got.ErrorCode, got.SessionID, raw.id, len(got.Topics))
		}
		if n := recordsIn(t, got.Topics[0].Partitions[0].RecordBatches); n != 1 {
			t.Fatalf("consumer got %d records, want 1", n)
		}
		// Next time, from after the record just read.
		next := fetchReq(13, "", topic.ID, fetchPos{0, int64(produced), 1 << 20})
		next.SessionID, next.SessionEpoch = raw.id, raw.epoch
		if r := raw.rc.do(next).(*kmsg.FetchResponse); r.ErrorCode != 0 {
			t.Fatalf("consumer offset update: %d", r.ErrorCode)
		}
		raw.epoch++
	}

	grew := int64(heapInUse()) - int64(before)
	t.Logf("heap grew %d KiB during a flood of %d unknown partitions", grew>>10, sessions*perSession)
	// The old unbounded cache held about 100 MiB here.
	if grew > 24<<20 {
		t.Errorf("heap grew %d MiB during the flood", grew>>20)
	}
	// The raw consumer's partition, and franz-go's if its session is open.
	if parts := scrape(t, b, "cascade_fetch_session_partitions"); parts < 1 || parts > 2 {
		t.Errorf("%v partitions cached, want the consumers' one each", parts)
	}
	if by := scrape(t, b, "cascade_fetch_session_bytes"); by <= 0 || by > 32<<20 {
		t.Errorf("session bytes %v, want within the default cap", by)
	}

	ctx := ctxT(t)
	var seen int
	for seen < produced {
		fs := kcl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("franz-go consumer read %d of %d records", seen, produced)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("franz-go fetch %s-%d: %v", tp, p, err) })
		seen += len(fs.Records())
	}
}

// TestFetchSessionEvictionOrder holds the cache to Kafka's
// FetchSessionCache rules with two slots and no session stale: a new
// consumer session displaces no session younger than the eviction
// threshold; a follower's displaces the least valuable consumer session,
// smallest first, but no young follower session.
func TestFetchSessionEvictionOrder(t *testing.T) {
	b := brokertest.Start(t, map[string]string{"max.incremental.fetch.session.cache.slots": "2"})
	topic := createTopic(t, b, "ev", 8)
	open := func(replica int32, n int32) *sessionFetcher {
		f := &sessionFetcher{rc: dial(t, b), v: 13, replicaID: replica}
		f.full(partsOf(13, "", topic.ID, n))
		return f
	}
	alive := func(name string, f *sessionFetcher) {
		t.Helper()
		if r := f.incremental(); r.ErrorCode != 0 || r.SessionID != f.id {
			t.Fatalf("%s: error %d session %d, want session %d", name, r.ErrorCode, r.SessionID, f.id)
		}
	}
	gone := func(name string, f *sessionFetcher) {
		t.Helper()
		if r := f.incremental(); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
			t.Fatalf("%s: error %d, want FETCH_SESSION_ID_NOT_FOUND", name, r.ErrorCode)
		}
	}

	a, bb := open(-1, 1), open(-1, 2)
	if a.id == 0 || bb.id == 0 {
		t.Fatal("sessions not created with free slots")
	}
	// A larger consumer session may not displace young ones.
	if c := open(-1, 3); c.id != 0 {
		t.Fatalf("consumer session %d created by displacing a young one", c.id)
	}
	alive("a", a)
	alive("b", bb)
	// A follower's session displaces the smallest consumer session.
	f1 := open(2, 1)
	if f1.id == 0 {
		t.Fatal("follower session not created")
	}
	gone("a", a)
	alive("b", bb)
	// And the next one the remaining consumer session, even a larger one.
	f2 := open(3, 1)
	if f2.id == 0 {
		t.Fatal("second follower session not created")
	}
	gone("b", bb)
	// Young follower sessions are displaced by nobody.
	if f3 := open(4, 8); f3.id != 0 {
		t.Fatal("young follower session displaced")
	}
	if c := open(-1, 8); c.id != 0 {
		t.Fatal("follower session displaced by a consumer")
	}
	alive("f1", f1)
	alive("f2", f2)
}

// TestFetchSessionByteCaps fetches a topic of 64 partitions under small
// byte caps: a session larger than one session may be is not created and
// the fetch is served in full without one; sessions stop being created
// when the total is reached; and an incremental fetch that grows a session
// past its cap ends the session with FETCH_SESSION_ID_NOT_FOUND.
func TestFetchSessionByteCaps(t *testing.T) {
	b := brokertest.Start(t, map[string]string{
		"cascade.admin.listener":                            "127.0.0.1:0",
		"cascade.incremental.fetch.session.max.bytes":       "8192",
		"cascade.incremental.fetch.session.cache.max.bytes": "16384",
	})
	topic := createTopic(t, b, "caps", 64)
	rc := dial(t, b)
	produceN(t, rc, "caps", 5, 1)

	big := &sessionFetcher{rc: rc, v: 13}
	resp := big.full(partsOf(13, "", topic.ID, 64))
	if resp.SessionID != 0 {
		t.Fatalf("session %d created beyond cascade.incremental.fetch.session.max.bytes", resp.SessionID)
	}
	if n := len(resp.Topics[0].Partitions); n != 64 || recordsIn(t, resp.Topics[0].Partitions[5].RecordBatches) != 1 {
		t.Fatalf("sessionless fetch answered %d partitions", n)
	}
	if r := scrape(t, b, `cascade_fetch_session_refusals_total{reason="too_large"}`); r != 1 {
		t.Fatalf("too_large refusals %v", r)
	}

	// Sessions of 16 partitions until the total is reached.
	var open []*sessionFetcher
	for i := 0; i < 20; i++ {
		f := &sessionFetcher{rc: dial(t, b), v: 13}
		f.full(partsOf(13, "", topic.ID, 16))
		if f.id == 0 {
			break
		}
		open = append(open, f)
	}
	if len(open) == 0 || len(open) == 20 {
		t.Fatalf("%d sessions of 16 partitions fit in 16384 bytes", len(open))
	}
	if by := scrape(t, b, "cascade_fetch_session_bytes"); by > 16384 {
		t.Fatalf("session bytes %v above the cap", by)
	}
	if got := scrape(t, b, "cascade_fetch_session_partitions"); got != float64(16*len(open)) {
		t.Fatalf("%v partitions cached, want %d", got, 16*len(open))
	}

	// Growing a session past its own cap ends it.
	f := open[0]
	grow := partsOf(13, "", topic.ID, 64)
	grow.SessionID, grow.SessionEpoch = f.id, f.epoch
	if r := rc.do(grow).(*kmsg.FetchResponse); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("oversized incremental fetch: error %d", r.ErrorCode)
	}
	if r := scrape(t, b, `cascade_fetch_session_evictions_total{reason="too_large"}`); r != 1 {
		t.Fatalf("too_large evictions %v", r)
	}
	if r := f.incremental(); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("grown session still answers: %d", r.ErrorCode)
	}
}

// TestFetchSessionUnknownPartitionNamedAgain: a session keeps no state for
// a partition that does not exist, and once the broker's partitions change
// it is ended, so the client's full fetch names the partition again and
// reads it.
func TestFetchSessionUnknownPartitionNamedAgain(t *testing.T) {
	b := brokertest.Start(t)
	createTopic(t, b, "here", 1)
	rc := dial(t, b)
	f := &sessionFetcher{rc: rc, v: 12}
	both := func() *kmsg.FetchRequest {
		req := fetchReq(12, "here", [16]byte{}, fetchPos{0, 0, 1 << 20})
		later := fetchReq(12, "later", [16]byte{}, fetchPos{0, 0, 1 << 20})
		req.Topics = append(req.Topics, later.Topics...)
		return req
	}
	resp := f.full(both())
	if f.id == 0 || len(resp.Topics) != 2 || resp.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("full fetch: session %d, %+v", f.id, resp.Topics)
	}
	// Unchanged partitions: nothing to answer, the unknown one included.
	if r := f.incremental(); r.ErrorCode != 0 || len(r.Topics) != 0 {
		t.Fatalf("incremental: error %d, %+v", r.ErrorCode, r.Topics)
	}
	createTopic(t, b, "later", 1)
	produceN(t, rc, "later", 0, 1)
	if r := f.incremental(); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("after the partition appeared: error %d, %+v", r.ErrorCode, r.Topics)
	}
	resp = f.full(both())
	if f.id == 0 || len(resp.Topics) != 2 || resp.Topics[1].Partitions[0].ErrorCode != 0 ||
		recordsIn(t, resp.Topics[1].Partitions[0].RecordBatches) != 1 {
		t.Fatalf("full fetch again: session %d, %+v", f.id, resp.Topics)
	}
	produceN(t, rc, "later", 0, 1)
	r := f.incremental()
	if r.ErrorCode != 0 || len(r.Topics) != 1 || r.Topics[0].Topic != "later" {
		t.Fatalf("incremental with both cached: error %d, %+v", r.ErrorCode, r.Topics)
	}
}

// TestFetchSessionFloodOfKnownPartitions opens 2,000 sessions of 256
// partitions that exist (half a million cached partitions if all were
// kept) with slots to spare: the byte cap holds the cache, by its
// accounting and by the heap, and the consumer's young session is not
// displaced by the flood.
func TestFetchSessionFloodOfKnownPartitions(t *testing.T) {
	b := brokertest.Start(t, map[string]string{
		"cascade.admin.listener":                    "127.0.0.1:0",
		"max.incremental.fetch.session.cache.slots": "100000",
	})
	wide := createTopic(t, b, "wide", 256)
	live := createTopic(t, b, "live", 1)
	prod := dial(t, b)
	raw := &sessionFetcher{rc: dial(t, b), v: 13}
	raw.full(fetchReq(13, "", live.ID, fetchPos{0, 0, 1 << 20}))
	if raw.id == 0 {
		t.Fatal("no session for the consumer")
	}
	before := heapInUse()

	flood := &sessionFetcher{rc: dial(t, b), v: 13}
	req := partsOf(13, "", wide.ID, 256)
	created := 0
	deadline := time.Now().Add(2 * time.Minute)
	for i := 0; i < 2000 && time.Now().Before(deadline); i++ {
		flood.full(req)
		if flood.id != 0 {
			created++
		}
		if i%250 == 0 {
			produceN(t, prod, "live", 0, 1)
			if r := raw.incremental(); r.ErrorCode != 0 || r.SessionID != raw.id || len(r.Topics) != 1 {
				t.Fatalf("consumer during flood %d: error %d session %d (want %d), %d topics", i, r.ErrorCode, r.SessionID, raw.id, len(r.Topics))
			}
		}
	}
	grew := int64(heapInUse()) - int64(before)
	t.Logf("%d of 2000 sessions created; heap grew %d KiB", created, grew>>10)
	// The old unbounded cache held about 90 MiB here.
	if grew > 48<<20 {
		t.Errorf("heap grew %d MiB during the flood", grew>>20)
	}
	if created == 0 || created == 2000 {
		t.Fatalf("%d sessions of 256 partitions created under a 32 MiB cap", created)
	}
	if accounted := scrape(t, b, "cascade_fetch_session_bytes"); accounted > 32<<20 {
		t.Errorf("accounted %v bytes, above the default cap", accounted)
	}
	if r := scrape(t, b, `cascade_fetch_session_refusals_total{reason="full"}`); r != float64(2000-created) {
		t.Errorf("%v refusals, want %d", r, 2000-created)
	}
}

// TestFetchSessionEpochMovedOnDuringLongPoll: an incremental fetch that
// waits while a request with the next epoch is served on another
// connection is answered INVALID_FETCH_SESSION_EPOCH, as Kafka's
// IncrementalFetchContext, not with partitions the later one reported.
func TestFetchSessionEpochMovedOnDuringLongPoll(t *testing.T) {
	b := brokertest.Start(t)
	topic := createTopic(t, b, "dup", 1)
	first := &sessionFetcher{rc: dial(t, b), v: 13}
	first.full(fetchReq(13, "", topic.ID, fetchPos{0, 0, 1 << 20}))
	if first.id == 0 {
		t.Fatal("no session")
	}
	waiting := kmsg.NewPtrFetchRequest()
	waiting.SetVersion(13)
	waiting.ReplicaID, waiting.MaxBytes, waiting.MinBytes, waiting.MaxWaitMillis = -1, 1<<20, 1, 1500
	waiting.SessionID, waiting.SessionEpoch = first.id, 1
	corr := first.rc.send(waiting)

	// The same session's next epoch from another connection, answered at
	// once, while the first waits. Bounded: the first waits 1.5 s.
	other := &sessionFetcher{rc: dial(t, b), v: 13, id: first.id, epoch: 2}
	var r *kmsg.FetchResponse
	for i := 0; i < 50; i++ {
		r = other.incremental()
		if r.ErrorCode == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond) // the first has not been read yet
	}
	if r.ErrorCode != 0 {
		t.Fatalf("next epoch: error %d", r.ErrorCode)
	}
	got := first.rc.recv(waiting, corr).(*kmsg.FetchResponse)
	if got.ErrorCode != kerr.InvalidFetchSessionEpoch.Code || got.SessionID != first.id || len(got.Topics) != 0 {
		t.Fatalf("overtaken long poll: error %d session %d, %d topics", got.ErrorCode, got.SessionID, len(got.Topics))
	}
}

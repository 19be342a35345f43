package handler

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// fakeCatalog knows the partitions of the topics named in it; off is the
// metadata offset.
type fakeCatalog struct {
	topics map[string]bool
	off    int64
}

func (f *fakeCatalog) offset() int64            { return f.off }
func (f *fakeCatalog) known(k *sessionKey) bool { return f.topics[k.topic] }

func catalogOf(topics ...string) *fakeCatalog {
	f := &fakeCatalog{topics: map[string]bool{}}
	for _, t := range topics {
		f.topics[t] = true
	}
	return f
}

func newTestSessions(slots int) (*FetchSessions, *fakeClock) {
	return newTestSessionsLimited(FetchSessionLimits{Slots: slots})
}

func newTestSessionsLimited(l FetchSessionLimits) (*FetchSessions, *fakeClock) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	return NewFetchSessions(l, c.now, rand.New(rand.NewPCG(1, 2))), c
}

func parts(names ...string) []*cachedPartition {
	var out []*cachedPartition
	for _, n := range names {
		out = append(out, &cachedPartition{key: sessionKey{topic: n}})
	}
	return out
}

// sized returns n partitions of one topic.
func sized(n int) []*cachedPartition {
	out := make([]*cachedPartition, n)
	for i := range out {
		out[i] = &cachedPartition{key: sessionKey{topic: "t", partition: int32(i)}}
	}
	return out
}

func TestFetchSessionLifecycle(t *testing.T) {
	c, _ := newTestSessions(10)
	cat := catalogOf("a", "b", "c")
	if ctx := c.open(0, initialEpoch, false, nil, nil, cat); !ctx.full || !ctx.create {
		t.Fatalf("initial: %+v", ctx)
	}
	id := c.create(parts("a", "b"), false, false, -1)
	if id == 0 {
		t.Fatal("no session created")
	}
	if ctx := c.open(id, 2, false, nil, nil, cat); ctx.errCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("wrong epoch: %+v", ctx)
	}
	if ctx := c.open(id+1, 1, false, nil, nil, cat); ctx.errCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown id: %+v", ctx)
	}
	// A session opened by names is not continued by topic ids.
	if ctx := c.open(id, 1, true, nil, nil, cat); ctx.errCode != kerr.FetchSessionTopicIDError.Code {
		t.Fatalf("topic ids in a session of names: %+v", ctx)
	}
	ctx := c.open(id, 1, false, []cachedPartition{{key: sessionKey{topic: "c"}}, {key: sessionKey{topic: "a"}, fetchOffset: 7}}, []sessionKey{{topic: "b"}}, cat)
	if ctx.errCode != 0 || ctx.full {
		t.Fatalf("incremental: %+v", ctx)
	}
	s := ctx.session
	if len(s.parts) != 2 || s.parts[0].key.topic != "a" || s.parts[0].fetchOffset != 7 || s.parts[1].key.topic != "c" || s.parts[1].hw != -1 {
		t.Fatalf("session parts after update: %+v %+v", s.parts[0], s.parts[1])
	}
	s.moveToEnd(s.parts[0])
	if s.parts[0].key.topic != "c" || s.parts[1].key.topic != "a" {
		t.Fatal("moveToEnd")
	}
	if ctx := c.open(id, 2, false, nil, nil, cat); ctx.errCode != 0 {
		t.Fatalf("epoch 2: %+v", ctx)
	}
	if st := c.Stats(); st.Sessions != 1 || st.Partitions != 2 || st.Bytes != sessionBytes(2) {
		t.Fatalf("stats %+v", st)
	}
	// FINAL closes the session.
	if ctx := c.open(id, finalEpoch, false, nil, nil, cat); !ctx.full || ctx.create {
		t.Fatalf("final: %+v", ctx)
	}
	if st := c.Stats(); c.Len() != 0 || st.Partitions != 0 || st.Bytes != 0 {
		t.Fatalf("session not closed: %+v", st)
	}
}

// TestFetchSessionUnknownPartitions: partitions that do not exist are
// answered but never cached; a session left with none is closed, and one
// that left a partition out is closed once the metadata changes so the
// client names it again.
func TestFetchSessionUnknownPartitions(t *testing.T) {
	c, _ := newTestSessions(10)
	cat := catalogOf("a")
	if c.create(nil, false, false, 0) != 0 {
		t.Fatal("session created with no partition")
	}
	id := c.create(parts("a"), false, false, -1)
	ctx := c.open(id, 1, false, []cachedPartition{{key: sessionKey{topic: "x"}}, {key: sessionKey{topic: "y"}}}, nil, cat)
	if ctx.errCode != 0 || len(ctx.uncached) != 2 || len(ctx.session.parts) != 1 {
		t.Fatalf("unknown partitions joined the session: %+v", ctx)
	}
	if st := c.Stats(); st.Partitions != 1 {
		t.Fatalf("%d partitions cached", st.Partitions)
	}
	// Same metadata: the session goes on.
	if ctx := c.open(id, 2, false, nil, nil, cat); ctx.errCode != 0 {
		t.Fatalf("epoch 2: %+v", ctx)
	}
	cat.off++
	if ctx := c.open(id, 3, false, nil, nil, cat); ctx.errCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("session with a missed partition kept across a metadata change: %+v", ctx)
	}
	if st := c.Stats(); st.Evictions["metadata"] != 1 || st.Sessions != 0 {
		t.Fatalf("stats %+v", st)
	}

	// Forgetting the last known partition while adding unknown ones
	// closes the session and serves the request without one.
	id = c.create(parts("a"), false, false, -1)
	ctx = c.open(id, 1, false, []cachedPartition{{key: sessionKey{topic: "x"}}}, []sessionKey{{topic: "a"}}, cat)
	if ctx.errCode != 0 || !ctx.full || ctx.create || len(ctx.uncached) != 1 || c.Len() != 0 {
		t.Fatalf("emptied session: %+v, %d sessions", ctx, c.Len())
	}
}

func TestFetchSessionEviction(t *testing.T) {
	c, clock := newTestSessions(2)
	a := c.create(parts("x"), false, false, -1)
	clock.t = clock.t.Add(time.Second)
	b := c.create(parts("x", "y", "z"), false, false, -1)
	if a == 0 || b == 0 {
		t.Fatal("not created")
	}
	// Full and every session young: a consumer displaces none, whatever
	// its size.
	if id := c.create(parts("q", "r", "s", "t"), false, false, -1); id != 0 {
		t.Fatal("created by displacing a young session")
	}
	// Once past the threshold since creation (as of their last use),
	// sessions may be displaced by a larger one, smallest first.
	clock.t = clock.t.Add(sessionEvictAfter)
	c.open(a, 1, false, nil, nil, catalogOf())
	c.open(b, 1, false, nil, nil, catalogOf())
	if id := c.create(parts("q"), false, false, -1); id != 0 {
		t.Fatal("created by displacing a session of the same size")
	}
	if id := c.create(parts("q", "r"), false, false, -1); id == 0 {
		t.Fatal("not created by displacing a smaller session")
	}
	if ctx := c.open(a, 2, false, nil, nil, catalogOf()); ctx.errCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatal("smaller session not evicted")
	}
	// Stale sessions go first whatever their size; idle for exactly the
	// threshold is not stale (Kafka's now - lastUsed > evictionMs).
	clock.t = clock.t.Add(sessionEvictAfter)
	if id := c.create(parts("s"), false, false, -1); id != 0 {
		t.Fatal("session idle for exactly the threshold evicted")
	}
	clock.t = clock.t.Add(time.Millisecond)
	if id := c.create(parts("s"), false, false, -1); id == 0 {
		t.Fatal("stale session not evicted")
	}
	if st := c.Stats(); c.Len() != 2 || st.Evictions["stale"] != 1 || st.Evictions["displaced"] != 1 || st.Refusals["full"] != 3 {
		t.Fatalf("len %d stats %+v", c.Len(), st)
	}
	if NewFetchSessions(FetchSessionLimits{}, clock.now, rand.New(rand.NewPCG(1, 1))).create(parts("a"), false, false, -1) != 0 {
		t.Fatal("0 slots created a session")
	}
}

// TestFetchSessionPrivileged: a follower's session displaces any consumer
// session, least valuable first, and young follower sessions are displaced
// by nobody (FetchSessionCacheShard's evictableByPrivileged).
func TestFetchSessionPrivileged(t *testing.T) {
	c, clock := newTestSessions(2)
	big := c.create(sized(50), false, false, -1)
	small := c.create(sized(5), false, false, -1)
	f1 := c.create(sized(1), true, false, -1)
	if f1 == 0 {
		t.Fatal("follower session not created")
	}
	if ctx := c.open(small, 1, false, nil, nil, catalogOf()); ctx.errCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatal("the smaller consumer session should go first")
	}
	f2 := c.create(sized(1), true, false, -1)
	if f2 == 0 {
		t.Fatal("second follower session not created")
	}
	if ctx := c.open(big, 1, false, nil, nil, catalogOf()); ctx.errCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatal("the larger consumer session should go next")
	}
	if c.create(sized(100), true, false, -1) != 0 || c.create(sized(100), false, false, -1) != 0 {
		t.Fatal("young follower session displaced")
	}
	// Old follower sessions may be displaced by a larger follower's.
	clock.t = clock.t.Add(sessionEvictAfter + time.Second)
	for _, id := range []int32{f1, f2} {
		if ctx := c.open(id, 1, false, nil, nil, catalogOf()); ctx.errCode != 0 {
			t.Fatal(ctx.errCode)
		}
	}
	if c.create(sized(1), false, false, -1) != 0 {
		t.Fatal("consumer displaced a follower session")
	}
	if c.create(sized(2), true, false, -1) == 0 {
		t.Fatal("old follower session not displaced by a larger follower's")
	}
}

// TestFetchSessionByteLimits: a session above the per-session limit is not
// created; a new session evicts as many as it needs to fit the total, or
// none when it cannot; growing past either limit ends the session.
func TestFetchSessionByteLimits(t *testing.T) {
	c, clock := newTestSessionsLimited(FetchSessionLimits{Slots: 100, SessionBytes: sessionBytes(10), TotalBytes: 2*sessionBytes(3) + sessionBytes(10)})
	if c.create(sized(11), false, false, -1) != 0 {
		t.Fatal("created beyond the per-session limit")
	}
	var ids []int32
	for i := 0; i < 4; i++ {
		if id := c.create(sized(3), false, false, -1); id != 0 {
			ids = append(ids, id)
		}
		clock.t = clock.t.Add(time.Second)
	}
	// 4 sessions of 3 fit; then a session of 10 needs two of them gone,
	// and none is old: nothing is evicted.
	big := c.create(sized(10), false, false, -1)
	if len(ids) != 4 || big != 0 || c.Len() != 4 {
		t.Fatalf("created %d, big %d, len %d", len(ids), big, c.Len())
	}
	if c.create(sized(10), false, false, -1) == 0 && c.Stats().Refusals["full"] != 2 {
		t.Fatal("refusals not counted")
	}
	// Past the threshold since creation, touched: the two least valuable
	// (smallest, then lowest id) make room.
	clock.t = clock.t.Add(sessionEvictAfter)
	for _, id := range ids {
		c.open(id, 1, false, nil, nil, catalogOf())
	}
	if c.create(sized(10), false, false, -1) == 0 {
		t.Fatal("not created by evicting two")
	}
	if st := c.Stats(); st.Sessions != 3 || st.Evictions["displaced"] != 2 || st.Bytes > 2*sessionBytes(3)+sessionBytes(10) {
		t.Fatalf("stats %+v", st)
	}
	// Growing a session past its own limit ends it.
	var survivor int32
	for _, id := range ids {
		if ctx := c.open(id, 2, false, nil, nil, catalogOf()); ctx.errCode == 0 {
			survivor = id
			break
		}
	}
	var grow []cachedPartition
	for i := 0; i < 8; i++ {
		grow = append(grow, cachedPartition{key: sessionKey{topic: "g", partition: int32(i)}})
	}
	if ctx := c.open(survivor, 3, false, grow, nil, catalogOf("g")); ctx.errCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("grown past the session limit: %+v", ctx)
	}
	if st := c.Stats(); st.Evictions["too_large"] != 1 || st.Bytes > 2*sessionBytes(3)+sessionBytes(10) {
		t.Fatalf("stats %+v", st)
	}
}

// TestFetchSessionBytesAccounted holds cachedPartitionBytes against the
// heap: sessions of tens of thousands of partitions, built as a full fetch
// builds them, at sizes where the index is nearly full and just grown, must
// not take more than they are accounted for, nor far less.
func TestFetchSessionBytesAccounted(t *testing.T) {
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	for _, n := range []int{57_000, 59_000, 100_000, 115_000, 118_000} {
		c, _ := newTestSessionsLimited(FetchSessionLimits{Slots: 10, SessionBytes: 1 << 30, TotalBytes: 1 << 30})
		before := heap()
		ps := make([]*cachedPartition, 0, n)
		for i := 0; i < n; i++ {
			ps = append(ps, &cachedPartition{key: sessionKey{id: [16]byte{byte(i), byte(i >> 8), byte(i >> 16)}, partition: int32(i)}})
		}
		id := c.create(ps, false, false, -1)
		ps = nil
		used := int64(heap() - before)
		accounted := c.Stats().Bytes
		t.Logf("session of %d partitions: %d bytes on the heap (%d per partition), %d accounted (%d per partition)",
			n, used, used/int64(n), accounted, cachedPartitionBytes)
		if id == 0 || used > accounted || used < accounted/3 {
			t.Fatalf("%d partitions: heap %d bytes, accounted %d", n, used, accounted)
		}
		runtime.KeepAlive(c)
	}
}

func TestNextEpochWraps(t *testing.T) {
	if nextEpoch(1<<31-1) != 1 {
		t.Fatal("epoch must wrap to 1")
	}
}

func TestValidateProduceRecords(t *testing.T) {
	batch := func(n int, magic byte, attrs byte) []byte {
		b := make([]byte, max(n, 30))
		l := n - 12
		b[8], b[9], b[10], b[11] = byte(l>>24), byte(l>>16), byte(l>>8), byte(l)
		b[16] = magic
		b[22] = attrs
		return b
	}
	for _, tc := range []struct {
		name string
		v    int16
		b    []byte
		want int16
	}{
		{"ok", 9, batch(70, 2, 0), 0},
		{"empty", 9, nil, kerr.InvalidRecord.Code},
		{"magic1", 9, batch(70, 1, 0), kerr.InvalidRecord.Code},
		{"two batches", 9, append(batch(70, 2, 0), batch(70, 2, 0)...), kerr.InvalidRecord.Code},
		{"truncated", 9, batch(70, 2, 0)[:60], kerr.InvalidRecord.Code},
		{"tiny length", 9, batch(20, 2, 0)[:20], kerr.CorruptMessage.Code},
		{"zstd v6", 6, batch(70, 2, 4), kerr.UnsupportedCompressionType.Code},
		{"zstd v7", 7, batch(70, 2, 4), 0},
	} {
		if got, _ := validateProduceRecords(tc.v, tc.b); got != tc.want {
			t.Errorf("%s: got %d want %d", tc.name, got, tc.want)
		}
	}
}

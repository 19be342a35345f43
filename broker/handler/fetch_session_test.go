package handler

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newTestSessions(slots int) (*FetchSessions, *fakeClock) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	return NewFetchSessions(slots, c.now, rand.New(rand.NewPCG(1, 2))), c
}

func parts(names ...string) []*cachedPartition {
	var out []*cachedPartition
	for _, n := range names {
		out = append(out, &cachedPartition{key: sessionKey{topic: n}})
	}
	return out
}

func TestFetchSessionLifecycle(t *testing.T) {
	c, _ := newTestSessions(10)
	if ctx := c.open(0, initialEpoch, nil, nil); !ctx.full || !ctx.create {
		t.Fatalf("initial: %+v", ctx)
	}
	id := c.create(parts("a", "b"))
	if id == 0 {
		t.Fatal("no session created")
	}
	if ctx := c.open(id, 2, nil, nil); ctx.errCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("wrong epoch: %+v", ctx)
	}
	if ctx := c.open(id+1, 1, nil, nil); ctx.errCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown id: %+v", ctx)
	}
	ctx := c.open(id, 1, []cachedPartition{{key: sessionKey{topic: "c"}}, {key: sessionKey{topic: "a"}, fetchOffset: 7}}, []sessionKey{{topic: "b"}})
	if ctx.errCode != 0 || ctx.full {
		t.Fatalf("incremental: %+v", ctx)
	}
	s := ctx.session
	if len(s.parts) != 2 || s.parts[0].key.topic != "a" || s.parts[0].fetchOffset != 7 || s.parts[1].key.topic != "c" || s.parts[1].hw != -1 {
		t.Fatalf("session parts after update: %+v %+v", s.parts[0], s.parts[1])
	}
	s.moveToEnd(s.parts[0])
	if s.parts[0].key.topic != "c" {
		t.Fatal("moveToEnd")
	}
	if ctx := c.open(id, 2, nil, nil); ctx.errCode != 0 {
		t.Fatalf("epoch 2: %+v", ctx)
	}
	// FINAL closes the session.
	if ctx := c.open(id, finalEpoch, nil, nil); !ctx.full || ctx.create {
		t.Fatalf("final: %+v", ctx)
	}
	if c.Len() != 0 {
		t.Fatal("session not closed")
	}
}

func TestFetchSessionEviction(t *testing.T) {
	c, clock := newTestSessions(2)
	a := c.create(parts("x"))
	clock.t = clock.t.Add(time.Second)
	b := c.create(parts("x", "y", "z"))
	if a == 0 || b == 0 {
		t.Fatal("not created")
	}
	// Full, nothing stale, new session not larger than the smallest: refused.
	if id := c.create(parts("q")); id != 0 {
		t.Fatal("created beyond capacity")
	}
	// Larger than the smallest: the smallest is evicted.
	if id := c.create(parts("q", "r")); id == 0 {
		t.Fatal("not created by evicting a smaller session")
	}
	if ctx := c.open(a, 1, nil, nil); ctx.errCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatal("smaller session not evicted")
	}
	// Stale sessions go first whatever their size.
	clock.t = clock.t.Add(sessionEvictAfter + time.Second)
	if id := c.create(parts("s")); id == 0 {
		t.Fatal("stale session not evicted")
	}
	if c.Len() != 2 {
		t.Fatalf("len %d", c.Len())
	}
	if NewFetchSessions(0, clock.now, rand.New(rand.NewPCG(1, 1))).create(parts("a")) != 0 {
		t.Fatal("0 slots created a session")
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

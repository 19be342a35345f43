package log

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/broker/record"
)

func TestIdempotentProducer(t *testing.T) {
	c := newFakeClock()
	m, l := openTest(t, t.TempDir(), c, smallConfig())
	defer m.Close()
	must := func(info AppendInfo, err error) AppendInfo {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	a := must(l.Append(idemBatch(t, 7, 0, 0, 3, false), 0))
	must(l.Append(idemBatch(t, 7, 0, 3, 2, false), 0))
	// A retry of the first batch is a duplicate with the original offsets.
	d := must(l.Append(idemBatch(t, 7, 0, 0, 3, false), 0))
	if !d.Duplicate || d.FirstOffset != a.FirstOffset || d.LastOffset != a.LastOffset || d.LogAppendTime != 1000 {
		t.Fatalf("duplicate: %+v, want the original offsets and the batch's timestamp 1000 as log append time", d)
	}
	if l.LogEndOffset() != 5 {
		t.Fatalf("duplicate written: LEO %d", l.LogEndOffset())
	}
	if _, err := l.Append(idemBatch(t, 7, 0, 9, 1, false), 0); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap: %v", err)
	}
	// A new epoch must start at 0; then the old epoch is fenced.
	if _, err := l.Append(idemBatch(t, 7, 1, 5, 1, false), 0); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("new epoch at 5: %v", err)
	}
	must(l.Append(idemBatch(t, 7, 1, 0, 1, false), 0))
	if _, err := l.Append(idemBatch(t, 7, 0, 5, 1, false), 0); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("old epoch: %v", err)
	}
	// An unknown producer may start at any sequence (KIP-360).
	must(l.Append(idemBatch(t, 8, 0, 42, 1, false), 0))
	// Sequence wraparound at MaxInt32.
	must(l.Append(idemBatch(t, 9, 0, math.MaxInt32-1, 2, false), 0))
	must(l.Append(idemBatch(t, 9, 0, 0, 1, false), 0))
	// Only the last five batches are remembered.
	for s := int32(1); s <= 6; s++ {
		must(l.Append(idemBatch(t, 9, 0, s, 1, false), 0))
	}
	if _, err := l.Append(idemBatch(t, 9, 0, 1, 1, false), 0); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("stale retry beyond the cache: %v", err)
	}
	if d := must(l.Append(idemBatch(t, 9, 0, 3, 1, false), 0)); !d.Duplicate {
		t.Fatal("recent retry not detected")
	}
	ps := l.ActiveProducers()
	if len(ps) != 3 || ps[0].ProducerID != 7 || ps[0].ProducerEpoch != 1 || ps[2].LastSequence != 6 {
		t.Fatalf("ActiveProducers = %+v", ps)
	}
}

// TestDuplicateAnswersLogAppendTime checks that a duplicate on a
// LogAppendTime topic answers the time the original append stamped, as
// UnifiedLog.append answers a duplicate with its cached batch's timestamp,
// and that the time is the one stored, so a restart answers the same.
func TestDuplicateAnswersLogAppendTime(t *testing.T) {
	c := newFakeClock()
	cfg := smallConfig()
	cfg.TimestampType = LogAppendTime
	dir := t.TempDir()
	m, l := openTest(t, dir, c, cfg)
	a, err := l.Append(idemBatch(t, 7, 0, 0, 3, false), 0)
	if err != nil || a.LogAppendTime != c.Now().UnixMilli() {
		t.Fatalf("append: %+v %v", a, err)
	}
	c.Advance(time.Minute)
	d, err := l.Append(idemBatch(t, 7, 0, 0, 3, false), 0)
	if err != nil || !d.Duplicate || d.LogAppendTime != a.LogAppendTime {
		t.Fatalf("retry: %+v %v, want a duplicate at log append time %d", d, err, a.LogAppendTime)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m, l = openTest(t, dir, c, cfg)
	defer m.Close()
	d, err = l.Append(idemBatch(t, 7, 0, 0, 3, false), 0)
	if err != nil || !d.Duplicate || d.LogAppendTime != a.LogAppendTime {
		t.Fatalf("retry after a restart: %+v %v, want log append time %d", d, err, a.LogAppendTime)
	}
}

func TestTransactionsAndTxnIndex(t *testing.T) {
	dir := t.TempDir()
	c := newFakeClock()
	m, l := openTest(t, dir, c, smallConfig())
	must := func(info AppendInfo, err error) AppendInfo {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	must(l.Append(batch(t, 1, "plain", 1), 0))               // offset 0
	t1 := must(l.Append(idemBatch(t, 11, 0, 0, 2, true), 0)) // 1-2
	must(l.Append(idemBatch(t, 12, 0, 0, 1, true), 0))       // 3
	if fu, ok := l.FirstUnstableOffset(); !ok || fu != t1.FirstOffset {
		t.Fatalf("first unstable %d %v", fu, ok)
	}
	if _, err := l.Append(idemBatch(t, 11, 0, 2, 1, false), 0); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("non-transactional write inside a transaction: %v", err)
	}
	abort := must(l.Append(record.ControlBatch(11, 0, false, 5, 9), 0)) // 4
	if fu, ok := l.FirstUnstableOffset(); !ok || fu != 3 {
		t.Fatalf("after abort first unstable %d %v", fu, ok)
	}
	must(l.Append(record.ControlBatch(12, 0, true, 5, 9), 0)) // 5: commit
	if _, ok := l.FirstUnstableOffset(); ok {
		t.Fatal("transaction still open after commit")
	}
	if _, err := l.Append(record.ControlBatch(12, 0, true, 4, 9), 0); !errors.Is(err, ErrCoordinatorFenced) {
		t.Fatalf("stale coordinator: %v", err)
	}
	want := []AbortedTxn{{ProducerID: 11, FirstOffset: 1, LastOffset: abort.FirstOffset, LastStable: 3}}
	if got := l.AbortedTxns(0, 100); !reflect.DeepEqual(got, want) {
		t.Fatalf("AbortedTxns = %+v", got)
	}
	if got := l.AbortedTxns(5, 100); len(got) != 0 {
		t.Fatalf("AbortedTxns(5,...) = %+v", got)
	}
	// Kafka's AbortedTxn format: 34 bytes, version 0.
	raw, _ := os.ReadFile(segmentPath(l.dir, 0, txnIndexSuffix))
	if len(raw) != 34 || raw[0] != 0 || raw[1] != 0 {
		t.Fatalf("txnindex = %x", raw)
	}
	// Open a transaction, then restart cleanly and after a crash: state,
	// first unstable offset and dedupe survive.
	open := must(l.Append(idemBatch(t, 13, 2, 0, 1, true), 0))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	snaps, _ := listSnapshots(l.dir)
	if len(snaps) == 0 || snaps[len(snaps)-1] != open.LastOffset+1 {
		t.Fatalf("no snapshot at the log end: %v", snaps)
	}
	for _, crash := range []bool{false, true} {
		m2, l2 := reopen(t, dir)
		if fu, ok := l2.FirstUnstableOffset(); !ok || fu != open.FirstOffset {
			t.Fatalf("crash=%v: first unstable %d %v", crash, fu, ok)
		}
		if d, err := l2.Append(idemBatch(t, 13, 2, 0, 1, true), 0); err != nil || !d.Duplicate {
			t.Fatalf("crash=%v: dedupe after restart: %+v %v", crash, d, err)
		}
		if got := l2.AbortedTxns(0, 100); !reflect.DeepEqual(got, want) {
			t.Fatalf("crash=%v: AbortedTxns = %+v", crash, got)
		}
		if crash {
			m2.Close()
			break
		}
		// Crash now, and remove snapshots so state is rebuilt from batches.
		m2.crash()
		snaps, _ := listSnapshots(filepath.Join(dir, "orders-3"))
		for _, s := range snaps {
			os.Remove(snapshotPath(filepath.Join(dir, "orders-3"), s))
		}
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	ps := newProducerState()
	e := emptyEntry(5)
	e.epoch, e.coordinatorEpoch, e.txnFirstOffset, e.lastTimestamp = 3, 7, 100, 999
	e.addBatch(batchMeta{firstSeq: math.MaxInt32 - 1, lastSeq: 1, firstOffset: 97, lastOffset: 100, timestamp: 999})
	ps.producers[5] = &e
	ps.addOngoing(100, 5)
	data := ps.encodeSnapshot()
	if len(data) != 10+snapshotEntrySize {
		t.Fatalf("snapshot of %d bytes", len(data))
	}
	got, err := decodeSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	g := got.producers[5]
	if g.epoch != 3 || g.coordinatorEpoch != 7 || g.txnFirstOffset != 100 || g.n != 1 ||
		g.batches[0] != (batchMeta{firstSeq: math.MaxInt32 - 1, lastSeq: 1, firstOffset: 97, lastOffset: 100, timestamp: 999}) {
		t.Fatalf("decoded %+v", g)
	}
	if fu, ok := got.firstUnstable(); !ok || fu != 100 {
		t.Fatal("ongoing transaction lost")
	}
	data[len(data)-1] ^= 1
	if _, err := decodeSnapshot(data); !errors.Is(err, errSnapshotCorrupt) {
		t.Fatalf("corrupt snapshot: %v", err)
	}
}

func TestProducerExpiration(t *testing.T) {
	c := newFakeClock()
	m, l := openTest(t, t.TempDir(), c, smallConfig())
	defer m.Close()
	now := c.Now().UnixMilli()
	old := idemBatch(t, 1, 0, 0, 1, false)
	s := record.NewSpec(record.Rec{Timestamp: now, Key: []byte("k")})
	s.ProducerID, s.ProducerEpoch, s.BaseSequence = 2, 0, 0
	fresh, _ := record.Build(s)
	for _, b := range [][]byte{old, fresh, idemBatch(t, 3, 0, 0, 1, true)} {
		if _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	// Producer 1 wrote at ts 1000 (long ago); 3 has an open transaction.
	if n := l.ExpireProducers(); n != 1 {
		t.Fatalf("expired %d producers", n)
	}
	if ps := l.ActiveProducers(); len(ps) != 2 || ps[0].ProducerID != 2 || ps[1].ProducerID != 3 {
		t.Fatalf("remaining %+v", ps)
	}
	// An expired producer is unknown again: any sequence is accepted.
	if _, err := l.Append(idemBatch(t, 1, 0, 17, 1, false), 0); err != nil {
		t.Fatal(err)
	}
}

func TestLogDirLock(t *testing.T) {
	dir := t.TempDir()
	m, err := Open(dir, testOpts(newFakeClock()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, testOpts(newFakeClock())); !errors.Is(err, ErrStorage) {
		t.Fatalf("second open of a locked dir: %v", err)
	}
	m.Close()
	m2, err := Open(dir, testOpts(newFakeClock()))
	if err != nil {
		t.Fatalf("reopen after close: %v", err)
	}
	m2.Close()
}

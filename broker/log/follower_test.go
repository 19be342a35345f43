package log

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cascade-kafka/cascade/broker/record"
)

// openFollower opens a second log dir holding testTP, as a follower replica.
func openFollower(t *testing.T, c *fakeClock, cfg Config) (string, *Manager, *Log) {
	t.Helper()
	dir := t.TempDir()
	m, l := openTest(t, dir, c, cfg)
	return dir, m, l
}

// feed appends batches to f as AppendAsFollower, chunk batches per call.
func feed(t *testing.T, f *Log, batches []record.Batch, chunk int) {
	t.Helper()
	for i := 0; i < len(batches); i += chunk {
		var set []byte
		for _, b := range batches[i:min(i+chunk, len(batches))] {
			set = append(set, b...)
		}
		info, err := f.AppendAsFollower(set)
		if err != nil {
			t.Fatalf("AppendAsFollower at %d: %v", batches[i].BaseOffset(), err)
		}
		if info.FirstOffset != batches[i].BaseOffset() || info.LastOffset+1 != f.LogEndOffset() {
			t.Fatalf("AppendAsFollower info %+v, LEO %d", info, f.LogEndOffset())
		}
	}
}

// sameReplica fails unless follower f holds what leader l holds: the same
// batch bytes, offsets, producer state, aborted transactions, open
// transactions and leader epochs.
func sameReplica(t *testing.T, l, f *Log) {
	t.Helper()
	if l.LogStartOffset() != f.LogStartOffset() || l.LogEndOffset() != f.LogEndOffset() {
		t.Fatalf("offsets: leader [%d, %d), follower [%d, %d)", l.LogStartOffset(), l.LogEndOffset(), f.LogStartOffset(), f.LogEndOffset())
	}
	lb, fb := readAll(t, l, l.LogStartOffset()), readAll(t, f, f.LogStartOffset())
	if len(lb) != len(fb) {
		t.Fatalf("%d leader batches, %d follower batches", len(lb), len(fb))
	}
	for i := range lb {
		if !bytes.Equal(lb[i], fb[i]) {
			t.Fatalf("batch %d (offset %d) differs", i, lb[i].BaseOffset())
		}
	}
	if a, b := l.ActiveProducers(), f.ActiveProducers(); !reflect.DeepEqual(a, b) {
		t.Fatalf("producers:\nleader   %+v\nfollower %+v", a, b)
	}
	if a, b := l.AbortedTxns(0, l.LogEndOffset()), f.AbortedTxns(0, f.LogEndOffset()); !reflect.DeepEqual(a, b) {
		t.Fatalf("aborted txns:\nleader   %+v\nfollower %+v", a, b)
	}
	lu, lok := l.FirstUnstableOffset()
	fu, fok := f.FirstUnstableOffset()
	if lu != fu || lok != fok {
		t.Fatalf("first unstable: leader %d %v, follower %d %v", lu, lok, fu, fok)
	}
	if l.LatestEpoch() != f.LatestEpoch() {
		t.Fatalf("latest epoch: leader %d, follower %d", l.LatestEpoch(), f.LatestEpoch())
	}
	for e := int32(-1); e <= 9; e++ {
		le, lo, lok := l.EndOffsetForEpoch(e)
		fe, fo, fok := f.EndOffsetForEpoch(e)
		if le != fe || lo != fo || lok != fok {
			t.Fatalf("EndOffsetForEpoch(%d): leader %d %d %v, follower %d %d %v", e, le, lo, lok, fe, fo, fok)
		}
	}
}

// writeLeaderLog appends, over leader epochs 1, 3 and 4, plain, idempotent
// and transactional batches with an abort, a commit and a transaction left
// open, across several segments.
func writeLeaderLog(t *testing.T, l *Log) {
	t.Helper()
	must := func(_ AppendInfo, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	seq := int32(0)
	for i := 0; i < 100; i++ {
		must(l.Append(batch(t, 3, "p", int64(1000+i)), 1))
		must(l.Append(idemBatch(t, 7, 0, seq, 2, false), 1))
		seq += 2
	}
	must(l.Append(idemBatch(t, 11, 0, 0, 2, true), 3))
	must(l.Append(idemBatch(t, 12, 0, 0, 1, true), 3))
	must(l.Append(record.ControlBatch(11, 0, false, 5, 2000), 3)) // abort
	must(l.Append(idemBatch(t, 7, 0, seq, 1, false), 3))
	must(l.Append(record.ControlBatch(12, 0, true, 5, 2001), 4)) // commit
	must(l.Append(idemBatch(t, 13, 2, 0, 3, true), 4))           // left open
	must(l.Append(keyedBatch(t, record.CodecZstd, 3000, kv{[]byte("a"), []byte("1")}, kv{[]byte("b"), []byte("2")}), 4))
	must(l.Append(batch(t, 2, "tail", 3000), 4))
}

// TestAppendAsFollowerFromCompactedLeader copies a leader log the cleaner
// compacted: batches with offset gaps between and inside them, kept as
// they are.
func TestAppendAsFollowerFromCompactedLeader(t *testing.T) {
	c := newFakeClock()
	cfg := compactConfig()
	lm, l := openTest(t, t.TempDir(), c, cfg)
	defer lm.Close()
	for i := 0; i < 300; i++ {
		key := []byte("k") // replaced by later batches, except every tenth
		if i%10 == 0 {
			key = []byte(fmt.Sprintf("u%d", i))
		}
		if _, err := l.Append(keyedBatch(t, record.CodecNone, 1000+int64(i), kv{key, []byte(fmt.Sprint(i))}, kv{key, []byte("again")}), int32(1+i/100)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if _, cleaned, err := lm.CleanOnce(); err != nil || !cleaned {
		t.Fatalf("CleanOnce: %v %v", cleaned, err)
	}
	batches := readAll(t, l, 0)
	gaps := 0
	for i := 1; i < len(batches); i++ {
		if batches[i].BaseOffset() > batches[i-1].NextOffset() {
			gaps++
		}
	}
	if gaps == 0 {
		t.Fatalf("the cleaner left no gaps in %d batches; the test needs some", len(batches))
	}
	_, fm, f := openFollower(t, c, cfg)
	defer fm.Close()
	feed(t, f, batches, 5)
	if f.LogEndOffset() != l.LogEndOffset() {
		t.Fatalf("follower LEO %d", f.LogEndOffset())
	}
	fb := readAll(t, f, 0)
	if len(fb) != len(batches) {
		t.Fatalf("%d follower batches, %d leader batches", len(fb), len(batches))
	}
	for i := range fb {
		if !bytes.Equal(fb[i], batches[i]) {
			t.Fatalf("batch %d differs", i)
		}
	}
	for e := int32(0); e <= 4; e++ {
		le, lo, _ := l.EndOffsetForEpoch(e)
		fe, fo, _ := f.EndOffsetForEpoch(e)
		if le != fe || lo != fo {
			t.Fatalf("EndOffsetForEpoch(%d): leader %d %d, follower %d %d", e, le, lo, fe, fo)
		}
	}
}

func TestAppendAsFollowerMirrorsLeader(t *testing.T) {
	c := newFakeClock()
	lm, l := openTest(t, t.TempDir(), c, smallConfig())
	defer lm.Close()
	writeLeaderLog(t, l)
	if l.NumSegments() < 3 {
		t.Fatalf("leader has %d segments; the test wants rolls", l.NumSegments())
	}
	batches := readAll(t, l, 0)
	for _, chunk := range []int{1, 3, 7} {
		fdir, fm, f := openFollower(t, c, smallConfig())
		feed(t, f, batches, chunk)
		sameReplica(t, l, f)
		if f.NumSegments() < 2 {
			t.Fatalf("follower did not roll: %d segments", f.NumSegments())
		}
		if err := fm.Close(); err != nil {
			t.Fatal(err)
		}
		// The follower's files hold the same state after a restart.
		fm, f = openTest(t, fdir, c, smallConfig())
		sameReplica(t, l, f)
		lc, _ := os.ReadFile(filepath.Join(l.Dir(), leaderEpochFile))
		fc, _ := os.ReadFile(filepath.Join(f.Dir(), leaderEpochFile))
		if string(lc) != string(fc) || string(fc) != "0\n3\n1 0\n3 500\n4 505\n" {
			t.Fatalf("leader-epoch-checkpoint: leader %q, follower %q", lc, fc)
		}
		fm.Close()
	}
}

func TestAppendAsFollowerRefuses(t *testing.T) {
	c := newFakeClock()
	lm, l := openTest(t, t.TempDir(), c, smallConfig())
	defer lm.Close()
	for i := 0; i < 4; i++ {
		if _, err := l.Append(batch(t, 5, "x", 1), 2); err != nil {
			t.Fatal(err)
		}
	}
	b := readAll(t, l, 0) // offsets 0-4, 5-9, 10-14, 15-19
	_, fm, f := openFollower(t, c, smallConfig())
	defer fm.Close()
	feed(t, f, b[:2], 2)

	// Overlap: the batch at 5 again.
	_, err := f.AppendAsFollower(b[1])
	var oe *AppendOffsetError
	if !errors.Is(err, ErrUnexpectedAppendOffset) || !errors.As(err, &oe) || oe.First != 5 || oe.Last != 9 || oe.LogEnd != 10 {
		t.Fatalf("overlap: %v", err)
	}
	// Out of order inside a set.
	if _, err := f.AppendAsFollower(append(append([]byte(nil), b[3]...), b[2]...)); !errors.Is(err, ErrOffsetsOutOfOrder) {
		t.Fatalf("out of order: %v", err)
	}
	// A flipped byte fails the CRC.
	bad := append([]byte(nil), b[2]...)
	bad[len(bad)-1] ^= 0xff
	if _, err := f.AppendAsFollower(bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bad crc: %v", err)
	}
	if f.LogEndOffset() != 10 {
		t.Fatalf("a refused append wrote: LEO %d", f.LogEndOffset())
	}
	// Nothing, or only a partial batch: nothing appended, no error.
	for _, set := range [][]byte{nil, b[2][:20], b[2][:len(b[2])-1]} {
		info, err := f.AppendAsFollower(set)
		if err != nil || info.LastOffset >= info.FirstOffset || f.LogEndOffset() != 10 {
			t.Fatalf("empty or partial set: %+v %v, LEO %d", info, err, f.LogEndOffset())
		}
	}
	// A whole batch followed by a partial one: the whole one is appended.
	if _, err := f.AppendAsFollower(append(append([]byte(nil), b[2]...), b[3][:30]...)); err != nil || f.LogEndOffset() != 15 {
		t.Fatalf("trailing partial batch: %v, LEO %d", err, f.LogEndOffset())
	}
	// A gap, as compaction leaves on the leader, is accepted.
	gap := batch(t, 2, "gap", 5)
	record.Batch(gap).SetBaseOffset(40)
	record.Batch(gap).SetPartitionLeaderEpoch(6)
	record.Batch(gap).UpdateCRC()
	if info, err := f.AppendAsFollower(gap); err != nil || info.FirstOffset != 40 || f.LogEndOffset() != 42 {
		t.Fatalf("gap: %+v %v, LEO %d", info, err, f.LogEndOffset())
	}
	if got := readAll(t, f, 15); len(got) != 1 || got[0].BaseOffset() != 40 {
		t.Fatalf("read across the gap: %d batches", len(got))
	}
	if e, o, ok := f.EndOffsetForEpoch(2); e != 2 || o != 40 || !ok {
		t.Fatalf("EndOffsetForEpoch(2) = %d %d %v, want 2 40", e, o, ok)
	}
}

// TestFollowerTruncateAndReappend follows a leader change: the follower
// copied the old leader's epoch 2, which the new leader never had; it
// truncates to where the new leader's answer for epoch 2 says and then
// copies the new leader's epoch 3.
func TestFollowerTruncateAndReappend(t *testing.T) {
	c := newFakeClock()
	cfg := smallConfig()
	oldm, old := openTest(t, t.TempDir(), c, cfg)
	defer oldm.Close()
	newm, nl := openTest(t, t.TempDir(), c, cfg)
	defer newm.Close()
	seq := int32(0)
	for i := 0; i < 60; i++ { // epoch 1 on both: offsets 0-119
		for _, l := range []*Log{old, nl} {
			if _, err := l.Append(idemBatch(t, 7, 0, seq, 2, false), 1); err != nil {
				t.Fatal(err)
			}
		}
		seq += 2
	}
	// Epoch 2 only on the old leader: more of producer 7 and a
	// transaction left open.
	for i := 0; i < 60; i++ {
		if _, err := old.Append(idemBatch(t, 7, 0, seq+int32(2*i), 2, false), 2); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := old.Append(idemBatch(t, 20, 0, 0, 1, true), 2); err != nil {
		t.Fatal(err)
	}
	// Epoch 3 on the new leader: producer 7 continues from 120.
	for i := 0; i < 5; i++ {
		if _, err := nl.Append(idemBatch(t, 7, 0, seq, 3, false), 3); err != nil {
			t.Fatal(err)
		}
		seq += 3
	}
	fdir, fm, f := openFollower(t, c, cfg)
	feed(t, f, readAll(t, old, 0), 4)
	sameReplica(t, old, f)
	if _, ok := f.FirstUnstableOffset(); !ok {
		t.Fatal("the open transaction is not seen")
	}
	// OffsetsForLeaderEpoch(2) to the new leader.
	e, end, ok := nl.EndOffsetForEpoch(f.LatestEpoch())
	if !ok || e != 1 || end != 120 {
		t.Fatalf("new leader's answer for epoch 2: %d %d %v", e, end, ok)
	}
	segsBefore := f.NumSegments()
	if err := f.Truncate(end); err != nil {
		t.Fatal(err)
	}
	if f.LogEndOffset() != 120 || f.NumSegments() >= segsBefore {
		t.Fatalf("after truncate LEO %d, %d segments (were %d)", f.LogEndOffset(), f.NumSegments(), segsBefore)
	}
	// The epoch cache answers as Kafka's after truncateFromEnd.
	for _, tc := range []struct {
		req, e int32
		off    int64
		ok     bool
	}{{1, 1, 120, true}, {2, -1, -1, false}, {0, 0, 0, true}} {
		if e, o, ok := f.EndOffsetForEpoch(tc.req); e != tc.e || o != tc.off || ok != tc.ok {
			t.Fatalf("after truncate EndOffsetForEpoch(%d) = %d %d %v, want %d %d %v", tc.req, e, o, ok, tc.e, tc.off, tc.ok)
		}
	}
	if _, ok := f.FirstUnstableOffset(); ok {
		t.Fatal("the truncated transaction is still open")
	}
	feed(t, f, readAll(t, nl, 120), 2)
	sameReplica(t, nl, f)
	// And after a restart (producer state from snapshots and the log).
	fm.Close()
	fm, f = openTest(t, fdir, c, cfg)
	defer fm.Close()
	sameReplica(t, nl, f)
	// The producer's next sequence continues where the new leader's does.
	next := idemBatch(t, 7, 0, seq, 1, false)
	if _, err := nl.Append(append([]byte(nil), next...), 3); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Append(next, 3); err != nil {
		t.Fatalf("follower's producer state differs: %v", err)
	}
}

// TestTruncateAtLogEndDropsEmptyEpoch is a replica that led an epoch and
// appended nothing in it before another leader took over: the leader
// answers its fetch with where its older epoch ends, the log end, and the
// truncation there, which cuts no record, must drop the empty epoch (as
// Kafka's UnifiedLog.truncateTo), or every later fetch names it again and
// is answered with the same divergence.
func TestTruncateAtLogEndDropsEmptyEpoch(t *testing.T) {
	c := newFakeClock()
	_, m, f := openFollower(t, c, smallConfig())
	defer m.Close()
	for i := int32(0); i < 3; i++ {
		if _, err := f.Append(idemBatch(t, 7, 0, 2*i, 2, false), 6); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.AssignEpochStartOffset(7, f.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(f.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if e := f.LatestEpoch(); e != 6 || f.LogEndOffset() != 6 {
		t.Fatalf("after the truncation at the log end: latest epoch %d, log end %d; want 6 and 6", e, f.LogEndOffset())
	}
	if e, end, ok := f.EndOffsetForEpoch(6); !ok || e != 6 || end != 6 {
		t.Fatalf("EndOffsetForEpoch(6) = %d %d %v, want 6 6 true", e, end, ok)
	}
	// Past the log end too.
	if err := f.AssignEpochStartOffset(8, f.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(f.LogEndOffset() + 5); err != nil {
		t.Fatal(err)
	}
	if e := f.LatestEpoch(); e != 6 {
		t.Fatalf("after a truncation past the log end: latest epoch %d, want 6", e)
	}
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	c := newFakeClock()
	cfg := smallConfig()
	dir, m, f := openFollower(t, c, cfg)
	for i := 0; i < 60; i++ {
		if _, err := f.Append(idemBatch(t, 9, 0, int32(3*i), 3, true), 2); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	if f.LogStartOffset() != 1000 || f.LogEndOffset() != 1000 || f.RecoveryPoint() != 1000 || f.NumSegments() != 1 {
		t.Fatalf("start %d end %d rp %d segs %d", f.LogStartOffset(), f.LogEndOffset(), f.RecoveryPoint(), f.NumSegments())
	}
	if f.LatestEpoch() != -1 || len(f.ActiveProducers()) != 0 {
		t.Fatalf("epoch %d, producers %+v", f.LatestEpoch(), f.ActiveProducers())
	}
	if _, ok := f.FirstUnstableOffset(); ok {
		t.Fatal("transaction survived")
	}
	if snaps, _ := listSnapshots(f.Dir()); len(snaps) != 0 {
		t.Fatalf("snapshots left: %v", snaps)
	}
	if _, err := f.Read(999, 100, 1<<62, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the new start: %v", err)
	}
	// The leader's first batch starts below 1000 (its log start fell
	// inside it): the empty follower starts over at its base.
	b := batch(t, 10, "x", 1)
	record.Batch(b).SetBaseOffset(995)
	record.Batch(b).SetPartitionLeaderEpoch(5)
	record.Batch(b).UpdateCRC()
	_, err := f.AppendAsFollower(b)
	var oe *AppendOffsetError
	if !errors.As(err, &oe) || oe.First != 995 || oe.Last != 1004 || oe.LogEnd != 1000 {
		t.Fatalf("below start: %v", err)
	}
	if err := f.TruncateFullyAndStartAt(oe.First); err != nil {
		t.Fatal(err)
	}
	if _, err := f.AppendAsFollower(b); err != nil || f.LogEndOffset() != 1005 || f.LatestEpoch() != 5 {
		t.Fatalf("append after start-over: %v, LEO %d", err, f.LogEndOffset())
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m, f = openTest(t, dir, c, cfg)
	if f.LogStartOffset() != 995 || f.LogEndOffset() != 1005 || len(readAll(t, f, 995)) != 1 {
		t.Fatalf("after restart [%d, %d)", f.LogStartOffset(), f.LogEndOffset())
	}
	// Truncating below the first segment empties the log there.
	if err := f.Truncate(10); err != nil {
		t.Fatal(err)
	}
	if f.LogStartOffset() != 10 || f.LogEndOffset() != 10 || f.LatestEpoch() != -1 {
		t.Fatalf("truncate below the first segment: [%d, %d) epoch %d", f.LogStartOffset(), f.LogEndOffset(), f.LatestEpoch())
	}
	m.Close()
}

// TestTruncateWritesCheckpoints checks that a truncation writes the log
// dir's checkpoints before it returns (LogManager.truncateTo): a recovery
// point left beyond the new end would let recovery after a crash skip what
// was appended after the truncation.
func TestTruncateWritesCheckpoints(t *testing.T) {
	c := newFakeClock()
	dir, m, f := openFollower(t, c, smallConfig())
	defer m.Close()
	appendN(t, f, 200)
	if err := f.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := m.WriteCheckpoints(); err != nil {
		t.Fatal(err)
	}
	read := func(name string) int64 {
		t.Helper()
		cp, err := readOffsetCheckpoint(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return cp[testTP]
	}
	if rp := read(recoveryPointFile); rp != 200 {
		t.Fatalf("recovery point %d before truncating", rp)
	}
	if err := f.Truncate(120); err != nil {
		t.Fatal(err)
	}
	if rp := read(recoveryPointFile); rp != 120 {
		t.Fatalf("recovery point checkpoint %d after truncating to 120", rp)
	}
	if err := f.TruncateFullyAndStartAt(500); err != nil {
		t.Fatal(err)
	}
	if rp, start := read(recoveryPointFile), read(logStartOffsetFile); rp != 500 || start != 500 {
		t.Fatalf("after starting over at 500: recovery point %d, log start %d", rp, start)
	}
}

package partition

import (
	"errors"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/record"
)

// idemBatch builds an idempotent producer's batch of n records starting at
// sequence seq.
func idemBatch(t *testing.T, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	return buildBatch(t, n, func(s *record.Spec) { s.ProducerID, s.ProducerEpoch, s.BaseSequence = pid, epoch, seq })
}

// openSegmented opens a log in dir whose segments hold segBytes.
func openSegmented(t *testing.T, dir string, segBytes int64) (*log.Manager, *log.Log) {
	t.Helper()
	m, err := log.Open(dir, log.Options{HighWatermarkCheckpoint: true, CheckpointInterval: time.Hour,
		HighWatermarkCheckpointInterval: time.Hour, RetentionCheckInterval: -1, CleanerBackoff: -1})
	if err != nil {
		t.Fatal(err)
	}
	tp := tp("t", 0)
	if l, ok := m.Get(tp); ok {
		return m, l
	}
	cfg := log.DefaultConfig()
	cfg.SegmentBytes = segBytes
	l, err := m.Create(tp, [16]byte{1}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m, l
}

// TestIdempotentRetryAfterLeaderChange is the failover path of an
// idempotent producer, as Kafka's ProducerStateManager keeps it on a
// follower (AppendOrigin.REPLICATION): the leader appends a producer's
// batches, the follower appends them as they are, truncates its tail
// where a newer leader's log diverged (producer state rebuilt from the
// snapshot at the segment's base and the batches after it), and becomes
// leader. The producer's retries are then answered as Kafka's
// UnifiedLog.append does: a batch the new leader holds is a duplicate with
// its original offsets and nothing is appended; the truncated batch is
// appended anew; a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER and an
// older producer epoch INVALID_PRODUCER_EPOCH. A restart keeps it all.
func TestIdempotentRetryAfterLeaderChange(t *testing.T) {
	const pid, other = 7, 9
	batchLen := int64(len(idemBatch(t, pid, 0, 0, 5)))
	seg := 3 * batchLen // three batches a segment: bases 0, 15, 30, ...
	lm, ll := openSegmented(t, t.TempDir(), seg)
	defer lm.Close()
	fdir := t.TempDir()
	fm, fl := openSegmented(t, fdir, seg)
	leader, follower := leaderOf(t, ll, 4), replicated(fl, 4)

	// B1..B8: sequences 0..39, offsets 0..39, five records each; another
	// producer's batch in between.
	base := map[int32]int64{}
	for i := int32(0); i < 8; i++ {
		info, err := leader.Append(idemBatch(t, pid, 0, 5*i, 5))
		if err != nil {
			t.Fatalf("leader append of sequence %d: %v", 5*i, err)
		}
		base[5*i] = info.FirstOffset
		if i == 3 {
			if _, err := leader.Append(idemBatch(t, other, 0, 0, 5)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for off := int64(0); off < leader.LogEndOffset(); off = follower.LogEndOffset() {
		if _, err := follower.AppendAsFollower(copyBatches(t, leader, off)); err != nil {
			t.Fatal(err)
		}
	}
	if follower.LogEndOffset() != leader.LogEndOffset() || fl.NumSegments() < 3 {
		t.Fatalf("follower at %d with %d segments, leader at %d", follower.LogEndOffset(), fl.NumSegments(), leader.LogEndOffset())
	}
	// The follower's own copy answers the leader's duplicate as the
	// leader does, before anything changes.
	if info, err := leader.Append(idemBatch(t, pid, 0, 35, 5)); err != nil || !info.Duplicate || info.FirstOffset != base[35] {
		t.Fatalf("leader's retry of its last batch: %+v %v", info, err)
	}

	// A newer leader's log ends after B7 (sequence 30..34): the follower
	// truncates B8 away, inside the segment holding B7 and B8.
	cut := base[35]
	if err := follower.TruncateTo(cut); err != nil {
		t.Fatal(err)
	}
	if err := follower.MakeLeader(6); err != nil {
		t.Fatal(err)
	}

	check := func(p *Partition) {
		t.Helper()
		// The last batch it holds and the one before: duplicates with
		// their original offsets, nothing appended.
		for _, seq := range []int32{30, 25} {
			leo := p.LogEndOffset()
			info, err := p.Append(idemBatch(t, pid, 0, seq, 5))
			if err != nil || !info.Duplicate || info.FirstOffset != base[seq] || info.LastOffset != base[seq]+4 || info.LogAppendTime != 1000 {
				t.Fatalf("retry of sequence %d (at %d): %+v %v, want a duplicate at its original offset", seq, base[seq], info, err)
			}
			if p.LogEndOffset() != leo {
				t.Fatalf("retry of sequence %d appended: log end %d, was %d", seq, p.LogEndOffset(), leo)
			}
		}
		// A gap after the last sequence it holds.
		if _, err := p.Append(idemBatch(t, pid, 0, 45, 5)); !errors.Is(err, log.ErrOutOfOrderSequence) {
			t.Fatalf("sequence 45 after 39: %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", err)
		}
		// The other producer's state came through too.
		if info, err := p.Append(idemBatch(t, other, 0, 0, 5)); err != nil || !info.Duplicate {
			t.Fatalf("retry of the other producer's batch: %+v %v", info, err)
		}
	}
	check(follower)
	// The truncated batch is not there: its retry is appended where it
	// was, in the new leader's epoch.
	info, err := follower.Append(idemBatch(t, pid, 0, 35, 5))
	if err != nil || info.Duplicate || info.FirstOffset != cut {
		t.Fatalf("retry of the truncated batch: %+v %v, want appended at %d", info, err, cut)
	}
	check(follower)
	// A new producer epoch starts at sequence 0 and fences the old one.
	if _, err := follower.Append(idemBatch(t, pid, 1, 0, 1)); err != nil {
		t.Fatalf("epoch bump: %v", err)
	}
	if _, err := follower.Append(idemBatch(t, pid, 0, 40, 5)); !errors.Is(err, log.ErrInvalidProducerEpoch) {
		t.Fatalf("old producer epoch after the bump: %v, want INVALID_PRODUCER_EPOCH", err)
	}

	// Restarted, the new leader answers the same from its snapshot.
	if err := fm.Close(); err != nil {
		t.Fatal(err)
	}
	fm, fl = openSegmented(t, fdir, seg)
	defer fm.Close()
	restarted := leaderOf(t, fl, 6)
	if info, err := restarted.Append(idemBatch(t, pid, 1, 0, 1)); err != nil || !info.Duplicate {
		t.Fatalf("after a restart, retry of the epoch bump: %+v %v", info, err)
	}
	if _, err := restarted.Append(idemBatch(t, pid, 1, 2, 1)); !errors.Is(err, log.ErrOutOfOrderSequence) {
		t.Fatalf("after a restart, sequence 2 after 0: %v", err)
	}
}

// TestTransactionStateAfterLeaderChange is the transactional side of the
// same failover: a follower keeps the open transactions of replicated
// batches and the aborted ones in its transaction index; truncated below a
// marker, the transaction it ended is open again, so the new leader's last
// stable offset stops at the transaction's first offset until the
// coordinator's marker, written again to the new leader, ends it.
func TestTransactionStateAfterLeaderChange(t *testing.T) {
	const t1, plain, t2 = 11, 12, 13
	txnBatch := func(pid int64, seq int32, n int) []byte {
		return buildBatch(t, n, func(s *record.Spec) {
			s.ProducerID, s.ProducerEpoch, s.BaseSequence, s.Transactional = pid, 0, seq, true
		})
	}
	lm, ll := openSegmented(t, t.TempDir(), 1<<20)
	defer lm.Close()
	fm, fl := openSegmented(t, t.TempDir(), 1<<20)
	defer fm.Close()
	leader, follower := leaderOf(t, ll, 4), replicated(fl, 4)
	for _, b := range [][]byte{txnBatch(t1, 0, 2), idemBatch(t, plain, 0, 0, 2)} { // 0-1, 2-3
		if _, err := leader.Append(b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := leader.AppendCoordinator(record.ControlBatch(t1, 0, false, 3, 1000)); err != nil { // 4: abort
		t.Fatal(err)
	}
	if _, err := leader.Append(txnBatch(t2, 0, 2)); err != nil { // 5-6, left open
		t.Fatal(err)
	}
	if _, err := follower.AppendAsFollower(copyBatches(t, leader, 0)); err != nil {
		t.Fatal(err)
	}
	if fu, ok := fl.FirstUnstableOffset(); !ok || fu != 5 {
		t.Fatalf("follower's first unstable offset %d %v, want 5 (the open transaction)", fu, ok)
	}
	if got := fl.AbortedTxns(0, 100); len(got) != 1 || got[0].ProducerID != t1 || got[0].FirstOffset != 0 || got[0].LastOffset != 4 {
		t.Fatalf("follower's aborted transactions %+v", got)
	}

	// A newer leader's log ends before the abort marker.
	if err := follower.TruncateTo(4); err != nil {
		t.Fatal(err)
	}
	if err := follower.MakeLeader(6); err != nil {
		t.Fatal(err)
	}
	follower.AdvanceHighWatermark(4)
	if fu, ok := fl.FirstUnstableOffset(); !ok || fu != 0 {
		t.Fatalf("after the truncation first unstable offset %d %v, want 0 (the transaction open again)", fu, ok)
	}
	if lso := follower.LastStableOffset(); lso != 0 {
		t.Fatalf("last stable offset %d, want 0", lso)
	}
	if got := fl.AbortedTxns(0, 100); len(got) != 0 {
		t.Fatalf("aborted transactions after the truncation: %+v", got)
	}
	if _, ongoing, known := fl.ProducerTxnState(t2); known || ongoing {
		t.Fatalf("producer %d, truncated away, still known (ongoing %v)", t2, ongoing)
	}
	// The coordinator writes its marker again; the plain producer's retry
	// is a duplicate.
	if _, err := follower.AppendCoordinator(record.ControlBatch(t1, 0, false, 3, 1000)); err != nil {
		t.Fatal(err)
	}
	follower.AdvanceHighWatermark(follower.LogEndOffset())
	if _, ok := fl.FirstUnstableOffset(); ok {
		t.Fatal("a transaction still open after the marker")
	}
	if lso := follower.LastStableOffset(); lso != 5 {
		t.Fatalf("last stable offset %d after the marker, want 5", lso)
	}
	if info, err := follower.Append(idemBatch(t, plain, 0, 0, 2)); err != nil || !info.Duplicate || info.FirstOffset != 2 {
		t.Fatalf("retry of the plain producer's batch: %+v %v", info, err)
	}
}

package partition

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/record"
	"github.com/cascade-kafka/cascade/broker/replica"
)

// signalled waits a bounded time for w.
func signalled(w *Waiter) bool {
	select {
	case <-w.C:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

func quiet(w *Waiter) bool {
	select {
	case <-w.C:
		return false
	default:
		return true
	}
}

func TestReplicatedLeaderHighWatermark(t *testing.T) {
	p := leaderOf(t, newMemLog(), 0)
	w := NewWaiter()
	p.AddWaiter(w)
	for _, s := range []string{"a", "b", "c"} {
		if _, err := p.Append([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if p.HighWatermark() != 0 || p.LogEndOffset() != 3 {
		t.Fatalf("append moved the high watermark: hw %d leo %d", p.HighWatermark(), p.LogEndOffset())
	}
	// Appends still wake waiters: a follower's fetch waits at the log end.
	if !signalled(w) {
		t.Fatal("append did not wake")
	}
	// A consumer at the high watermark reads nothing, then waits.
	if res, err := p.Read(0, 100, ReadHighWatermark, true); err != nil || len(res.Regions) != 0 || res.HighWatermark != 0 {
		t.Fatalf("read at the high watermark: %+v %v", res, err)
	}
	p.AddWaiter(w)
	if hw, moved := p.AdvanceHighWatermark(2); hw != 2 || !moved {
		t.Fatalf("AdvanceHighWatermark(2) = %d %v", hw, moved)
	}
	if !signalled(w) {
		t.Fatal("high watermark move did not wake the consumer")
	}
	if res, err := p.Read(0, 100, ReadHighWatermark, true); err != nil || len(res.Regions) != 2 {
		t.Fatalf("read after the move: %d regions %v", len(res.Regions), err)
	}
	// Never backwards, never beyond the log end; no move, no wake.
	p.AddWaiter(w)
	if hw, moved := p.AdvanceHighWatermark(1); hw != 2 || moved {
		t.Fatalf("AdvanceHighWatermark(1) = %d %v", hw, moved)
	}
	if !quiet(w) {
		t.Fatal("woken without a move")
	}
	if hw, _ := p.AdvanceHighWatermark(99); hw != 3 {
		t.Fatalf("AdvanceHighWatermark(99) = %d, want the log end 3", hw)
	}
	// Back to a single replica: appends move it again.
	p.SetReplicated(false)
	p.Append([]byte("d"))
	if p.HighWatermark() != 4 {
		t.Fatalf("single-replica append: hw %d", p.HighWatermark())
	}
}

func TestFollowerHighWatermarkAndTruncation(t *testing.T) {
	ml := newMemLog()
	p := New(tp("t", 0), [16]byte{1}, 0, ml)
	p.SetReplicated(true)
	for i := 0; i < 6; i++ {
		if _, err := p.AppendAsFollower([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if p.HighWatermark() != 0 {
		t.Fatalf("follower append moved the high watermark to %d", p.HighWatermark())
	}
	w := NewWaiter()
	p.AddWaiter(w)
	if hw := p.SetHighWatermark(10); hw != 6 {
		t.Fatalf("SetHighWatermark(10) = %d, want own log end 6", hw)
	}
	if !signalled(w) {
		t.Fatal("high watermark move did not wake")
	}
	if hw := p.SetHighWatermark(4); hw != 4 {
		t.Fatalf("SetHighWatermark(4) = %d", hw)
	}
	p.AddWaiter(w)
	if err := p.TruncateTo(2); err != nil {
		t.Fatal(err)
	}
	if p.LogEndOffset() != 2 || p.HighWatermark() != 2 {
		t.Fatalf("after truncate leo %d hw %d", p.LogEndOffset(), p.HighWatermark())
	}
	if !signalled(w) {
		t.Fatal("truncation did not wake")
	}
	if err := p.TruncateFullyAndStartAt(50); err != nil {
		t.Fatal(err)
	}
	if p.LogStartOffset() != 50 || p.LogEndOffset() != 50 || p.HighWatermark() != 50 {
		t.Fatalf("after truncate fully: [%d, %d) hw %d", p.LogStartOffset(), p.LogEndOffset(), p.HighWatermark())
	}
	if hw := p.SetHighWatermark(3); hw != 50 {
		t.Fatalf("below the log start: %d", hw)
	}
	p.markDeleted()
	if _, err := p.AppendAsFollower([]byte("x")); !errors.Is(err, ErrDeleted) {
		t.Fatalf("follower append to a removed partition: %v", err)
	}
	if err := p.TruncateTo(0); !errors.Is(err, ErrDeleted) {
		t.Fatalf("truncate a removed partition: %v", err)
	}
}

// TestHighWatermarkFromCheckpoint checks where New starts the high
// watermark: at the log end on a single node, at the checkpoint when the
// log dir keeps one; and that moves reach the log's checkpoint.
func TestHighWatermarkFromCheckpoint(t *testing.T) {
	ml := newMemLog()
	for i := 0; i < 10; i++ {
		ml.Append([]byte{byte(i)}, 0)
	}
	if p := New(tp("t", 0), [16]byte{1}, 0, ml); p.HighWatermark() != 10 {
		t.Fatalf("single node: hw %d, want the log end", p.HighWatermark())
	}
	ml.hwKept, ml.hw = true, 3
	p := New(tp("t", 0), [16]byte{1}, 0, ml)
	if p.HighWatermark() != 3 {
		t.Fatalf("from the checkpoint: hw %d", p.HighWatermark())
	}
	p.SetReplicated(true)
	p.AdvanceHighWatermark(7)
	if hw, _ := ml.HighWatermark(); hw != 7 {
		t.Fatalf("checkpointed %d after a move to 7", hw)
	}
}

// copyBatches reads from leader at offset up to its log end, as a
// follower's fetch does, and returns the bytes.
func copyBatches(t *testing.T, leader *Partition, offset int64) []byte {
	t.Helper()
	res, err := leader.Read(offset, 1<<20, ReadLogEnd, true)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, r := range res.Regions {
		if _, err := r.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		r.Release()
	}
	return buf.Bytes()
}

func openDir(t *testing.T, dir string, hwCheckpoint bool) (*log.Manager, *log.Log) {
	t.Helper()
	m, err := log.Open(dir, log.Options{HighWatermarkCheckpoint: hwCheckpoint, CheckpointInterval: time.Hour,
		HighWatermarkCheckpointInterval: time.Hour, RetentionCheckInterval: -1, CleanerBackoff: -1})
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Create(tp("t", 0), [16]byte{1}, log.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return m, l
}

func clientBatch(t *testing.T, n int) []byte { return buildBatch(t, n, func(*record.Spec) {}) }

// buildBatch builds a batch of n records with timestamp 1000 and value "v",
// its header set by set.
func buildBatch(t *testing.T, n int, set func(*record.Spec)) []byte {
	t.Helper()
	recs := make([]record.Rec, n)
	for i := range recs {
		recs[i] = record.Rec{Timestamp: 1000, Value: []byte("v")}
	}
	s := record.NewSpec(recs...)
	set(&s)
	b, err := record.Build(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// replicated is a partition over l whose high watermark moves from
// outside, as the replication shell's.
func replicated(l Log, epoch int32) *Partition {
	p := New(tp("t", 0), [16]byte{1}, epoch, l)
	p.SetReplicated(true)
	return p
}

// leaderOf is replicated, led by this broker in epoch, as the replication
// shell makes a leader.
func leaderOf(t *testing.T, l Log, epoch int32) *Partition {
	t.Helper()
	p := replicated(l, epoch)
	if err := p.MakeLeader(epoch); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFollowerOverRealLogs replicates between two partitions over the
// storage engine as the fetcher shell will: the follower copies what the
// leader's log-end read returns, the leader's high watermark follows the
// follower's log end, the follower's follows the leader's, and a consumer
// parked on the follower wakes when its high watermark passes its offset.
func TestFollowerOverRealLogs(t *testing.T) {
	lm, ll := openDir(t, t.TempDir(), true)
	defer lm.Close()
	fdir := t.TempDir()
	fm, fl := openDir(t, fdir, true)
	leader, follower := leaderOf(t, ll, 4), replicated(fl, 4)
	for i := 0; i < 3; i++ {
		if _, err := leader.Append(clientBatch(t, 4)); err != nil {
			t.Fatal(err)
		}
	}
	consumer := NewWaiter()
	follower.AddWaiter(consumer)
	if _, err := follower.AppendAsFollower(copyBatches(t, leader, 0)); err != nil {
		t.Fatal(err)
	}
	if !quiet(consumer) {
		t.Fatal("a follower append woke the consumer before the high watermark moved")
	}
	leader.AdvanceHighWatermark(follower.LogEndOffset())
	follower.SetHighWatermark(leader.HighWatermark())
	if !signalled(consumer) || follower.HighWatermark() != 12 {
		t.Fatalf("consumer not woken; follower hw %d", follower.HighWatermark())
	}
	if res, err := follower.Read(0, 1<<20, ReadHighWatermark, true); err != nil || res.Size == 0 {
		t.Fatalf("consumer read on the follower: %v", err)
	}
	if e, o := follower.EndOffsetForEpoch(4); e != 4 || o != 12 {
		t.Fatalf("follower EndOffsetForEpoch(4) = %d %d", e, o)
	}
	// A restart keeps the checkpointed high watermark, not the log end.
	if _, err := leader.Append(clientBatch(t, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := follower.AppendAsFollower(copyBatches(t, leader, 12)); err != nil {
		t.Fatal(err)
	}
	if err := fm.Close(); err != nil {
		t.Fatal(err)
	}
	fm, err := log.Open(fdir, log.Options{HighWatermarkCheckpoint: true, RetentionCheckInterval: -1, CleanerBackoff: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer fm.Close()
	fl, _ = fm.Get(tp("t", 0))
	follower = New(tp("t", 0), [16]byte{1}, 4, fl)
	if follower.HighWatermark() != 12 || follower.LogEndOffset() != 14 {
		t.Fatalf("after restart hw %d leo %d, want 12 14", follower.HighWatermark(), follower.LogEndOffset())
	}
}

// TestFollowerStartsInsideLeaderBatch covers a new follower of a leader
// whose log start fell inside a batch (DeleteRecords): it starts its empty
// log at the leader's log start, fetches from there, gets the whole batch
// holding it, and starts over at the batch's base.
func TestFollowerStartsInsideLeaderBatch(t *testing.T) {
	lm, ll := openDir(t, t.TempDir(), false)
	defer lm.Close()
	fm, fl := openDir(t, t.TempDir(), false)
	defer fm.Close()
	leader := New(tp("t", 0), [16]byte{1}, 2, ll)
	for i := 0; i < 3; i++ {
		if _, err := leader.Append(clientBatch(t, 5)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := leader.DeleteRecordsBefore(7); err != nil {
		t.Fatal(err)
	}
	follower := New(tp("t", 0), [16]byte{1}, 2, fl)
	follower.SetReplicated(true)
	if err := follower.TruncateFullyAndStartAt(leader.LogStartOffset()); err != nil {
		t.Fatal(err)
	}
	info, err := follower.AppendAsFollower(copyBatches(t, leader, 7))
	if err != nil {
		t.Fatal(err)
	}
	if info.FirstOffset != 5 || follower.LogStartOffset() != 5 || follower.LogEndOffset() != 15 {
		t.Fatalf("info %+v, follower [%d, %d)", info, follower.LogStartOffset(), follower.LogEndOffset())
	}
	// Not empty any more: an overlap is refused, not started over.
	_, err = follower.AppendAsFollower(copyBatches(t, leader, 10))
	if !errors.Is(err, log.ErrUnexpectedAppendOffset) || follower.LogStartOffset() != 5 {
		t.Fatalf("overlap on a non-empty log: %v, start %d", err, follower.LogStartOffset())
	}
}

// TestConsumerFollowsHighWatermark runs a replicated leader's appends, its
// high watermark advances and a long-polling consumer at once: the consumer
// never reads at or past the high watermark it was answered with, and reads
// every record once the high watermark passes it.
func TestConsumerFollowsHighWatermark(t *testing.T) {
	p := leaderOf(t, newMemLog(), 0)
	const n = 300
	go func() {
		for i := 0; i < n; i++ {
			p.Append([]byte{byte(i)})
			if i%3 == 2 {
				p.AdvanceHighWatermark(p.LogEndOffset() - 1)
			}
		}
		p.AdvanceHighWatermark(n)
	}()
	next := int64(0)
	deadline := time.After(30 * time.Second)
	for next < n {
		w := NewWaiter()
		p.AddWaiter(w)
		res, err := p.Read(next, 1<<20, ReadHighWatermark, true)
		if err != nil {
			t.Fatal(err)
		}
		if next+int64(len(res.Regions)) > res.HighWatermark {
			t.Fatalf("read %d records from %d past the high watermark %d", len(res.Regions), next, res.HighWatermark)
		}
		for _, r := range res.Regions {
			var b bytes.Buffer
			r.WriteTo(&b)
			if b.Len() != 1 || b.Bytes()[0] != byte(next) {
				t.Fatalf("record %d reads %v", next, b.Bytes())
			}
			next++
		}
		if len(res.Regions) > 0 {
			p.RemoveWaiter(w)
			continue
		}
		select {
		case <-w.C:
		case <-deadline:
			t.Fatalf("consumer stuck at %d, high watermark %d, log end %d", next, p.HighWatermark(), p.LogEndOffset())
		}
	}
}

func TestMakeLeaderAssignsEpochStart(t *testing.T) {
	ml := newMemLog()
	p := New(tp("t", 0), [16]byte{1}, 1, ml)
	p.Append([]byte("a"))
	p.Append([]byte("b"))
	if err := p.MakeLeader(3); err != nil {
		t.Fatal(err)
	}
	// Before the new leader appends, a follower of epoch 1 learns that
	// epoch 1 ended at 2, and epoch 3 is the latest.
	if e, o := p.EndOffsetForEpoch(1); e != 1 || o != 2 {
		t.Fatalf("EndOffsetForEpoch(1) = %d %d", e, o)
	}
	if p.LeaderEpoch() != 3 || ml.LatestEpoch() != 3 {
		t.Fatalf("epoch %d, cache %d", p.LeaderEpoch(), ml.LatestEpoch())
	}
	if err := p.MakeLeader(2); err != nil || ml.LatestEpoch() != 3 || len(ml.epochs) != 2 {
		t.Fatalf("older epoch: %v, cache %+v", err, ml.epochs)
	}
}

func TestManagerSyncReplicated(t *testing.T) {
	m := NewManager(&memLogs{})
	spec := Spec{TP: tp("a", 0), TopicID: [16]byte{0xa}, Replicated: true}
	if err := m.Sync([]Spec{spec}); err != nil {
		t.Fatal(err)
	}
	p := m.Get(tp("a", 0))
	if !p.Replicated() {
		t.Fatal("opened without the replicated flag")
	}
	p.Append([]byte("x"))
	if p.HighWatermark() != 0 {
		t.Fatalf("a replicated partition's append moved the high watermark to %d", p.HighWatermark())
	}
	spec.Replicated = false
	if err := m.Sync([]Spec{spec}); err != nil || p.Replicated() {
		t.Fatalf("flag not cleared: %v", err)
	}
}

// TestLeaderAppendStampsTheEpochItLeads is a leader deposed while an
// append is on its way: the metadata image names another leader in a newer
// epoch (Manager.Sync sets it) before the replication shell makes this
// replica a follower. The append is stamped with the epoch this replica
// led, so that as a follower its last fetched epoch is that one and the
// new leader's divergence check cuts what it alone holds; once it stops
// leading, appends are refused, as Kafka's Partition.appendRecordsToLeader
// refuses them without a local leader log.
func TestLeaderAppendStampsTheEpochItLeads(t *testing.T) {
	ml := newMemLog()
	p := leaderOf(t, ml, 2)
	if _, err := p.Append([]byte("a")); err != nil {
		t.Fatal(err)
	}
	p.SetLeaderEpoch(3)
	if _, err := p.Append([]byte("b")); err != nil {
		t.Fatal(err)
	}
	if e := ml.LatestEpoch(); e != 2 {
		t.Fatalf("an append after the image moved to epoch 3 is in epoch %d, want the led epoch 2", e)
	}
	if e, ok := p.Leading(); !ok || e != 2 {
		t.Fatalf("Leading() = %d %v, want 2 true", e, ok)
	}
	p.StopLeading()
	for name, appendFn := range map[string]func([]byte) (log.AppendInfo, error){
		"client": p.Append, "coordinator": p.AppendCoordinator,
	} {
		if _, err := appendFn([]byte("c")); !errors.Is(err, ErrNotLeader) || !errors.Is(err, replica.ErrNotLeaderOrFollower) {
			t.Fatalf("%s append after StopLeading: %v, want ErrNotLeader", name, err)
		}
	}
	if p.LogEndOffset() != 2 || ml.LatestEpoch() != 2 {
		t.Fatalf("refused appends wrote: log end %d, latest epoch %d", p.LogEndOffset(), ml.LatestEpoch())
	}
	// Leading again in the newer epoch (re-elected): stamped with it.
	if err := p.MakeLeader(4); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append([]byte("d")); err != nil || ml.LatestEpoch() != 4 {
		t.Fatalf("append as the epoch 4 leader: %v, latest epoch %d", err, ml.LatestEpoch())
	}
	// A replicated partition this broker never led refuses appends; a
	// single node's stamps the image's epoch.
	if _, err := replicated(newMemLog(), 5).Append([]byte("e")); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("append to a replicated partition never led: %v", err)
	}
	single := newMemLog()
	if _, err := New(tp("t", 0), [16]byte{1}, 5, single).Append([]byte("e")); err != nil || single.LatestEpoch() != 5 {
		t.Fatalf("single node append: %v, epoch %d", err, single.LatestEpoch())
	}
}

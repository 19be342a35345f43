package partition

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/broker/log"
)

// memLog is an in-memory Log where each Append is one record at one offset.
type memLog struct {
	mu       sync.Mutex
	start    int64
	recs     [][]byte
	unstable int64 // -1: none
	cfg      log.Config
	failNext error
	epochs   []memEpoch // the start of each leader epoch, ascending
	hw       int64      // the checkpointed high watermark when hwKept
	hwKept   bool
}

type memEpoch struct {
	epoch int32
	start int64
}

func newMemLog() *memLog { return &memLog{unstable: -1} }

type memRegion struct{ b []byte }

func (r memRegion) WriteTo(w io.Writer) (int64, error) { n, err := w.Write(r.b); return int64(n), err }
func (r memRegion) Len() int                           { return len(r.b) }
func (r memRegion) Release()                           {}

func (l *memLog) Append(records []byte, epoch int32) (log.AppendInfo, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failNext != nil {
		err := l.failNext
		l.failNext = nil
		return log.AppendInfo{}, err
	}
	off := l.start + int64(len(l.recs))
	l.recs = append(l.recs, append([]byte(nil), records...))
	if n := len(l.epochs); epoch >= 0 && (n == 0 || epoch > l.epochs[n-1].epoch) {
		l.epochs = append(l.epochs, memEpoch{epoch, off})
	}
	return log.AppendInfo{FirstOffset: off, LastOffset: off, LogAppendTime: -1, NumRecords: 1}, nil
}

// AppendAsFollower appends records as one record at the log end, with no
// epoch: the in-memory log has no batches to keep offsets from.
func (l *memLog) AppendAsFollower(records []byte) (log.AppendInfo, error) {
	return l.Append(records, -1)
}

func (l *memLog) Truncate(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if end := l.start + int64(len(l.recs)); offset < end {
		l.recs = l.recs[:max(offset-l.start, 0)]
	}
	for n := len(l.epochs); n > 0 && l.epochs[n-1].start >= offset; n-- {
		l.epochs = l.epochs[:n-1]
	}
	return nil
}

func (l *memLog) TruncateFullyAndStartAt(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs, l.start, l.epochs = nil, offset, nil
	return nil
}

// EndOffsetForEpoch is LeaderEpochFileCache.endOffsetFor.
func (l *memLog) EndOffsetForEpoch(epoch int32) (int32, int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.epochs)
	switch {
	case epoch < 0 || n == 0:
		return -1, -1, false
	case l.epochs[n-1].epoch == epoch:
		return epoch, l.start + int64(len(l.recs)), true
	case epoch < l.epochs[0].epoch:
		return epoch, l.epochs[0].start, true
	}
	for i := n - 1; i > 0; i-- {
		if l.epochs[i-1].epoch <= epoch && l.epochs[i].epoch > epoch {
			return l.epochs[i-1].epoch, l.epochs[i].start, true
		}
	}
	return -1, -1, false
}

func (l *memLog) AssignEpochStartOffset(epoch int32, offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.epochs = append(l.epochs, memEpoch{epoch, offset})
	return nil
}

func (l *memLog) LatestEpoch() int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.epochs); n > 0 {
		return l.epochs[n-1].epoch
	}
	return -1
}

func (l *memLog) HighWatermark() (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hw, l.hwKept
}

func (l *memLog) UpdateHighWatermark(hw int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hwKept {
		l.hw = hw
	}
	return hw
}

func (l *memLog) AppendFromClient(records []byte, epoch int32) (log.AppendInfo, error) {
	return l.Append(records, epoch)
}

func (l *memLog) Read(offset int64, maxBytes int, maxOffset int64, minOne bool) (log.ReadResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var rr log.ReadResult
	for o := offset; o < maxOffset && o-l.start < int64(len(l.recs)); o++ {
		b := l.recs[o-l.start]
		if rr.Size+len(b) > maxBytes && !(minOne && len(rr.Regions) == 0) {
			break
		}
		rr.Regions = append(rr.Regions, memRegion{b})
		rr.Size += len(b)
	}
	rr.LogStartOffset, rr.LogEndOffset = l.start, l.start+int64(len(l.recs))
	return rr, nil
}

func (l *memLog) LogStartOffset() int64 { l.mu.Lock(); defer l.mu.Unlock(); return l.start }
func (l *memLog) LogEndOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.start + int64(len(l.recs))
}
func (l *memLog) FirstUnstableOffset() (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.unstable, l.unstable >= 0
}
func (l *memLog) OffsetForTimestamp(ts int64) (int64, int64, int32, bool) { return 0, 0, 0, false }
func (l *memLog) MaxTimestamp() (int64, int64)                            { return -1, -1 }
func (l *memLog) AbortedTxns(from, to int64) []log.AbortedTxn             { return nil }
func (l *memLog) DeleteRecordsBefore(offset int64) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if offset > l.start {
		l.recs = l.recs[offset-l.start:]
		l.start = offset
	}
	return l.start, nil
}
func (l *memLog) Flush() error           { return nil }
func (l *memLog) SetConfig(c log.Config) { l.mu.Lock(); l.cfg = c; l.mu.Unlock() }
func (l *memLog) Err() error             { return nil }
func (l *memLog) Size() int64            { return 0 }

func tp(topic string, p int32) log.TopicPartition {
	return log.TopicPartition{Topic: topic, Partition: p}
}

func TestAppendAdvancesHighWatermarkAndWakes(t *testing.T) {
	p := New(tp("t", 0), [16]byte{1}, 0, newMemLog())
	ch := p.Changed()
	if p.HighWatermark() != 0 {
		t.Fatal("hw not 0")
	}
	done := make(chan struct{})
	go func() {
		<-ch
		close(done)
	}()
	info, err := p.Append([]byte("a"))
	if err != nil || info.FirstOffset != 0 {
		t.Fatal(info, err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken")
	}
	if p.HighWatermark() != 1 || p.LastStableOffset() != 1 {
		t.Fatalf("hw %d lso %d", p.HighWatermark(), p.LastStableOffset())
	}
	select {
	case <-p.Changed():
		t.Fatal("new channel already closed")
	default:
	}
}

func TestFailedAppendDoesNotWake(t *testing.T) {
	ml := newMemLog()
	p := New(tp("t", 0), [16]byte{1}, 0, ml)
	ch := p.Changed()
	ml.failNext = log.ErrCorrupt
	if _, err := p.Append([]byte("x")); !errors.Is(err, log.ErrCorrupt) {
		t.Fatal(err)
	}
	select {
	case <-ch:
		t.Fatal("woken by failed append")
	default:
	}
}

func TestReadBoundsAndOutOfRange(t *testing.T) {
	ml := newMemLog()
	p := New(tp("t", 0), [16]byte{1}, 0, ml)
	for _, s := range []string{"a", "bb", "ccc"} {
		if _, err := p.Append([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	ml.unstable = 1
	res, err := p.Read(0, 100, ReadCommitted, true)
	if err != nil || len(res.Regions) != 1 || res.LastStableOffset != 1 || res.HighWatermark != 3 {
		t.Fatalf("committed read: %+v %v", res, err)
	}
	res, err = p.Read(0, 100, ReadHighWatermark, true)
	if err != nil || len(res.Regions) != 3 {
		t.Fatalf("uncommitted read: %d %v", len(res.Regions), err)
	}
	res, err = p.Read(0, 1, ReadHighWatermark, true)
	if err != nil || len(res.Regions) != 1 {
		t.Fatalf("minOne read: %d %v", len(res.Regions), err)
	}
	res, err = p.Read(3, 100, ReadHighWatermark, true)
	if err != nil || len(res.Regions) != 0 {
		t.Fatalf("read at end: %v", err)
	}
	if _, err := p.Read(4, 100, ReadHighWatermark, true); !errors.Is(err, log.ErrOffsetOutOfRange) {
		t.Fatalf("beyond end: %v", err)
	}
	if _, err := p.DeleteRecordsBefore(2); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Read(1, 100, ReadHighWatermark, true); !errors.Is(err, log.ErrOffsetOutOfRange) {
		t.Fatalf("below start: %v", err)
	}
	if _, err := p.DeleteRecordsBefore(9); !errors.Is(err, log.ErrOffsetOutOfRange) {
		t.Fatalf("delete beyond hw: %v", err)
	}
	var buf bytes.Buffer
	res, _ = p.Read(2, 100, ReadHighWatermark, false)
	for _, r := range res.Regions {
		r.WriteTo(&buf)
	}
	if buf.String() != "ccc" {
		t.Fatalf("read %q", buf.String())
	}
}

func TestEndOffsetForEpoch(t *testing.T) {
	p := New(tp("t", 0), [16]byte{1}, 3, newMemLog())
	if e, o := p.EndOffsetForEpoch(3); e != -1 || o != -1 {
		t.Fatalf("empty log: %d %d", e, o)
	}
	p.Append([]byte("a"))
	p.Append([]byte("b"))
	for _, tc := range []struct {
		in, e int32
		o     int64
	}{{3, 3, 2}, {4, -1, -1}, {-1, -1, -1}, {1, 1, 0}} {
		if e, o := p.EndOffsetForEpoch(tc.in); e != tc.e || o != tc.o {
			t.Fatalf("epoch %d: got %d %d want %d %d", tc.in, e, o, tc.e, tc.o)
		}
	}
	p.SetLeaderEpoch(2)
	if p.LeaderEpoch() != 3 {
		t.Fatal("epoch went backwards")
	}
}

type memLogs struct {
	mu      sync.Mutex
	logs    map[log.TopicPartition]*memLog
	deleted []log.TopicPartition
	fail    map[log.TopicPartition]error // Open fails with this error
}

func (m *memLogs) Open(tp log.TopicPartition, id [16]byte, cfg log.Config) (Log, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.fail[tp]; err != nil {
		return nil, err
	}
	if m.logs == nil {
		m.logs = map[log.TopicPartition]*memLog{}
	}
	l := newMemLog()
	l.cfg = cfg
	m.logs[tp] = l
	return l, nil
}

func (m *memLogs) Delete(tp log.TopicPartition) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.logs, tp)
	m.deleted = append(m.deleted, tp)
	return nil
}

func TestManagerSync(t *testing.T) {
	ml := &memLogs{}
	m := NewManager(ml)
	idA, idB := [16]byte{0xa}, [16]byte{0xb}
	cfg := log.Config{SegmentBytes: 1 << 20}
	if err := m.Sync([]Spec{{TP: tp("a", 0), TopicID: idA, Config: cfg}, {TP: tp("a", 1), TopicID: idA, Config: cfg}, {TP: tp("b", 0), TopicID: idB, Config: cfg}}); err != nil {
		t.Fatal(err)
	}
	if len(m.All()) != 3 || m.Get(tp("a", 1)) == nil {
		t.Fatal("partitions not created")
	}
	if name, ok := m.TopicName(idB); !ok || name != "b" {
		t.Fatal("topic id lookup")
	}
	pb := m.Get(tp("b", 0))
	waiter := pb.Changed()
	cfg2 := cfg
	cfg2.RetentionMs = 5
	if err := m.Sync([]Spec{{TP: tp("a", 0), TopicID: idA, Config: cfg2, LeaderEpoch: 1}, {TP: tp("a", 1), TopicID: idA, Config: cfg}}); err != nil {
		t.Fatal(err)
	}
	if m.Get(tp("b", 0)) != nil || !pb.Deleted() {
		t.Fatal("b not removed")
	}
	select {
	case <-waiter:
	default:
		t.Fatal("waiter of deleted partition not woken")
	}
	if _, err := pb.Append([]byte("x")); !errors.Is(err, ErrDeleted) {
		t.Fatalf("append to deleted: %v", err)
	}
	if _, ok := m.TopicName(idB); ok {
		t.Fatal("deleted topic id still known")
	}
	if ml.logs[tp("a", 0)].cfg.RetentionMs != 5 || m.Get(tp("a", 0)).LeaderEpoch() != 1 {
		t.Fatal("config or epoch not applied")
	}
	// Re-created under the same name with a new id: a fresh log.
	old := m.Get(tp("a", 1))
	if err := m.Sync([]Spec{{TP: tp("a", 1), TopicID: [16]byte{0xc}, Config: cfg}}); err != nil {
		t.Fatal(err)
	}
	if m.Get(tp("a", 1)) == old || !old.Deleted() {
		t.Fatal("re-created topic reused old partition")
	}
}

// TestManagerOpenError checks that a partition whose log cannot be opened
// is reported by OpenError until an open succeeds or it is no longer wanted.
func TestManagerOpenError(t *testing.T) {
	disk := errors.New("too many open files")
	ml := &memLogs{fail: map[log.TopicPartition]error{tp("a", 1): disk}}
	m := NewManager(ml)
	want := []Spec{{TP: tp("a", 0), TopicID: [16]byte{0xa}}, {TP: tp("a", 1), TopicID: [16]byte{0xa}}}
	if err := m.Sync(want); !errors.Is(err, disk) {
		t.Fatalf("Sync: %v, want the open error", err)
	}
	if m.Get(tp("a", 0)) == nil || m.OpenError(tp("a", 0)) != nil {
		t.Fatal("the partition that opened is not hosted")
	}
	if m.Get(tp("a", 1)) != nil || !errors.Is(m.OpenError(tp("a", 1)), disk) {
		t.Fatalf("failed partition: hosted %v, error %v", m.Get(tp("a", 1)) != nil, m.OpenError(tp("a", 1)))
	}
	ml.fail = nil // the disk is back: the next Sync opens it
	if err := m.Sync(want); err != nil || m.Get(tp("a", 1)) == nil || m.OpenError(tp("a", 1)) != nil {
		t.Fatalf("retry: %v", err)
	}
	ml.fail = map[log.TopicPartition]error{tp("b", 0): disk}
	if err := m.Sync(append(want, Spec{TP: tp("b", 0), TopicID: [16]byte{0xb}})); !errors.Is(err, disk) {
		t.Fatalf("Sync: %v", err)
	}
	if err := m.Sync(want); err != nil || m.OpenError(tp("b", 0)) != nil {
		t.Fatalf("error of a partition no longer wanted: %v, %v", err, m.OpenError(tp("b", 0)))
	}
}

func TestWaiterAcrossPartitions(t *testing.T) {
	a := New(tp("a", 0), [16]byte{1}, 0, newMemLog())
	b := New(tp("b", 0), [16]byte{2}, 0, newMemLog())
	w := NewWaiter()
	a.AddWaiter(w)
	b.AddWaiter(w)
	b.Append([]byte("x"))
	select {
	case <-w.C:
	case <-time.After(5 * time.Second):
		t.Fatal("not signalled")
	}
	a.RemoveWaiter(w)
	if len(a.waiters) != 0 || len(b.waiters) != 0 {
		t.Fatal("waiters not cleaned up")
	}
	a.Append([]byte("y"))
	select {
	case <-w.C:
		t.Fatal("signalled after removal")
	default:
	}
}

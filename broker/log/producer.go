package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/cascade-kafka/cascade/broker/record"
)

// ErrCoordinatorFenced is returned when a transaction marker carries an older
// coordinator epoch than one already seen (TRANSACTION_COORDINATOR_FENCED).
var ErrCoordinatorFenced = errors.New("log: transaction coordinator fenced")

// producerBatchesCached is how many recent batches per producer are kept for
// duplicate detection (ProducerStateEntry.NUM_BATCHES_TO_RETAIN).
const producerBatchesCached = 5

type batchMeta struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
	timestamp               int64
}

// producerEntry is Kafka's ProducerStateEntry.
type producerEntry struct {
	pid              int64
	epoch            int16
	batches          [producerBatchesCached]batchMeta
	n                int // valid batches, oldest first
	coordinatorEpoch int32
	txnFirstOffset   int64 // -1 when no transaction is open
	lastTimestamp    int64
}

func emptyEntry(pid int64) producerEntry {
	return producerEntry{pid: pid, epoch: record.NoProducerEpoch, coordinatorEpoch: -1, txnFirstOffset: -1, lastTimestamp: -1}
}

func (e *producerEntry) last() (batchMeta, bool) {
	if e.n == 0 {
		return batchMeta{}, false
	}
	return e.batches[e.n-1], true
}

// setEpoch clears cached batches when the epoch changes
// (ProducerStateEntry.maybeUpdateProducerEpoch).
func (e *producerEntry) setEpoch(epoch int16) {
	if e.epoch != epoch {
		e.epoch = epoch
		e.n = 0
	}
}

func (e *producerEntry) addBatch(m batchMeta) {
	if e.n == producerBatchesCached {
		copy(e.batches[:], e.batches[1:])
		e.n--
	}
	e.batches[e.n] = m
	e.n++
}

func (e *producerEntry) findDuplicate(epoch int16, firstSeq, lastSeq int32) (batchMeta, bool) {
	if epoch != e.epoch {
		return batchMeta{}, false
	}
	for i := 0; i < e.n; i++ {
		if b := e.batches[i]; b.firstSeq == firstSeq && b.lastSeq == lastSeq {
			return b, true
		}
	}
	return batchMeta{}, false
}

type ongoingTxn struct {
	firstOffset int64
	pid         int64
}

// completedTxn is one transaction ended by a marker in the current append.
type completedTxn struct {
	pid                     int64
	firstOffset, lastOffset int64
	aborted                 bool
}

// producerState is Kafka's ProducerStateManager for one partition. It is
// guarded by the log's append lock.
type producerState struct {
	producers map[int64]*producerEntry
	ongoing   []ongoingTxn // sorted by first offset
	// staged holds entries updated by the append in progress.
	staged    []producerEntry
	completed []completedTxn
}

func newProducerState() *producerState {
	return &producerState{producers: map[int64]*producerEntry{}}
}

func (ps *producerState) stagedEntry(pid int64) *producerEntry {
	for i := range ps.staged {
		if ps.staged[i].pid == pid {
			return &ps.staged[i]
		}
	}
	if cur, ok := ps.producers[pid]; ok {
		ps.staged = append(ps.staged, *cur)
	} else {
		ps.staged = append(ps.staged, emptyEntry(pid))
	}
	return &ps.staged[len(ps.staged)-1]
}

func (ps *producerState) reset() {
	ps.staged = ps.staged[:0]
	ps.completed = ps.completed[:0]
}

func inSequence(last, next int32) bool {
	return next == last+1 || (next == 0 && last == 1<<31-1)
}

// stage checks one batch whose offsets are already assigned against the
// producer's state, as ProducerAppendInfo.append with validation when
// validate is set (client and coordinator appends), and records the update.
// A duplicate returns the original batch and no error.
func (ps *producerState) stage(b record.Batch, validate bool) (dup batchMeta, isDup bool, err error) {
	pid := b.ProducerID()
	if pid < 0 {
		return batchMeta{}, false, nil
	}
	e := ps.stagedEntry(pid)
	epoch := b.ProducerEpoch()
	if b.Control() {
		if b.RecordCount() == 0 {
			// An empty control batch is a marker whose whole transaction
			// the cleaner removed: nothing to apply (ProducerAppendInfo.append).
			return batchMeta{}, false, nil
		}
		marker, err := b.ControlOf()
		if err != nil {
			return batchMeta{}, false, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		if marker.Type != record.ControlAbort && marker.Type != record.ControlCommit {
			return batchMeta{}, false, nil
		}
		if validate {
			if epoch < e.epoch {
				return batchMeta{}, false, fmt.Errorf("%w: marker epoch %d below current %d for producer %d", ErrInvalidProducerEpoch, epoch, e.epoch, pid)
			}
			if e.coordinatorEpoch > marker.CoordinatorEpoch {
				return batchMeta{}, false, fmt.Errorf("%w: coordinator epoch %d below %d for producer %d", ErrCoordinatorFenced, marker.CoordinatorEpoch, e.coordinatorEpoch, pid)
			}
		}
		first := e.txnFirstOffset
		if first < 0 {
			first = b.BaseOffset()
		}
		ps.completed = append(ps.completed, completedTxn{pid: pid, firstOffset: first, lastOffset: b.BaseOffset(), aborted: marker.Type == record.ControlAbort})
		e.setEpoch(epoch)
		e.coordinatorEpoch = marker.CoordinatorEpoch
		e.txnFirstOffset = -1
		e.lastTimestamp = b.MaxTimestamp()
		return batchMeta{}, false, nil
	}
	firstSeq, lastSeq := b.BaseSequence(), b.LastSequence()
	if validate {
		if d, ok := e.findDuplicate(epoch, firstSeq, lastSeq); ok {
			return d, true, nil
		}
		if epoch < e.epoch {
			return batchMeta{}, false, fmt.Errorf("%w: epoch %d below current %d for producer %d", ErrInvalidProducerEpoch, epoch, e.epoch, pid)
		}
		if epoch != e.epoch {
			if firstSeq != 0 && e.epoch != record.NoProducerEpoch {
				return batchMeta{}, false, fmt.Errorf("%w: new epoch %d of producer %d starts at sequence %d", ErrOutOfOrderSequence, epoch, pid, firstSeq)
			}
		} else {
			last := int32(record.NoSequence)
			if m, ok := e.last(); ok {
				last = m.lastSeq
			}
			if e.epoch != record.NoProducerEpoch && !inSequence(last, firstSeq) {
				return batchMeta{}, false, fmt.Errorf("%w: producer %d expected sequence %d, got %d", ErrOutOfOrderSequence, pid, last+1, firstSeq)
			}
		}
		if !b.Transactional() && e.txnFirstOffset >= 0 {
			return batchMeta{}, false, fmt.Errorf("%w: non-transactional write from producer %d inside its transaction", ErrInvalidTxnState, pid)
		}
	}
	e.setEpoch(epoch)
	e.addBatch(batchMeta{firstSeq: firstSeq, lastSeq: lastSeq, firstOffset: b.BaseOffset(), lastOffset: b.LastOffset(), timestamp: b.MaxTimestamp()})
	e.lastTimestamp = b.MaxTimestamp()
	if b.Transactional() && e.txnFirstOffset < 0 {
		e.txnFirstOffset = b.BaseOffset()
	}
	return batchMeta{}, false, nil
}

// commit applies the staged entries and returns the transactions completed,
// each with its last stable offset (ProducerStateManager.lastStableOffset).
// The caller resets the staging area after writing the txn index.
func (ps *producerState) commit() {
	for i := range ps.staged {
		e := ps.staged[i]
		cur, ok := ps.producers[e.pid]
		if !ok {
			// An empty entry, not a zero one: a zero txnFirstOffset
			// would read as a transaction open at offset 0.
			ne := emptyEntry(e.pid)
			cur = &ne
			ps.producers[e.pid] = cur
		}
		wasOpen := cur.txnFirstOffset
		*cur = e
		if wasOpen >= 0 && e.txnFirstOffset != wasOpen {
			ps.removeOngoing(e.pid, wasOpen)
		}
		if e.txnFirstOffset >= 0 && e.txnFirstOffset != wasOpen {
			ps.addOngoing(e.txnFirstOffset, e.pid)
		}
	}
}

func (ps *producerState) addOngoing(first, pid int64) {
	i := sort.Search(len(ps.ongoing), func(i int) bool { return ps.ongoing[i].firstOffset >= first })
	ps.ongoing = append(ps.ongoing, ongoingTxn{})
	copy(ps.ongoing[i+1:], ps.ongoing[i:])
	ps.ongoing[i] = ongoingTxn{first, pid}
}

func (ps *producerState) removeOngoing(pid, first int64) {
	for i, o := range ps.ongoing {
		if o.pid == pid && o.firstOffset == first {
			ps.ongoing = append(ps.ongoing[:i], ps.ongoing[i+1:]...)
			return
		}
	}
}

// lastStableFor returns the LSO after txn completes: the first offset of the
// earliest other open transaction, else the marker offset + 1.
func (ps *producerState) lastStableFor(t completedTxn) int64 {
	for _, o := range ps.ongoing {
		if o.pid != t.pid {
			return o.firstOffset
		}
	}
	return t.lastOffset + 1
}

func (ps *producerState) firstUnstable() (int64, bool) {
	if len(ps.ongoing) == 0 {
		return 0, false
	}
	return ps.ongoing[0].firstOffset, true
}

// Snapshot format (ProducerStateManager, version 1): version int16, crc
// uint32 (CRC32C of everything after it), then an array (int32 count) of
// entries of producer_id int64, epoch int16, last_sequence int32,
// last_offset int64, offset_delta int32, timestamp int64,
// coordinator_epoch int32, current_txn_first_offset int64.
const (
	snapshotVersion   = 1
	snapshotEntrySize = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8
	snapshotSuffix    = ".snapshot"
)

func snapshotPath(dir string, offset int64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", offset, snapshotSuffix))
}

func (ps *producerState) encodeSnapshot() []byte {
	pids := make([]int64, 0, len(ps.producers))
	for pid := range ps.producers {
		pids = append(pids, pid)
	}
	sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
	buf := make([]byte, 10, 10+len(pids)*snapshotEntrySize)
	be := binary.BigEndian
	be.PutUint16(buf, snapshotVersion)
	be.PutUint32(buf[6:], uint32(len(pids)))
	for _, pid := range pids {
		e := ps.producers[pid]
		lastSeq, lastOff, delta := int32(-1), int64(-1), int32(0)
		if m, ok := e.last(); ok {
			lastSeq, lastOff, delta = m.lastSeq, m.lastOffset, int32(m.lastOffset-m.firstOffset)
		}
		buf = be.AppendUint64(buf, uint64(pid))
		buf = be.AppendUint16(buf, uint16(e.epoch))
		buf = be.AppendUint32(buf, uint32(lastSeq))
		buf = be.AppendUint64(buf, uint64(lastOff))
		buf = be.AppendUint32(buf, uint32(delta))
		buf = be.AppendUint64(buf, uint64(e.lastTimestamp))
		buf = be.AppendUint32(buf, uint32(e.coordinatorEpoch))
		buf = be.AppendUint64(buf, uint64(e.txnFirstOffset))
	}
	be.PutUint32(buf[2:], crc32.Checksum(buf[6:], castagnoli))
	return buf
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var errSnapshotCorrupt = errors.New("log: corrupt producer snapshot")

func decodeSnapshot(data []byte) (*producerState, error) {
	be := binary.BigEndian
	if len(data) < 10 {
		return nil, fmt.Errorf("%w: %d bytes", errSnapshotCorrupt, len(data))
	}
	if v := be.Uint16(data); v != snapshotVersion {
		return nil, fmt.Errorf("%w: version %d", errSnapshotCorrupt, v)
	}
	if crc := crc32.Checksum(data[6:], castagnoli); crc != be.Uint32(data[2:]) {
		return nil, fmt.Errorf("%w: crc mismatch", errSnapshotCorrupt)
	}
	n := int64(int32(be.Uint32(data[6:])))
	if n < 0 || n*snapshotEntrySize != int64(len(data)-10) {
		return nil, fmt.Errorf("%w: %d entries in %d bytes", errSnapshotCorrupt, n, len(data)-10)
	}
	ps := newProducerState()
	for p := data[10:]; len(p) > 0; p = p[snapshotEntrySize:] {
		e := emptyEntry(int64(be.Uint64(p)))
		e.epoch = int16(be.Uint16(p[8:]))
		lastSeq := int32(be.Uint32(p[10:]))
		lastOff := int64(be.Uint64(p[14:]))
		delta := int32(be.Uint32(p[22:]))
		e.lastTimestamp = int64(be.Uint64(p[26:]))
		e.coordinatorEpoch = int32(be.Uint32(p[34:]))
		e.txnFirstOffset = int64(be.Uint64(p[38:]))
		if lastOff >= 0 && lastSeq >= 0 && delta >= 0 {
			// As DefaultRecordBatch.decrementSequence: wrap below 0.
			first := int64(lastSeq) - int64(delta)
			if first < 0 {
				first += 1 << 31
			}
			e.addBatch(batchMeta{firstSeq: int32(first), lastSeq: lastSeq, firstOffset: lastOff - int64(delta), lastOffset: lastOff, timestamp: e.lastTimestamp})
		}
		cp := e
		ps.producers[e.pid] = &cp
		if e.txnFirstOffset >= 0 {
			ps.addOngoing(e.txnFirstOffset, e.pid)
		}
	}
	return ps, nil
}

// listSnapshots returns the snapshot offsets in dir, ascending.
func listSnapshots(dir string) ([]int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, snapshotSuffix) {
			continue
		}
		o, err := strconv.ParseInt(strings.TrimSuffix(name, snapshotSuffix), 10, 64)
		if err != nil {
			continue
		}
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// ProducerInfo describes one active producer (for DescribeProducers).
type ProducerInfo struct {
	ProducerID            int64
	ProducerEpoch         int16
	LastSequence          int32
	LastTimestamp         int64
	CoordinatorEpoch      int32
	CurrentTxnStartOffset int64 // -1 when no transaction is open
}

// expire drops producers idle since before cutoff (ms) that have no open
// transaction (ProducerStateManager.removeExpiredProducers).
func (ps *producerState) expire(cutoff int64) int {
	n := 0
	for pid, e := range ps.producers {
		if e.txnFirstOffset < 0 && e.lastTimestamp < cutoff {
			delete(ps.producers, pid)
			n++
		}
	}
	return n
}

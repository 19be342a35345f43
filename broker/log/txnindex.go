package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
)

// abortedTxnSize is the size of one entry of Kafka's TransactionIndex
// (AbortedTxn): version int16 (0), producerId int64, firstOffset int64,
// lastOffset int64, lastStableOffset int64.
const abortedTxnSize = 34

// txnIndex is a segment's .txnindex file plus its entries in memory. As
// Kafka's TransactionIndex, the file is created only when the first aborted
// transaction is written: most segments have none and no file. It is open
// from a write until the next fsync, and opened for a truncation; reads use
// the entries in memory.
type txnIndex struct {
	path    string
	f       *os.File // open from a write or truncation until sync; guarded by mu
	mu      sync.RWMutex
	entries []AbortedTxn
	dirty   bool
	scratch [abortedTxnSize]byte
}

// openTxnIndex loads a .txnindex file's entries, or with create starts an
// empty index, removing a file left at that name.
func openTxnIndex(path string, create bool) (*txnIndex, error) {
	ti := &txnIndex{path: path}
	if create {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return ti, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return ti, nil
	}
	if err != nil {
		return nil, err
	}
	entries, err := decodeAbortedTxns(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ti.entries = entries
	return ti, nil
}

// fileLocked returns the open file, opening (and with create, creating)
// it; f is nil without error when the file does not exist and create is
// false. The caller holds mu.
func (ti *txnIndex) fileLocked(create bool) (*os.File, error) {
	if ti.f != nil {
		return ti.f, nil
	}
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(ti.path, flags, 0o644)
	if !create && errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	openFileCounts.txnIndex.Add(1)
	ti.f = f
	return f, nil
}

// decodeAbortedTxns parses a .txnindex file; a trailing partial entry or an
// unknown version is corruption.
func decodeAbortedTxns(data []byte) ([]AbortedTxn, error) {
	if len(data)%abortedTxnSize != 0 {
		return nil, fmt.Errorf("%w: txnindex size %d is not a multiple of %d", errIndexCorrupt, len(data), abortedTxnSize)
	}
	var out []AbortedTxn
	be := binary.BigEndian
	for p := data; len(p) > 0; p = p[abortedTxnSize:] {
		if v := int16(be.Uint16(p)); v != 0 {
			return nil, fmt.Errorf("%w: txnindex entry version %d", errIndexCorrupt, v)
		}
		out = append(out, AbortedTxn{
			ProducerID:  int64(be.Uint64(p[2:])),
			FirstOffset: int64(be.Uint64(p[10:])),
			LastOffset:  int64(be.Uint64(p[18:])),
			LastStable:  int64(be.Uint64(p[26:])),
		})
	}
	return out, nil
}

func (ti *txnIndex) add(a AbortedTxn) error {
	be := binary.BigEndian
	p := ti.scratch[:]
	be.PutUint16(p, 0)
	be.PutUint64(p[2:], uint64(a.ProducerID))
	be.PutUint64(p[10:], uint64(a.FirstOffset))
	be.PutUint64(p[18:], uint64(a.LastOffset))
	be.PutUint64(p[26:], uint64(a.LastStable))
	ti.mu.Lock()
	defer ti.mu.Unlock()
	f, err := ti.fileLocked(true)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(p, int64(len(ti.entries))*abortedTxnSize); err != nil {
		return err
	}
	ti.entries = append(ti.entries, a)
	ti.dirty = true
	return nil
}

// collect appends the entries overlapping [from, to), as
// TransactionIndex.collectAbortedTxns.
func (ti *txnIndex) collect(dst []AbortedTxn, from, to int64) []AbortedTxn {
	ti.mu.RLock()
	defer ti.mu.RUnlock()
	for _, a := range ti.entries {
		if a.LastOffset >= from && a.FirstOffset < to {
			dst = append(dst, a)
		}
	}
	return dst
}

// truncateTo drops entries whose marker is at or after offset.
func (ti *txnIndex) truncateTo(offset int64) error {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	n := 0
	for n < len(ti.entries) && ti.entries[n].LastOffset < offset {
		n++
	}
	ti.entries = ti.entries[:n]
	f, err := ti.fileLocked(false)
	if err != nil || f == nil {
		return err
	}
	ti.dirty = true
	return f.Truncate(int64(n) * abortedTxnSize)
}

// sync fsyncs what was written since the last sync and closes the file.
func (ti *txnIndex) sync() error {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	if !ti.dirty {
		return nil
	}
	f, err := ti.fileLocked(false)
	if err != nil || f == nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	ti.dirty = false
	return ti.closeLocked()
}

// close closes the file if open; a later sync reopens it.
func (ti *txnIndex) close() error {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	return ti.closeLocked()
}

func (ti *txnIndex) closeLocked() error {
	if ti.f == nil {
		return nil
	}
	err := ti.f.Close()
	openFileCounts.txnIndex.Add(-1)
	ti.f = nil
	return err
}

// rename points the index at its file's new name.
func (ti *txnIndex) rename(path string) {
	ti.mu.Lock()
	ti.path = path
	ti.mu.Unlock()
}

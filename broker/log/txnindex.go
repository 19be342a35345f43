package log

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"
)

// abortedTxnSize is the size of one entry of Kafka's TransactionIndex
// (AbortedTxn): version int16 (0), producerId int64, firstOffset int64,
// lastOffset int64, lastStableOffset int64.
const abortedTxnSize = 34

// txnIndex is a segment's .txnindex file plus its entries in memory.
type txnIndex struct {
	path    string
	f       *os.File
	mu      sync.RWMutex
	entries []AbortedTxn
	dirty   bool
	scratch [abortedTxnSize]byte
}

func openTxnIndex(path string, create bool) (*txnIndex, error) {
	flags := os.O_RDWR | os.O_CREATE
	if create {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return nil, err
	}
	ti := &txnIndex{path: path, f: f}
	data, err := os.ReadFile(path)
	if err != nil {
		f.Close()
		return nil, err
	}
	entries, err := decodeAbortedTxns(data)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ti.entries = entries
	return ti, nil
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
	if _, err := ti.f.WriteAt(p, int64(len(ti.entries))*abortedTxnSize); err != nil {
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
	return ti.f.Truncate(int64(n) * abortedTxnSize)
}

func (ti *txnIndex) sync() error {
	ti.mu.Lock()
	dirty := ti.dirty
	ti.dirty = false
	ti.mu.Unlock()
	if !dirty {
		return nil
	}
	return ti.f.Sync()
}

func (ti *txnIndex) close() error { return ti.f.Close() }

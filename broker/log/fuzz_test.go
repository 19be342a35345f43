package log

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzCheckpoint feeds arbitrary bytes to the checkpoint parsers.
func FuzzCheckpoint(f *testing.F) {
	f.Add([]byte("0\n2\norders 0 15\norders 1 7\n"))
	f.Add([]byte("0\n1\n3 100\n"))
	f.Add([]byte("1\n0\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		p := filepath.Join(dir, "ck")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if m, err := readOffsetCheckpoint(p); err == nil {
			if err := writeOffsetCheckpoint(p, m); err != nil {
				t.Fatal(err)
			}
			m2, err := readOffsetCheckpoint(p)
			if err != nil || len(m2) != len(m) {
				t.Fatalf("round trip: %v", err)
			}
		}
		_, _ = readEpochCheckpoint(p)
	})
}

// FuzzTxnIndex feeds arbitrary bytes to the transaction index decoder.
func FuzzTxnIndex(f *testing.F) {
	f.Add(make([]byte, abortedTxnSize))
	f.Add([]byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = decodeAbortedTxns(data)
	})
}

// FuzzSnapshot feeds arbitrary bytes to the producer snapshot decoder.
func FuzzSnapshot(f *testing.F) {
	ps := newProducerState()
	e := emptyEntry(1)
	e.addBatch(batchMeta{firstSeq: 0, lastSeq: 4, firstOffset: 10, lastOffset: 14})
	ps.producers[1] = &e
	f.Add(ps.encodeSnapshot())
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = decodeSnapshot(data)
	})
}

// FuzzPartitionMetadata feeds arbitrary bytes to the partition.metadata reader.
func FuzzPartitionMetadata(f *testing.F) {
	f.Add([]byte("version: 0\ntopic_id: AQIDAAAAAAAAAAAAAAAAAA\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, partitionMetaFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, _ = readPartitionMetadata(dir)
	})
}

// FuzzIndexFiles loads arbitrary offset and time index bytes; the sanity
// checks must reject garbage without panicking, and lookups stay in bounds.
func FuzzIndexFiles(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0}, []byte{0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, oi, ti []byte) {
		dir := t.TempDir()
		op, tp := filepath.Join(dir, "0.index"), filepath.Join(dir, "0.timeindex")
		os.WriteFile(op, oi, 0o644)
		os.WriteFile(tp, ti, 0o644)
		ix, err := openIndex(op, offsetEntrySize, 1<<20, false, &openFileCounts.index)
		if err != nil {
			t.Fatal(err)
		}
		o := &offsetIndex{index: ix, base: 100}
		_ = o.sanityCheck(1 << 20)
		o.lookup(150)
		o.lastOffset()
		tx, err := openIndex(tp, timeEntrySize, 1<<20, false, &openFileCounts.timeIndex)
		if err != nil {
			t.Fatal(err)
		}
		tt := &timeIndex{index: tx, base: 100}
		_ = tt.sanityCheck()
		tt.lookup(5)
		tt.last()
	})
}

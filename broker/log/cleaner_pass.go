package log

// This file cleans one log, as Kafka's Cleaner: build the key -> latest
// offset map over the dirty section, then rewrite the log from its start to
// the end of the map in groups of segments, keeping the latest record of
// each key, tombstones until their delete horizon, transaction markers
// until no reader needs them, and each active producer's last batch.

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"os"
	"sort"
	"time"

	"github.com/cascade-kafka/cascade/broker/record"
)

// offsetMapEntryBytes is what Kafka's SkimpyOffsetMap spends per key (a
// 16-byte MD5 hash and an 8-byte offset); log.cleaner.dedupe.buffer.size
// divided by it bounds the keys of one pass.
const offsetMapEntryBytes = 24

// cleanerWriteChunk is how many cleaned bytes are buffered before they are
// written to the cleaned segment.
const cleanerWriteChunk = 1 << 20

// offsetMap maps a key's 128-bit hash to the latest offset seen for it
// (Kafka's SkimpyOffsetMap keys by MD5; two independent 64-bit hashes make
// a collision as unlikely).
type offsetMap struct {
	s1, s2 maphash.Seed
	m      map[[2]uint64]int64
	slots  int
	latest int64 // the last offset covered by the map, -1 when none
}

func newOffsetMap(slots int) *offsetMap {
	return &offsetMap{s1: maphash.MakeSeed(), s2: maphash.MakeSeed(), m: map[[2]uint64]int64{}, slots: slots, latest: -1}
}

func (om *offsetMap) hash(k []byte) [2]uint64 {
	return [2]uint64{maphash.Bytes(om.s1, k), maphash.Bytes(om.s2, k)}
}

// put records offset for key; it reports false when the map is full and the
// key is new.
func (om *offsetMap) put(k []byte, offset int64) bool {
	h := om.hash(k)
	if _, ok := om.m[h]; !ok && len(om.m) >= om.slots {
		return false
	}
	om.m[h] = offset
	return true
}

func (om *offsetMap) get(k []byte) (int64, bool) {
	o, ok := om.m[om.hash(k)]
	return o, ok
}

// cleanParams are the inputs of one pass.
type cleanParams struct {
	firstDirty, upper int64
	now               time.Time
	stop              <-chan struct{}
	slots             int
	hook              func(step string) error
}

// lastRecord is Kafka's LastRecord: an active producer's last data offset
// (-1 when it has none) and epoch.
type lastRecord struct {
	lastData int64
	epoch    int16
}

// lastRecordsOfActiveProducers is UnifiedLog.lastRecordsOfActiveProducers.
func (l *Log) lastRecordsOfActiveProducers() map[int64]lastRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[int64]lastRecord, len(l.ps.producers))
	for pid, e := range l.ps.producers {
		lr := lastRecord{lastData: -1, epoch: e.epoch}
		if m, ok := e.last(); ok {
			lr.lastData = m.lastOffset
		}
		out[pid] = lr
	}
	return out
}

// cleaner holds the scratch buffers of one pass.
type cleaner struct {
	l       *Log
	cfg     *Config
	p       cleanParams
	limit   int // decompressed-size cap
	readBuf []byte
	decomp  []byte
	payload []byte
	out     []byte
	recs    []record.Record
	stats   CleanStats
}

func (c *cleaner) checkDone() error {
	select {
	case <-c.p.stop:
		return errCleaningAborted
	default:
	}
	if c.l.closed.Load() {
		return errCleaningAborted
	}
	return nil
}

// clean runs one pass over l (Cleaner.doClean) and returns its statistics;
// EndOffset is the new first dirty offset.
func (l *Log) clean(p cleanParams) (CleanStats, error) {
	start := time.Now()
	c := &cleaner{l: l, cfg: l.cfg.Load(), p: p, limit: l.opts.MaxDecompressedBytes}
	c.stats = CleanStats{Partition: l.tp, FirstDirty: p.firstDirty, EndOffset: p.firstDirty}
	gen := l.cleanGen.Load()
	segs := l.segments()
	held := make([]*segment, 0, len(segs))
	defer func() {
		for _, s := range held {
			s.unref()
		}
	}()
	for _, s := range segs {
		if !s.tryRef() {
			return c.stats, errCleaningAborted
		}
		held = append(held, s)
	}
	om := newOffsetMap(p.slots)
	if err := c.buildOffsetMap(segs, om); err != nil {
		return c.stats, err
	}
	c.stats.MapKeys = len(om.m)
	if p.hook != nil {
		if err := p.hook("mapped"); err != nil {
			return c.stats, err
		}
	}
	end := om.latest + 1
	if end <= p.firstDirty {
		return c.stats, nil
	}
	var toClean []*segment
	for _, s := range segs[:len(segs)-1] { // never the active segment
		if s.base < end {
			toClean = append(toClean, s)
		}
	}
	if len(toClean) == 0 {
		return c.stats, nil
	}
	nextBase := func(s *segment) int64 {
		i := sort.Search(len(segs), func(i int) bool { return segs[i].base > s.base })
		return segs[i].base // s is never the active segment
	}
	// Aborted transactions of the whole range, from every segment's
	// transaction index (so a marker beyond the range is seen too).
	tt := newTxnTracker(l.AbortedTxns(toClean[0].base, nextBase(toClean[len(toClean)-1])))
	last := l.lastRecordsOfActiveProducers()
	for _, g := range groupSegments(toClean, c.cfg, p.upper, nextBase) {
		if err := c.checkDone(); err != nil {
			return c.stats, err
		}
		cleaned, err := c.cleanGroup(g, nextBase(g[len(g)-1]), om, tt, last)
		if err != nil {
			return c.stats, err
		}
		if err := l.replaceSegments(g, cleaned, gen, p.hook); err != nil {
			return c.stats, err
		}
		c.stats.Groups++
		c.stats.Segments += len(g)
	}
	c.stats.EndOffset = end
	c.stats.Duration = time.Since(start)
	return c.stats, nil
}

// buildOffsetMap maps every key of the dirty section [firstDirty, upper)
// to its latest offset, skipping aborted transactions and markers, until
// the map is full (Cleaner.buildOffsetMap).
func (c *cleaner) buildOffsetMap(segs []*segment, om *offsetMap) error {
	start, end := c.p.firstDirty, c.p.upper
	tt := newTxnTracker(c.l.AbortedTxns(start, end))
	for i, s := range segs[:len(segs)-1] {
		if s.base >= end {
			break
		}
		next := segs[i+1].base
		if next <= start {
			continue
		}
		full, err := c.mapSegment(s, om, tt)
		if err != nil || full {
			return err
		}
		// Offsets removed earlier leave gaps: the map covers the whole
		// segment.
		om.latest = max(om.latest, min(next, end)-1)
	}
	return nil
}

// mapSegment adds the keys of one segment at or after firstDirty to the map
// (Cleaner.buildOffsetMapForSegment). It reports whether the map filled.
func (c *cleaner) mapSegment(s *segment, om *offsetMap, tt *txnTracker) (bool, error) {
	start := c.p.firstDirty
	_, pos := s.oi.lookup(start)
	fh, err := c.logFile(s)
	if err != nil {
		return false, err
	}
	defer fh.release()
	sc := newScanner(fh.f, pos, s.size.Load())
	defer sc.release()
	for {
		if err := c.checkDone(); err != nil {
			return false, err
		}
		h, p, ok, err := sc.next()
		if err != nil {
			return false, fmt.Errorf("%w: mapping segment %d: %v", ErrCorrupt, s.base, err)
		}
		if !ok {
			return false, nil
		}
		if h.BaseOffset() >= c.p.upper {
			return false, nil
		}
		lastOff := h.LastOffset()
		if h.Control() {
			b, err := c.read(fh.f, p, h)
			if err != nil {
				return false, err
			}
			if _, err := tt.onControl(b); err != nil {
				return false, err
			}
		} else if !tt.onData(h) {
			b, err := c.read(fh.f, p, h)
			if err != nil {
				return false, err
			}
			it, err := b.RecordsReuse(c.limit, &c.decomp)
			if err != nil {
				return false, fmt.Errorf("%w: batch at offset %d: %v", ErrCorrupt, b.BaseOffset(), err)
			}
			for r, more := it.Next(); more; r, more = it.Next() {
				if o := r.OffsetIn(b); r.Key != nil && o >= start && !om.put(r.Key, o) {
					return true, nil
				}
			}
			if it.Err() != nil {
				return false, fmt.Errorf("%w: batch at offset %d: %v", ErrCorrupt, b.BaseOffset(), it.Err())
			}
		}
		if lastOff >= start {
			om.latest = max(om.latest, lastOff)
		}
	}
}

// read reads and CRC-checks the whole batch at pos.
func (c *cleaner) read(f *os.File, pos int64, h record.Batch) (record.Batch, error) {
	b, err := readBatch(f, pos, h, c.readBuf)
	if err != nil {
		return nil, err
	}
	c.readBuf = b[:cap(b)]
	return b, nil
}

// logFile opens a segment's .log file for the pass; a segment deleted
// meanwhile aborts it.
func (c *cleaner) logFile(s *segment) (*fileHandle, error) {
	fh, err := s.logFile()
	if errors.Is(err, errSegmentGone) {
		return nil, errCleaningAborted
	}
	return fh, err
}

// groupSegments groups consecutive segments whose total log and index
// sizes fit one segment and whose offsets fit a 32-bit relative offset
// (Cleaner.groupSegmentsBySize).
func groupSegments(segs []*segment, cfg *Config, upper int64, nextBase func(*segment) int64) [][]*segment {
	var out [][]*segment
	for len(segs) > 0 {
		g := []*segment{segs[0]}
		logSize := segs[0].size.Load()
		ixSize := indexBytes(segs[0].oi.index)
		tiSize := indexBytes(segs[0].ti.index)
		segs = segs[1:]
		for len(segs) > 0 {
			s := segs[0]
			lastOff := nextBase(s) - 1
			if len(segs) == 1 {
				lastOff = max(lastOff, upper-1)
			}
			if logSize+s.size.Load() > cfg.SegmentBytes ||
				ixSize+indexBytes(s.oi.index) > int64(cfg.SegmentIndexBytes) ||
				tiSize+indexBytes(s.ti.index) > int64(cfg.SegmentIndexBytes) ||
				(s.size.Load() > 0 && lastOff-g[0].base > math.MaxInt32) {
				break
			}
			g = append(g, s)
			logSize += s.size.Load()
			ixSize += indexBytes(s.oi.index)
			tiSize += indexBytes(s.ti.index)
			segs = segs[1:]
		}
		out = append(out, g)
	}
	return out
}

// indexBytes returns the size of an index's entries; a truncation may be
// rewriting them concurrently.
func indexBytes(ix *index) int64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return int64(len(ix.entries))
}

// cleanGroup writes the retained batches of a group of segments into a new
// segment with .cleaned files (Cleaner.cleanSegments), flushed and with
// trimmed indexes, ready to be swapped in.
func (c *cleaner) cleanGroup(g []*segment, next int64, om *offsetMap, tt *txnTracker, last map[int64]lastRecord) (*segment, error) {
	cleaned := newSegmentStruct(c.l.dir, g[0].base, g[len(g)-1].created)
	if err := cleaned.createFiles(c.cfg, cleanedSuffix); err != nil {
		removeCleanedFiles(c.l.dir, g[0].base)
		return nil, c.l.fail(err)
	}
	ok := false
	defer func() {
		if !ok {
			cleaned.closeFiles()
			removeCleanedFiles(c.l.dir, g[0].base)
		}
	}()
	tt.index = cleaned.txn
	defer func() { tt.index = nil }()
	for _, s := range g {
		if err := c.cleanInto(s, cleaned, om, tt, last); err != nil {
			return nil, err
		}
	}
	if err := cleaned.onRoll(); err != nil {
		return nil, c.l.fail(err)
	}
	cleaned.dirty.Store(true)
	if err := cleaned.sync(); err != nil {
		return nil, c.l.fail(err)
	}
	cleaned.nextOffset.Store(next)
	ok = true
	return cleaned, nil
}

// cleanInto copies the batches of src that are retained into dst
// (Cleaner.cleanInto with MemoryRecords.filterTo).
func (c *cleaner) cleanInto(src, dst *segment, om *offsetMap, tt *txnTracker, last map[int64]lastRecord) error {
	size := src.size.Load()
	c.stats.BytesRead += size
	fh, err := c.logFile(src)
	if err != nil {
		return err
	}
	defer fh.release()
	sc := newScanner(fh.f, 0, size)
	defer sc.release()
	c.out = c.out[:0]
	for {
		if err := c.checkDone(); err != nil {
			return err
		}
		h, p, ok, err := sc.next()
		if err != nil {
			return fmt.Errorf("%w: cleaning segment %d: %v", ErrCorrupt, src.base, err)
		}
		if !ok {
			break
		}
		b, err := c.read(fh.f, p, h)
		if err != nil {
			return err
		}
		if err := c.filterBatch(b, om, tt, last); err != nil {
			return err
		}
		if len(c.out) >= cleanerWriteChunk {
			if err := c.flushOut(dst); err != nil {
				return err
			}
		}
	}
	return c.flushOut(dst)
}

func (c *cleaner) flushOut(dst *segment) error {
	if len(c.out) == 0 {
		return nil
	}
	if err := dst.append(c.out, c.cfg.IndexIntervalBytes); err != nil {
		return c.l.fail(err)
	}
	c.stats.BytesWritten += int64(len(c.out))
	c.out = c.out[:0]
	return nil
}

// filterBatch appends what survives of batch b to c.out, as the cleaner's
// RecordFilter (checkBatchRetention, shouldRetainRecord) applied by
// MemoryRecords.filterTo.
func (c *cleaner) filterBatch(b record.Batch, om *offsetMap, tt *txnTracker, last map[int64]lastRecord) error {
	now := c.p.now.UnixMilli()
	var canDiscard, discardRecords bool
	if b.Control() {
		d, err := tt.onControl(b)
		if err != nil {
			return err
		}
		// Markers piggy-back on tombstone retention: one is removed only
		// once its delete horizon, set when it first became removable,
		// has passed.
		canDiscard = d
		discardRecords = d && b.HasDeleteHorizon() && b.BaseTimestamp() <= now
	} else {
		canDiscard = tt.onData(b)
		discardRecords = canDiscard
	}
	pid := b.ProducerID()
	isLast := false
	if lr, ok := last[pid]; ok && pid >= 0 {
		if lr.lastData >= 0 {
			isLast = b.LastOffset() == lr.lastData
		} else {
			isLast = b.Control() && b.ProducerEpoch() == lr.epoch
		}
	}
	// Retain-empty batches keep an active producer's last sequence and
	// epoch, and the last offset of the cleaning round.
	retainEmpty := isLast || b.NextOffset() == c.p.upper
	if discardRecords && !retainEmpty {
		c.stats.RecordsRead += int64(b.RecordCount())
		return nil
	}
	markerForEmptyTxn := canDiscard && b.Control()
	c.recs = c.recs[:0]
	all, tombstones := true, false
	n := 0
	if b.RecordCount() > 0 {
		it, err := b.RecordsReuse(c.limit, &c.decomp)
		if err != nil {
			return fmt.Errorf("%w: batch at offset %d: %v", ErrCorrupt, b.BaseOffset(), err)
		}
		for r, more := it.Next(); more; r, more = it.Next() {
			n++
			if c.retain(b, r, discardRecords, om, now) {
				c.recs = append(c.recs, r)
				tombstones = tombstones || r.Value == nil
			} else {
				all = false
			}
		}
		if it.Err() != nil {
			return fmt.Errorf("%w: batch at offset %d: %v", ErrCorrupt, b.BaseOffset(), it.Err())
		}
	}
	c.stats.RecordsRead += int64(n)
	c.stats.RecordsRetained += int64(len(c.recs))
	switch {
	case len(c.recs) > 0:
		needHorizon := (tombstones || markerForEmptyTxn) && !b.HasDeleteHorizon()
		if all && !needHorizon {
			c.out = append(c.out, b...)
			return nil
		}
		horizon := int64(-1)
		if needHorizon {
			horizon = now + c.cfg.DeleteRetentionMs.Milliseconds()
		} else if b.HasDeleteHorizon() {
			horizon = b.BaseTimestamp()
		}
		var err error
		if c.out, c.payload, err = record.AppendRetained(c.out, b, c.recs, horizon, c.payload); err != nil {
			return fmt.Errorf("%w: re-encoding batch at offset %d: %v", ErrCorrupt, b.BaseOffset(), err)
		}
	case retainEmpty:
		c.out = record.AppendEmpty(c.out, b)
	}
	return nil
}

// retain is Cleaner.shouldRetainRecord for one record.
func (c *cleaner) retain(b record.Batch, r record.Record, discardRecords bool, om *offsetMap, now int64) bool {
	switch {
	case discardRecords:
		return false // kept only for the producer's sequence
	case b.Control():
		return true
	}
	off := r.OffsetIn(b)
	if off > om.latest {
		return true
	}
	if r.Key == nil {
		return false // a compacted topic's records need keys
	}
	if found, ok := om.get(r.Key); ok && off < found {
		return false
	}
	if r.Value != nil {
		return true
	}
	// A tombstone stays until the delete horizon its batch got when it was
	// first cleaned (KIP-534).
	return !b.HasDeleteHorizon() || now < b.BaseTimestamp()
}

// removeCleanedFiles removes the .cleaned files of an abandoned segment.
func removeCleanedFiles(dir string, base int64) {
	for _, suf := range segmentSuffixes {
		if err := os.Remove(segmentPath(dir, base, suf+cleanedSuffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
			// Leftovers are removed at the next load.
			continue
		}
	}
}

// segmentSuffixes are the files of one segment.
var segmentSuffixes = []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix}

// txnTracker is Kafka's CleanedTransactionMetadata: while the cleaner walks
// the log it tracks which transactions are aborted (from the transaction
// indexes) and which are committed, to decide which data batches are
// aborted and when a marker may go. Retained aborted transactions are
// written to the cleaned segment's transaction index.
type txnTracker struct {
	aborted   []AbortedTxn // by first offset, consumed from the front
	ongoingAb map[int64]*abortedMeta
	ongoingCo map[int64]bool
	index     *txnIndex
}

type abortedMeta struct {
	txn      AbortedTxn
	observed bool // a batch of the transaction was seen in this pass
}

func newTxnTracker(aborted []AbortedTxn) *txnTracker {
	sort.Slice(aborted, func(i, j int) bool {
		if aborted[i].FirstOffset != aborted[j].FirstOffset {
			return aborted[i].FirstOffset < aborted[j].FirstOffset
		}
		return aborted[i].ProducerID < aborted[j].ProducerID
	})
	// The same transaction can be listed twice; keep one.
	out := aborted[:0]
	for i, a := range aborted {
		if i > 0 && a.ProducerID == aborted[i-1].ProducerID && a.FirstOffset == aborted[i-1].FirstOffset {
			continue
		}
		out = append(out, a)
	}
	return &txnTracker{aborted: out, ongoingAb: map[int64]*abortedMeta{}, ongoingCo: map[int64]bool{}}
}

func (t *txnTracker) consumeUpTo(offset int64) {
	for len(t.aborted) > 0 && t.aborted[0].FirstOffset <= offset {
		a := t.aborted[0]
		t.aborted = t.aborted[1:]
		if _, ok := t.ongoingAb[a.ProducerID]; !ok {
			t.ongoingAb[a.ProducerID] = &abortedMeta{txn: a}
		}
	}
}

// onData reports whether a data batch belongs to an aborted transaction
// (CleanedTransactionMetadata.onBatchRead). Only the header is needed.
func (t *txnTracker) onData(b record.Batch) bool {
	t.consumeUpTo(b.LastOffset())
	if !b.Transactional() {
		return false
	}
	if m, ok := t.ongoingAb[b.ProducerID()]; ok {
		m.observed = true
		return true
	}
	t.ongoingCo[b.ProducerID()] = true
	return false
}

// onControl reports whether a marker may be discarded
// (CleanedTransactionMetadata.onControlBatchRead): an abort marker once
// none of its transaction's batches remain, a commit marker once none of
// its batches were seen in this pass, an empty (already cleaned) marker
// always.
func (t *txnTracker) onControl(b record.Batch) (bool, error) {
	t.consumeUpTo(b.LastOffset())
	if b.RecordCount() == 0 {
		return true, nil
	}
	marker, err := b.ControlOf()
	if err != nil {
		return false, fmt.Errorf("%w: marker at offset %d: %v", ErrCorrupt, b.BaseOffset(), err)
	}
	pid := b.ProducerID()
	switch marker.Type {
	case record.ControlAbort:
		m, ok := t.ongoingAb[pid]
		delete(t.ongoingAb, pid)
		if ok && m.observed {
			if t.index != nil {
				if err := t.index.add(m.txn); err != nil {
					return false, err
				}
			}
			return false, nil
		}
		return true, nil
	case record.ControlCommit:
		seen := t.ongoingCo[pid]
		delete(t.ongoingCo, pid)
		return !seen, nil
	}
	return false, nil
}

package log

// This file swaps a cleaned segment in for the segments it replaces, as
// Kafka's LocalLog.replaceSegments: crash-safe in two phases, with the
// loader (completeSwaps in load.go) finishing a swap a crash interrupted.

import (
	"errors"
	"fmt"
	"os"
)

// replaceSegments swaps cleaned (files named .cleaned, flushed) in for old,
// a run of consecutive segments of the log:
//
//  1. the cleaned files are renamed to .swap: from here a crash completes
//     the swap at the next load, which deletes the segments whose base
//     offsets fall in the swapped segment's range and renames .swap away;
//  2. the in-memory segment list is replaced, under the append lock;
//  3. the old segments' files are renamed to .deleted (removed at the next
//     load if a crash comes first);
//  4. the .swap files get their final names, and the directory is synced;
//  5. the .deleted files are removed. Readers holding Regions of the old
//     segments keep their open files until they release them.
//
// If the log changed since the pass began (truncation, retention, deletion
// or shutdown removed or replaced any of old), the cleaned files are
// discarded and errCleaningAborted returned.
func (l *Log) replaceSegments(old []*segment, cleaned *segment, gen int64, hook func(string) error) error {
	step := func(name string) error {
		if hook == nil {
			return nil
		}
		return hook(name)
	}
	abandon := func() error {
		cleaned.closeFiles()
		removeCleanedFiles(l.dir, cleaned.base)
		return errCleaningAborted
	}
	l.mu.Lock()
	cur := l.segments()
	i := -1
	for j, s := range cur {
		if s == old[0] {
			i = j
			break
		}
	}
	valid := i >= 0 && i+len(old) < len(cur) && !l.closed.Load() && l.Err() == nil && l.cleanGen.Load() == gen
	for k := 0; valid && k < len(old); k++ {
		valid = cur[i+k] == old[k]
	}
	if !valid {
		l.mu.Unlock()
		return abandon()
	}
	if err := step("cleaned"); err != nil {
		l.mu.Unlock()
		return err
	}
	base := cleaned.base
	for _, suf := range segmentSuffixes {
		// A cleaned segment without aborted transactions has no .txnindex.
		if err := os.Rename(segmentPath(l.dir, base, suf+cleanedSuffix), segmentPath(l.dir, base, suf+swapSuffix)); err != nil && !(suf == txnIndexSuffix && errors.Is(err, os.ErrNotExist)) {
			l.mu.Unlock()
			return l.fail(err)
		}
	}
	if err := syncDir(l.dir); err != nil {
		l.mu.Unlock()
		return l.fail(err)
	}
	if err := step("swap"); err != nil {
		l.mu.Unlock()
		return err
	}
	segs := make([]*segment, 0, len(cur)-len(old)+1)
	segs = append(append(append(segs, cur[:i]...), cleaned), cur[i+len(old):]...)
	l.segs.Store(&segs)
	for _, s := range old {
		s.retire() // readers holding it keep its .log file open
		for _, suf := range segmentSuffixes {
			p := segmentPath(l.dir, s.base, suf)
			if err := os.Rename(p, p+deletedSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
				l.mu.Unlock()
				return l.fail(err)
			}
		}
	}
	if err := step("deleted"); err != nil {
		l.mu.Unlock()
		return err
	}
	for _, suf := range segmentSuffixes {
		if err := os.Rename(segmentPath(l.dir, base, suf+swapSuffix), segmentPath(l.dir, base, suf)); err != nil && !(suf == txnIndexSuffix && errors.Is(err, os.ErrNotExist)) {
			l.mu.Unlock()
			return l.fail(err)
		}
	}
	cleaned.renamed()
	if err := syncDir(l.dir); err != nil {
		l.mu.Unlock()
		return l.fail(err)
	}
	if err := cleaned.seal(); err != nil {
		l.mu.Unlock()
		return l.fail(err)
	}
	l.mu.Unlock()
	var first error
	for _, s := range old {
		for _, suf := range segmentSuffixes {
			if err := os.Remove(segmentPath(l.dir, s.base, suf+deletedSuffix)); err != nil && !errors.Is(err, os.ErrNotExist) && first == nil {
				first = err
			}
		}
		s.unref()
	}
	if first != nil {
		return l.fail(fmt.Errorf("removing replaced segment files: %w", first))
	}
	return nil
}

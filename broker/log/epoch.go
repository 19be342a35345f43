package log

import (
	"sort"
	"sync"
)

// epochCache is Kafka's LeaderEpochFileCache: the start offset of every
// leader epoch, persisted to leader-epoch-checkpoint on each change.
type epochCache struct {
	path    string
	mu      sync.RWMutex
	entries []epochEntry
}

func loadEpochCache(path string) (*epochCache, error) {
	entries, err := readEpochCheckpoint(path)
	if err != nil {
		return nil, err
	}
	return &epochCache{path: path, entries: entries}, nil
}

func (c *epochCache) latest() (epochEntry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.entries) == 0 {
		return epochEntry{}, false
	}
	return c.entries[len(c.entries)-1], true
}

// assign records that epoch starts at offset, as LeaderEpochFileCache.assign:
// an update is needed when the epoch differs from the latest or starts
// earlier; entries with a larger epoch or a start at or after offset are
// removed so the cache stays monotonic.
func (c *epochCache) assign(epoch int32, offset int64) error {
	if epoch < 0 || offset < 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.entries); n > 0 {
		last := c.entries[n-1]
		if last.Epoch == epoch && offset >= last.StartOffset {
			return nil
		}
	}
	kept := c.entries[:0]
	for _, e := range c.entries {
		if e.Epoch < epoch && e.StartOffset < offset {
			kept = append(kept, e)
		}
	}
	c.entries = append(kept, epochEntry{epoch, offset})
	return writeEpochCheckpoint(c.path, c.entries)
}

// endOffsetFor answers OffsetForLeaderEpoch as LeaderEpochFileCache.endOffsetFor.
func (c *epochCache) endOffsetFor(epoch int32, logEnd int64) (int32, int64, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := len(c.entries)
	if epoch < 0 || n == 0 {
		return -1, -1, false
	}
	if c.entries[n-1].Epoch == epoch {
		return epoch, logEnd, true
	}
	// First entry with a larger epoch.
	hi := sort.Search(n, func(i int) bool { return c.entries[i].Epoch > epoch })
	if hi == n {
		return -1, -1, false
	}
	if hi == 0 {
		// Older than every known epoch: the requested epoch with the
		// start of the earliest known one.
		return epoch, c.entries[0].StartOffset, true
	}
	return c.entries[hi-1].Epoch, c.entries[hi].StartOffset, true
}

// truncateFromEnd removes epochs starting at or after offset.
func (c *epochCache) truncateFromEnd(offset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= offset {
		n--
	}
	if n == len(c.entries) {
		return nil
	}
	c.entries = c.entries[:n]
	return writeEpochCheckpoint(c.path, c.entries)
}

// truncateFromStart drops epochs wholly below offset and moves the start of
// the epoch containing it up to offset (LeaderEpochFileCache.truncateFromStart).
func (c *epochCache) truncateFromStart(offset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := 0
	for i+1 < len(c.entries) && c.entries[i+1].StartOffset <= offset {
		i++
	}
	changed := i > 0
	c.entries = c.entries[i:]
	if len(c.entries) > 0 && c.entries[0].StartOffset < offset {
		c.entries[0].StartOffset = offset
		changed = true
	}
	if !changed {
		return nil
	}
	return writeEpochCheckpoint(c.path, c.entries)
}

// epochAt returns the epoch whose range contains offset, or -1.
func (c *epochCache) epochAt(offset int64) int32 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e := int32(-1)
	for _, en := range c.entries {
		if en.StartOffset > offset {
			break
		}
		e = en.Epoch
	}
	return e
}

package handler

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Fetch sessions, KIP-227, as Kafka's FetchSession.scala: a client that sends
// SessionEpoch 0 asks for a new session; later requests carry the session id
// and the next epoch and list only the partitions that changed, and the
// response lists only the partitions with news.

const (
	// finalEpoch (-1) closes a session or asks for a sessionless fetch.
	finalEpoch = -1
	// initialEpoch (0) asks for a full fetch that opens a session.
	initialEpoch = 0
	// sessionEvictAfter is FetchSessionCache's evictionMs: a session idle this
	// long may be evicted by any new one.
	sessionEvictAfter = 120 * time.Second
)

// sessionKey names one partition in a session: by topic id from Fetch v13,
// by name before (id zero).
type sessionKey struct {
	id        [16]byte
	topic     string
	partition int32
}

// cachedPartition is Kafka's CachedPartition: what the client last asked for
// and what the broker last told it.
type cachedPartition struct {
	key                sessionKey
	fetchOffset        int64
	logStartOffset     int64
	maxBytes           int32
	currentLeaderEpoch int32
	lastFetchedEpoch   int32

	hw, lso, startOffset int64
}

type fetchSession struct {
	id       int32
	epoch    int32 // the epoch the next request must carry
	parts    []*cachedPartition
	index    map[sessionKey]*cachedPartition
	lastUsed time.Time
}

func (s *fetchSession) remove(k sessionKey) {
	if _, ok := s.index[k]; !ok {
		return
	}
	delete(s.index, k)
	for i, p := range s.parts {
		if p.key == k {
			s.parts = append(s.parts[:i], s.parts[i+1:]...)
			return
		}
	}
}

// moveToEnd puts cp last, so partitions that just returned data give way to
// the others next time (Kafka's IncrementalFetchContext iterator).
func (s *fetchSession) moveToEnd(cp *cachedPartition) {
	for i, p := range s.parts {
		if p == cp {
			copy(s.parts[i:], s.parts[i+1:])
			s.parts[len(s.parts)-1] = cp
			return
		}
	}
}

// FetchSessions is the broker's FetchSessionCache.
type FetchSessions struct {
	mu       sync.Mutex
	max      int
	sessions map[int32]*fetchSession
	now      func() time.Time
	rng      *rand.Rand
}

// NewFetchSessions returns a cache of at most slots sessions; slots 0
// disables incremental fetch sessions, as in Kafka.
func NewFetchSessions(slots int, now func() time.Time, rng *rand.Rand) *FetchSessions {
	return &FetchSessions{max: slots, sessions: map[int32]*fetchSession{}, now: now, rng: rng}
}

// Len returns the number of cached sessions.
func (c *FetchSessions) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sessions)
}

// fetchContext is the outcome of resolving a request against the cache
// (Kafka's FetchContext): which partitions to read and how to shape the
// response.
type fetchContext struct {
	errCode int16
	// session is nil for sessionless and full fetches.
	session *fetchSession
	// full is true for sessionless and full (initial) fetches.
	full bool
	// create asks for a new session to be made from the response of a
	// full fetch (SessionEpoch 0).
	create bool
}

func nextEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

// open resolves a request's session fields. For an incremental request it
// applies the request's partitions (wanted, in request order) and forgotten
// partitions to the session and advances its epoch, as
// FetchManager.newContext.
func (c *FetchSessions) open(sessionID, epoch int32, wanted []cachedPartition, forgotten []sessionKey) fetchContext {
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch == finalEpoch || epoch == initialEpoch {
		if sessionID != 0 {
			delete(c.sessions, sessionID)
		}
		return fetchContext{full: true, create: epoch == initialEpoch}
	}
	s, ok := c.sessions[sessionID]
	if !ok {
		return fetchContext{errCode: kerr.FetchSessionIDNotFound.Code}
	}
	if s.epoch != epoch {
		return fetchContext{errCode: kerr.InvalidFetchSessionEpoch.Code}
	}
	for _, k := range forgotten {
		s.remove(k)
	}
	for i := range wanted {
		w := wanted[i]
		if cp, ok := s.index[w.key]; ok {
			cp.fetchOffset, cp.logStartOffset, cp.maxBytes = w.fetchOffset, w.logStartOffset, w.maxBytes
			cp.currentLeaderEpoch, cp.lastFetchedEpoch = w.currentLeaderEpoch, w.lastFetchedEpoch
			continue
		}
		cp := w
		cp.hw, cp.lso, cp.startOffset = -1, -1, -1
		s.parts = append(s.parts, &cp)
		s.index[cp.key] = &cp
	}
	s.epoch = nextEpoch(s.epoch)
	s.lastUsed = c.now()
	return fetchContext{session: s}
}

// create stores a new session holding parts (with the offsets just sent)
// and returns its id, or 0 when the cache is full and nothing can be evicted
// (Kafka's maybeCreateSession; the client then keeps sending full fetches).
func (c *FetchSessions) create(parts []*cachedPartition) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.max <= 0 {
		return 0
	}
	if len(c.sessions) >= c.max && !c.evictLocked(len(parts)) {
		return 0
	}
	var id int32
	for id == 0 || c.sessions[id] != nil {
		id = c.rng.Int32N(math.MaxInt32) + 1
	}
	s := &fetchSession{id: id, epoch: 1, parts: parts, index: make(map[sessionKey]*cachedPartition, len(parts)), lastUsed: c.now()}
	for _, p := range parts {
		s.index[p.key] = p
	}
	c.sessions[id] = s
	return id
}

// evictLocked makes room as FetchSessionCache.tryEvict: first the least
// recently used session if it has been idle past sessionEvictAfter, else the
// smallest session if it is smaller than the one being created.
func (c *FetchSessions) evictLocked(newSize int) bool {
	var lru, smallest *fetchSession
	for _, s := range c.sessions {
		if lru == nil || s.lastUsed.Before(lru.lastUsed) {
			lru = s
		}
		if smallest == nil || len(s.parts) < len(smallest.parts) {
			smallest = s
		}
	}
	if lru != nil && c.now().Sub(lru.lastUsed) >= sessionEvictAfter {
		delete(c.sessions, lru.id)
		return true
	}
	if smallest != nil && len(smallest.parts) < newSize {
		delete(c.sessions, smallest.id)
		return true
	}
	return false
}

// lock and unlock guard reads and writes of a session's partitions while a
// response is built.
func (c *FetchSessions) lock()   { c.mu.Lock() }
func (c *FetchSessions) unlock() { c.mu.Unlock() }

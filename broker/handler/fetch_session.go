package handler

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/metrics"
)

// Fetch sessions, KIP-227, as Kafka's FetchSession.scala: a client that sends
// SessionEpoch 0 asks for a new session; later requests carry the session id
// and the next epoch and list only the partitions that changed, and the
// response lists only the partitions with news.
//
// Unlike Kafka, a session holds only partitions this broker hosts. A
// partition that does not exist is answered UNKNOWN_TOPIC_OR_PARTITION or
// UNKNOWN_TOPIC_ID in the response to the request that names it and is not
// remembered, so requests naming any number of unknown partitions cost no
// session memory. A session that left one out is closed
// (FETCH_SESSION_ID_NOT_FOUND) at its next incremental fetch after the
// broker's partitions changed, so the client sends a full fetch that names
// the partition again; Kafka instead keeps the partition and repeats its error
// in every incremental response.
//
// The cache is bounded by slots (max.incremental.fetch.session.cache.slots),
// by the bytes one session may hold and by the bytes all sessions hold
// (FetchSessionLimits), each cached partition costing cachedPartitionBytes.
// A full fetch whose session would not fit is served without a session
// (session id 0), as Kafka does when its cache is full.

const (
	// finalEpoch (-1) closes a session or asks for a sessionless fetch.
	finalEpoch = -1
	// initialEpoch (0) asks for a full fetch that opens a session.
	initialEpoch = 0
	// sessionEvictAfter is FetchSessionCache's evictionMs (Kafka's
	// MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS): a session idle longer may
	// be evicted by any new one, and a session younger is protected from
	// displacement by a larger one of its own priority.
	sessionEvictAfter = 120 * time.Second
)

// Cost of the session memory, in bytes, as held on the Go heap. A cached
// partition is its cachedPartition, its slot in the session's index (a key,
// a pointer and a control byte, three times over for the index's lowest
// load factor just after it grows, and its directory) and its slot in the
// ordered slice (twice, for append's spare capacity). A name key's topic is
// the broker's own string for the partition, shared with the partition
// manager, so it adds nothing per session. TestFetchSessionBytesAccounted
// holds the estimate against runtime heap statistics.
const (
	cachedPartitionBytes = int64(unsafe.Sizeof(cachedPartition{})) +
		3*int64(unsafe.Sizeof(sessionKey{})+unsafe.Sizeof(uintptr(0))+1) +
		2*int64(unsafe.Sizeof(uintptr(0)))
	// sessionOverheadBytes is one session's struct, map and slice headers
	// and its entry in the cache's map.
	sessionOverheadBytes = int64(unsafe.Sizeof(fetchSession{})) + 256
)

// Default byte limits: cascade.incremental.fetch.session.max.bytes and
// cascade.incremental.fetch.session.cache.max.bytes.
const (
	DefaultFetchSessionMaxBytes      = 8 << 20
	DefaultFetchSessionCacheMaxBytes = 32 << 20
)

// sessionBytes is the cost of a session of n partitions.
func sessionBytes(n int) int64 { return sessionOverheadBytes + int64(n)*cachedPartitionBytes }

// Reasons a session left the cache other than its client closing it.
const (
	// evictStale: idle past sessionEvictAfter, evicted for a new session.
	evictStale = iota
	// evictDisplaced: displaced by a more valuable new session (Kafka's
	// EvictableKey order: privileged, then size).
	evictDisplaced
	// evictTooLarge: an incremental fetch grew it past a byte limit.
	evictTooLarge
	// evictMetadata: it left out an unknown partition and the metadata
	// has changed since, so the client is made to name it again.
	evictMetadata
	numEvictReasons
)

var evictReasonNames = [numEvictReasons]string{"stale", "displaced", "too_large", "metadata"}

// Reasons a full fetch was served without a new session.
const (
	// refuseFull: no slot or bytes free and nothing evictable.
	refuseFull = iota
	// refuseTooLarge: more than one session's byte limit.
	refuseTooLarge
	numRefuseReasons
)

var refuseReasonNames = [numRefuseReasons]string{"full", "too_large"}

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
	id    int32
	epoch int32 // the epoch the next request must carry
	// privileged is Kafka's FetchSession.privileged: opened by a follower.
	privileged bool
	// usesIDs is Kafka's FetchSession.usesTopicIds: opened by Fetch v13
	// or later, so its partitions are keyed by topic id.
	usesIDs  bool
	parts    []*cachedPartition
	index    map[sessionKey]*cachedPartition
	created  time.Time
	lastUsed time.Time
	// size and bytes are as of the last touch (Kafka's cachedSize).
	size  int
	bytes int64
	// byAll and byPrivileged say, as of the last touch, whether any new
	// session or only a privileged one may displace this one (Kafka's
	// evictableByAll and evictableByPrivileged).
	byAll, byPrivileged bool
	// missedAt is the partition generation (PartitionsChanged) at which
	// an unknown partition was left out of the session, or -1.
	missedAt int64
}

// removeKeys drops the partitions named in forgotten, in one pass.
func (s *fetchSession) removeKeys(forgotten []sessionKey) {
	gone := 0
	for _, k := range forgotten {
		if _, ok := s.index[k]; ok {
			delete(s.index, k)
			gone++
		}
	}
	if gone == 0 {
		return
	}
	kept := s.parts[:0]
	for _, p := range s.parts {
		if s.index[p.key] == p {
			kept = append(kept, p)
		}
	}
	clear(s.parts[len(kept):])
	s.parts = kept
}

// moveToEnd puts the given partitions last, in the given order, so
// partitions that just returned data give way to the others next time
// (Kafka's IncrementalFetchContext iterator).
func (s *fetchSession) moveToEnd(moved ...*cachedPartition) {
	if len(moved) == 0 {
		return
	}
	set := make(map[*cachedPartition]struct{}, len(moved))
	for _, cp := range moved {
		set[cp] = struct{}{}
	}
	kept := make([]*cachedPartition, 0, len(s.parts))
	for _, p := range s.parts {
		if _, ok := set[p]; !ok {
			kept = append(kept, p)
		}
	}
	for _, cp := range moved {
		if _, ok := set[cp]; ok && s.index[cp.key] == cp {
			kept = append(kept, cp)
			delete(set, cp)
		}
	}
	s.parts = kept
}

// movedOn reports, with the cache locked, whether a later request of the
// session was served while the one carrying reqEpoch waited: its answer
// would then be built on partitions the later one already reported, so it
// is INVALID_FETCH_SESSION_EPOCH instead, as
// IncrementalFetchContext.updateAndGenerateResponseData.
func (s *fetchSession) movedOn(reqEpoch int32) bool { return s.epoch != nextEpoch(reqEpoch) }

// FetchSessionLimits bounds the fetch session cache.
type FetchSessionLimits struct {
	// Slots is max.incremental.fetch.session.cache.slots; 0 disables
	// incremental fetch sessions, as in Kafka.
	Slots int
	// SessionBytes is cascade.incremental.fetch.session.max.bytes, the
	// most one session may hold.
	SessionBytes int64
	// TotalBytes is cascade.incremental.fetch.session.cache.max.bytes, the
	// most all sessions hold together.
	TotalBytes int64
}

// FetchSessions is the broker's FetchSessionCache.
type FetchSessions struct {
	mu         sync.Mutex
	limits     FetchSessionLimits
	sessions   map[int32]*fetchSession
	bytes      int64
	partitions int64
	evicted    [numEvictReasons]uint64
	refused    [numRefuseReasons]uint64
	now        func() time.Time
	rng        *rand.Rand
	// gens counts the partition sets applied (PartitionsChanged).
	gens atomic.Int64
}

// PartitionsChanged tells the cache that the broker's partitions may have
// changed: sessions that left out a partition that did not exist are ended
// at their next incremental fetch. The broker calls it after each metadata
// commit, once its partitions follow the new image.
func (c *FetchSessions) PartitionsChanged() { c.gens.Add(1) }

// NewFetchSessions returns a cache bounded by limits; byte limits of 0 or
// less take the defaults.
func NewFetchSessions(limits FetchSessionLimits, now func() time.Time, rng *rand.Rand) *FetchSessions {
	if limits.SessionBytes <= 0 {
		limits.SessionBytes = DefaultFetchSessionMaxBytes
	}
	if limits.TotalBytes <= 0 {
		limits.TotalBytes = DefaultFetchSessionCacheMaxBytes
	}
	return &FetchSessions{limits: limits, sessions: map[int32]*fetchSession{}, now: now, rng: rng}
}

// Len returns the number of cached sessions.
func (c *FetchSessions) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sessions)
}

// Stats returns the cache's numbers for the metrics collector.
func (c *FetchSessions) Stats() metrics.FetchSessionStat {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := metrics.FetchSessionStat{
		Sessions:   int64(len(c.sessions)),
		Partitions: c.partitions,
		Bytes:      c.bytes,
		Evictions:  make(map[string]uint64, numEvictReasons),
		Refusals:   make(map[string]uint64, numRefuseReasons),
	}
	for i, n := range c.evicted {
		st.Evictions[evictReasonNames[i]] = n
	}
	for i, n := range c.refused {
		st.Refusals[refuseReasonNames[i]] = n
	}
	return st
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
	// uncached are the partitions an incremental request named that do
	// not exist: answered with their error, kept out of the session.
	uncached []cachedPartition
	// generation is the partition generation read before the partitions
	// were looked up, for missedAt.
	generation int64
}

func nextEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

// partitionCatalog tells the cache which partitions exist.
type partitionCatalog interface {
	// offset is the partition generation: it changes after partitions
	// may have been created, not before.
	offset() int64
	// known reports whether the partition exists, and points a name
	// key's topic at the broker's own string.
	known(k *sessionKey) bool
}

// envCatalog is the partitionCatalog of a broker's Env.
type envCatalog struct{ env *Env }

func (e envCatalog) offset() int64 { return e.env.FetchSessions.gens.Load() }

func (e envCatalog) known(k *sessionKey) bool {
	if e.env.Partitions == nil {
		return false
	}
	if k.topic == "" {
		name, ok := e.env.Partitions.TopicName(k.id)
		return ok && e.env.Partitions.Get(log.TopicPartition{Topic: name, Partition: k.partition}) != nil
	}
	p := e.env.Partitions.Get(log.TopicPartition{Topic: k.topic, Partition: k.partition})
	if p == nil {
		return false
	}
	k.topic = p.TopicPartition().Topic
	return true
}

// fetchFromFollower is Kafka's FetchRequest.isFromFollower: a replica id of
// 0 or more. A follower's session is privileged.
func fetchFromFollower(r *kmsg.FetchRequest) bool {
	if r.Version >= 15 {
		return r.ReplicaState.ID >= 0
	}
	return r.ReplicaID >= 0
}

// open resolves a request's session fields. For an incremental request it
// applies the request's partitions (wanted, in request order) and forgotten
// partitions to the session and advances its epoch, as
// FetchManager.newContext; wanted partitions that do not exist are returned
// in uncached instead of joining the session.
func (c *FetchSessions) open(sessionID, epoch int32, usesIDs bool, wanted []cachedPartition, forgotten []sessionKey, cat partitionCatalog) fetchContext {
	generation := cat.offset()
	if epoch == finalEpoch || epoch == initialEpoch {
		if sessionID != 0 {
			c.mu.Lock()
			if s := c.sessions[sessionID]; s != nil {
				c.removeLocked(s)
			}
			c.mu.Unlock()
		}
		return fetchContext{full: true, create: epoch == initialEpoch, generation: generation}
	}
	// Look the partitions up before taking the cache's lock.
	known := make([]bool, len(wanted))
	for i := range wanted {
		known[i] = cat.known(&wanted[i].key)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.sessions[sessionID]
	if !ok {
		return fetchContext{errCode: kerr.FetchSessionIDNotFound.Code}
	}
	if s.epoch != epoch {
		return fetchContext{errCode: kerr.InvalidFetchSessionEpoch.Code}
	}
	if s.usesIDs != usesIDs {
		// As FetchManager.newContext: a session keyed by topic ids is
		// not continued by names, nor the other way round.
		return fetchContext{errCode: kerr.FetchSessionTopicIDError.Code}
	}
	if s.missedAt >= 0 && s.missedAt != generation {
		c.evictLocked(s, evictMetadata)
		return fetchContext{errCode: kerr.FetchSessionIDNotFound.Code}
	}
	s.removeKeys(forgotten)
	added := 0
	for i := range wanted {
		if _, ok := s.index[wanted[i].key]; !ok && known[i] {
			added++
		}
	}
	if added > 0 {
		grown := sessionBytes(len(s.parts) + added)
		if grown > c.limits.SessionBytes {
			c.evictLocked(s, evictTooLarge)
			return fetchContext{errCode: kerr.FetchSessionIDNotFound.Code}
		}
		victims, ok := c.planEvictionLocked(s.privileged, len(s.parts)+added, grown, s)
		if !ok {
			c.evictLocked(s, evictTooLarge)
			return fetchContext{errCode: kerr.FetchSessionIDNotFound.Code}
		}
		c.applyEvictionLocked(victims)
	}
	var uncached []cachedPartition
	for i := range wanted {
		w := wanted[i]
		if cp, ok := s.index[w.key]; ok {
			// A cached partition deleted since stays until forgotten,
			// answered with its error, as in Kafka.
			cp.fetchOffset, cp.logStartOffset, cp.maxBytes = w.fetchOffset, w.logStartOffset, w.maxBytes
			cp.currentLeaderEpoch, cp.lastFetchedEpoch = w.currentLeaderEpoch, w.lastFetchedEpoch
			continue
		}
		if !known[i] {
			uncached = append(uncached, w)
			s.missedAt = generation
			continue
		}
		cp := w
		cp.hw, cp.lso, cp.startOffset = -1, -1, -1
		s.parts = append(s.parts, &cp)
		s.index[cp.key] = &cp
	}
	if len(s.parts) == 0 {
		// As FetchManager.newContext: a session left empty is closed and
		// the request served without one.
		c.removeLocked(s)
		return fetchContext{full: true, uncached: uncached, generation: generation}
	}
	s.epoch = nextEpoch(s.epoch)
	c.touchLocked(s)
	return fetchContext{session: s, uncached: uncached, generation: generation}
}

// create stores a new session holding parts (with the offsets just sent)
// and returns its id, or 0 when it is not cached: no partition to hold,
// larger than one session may be, or the cache full with nothing evictable
// (Kafka's maybeCreateSession; the client then keeps sending full
// fetches). missedAt is the partition generation if the request named a
// partition that does not exist, else -1.
func (c *FetchSessions) create(parts []*cachedPartition, privileged, usesIDs bool, missedAt int64) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.limits.Slots <= 0 || len(parts) == 0 {
		return 0
	}
	size := sessionBytes(len(parts))
	if size > c.limits.SessionBytes {
		c.refused[refuseTooLarge]++
		return 0
	}
	victims, ok := c.planEvictionLocked(privileged, len(parts), size, nil)
	if !ok {
		c.refused[refuseFull]++
		return 0
	}
	c.applyEvictionLocked(victims)
	var id int32
	for id == 0 || c.sessions[id] != nil {
		id = c.rng.Int32N(math.MaxInt32) + 1
	}
	now := c.now()
	s := &fetchSession{id: id, epoch: 1, privileged: privileged, usesIDs: usesIDs, parts: parts,
		index: make(map[sessionKey]*cachedPartition, len(parts)), created: now, missedAt: missedAt}
	for _, p := range parts {
		s.index[p.key] = p
	}
	c.sessions[id] = s
	c.touchLocked(s)
	return id
}

// touchLocked is FetchSessionCache.touch: it records the session's use, its
// size, and whether it may be displaced, and updates the cache's totals.
func (c *FetchSessions) touchLocked(s *fetchSession) {
	now := c.now()
	s.lastUsed = now
	c.bytes -= s.bytes
	c.partitions -= int64(s.size)
	s.size = len(s.parts)
	s.bytes = sessionBytes(s.size)
	c.bytes += s.bytes
	c.partitions += int64(s.size)
	old := now.Sub(s.created) > sessionEvictAfter
	s.byPrivileged = !s.privileged || old
	s.byAll = old
}

// removeLocked drops s from the cache and its totals.
func (c *FetchSessions) removeLocked(s *fetchSession) {
	if c.sessions[s.id] != s {
		return
	}
	delete(c.sessions, s.id)
	c.bytes -= s.bytes
	c.partitions -= int64(s.size)
}

func (c *FetchSessions) evictLocked(s *fetchSession, reason int) {
	c.removeLocked(s)
	c.evicted[reason]++
}

type eviction struct {
	s      *fetchSession
	reason int
}

// evictable orders sessions as Kafka's EvictableKey: (privileged, size, id).
func lessEvictable(aPriv bool, aSize int, aID int32, b *fetchSession) bool {
	if aPriv != b.privileged {
		return !aPriv
	}
	if aSize != b.size {
		return aSize < b.size
	}
	return aID < b.id
}

// planEvictionLocked chooses the sessions to evict so that a session of
// size partitions and bytes fits in the cache (grow, if not nil, is the
// session being grown to that size, already counted). It repeats
// FetchSessionCacheShard.tryEvict until there is a free slot and enough
// bytes: the least recently used session if it has been idle longer than
// sessionEvictAfter; else the least valuable session the newcomer may
// displace (any non-privileged one or an old privileged one for a
// privileged newcomer, only old ones otherwise), if it is no more valuable
// than the newcomer. It returns false, evicting nothing, when no plan fits.
func (c *FetchSessions) planEvictionLocked(privileged bool, size int, bytes int64, grow *fetchSession) ([]eviction, bool) {
	var plan []eviction
	inPlan := map[*fetchSession]bool{}
	planned := func(s *fetchSession) bool { return s == grow || inPlan[s] }
	now := c.now()
	freed := int64(0)
	for {
		count, used := len(c.sessions)-len(plan), c.bytes-freed
		if grow != nil {
			count, used = count-1, used-grow.bytes
		}
		if count < c.limits.Slots && used+bytes <= c.limits.TotalBytes {
			return plan, true
		}
		var lru, least *fetchSession
		for _, s := range c.sessions {
			if planned(s) {
				continue
			}
			if lru == nil || s.lastUsed.Before(lru.lastUsed) || (s.lastUsed.Equal(lru.lastUsed) && s.id < lru.id) {
				lru = s
			}
			if (privileged && s.byPrivileged) || (!privileged && s.byAll) {
				if least == nil || lessEvictable(s.privileged, s.size, s.id, least) {
					least = s
				}
			}
		}
		switch {
		case lru == nil:
			return nil, false
		case now.Sub(lru.lastUsed) > sessionEvictAfter:
			plan = append(plan, eviction{lru, evictStale})
			inPlan[lru] = true
			freed += lru.bytes
		case least == nil || lessEvictable(privileged, size, 0, least):
			return nil, false
		default:
			plan = append(plan, eviction{least, evictDisplaced})
			inPlan[least] = true
			freed += least.bytes
		}
	}
}

func (c *FetchSessions) applyEvictionLocked(plan []eviction) {
	for _, e := range plan {
		c.evictLocked(e.s, e.reason)
	}
}

// lock and unlock guard reads and writes of a session's partitions while a
// response is built.
func (c *FetchSessions) lock()   { c.mu.Lock() }
func (c *FetchSessions) unlock() { c.mu.Unlock() }

// createSession caches the partitions of a full fetch that exist, with the
// offsets just sent, as FullFetchContext.updateAndGenerateResponseData, and
// returns the new session's id or 0. A name key's topic is replaced by the
// broker's own string, so the session does not keep the request's alive.
func createSession(env *Env, r *kmsg.FetchRequest, parts []*fetchPart, generation int64) int32 {
	missedAt := int64(-1)
	cps := make([]*cachedPartition, 0, len(parts))
	for _, fp := range parts {
		if fp.p == nil {
			missedAt = generation
			continue
		}
		cp := *fp.cp
		if cp.key.topic != "" {
			cp.key.topic = fp.p.TopicPartition().Topic
		}
		cp.hw, cp.lso, cp.startOffset = fp.res.HighWatermark, fp.res.LastStableOffset, fp.res.LogStartOffset
		if fp.code != 0 {
			cp.hw, cp.lso, cp.startOffset = -1, -1, -1
		}
		cps = append(cps, &cp)
	}
	return env.FetchSessions.create(cps, fetchFromFollower(r), r.Version >= 13, missedAt)
}

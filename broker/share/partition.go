package share

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// RecordState is the delivery state of an in-flight record, with Kafka's
// RecordState ids (the DeliveryState of the share state records).
type RecordState int8

// The record states of Kafka's SharePartition. Acquired is never
// persisted: a record acquired when the share-partition leader stops is
// Available again when its state is loaded.
const (
	Available    RecordState = 0
	Acquired     RecordState = 1
	Acknowledged RecordState = 2
	Archived     RecordState = 4
)

func (s RecordState) String() string {
	switch s {
	case Available:
		return "available"
	case Acquired:
		return "acquired"
	case Acknowledged:
		return "acknowledged"
	case Archived:
		return "archived"
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// terminal reports whether a record's delivery is complete.
func (s RecordState) terminal() bool { return s == Acknowledged || s == Archived }

// AckType is an acknowledgement type of ShareFetch and ShareAcknowledge
// (Kafka's AcknowledgeType); Gap acknowledges an offset with no record,
// Renew (KIP-1222, Kafka 4.2) keeps a record acquired under a fresh lock.
type AckType int8

// The acknowledgement types.
const (
	AckGap     AckType = 0
	AckAccept  AckType = 1
	AckRelease AckType = 2
	AckReject  AckType = 3
	AckRenew   AckType = 4
)

// Auto offset reset policies of share.auto.offset.reset.
const (
	ResetLatest   = "latest"
	ResetEarliest = "earliest"
	// ResetByDuration prefixes a duration: "by_duration:PT1H".
	ResetByDuration = "by_duration:"
)

// PartitionConfig holds the settings of a share-partition, named after
// Kafka's broker and group properties.
type PartitionConfig struct {
	LockDuration       time.Duration // group.share.record.lock.duration.ms
	DeliveryCountLimit int16         // group.share.delivery.count.limit
	MaxRecordLocks     int           // group.share.partition.max.record.locks
	AutoOffsetReset    string        // share.auto.offset.reset
	ReadCommitted      bool          // share.isolation.level=read_committed
}

// DefaultPartitionConfig returns Apache Kafka 4.4's defaults.
func DefaultPartitionConfig() PartitionConfig {
	return PartitionConfig{
		LockDuration:       30 * time.Second,
		DeliveryCountLimit: 5,
		MaxRecordLocks:     2000,
		AutoOffsetReset:    ResetLatest,
	}
}

// LogOffsets is what the share-partition needs to know of its log to
// place a new share group: the log start offset, the high watermark, and
// the first offset at or after a timestamp (-1 when there is none).
type LogOffsets struct {
	LogStartOffset     int64
	HighWatermark      int64
	OffsetForTimestamp func(ms int64) int64
}

// Batch is one record batch a share fetch read from the log, from the
// partition's next fetch offset on.
type Batch struct {
	BaseOffset    int64
	LastOffset    int64
	ProducerID    int64
	Transactional bool
	Control       bool
}

// AbortedTxn is one aborted transaction of the fetched range, as a
// FetchResponse lists it: the producer and the first offset of its
// transaction; its records run to its abort marker.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
}

// AcquiredRecords is one run of records acquired for a member, as the
// AcquiredRecords of a ShareFetch response.
type AcquiredRecords struct {
	FirstOffset   int64
	LastOffset    int64
	DeliveryCount int16
}

// Ack is one acknowledgement batch: either one type for every offset, or
// one type per offset.
type Ack struct {
	FirstOffset int64
	LastOffset  int64
	Types       []AckType
}

// AckError is an acknowledgement refused with a Kafka error.
type AckError struct {
	Err     *kerr.Error
	Message string
}

func (e *AckError) Error() string { return e.Err.Message + ": " + e.Message }

func ackErr(err *kerr.Error, format string, a ...any) error {
	return &AckError{Err: err, Message: fmt.Sprintf(format, a...)}
}

// ErrNotInitialized is returned by a share-partition used before
// Initialize.
var ErrNotInitialized = errors.New("share: share-partition not initialized")

type record struct {
	state     RecordState
	count     int16
	member    string
	lockUntil time.Time
}

// Partition is one share group's view of one topic-partition (Kafka's
// SharePartition): the records in flight between the share-partition
// start offset (SPSO) and end offset (SPEO), each Available, Acquired by
// one member under a time-limited lock, Acknowledged or Archived, with its
// delivery count. It is a pure state machine: the caller passes the time,
// reads the log for it, and drains Ready of the state to persist.
type Partition struct {
	cfg         PartitionConfig
	initialized bool
	start       int64    // the SPSO
	stateEpoch  int32    // of the persisted state, written back with each change
	recs        []record // recs[i] is offset start+i; the in-flight window
	dirty       map[int64]bool
	startMoved  bool
}

// NewPartition returns a share-partition to Initialize.
func NewPartition(cfg PartitionConfig) *Partition {
	d := DefaultPartitionConfig()
	orDefault(&cfg.LockDuration, d.LockDuration)
	orDefault(&cfg.DeliveryCountLimit, d.DeliveryCountLimit)
	orDefault(&cfg.MaxRecordLocks, d.MaxRecordLocks)
	orDefault(&cfg.AutoOffsetReset, d.AutoOffsetReset)
	return &Partition{cfg: cfg, dirty: map[int64]bool{}}
}

// Initialize loads the share-partition from its persisted state, or, when
// there is none (nil, or a start offset of -1), places the SPSO by
// share.auto.offset.reset: latest is the high watermark, earliest the log
// start offset, by_duration the first offset written within the duration
// before now (the high watermark when there is none), as Kafka's
// SharePartition.initialize and ShareFetchUtils.offsetForDuration. The
// new start offset is then in the first Ready. Persisted records that lie
// below the log start offset are dropped.
func (p *Partition) Initialize(now time.Time, persisted *SnapshotValue, log LogOffsets) error {
	p.recs, p.dirty, p.startMoved, p.stateEpoch = nil, map[int64]bool{}, false, 0
	if persisted != nil {
		p.stateEpoch = persisted.StateEpoch
	}
	if persisted != nil && persisted.StartOffset >= 0 {
		p.start = persisted.StartOffset
		var end int64 = p.start
		for _, b := range persisted.StateBatches {
			if b.LastOffset+1 > end {
				end = b.LastOffset + 1
			}
		}
		p.recs = make([]record, end-p.start)
		for _, b := range persisted.StateBatches {
			for o := max(b.FirstOffset, p.start); o <= b.LastOffset; o++ {
				st := RecordState(b.DeliveryState)
				if st == Acquired {
					st = Available
				}
				p.recs[o-p.start] = record{state: st, count: b.DeliveryCount}
			}
		}
		p.initialized = true
		if log.LogStartOffset > p.start {
			p.moveStart(log.LogStartOffset)
		}
		p.advance()
		return nil
	}
	start, err := p.resetOffset(now, log)
	if err != nil {
		return err
	}
	p.start, p.initialized, p.startMoved = start, true, true
	return nil
}

func (p *Partition) resetOffset(now time.Time, log LogOffsets) (int64, error) {
	policy := p.cfg.AutoOffsetReset
	switch {
	case policy == ResetLatest:
		return log.HighWatermark, nil
	case policy == ResetEarliest:
		return log.LogStartOffset, nil
	case strings.HasPrefix(policy, ResetByDuration):
		d, err := ParseISODuration(strings.TrimPrefix(policy, ResetByDuration))
		if err != nil {
			return 0, fmt.Errorf("share.auto.offset.reset %q: %w", policy, err)
		}
		if log.OffsetForTimestamp != nil {
			if o := log.OffsetForTimestamp(now.Add(-d).UnixMilli()); o >= 0 {
				return o, nil
			}
		}
		return log.HighWatermark, nil
	}
	return 0, fmt.Errorf("share.auto.offset.reset %q: not latest, earliest or by_duration:<ISO-8601 duration>", policy)
}

// ParseISODuration parses the ISO-8601 durations of Java's
// Duration.parse that by_duration takes: PnDTnHnMn.nS, each part optional
// but at least one present, none negative.
func ParseISODuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("invalid ISO-8601 duration %q", s)
	if !strings.HasPrefix(s, "P") || len(s) < 3 {
		return 0, bad
	}
	s = s[1:]
	var total time.Duration
	units := map[byte]time.Duration{'D': 24 * time.Hour, 'H': time.Hour, 'M': time.Minute, 'S': time.Second}
	inTime := false
	order := "D"
	for s != "" {
		if s[0] == 'T' {
			if inTime || len(s) == 1 {
				return 0, bad
			}
			inTime, order, s = true, "HMS", s[1:]
			continue
		}
		i := strings.IndexAny(s, "DHMS")
		if i <= 0 {
			return 0, bad
		}
		unit := s[i]
		j := strings.IndexByte(order, unit)
		if j < 0 || (unit != 'S' && strings.Contains(s[:i], ".")) {
			return 0, bad
		}
		order = order[j+1:]
		v, err := strconv.ParseFloat(s[:i], 64)
		if err != nil || v < 0 || strings.ContainsAny(s[:i], "+-eE") {
			return 0, bad
		}
		total += time.Duration(v * float64(units[unit]))
		s = s[i+1:]
	}
	return total, nil
}

// StartOffset returns the SPSO.
func (p *Partition) StartOffset() int64 { return p.start }

// EndOffset returns the SPEO: the last offset in flight, or the SPSO when
// none is.
func (p *Partition) EndOffset() int64 {
	if len(p.recs) == 0 {
		return p.start
	}
	return p.end() - 1
}

func (p *Partition) end() int64 { return p.start + int64(len(p.recs)) }

// NextFetchOffset returns where the next share fetch reads the log: the
// first Available record in flight, or the offset after the window.
func (p *Partition) NextFetchOffset() int64 {
	for i, r := range p.recs {
		if r.state == Available {
			return p.start + int64(i)
		}
	}
	return p.end()
}

// Record returns the state, delivery count and owner of an in-flight
// offset; ok is false outside the window.
func (p *Partition) Record(offset int64) (state RecordState, count int16, member string, ok bool) {
	if offset < p.start || offset >= p.end() {
		return 0, 0, "", false
	}
	r := p.recs[offset-p.start]
	return r.state, r.count, r.member, true
}

// DeliveryCompleteCount returns how many in-flight records are
// Acknowledged or Archived (KIP-1226).
func (p *Partition) DeliveryCompleteCount() int32 {
	n := int32(0)
	for _, r := range p.recs {
		if r.state.terminal() {
			n++
		}
	}
	return n
}

// Acquire acquires, for member, up to maxRecords Available records of the
// fetched batches, each under a lock of group.share.record.lock.duration.ms,
// and returns them as runs. Records past the window extend it while
// fewer than group.share.partition.max.record.locks records are in
// flight; records already in it are acquired again when they are
// Available. Control records, and under read_committed the records of
// aborted transactions, are archived without being delivered; offsets the
// log skipped (compaction) are archived too.
func (p *Partition) Acquire(now time.Time, member string, batches []Batch, aborted []AbortedTxn, maxRecords int) ([]AcquiredRecords, error) {
	if !p.initialized {
		return nil, ErrNotInitialized
	}
	// As Kafka's lastOffsetAndMaxRecordsToAcquire: at most the room left
	// under the record lock limit; with none left, only records already in
	// flight (released or expired ones) are acquired again.
	last := int64(math.MaxInt64)
	limit := min(maxRecords, p.cfg.MaxRecordLocks-len(p.recs))
	if limit <= 0 {
		from := p.NextFetchOffset()
		if from >= p.end() {
			return nil, nil
		}
		limit, last = min(maxRecords, int(p.end()-from)), p.end()-1
	}
	var out []AcquiredRecords
	n := 0
	// Kafka's throttleRecordsDeliveryLimit: half the delivery count
	// limit, at least 2.
	throttle := max(2, (p.cfg.DeliveryCountLimit+1)/2)
	throttled := false
	// As the consumer's read_committed filter (and Kafka's
	// filterAbortedTransactionalAcquiredRecords): an aborted transaction
	// opens at its first offset and closes at its producer's next control
	// batch, its abort marker.
	pending := slices.Clone(aborted)
	slices.SortFunc(pending, func(a, b AbortedTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	open := map[int64]bool{} // producers inside an aborted transaction
	for _, b := range batches {
		for len(pending) > 0 && pending[0].FirstOffset <= b.LastOffset {
			open[pending[0].ProducerID] = true
			pending = pending[1:]
		}
		isAborted := p.cfg.ReadCommitted && b.Transactional && !b.Control && open[b.ProducerID]
		for o := max(b.BaseOffset, p.start); o <= min(b.LastOffset, last); o++ {
			if n >= limit {
				return out, p.acquired()
			}
			if o >= p.end() {
				if len(p.recs)+int(o-p.end())+1 > p.cfg.MaxRecordLocks {
					return out, p.acquired()
				}
				for p.end() < o {
					p.recs = append(p.recs, record{state: Archived})
					p.dirty[p.end()-1] = true
				}
				p.recs = append(p.recs, record{state: Available})
			}
			r := &p.recs[o-p.start]
			if r.state != Available {
				continue
			}
			if b.Control || isAborted {
				r.state = Archived
				p.dirty[o] = true
				continue
			}
			// Records delivered often are throttled, so that one bad
			// record does not use up the attempts of others (Kafka's
			// shouldThrottleRecordsDelivery and
			// acquireSubsetBatchRecords): from the throttle limit on
			// they are not added to records already acquired, and a
			// fetch of them takes a batch halved for each delivery
			// past the limit; a record on its last attempt goes alone.
			lastAttempt := p.cfg.DeliveryCountLimit > 2 && r.count == p.cfg.DeliveryCountLimit-1
			if n > 0 && (lastAttempt || (r.count >= throttle && !throttled)) {
				return out, p.acquired()
			}
			if r.count >= throttle && !throttled {
				throttled = true
				limit = min(limit, max(1, int(b.LastOffset-b.BaseOffset+1)>>(r.count-throttle+1)))
			}
			r.state, r.member, r.lockUntil = Acquired, member, now.Add(p.cfg.LockDuration)
			r.count++
			n++
			if l := len(out) - 1; l >= 0 && out[l].LastOffset+1 == o && out[l].DeliveryCount == r.count {
				out[l].LastOffset = o
			} else {
				out = append(out, AcquiredRecords{FirstOffset: o, LastOffset: o, DeliveryCount: r.count})
			}
			if lastAttempt {
				return out, p.acquired()
			}
		}
		if b.Control {
			delete(open, b.ProducerID)
		}
	}
	return out, p.acquired()
}

// acquired ends an Acquire: archived control and aborted records may have
// completed a prefix.
func (p *Partition) acquired() error {
	p.advance()
	return nil
}

// Acknowledge applies a member's acknowledgements, all or none, as Kafka's
// SharePartition.acknowledge: Accept acknowledges, Reject and Gap archive,
// Release makes the record Available again (Archived once its delivery
// count has reached group.share.delivery.count.limit), Renew restarts its
// lock. Every offset at or past the SPSO must be Acquired by member, or
// the whole call fails with INVALID_RECORD_STATE; malformed batches, and
// offsets past the records in flight, fail with INVALID_REQUEST.
func (p *Partition) Acknowledge(now time.Time, member string, acks []Ack) error {
	if !p.initialized {
		return ErrNotInitialized
	}
	prev := int64(-1)
	for _, a := range acks {
		if a.FirstOffset > a.LastOffset {
			return ackErr(kerr.InvalidRequest, "first offset %d is after last offset %d", a.FirstOffset, a.LastOffset)
		}
		if a.FirstOffset <= prev {
			return ackErr(kerr.InvalidRequest, "acknowledgement batches overlap or are out of order at offset %d", a.FirstOffset)
		}
		prev = a.LastOffset
		if len(a.Types) != 1 && int64(len(a.Types)) != a.LastOffset-a.FirstOffset+1 {
			return ackErr(kerr.InvalidRequest, "batch %d-%d has %d acknowledge types", a.FirstOffset, a.LastOffset, len(a.Types))
		}
		for _, t := range a.Types {
			if t < AckGap || t > AckRenew {
				return ackErr(kerr.InvalidRequest, "invalid acknowledge type %d", t)
			}
		}
		// As Kafka's fetchSubMapForAcknowledgementBatch: offsets the SPSO
		// has passed are skipped, but a batch wholly below it, or past
		// the records in flight, is not found.
		switch {
		case a.LastOffset < p.start:
			return ackErr(kerr.InvalidRecordState, "Batch record not found. The request batch offsets are not found in the cache.")
		case a.FirstOffset >= p.end():
			return ackErr(kerr.InvalidRequest, "Batch record not found. The first offset in request is past acquired records.")
		case a.LastOffset >= p.end():
			return ackErr(kerr.InvalidRequest, "Batch record not found. The last offset in request is past acquired records.")
		}
		for o := max(a.FirstOffset, p.start); o <= a.LastOffset; o++ {
			r := p.recs[o-p.start]
			if r.state != Acquired {
				return ackErr(kerr.InvalidRecordState, "The batch cannot be acknowledged. The batch is not in the acquired state.")
			}
			if r.member != member {
				return ackErr(kerr.InvalidRecordState, "Member is not the owner of batch record")
			}
		}
	}
	for _, a := range acks {
		for o := max(a.FirstOffset, p.start); o <= a.LastOffset; o++ {
			t := a.Types[0]
			if len(a.Types) > 1 {
				t = a.Types[o-a.FirstOffset]
			}
			r := &p.recs[o-p.start]
			if t == AckRenew {
				r.lockUntil = now.Add(p.cfg.LockDuration)
				continue
			}
			switch t {
			case AckAccept:
				r.state = Acknowledged
			case AckRelease:
				r.state = p.releasedState(r.count)
			default:
				r.state = Archived
			}
			r.member, r.lockUntil = "", time.Time{}
			p.dirty[o] = true
		}
	}
	p.advance()
	return nil
}

// releasedState is where a released or expired record goes: Available,
// or Archived once its delivery count has reached the limit (Kafka's
// InFlightState.startStateTransition with DeliveryCountOps.NO_OP).
func (p *Partition) releasedState(count int16) RecordState {
	if count >= p.cfg.DeliveryCountLimit {
		return Archived
	}
	return Available
}

// ReleaseMember makes every record member holds Available again, as when
// its share session closes or it leaves the group (Kafka's
// SharePartition.releaseAcquiredRecords): the records were not delivered,
// so their delivery count goes back down (DeliveryCountOps.DECREASE) and
// none is archived for it.
func (p *Partition) ReleaseMember(member string) {
	for i := range p.recs {
		r := &p.recs[i]
		if r.state == Acquired && r.member == member {
			r.state, r.member, r.lockUntil = Available, "", time.Time{}
			if r.count > 0 {
				r.count--
			}
			p.dirty[p.start+int64(i)] = true
		}
	}
	p.advance()
}

// Tick expires the acquisition locks due at now: each such record is
// Available again, or Archived past the delivery count limit.
func (p *Partition) Tick(now time.Time) {
	for i := range p.recs {
		r := &p.recs[i]
		if r.state == Acquired && !now.Before(r.lockUntil) {
			r.state, r.member, r.lockUntil = p.releasedState(r.count), "", time.Time{}
			p.dirty[p.start+int64(i)] = true
		}
	}
	p.advance()
}

// NextDeadline returns the earliest lock expiry, or the zero time.
func (p *Partition) NextDeadline() time.Time {
	var min time.Time
	for _, r := range p.recs {
		if r.state == Acquired && (min.IsZero() || r.lockUntil.Before(min)) {
			min = r.lockUntil
		}
	}
	return min
}

// advance moves the SPSO past the prefix of Acknowledged and Archived
// records, as Kafka's maybeUpdateCachedStateAndOffsets.
func (p *Partition) advance() {
	i := 0
	for i < len(p.recs) && p.recs[i].state.terminal() {
		i++
	}
	if i > 0 {
		p.moveStart(p.start + int64(i))
	}
}

func (p *Partition) moveStart(to int64) {
	if to >= p.end() {
		p.recs = nil
	} else {
		p.recs = p.recs[to-p.start:]
	}
	p.start, p.startMoved = to, true
	for o := range p.dirty {
		if o < to {
			delete(p.dirty, o)
		}
	}
}

// StateWrite is what a share-partition asks to persist through
// WriteShareGroupState: the state epoch it loaded, its SPSO (always
// written, as Kafka's SharePartition does: the share coordinator keeps the
// larger start offset and judges the count of completed deliveries by it),
// that count, and the runs of records whose state changed, in their
// current state.
type StateWrite struct {
	StateEpoch            int32
	StartOffset           int64
	DeliveryCompleteCount int32
	StateBatches          []StateBatch
}

// Ready returns and clears the state to persist since the last call, or
// nil when nothing changed. Records acquired again since they changed are
// left out: acquisition is not persisted.
func (p *Partition) Ready() *StateWrite {
	if len(p.dirty) == 0 && !p.startMoved {
		return nil
	}
	w := &StateWrite{StateEpoch: p.stateEpoch, StartOffset: p.start, DeliveryCompleteCount: p.DeliveryCompleteCount()}
	for i, r := range p.recs {
		o := p.start + int64(i)
		if !p.dirty[o] || r.state == Acquired {
			continue
		}
		if l := len(w.StateBatches) - 1; l >= 0 && w.StateBatches[l].LastOffset+1 == o &&
			w.StateBatches[l].DeliveryState == int8(r.state) && w.StateBatches[l].DeliveryCount == r.count {
			w.StateBatches[l].LastOffset = o
			continue
		}
		w.StateBatches = append(w.StateBatches, StateBatch{FirstOffset: o, LastOffset: o, DeliveryState: int8(r.state), DeliveryCount: r.count})
	}
	p.dirty, p.startMoved = map[int64]bool{}, false
	return w
}

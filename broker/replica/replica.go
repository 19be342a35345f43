package replica

import (
	"errors"
	"slices"
	"time"
)

// Role is what the local replica does for its partition.
type Role int8

// Roles of a replica.
const (
	RoleNone Role = iota
	RoleLeader
	RoleFollower
)

func (r Role) String() string {
	switch r {
	case RoleLeader:
		return "leader"
	case RoleFollower:
		return "follower"
	}
	return "none"
}

// NoLeader is a partition without a leader, as Kafka's LeaderConstants.
const NoLeader int32 = -1

// Config is the local broker and the partition's replication settings.
type Config struct {
	// BrokerID is the local broker (node.id).
	BrokerID int32
	// MinInSyncReplicas is min.insync.replicas (Kafka's default 1).
	MinInSyncReplicas int
	// ReplicaLagTimeMax is replica.lag.time.max.ms (Kafka's default 30s).
	ReplicaLagTimeMax time.Duration
}

// BrokerStatus is what the metadata image says of a broker, for ISR
// eligibility (KIP-841) and fetch fencing.
type BrokerStatus struct {
	Epoch        int64
	Fenced       bool
	ShuttingDown bool
}

// LeaderRecoveryState is Kafka's LeaderRecoveryState (KIP-704): whether
// the partition's leader, elected from outside the ISR, has yet to recover.
type LeaderRecoveryState int8

// Leader recovery states, with Kafka's values.
const (
	// Recovered is a leader elected from the ISR, or one that reported
	// itself recovered.
	Recovered LeaderRecoveryState = 0
	// Recovering is a leader elected uncleanly that has not yet told the
	// controller it recovered: the controller refuses any ISR of more
	// than the leader until it does.
	Recovering LeaderRecoveryState = 1
)

func (r LeaderRecoveryState) String() string {
	if r == Recovering {
		return "recovering"
	}
	return "recovered"
}

// PartitionState is the partition's registration in the metadata image, as
// Kafka's PartitionRegistration.
type PartitionState struct {
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
	// LeaderRecovery is Recovering after an unclean election until the
	// leader's AlterPartition says Recovered.
	LeaderRecovery LeaderRecoveryState
}

// BrokerState is one member of an AlterPartition ISR with the broker epoch
// the leader knows it by (-1 when it does not know it), as AlterPartition v3.
type BrokerState struct {
	BrokerID    int32
	BrokerEpoch int64
}

// AlterPartition is one AlterPartition request for the I/O shell to send to
// the controller. Seq names it for AlterPartitionResult. LeaderRecovery is
// the leader's recovery state, which a leader carries in every request as
// Kafka's Partition.prepareIsrExpand and prepareIsrShrink do: always
// Recovered, since becoming leader recovers (Partition.makeLeader).
type AlterPartition struct {
	Seq            uint64
	LeaderID       int32
	LeaderEpoch    int32
	PartitionEpoch int32
	NewISR         []BrokerState
	LeaderRecovery LeaderRecoveryState
}

// AlterResult is the controller's answer to the AlterPartition Seq: Err (one
// of this package's Err* sentinels for a Kafka error code, or any other
// error for a failure to retry), or the partition's state after the change.
type AlterResult struct {
	Seq            uint64
	Err            error
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
	LeaderRecovery LeaderRecoveryState
}

// Effects is what an input asks of the I/O shell.
type Effects struct {
	// HighWatermarkMoved is true when the high watermark advanced (or, on a
	// follower, changed): wake waiting fetches and delayed produces.
	HighWatermarkMoved bool
	// AlterPartition, if set, is to be sent to the controller.
	AlterPartition *AlterPartition
	// EpochStart, if set, is to be assigned in the log's leader epoch
	// cache (a new leader's epoch starts at its log end).
	EpochStart *EpochEntry
	// Recovered is true when a leader elected uncleanly took the
	// partition as recovered (it has no log recovery to run, as Kafka's
	// Partition.makeLeader); the controller learns it with the leader's
	// next AlterPartition.
	Recovered bool
}

// FollowerState is the leader's view of one follower, as Kafka's
// ReplicaState. Times are Unix milliseconds; 0 is never.
type FollowerState struct {
	LogStartOffset int64
	LogEndOffset   int64
	// LastFetchLeaderLogEndOffset is the leader's log end at the follower's
	// previous fetch.
	LastFetchLeaderLogEndOffset int64
	LastFetchTimeMs             int64
	LastCaughtUpTimeMs          int64
	// BrokerEpoch is the epoch of the follower's last fetch, -1 when it
	// has not fetched in this leadership.
	BrokerEpoch int64
}

// isCaughtUp is Kafka's ReplicaState.isCaughtUp.
func (f *FollowerState) isCaughtUp(leaderEnd, nowMs int64, maxLag time.Duration) bool {
	return leaderEnd == f.LogEndOffset || nowMs-f.LastCaughtUpTimeMs <= maxLag.Milliseconds()
}

// pending is an ISR change in flight, as Kafka's PendingExpandIsr and
// PendingShrinkIsr.
type pending struct {
	expand  bool
	newISR  []int32
	request AlterPartition
}

// State is the replication state of one partition on one broker.
type State struct {
	cfg     Config
	brokers map[int32]BrokerStatus

	role           Role
	leader         int32
	leaderEpoch    int32
	partitionEpoch int32
	replicas       []int32
	isr            []int32 // committed
	recovery       LeaderRecoveryState
	pending        *pending
	seq            uint64

	highWatermark    int64
	logStartOffset   int64
	logEndOffset     int64
	leaderEpochStart int64 // UndefinedOffset unless leader
	followers        map[int32]*FollowerState
}

// New is a replica with no role, an empty log and partition epoch -1 (so
// the first metadata applies).
func New(cfg Config) *State {
	return &State{cfg: cfg, leader: NoLeader, leaderEpoch: -1, partitionEpoch: -1,
		leaderEpochStart: UndefinedOffset, followers: map[int32]*FollowerState{}}
}

// Restore sets the local log's offsets and checkpointed high watermark at
// open, before any role.
func (s *State) Restore(logStartOffset, logEndOffset, highWatermark int64) {
	s.logStartOffset, s.logEndOffset = logStartOffset, logEndOffset
	s.highWatermark = min(max(highWatermark, logStartOffset), logEndOffset)
}

// SetBrokers replaces the broker view (epochs, fencing, controlled
// shutdown) that ISR eligibility and fetch fencing use. A broker missing
// from it is not eligible for the ISR.
func (s *State) SetBrokers(view map[int32]BrokerStatus) {
	s.brokers = view
}

// SetMinInSyncReplicas changes min.insync.replicas (the topic's config
// changed), as Kafka's Partition reads it from the log's config at each
// check.
func (s *State) SetMinInSyncReplicas(n int) { s.cfg.MinInSyncReplicas = n }

// Role is the local replica's role.
func (s *State) Role() Role { return s.role }

// Leader is the partition's leader as this replica knows it.
func (s *State) Leader() int32 { return s.leader }

// LeaderEpoch is the leader epoch this replica knows.
func (s *State) LeaderEpoch() int32 { return s.leaderEpoch }

// PartitionEpoch is the partition epoch this replica knows.
func (s *State) PartitionEpoch() int32 { return s.partitionEpoch }

// Replicas is the partition's assignment.
func (s *State) Replicas() []int32 { return slices.Clone(s.replicas) }

// ISR is the committed ISR (empty on a follower, as Kafka's makeFollower).
func (s *State) ISR() []int32 { return slices.Clone(s.isr) }

// LeaderRecovery is the partition's leader recovery state as this replica
// knows it: a leader's own (Recovered once it leads), a follower's from the
// metadata image.
func (s *State) LeaderRecovery() LeaderRecoveryState { return s.recovery }

// MaximalISR is the ISR the high watermark and acks=all use: the committed
// ISR plus a replica being added (KIP-497); a shrink in flight does not
// count until committed.
func (s *State) MaximalISR() []int32 {
	if s.pending != nil && s.pending.expand {
		return sortedUnion(s.isr, s.pending.newISR)
	}
	return slices.Clone(s.isr)
}

// Pending is the AlterPartition in flight, if any.
func (s *State) Pending() (AlterPartition, bool) {
	if s.pending == nil {
		return AlterPartition{}, false
	}
	return s.pending.request, true
}

// HighWatermark is the local high watermark.
func (s *State) HighWatermark() int64 { return s.highWatermark }

// LogEndOffset is the local log end offset.
func (s *State) LogEndOffset() int64 { return s.logEndOffset }

// LogStartOffset is the local log start offset.
func (s *State) LogStartOffset() int64 { return s.logStartOffset }

// Follower is the leader's view of follower id.
func (s *State) Follower(id int32) (FollowerState, bool) {
	f, ok := s.followers[id]
	if !ok {
		return FollowerState{}, false
	}
	return *f, true
}

// MetadataChange applies the partition's registration from a metadata
// delta, as Kafka's ReplicaManager.applyDelta: the local broker leads,
// follows, or (not a replica) stops. A partition epoch not newer than the
// one known is ignored: a KRaft delta holds only changed partitions, and
// the AlterPartition answer may have brought the epoch first. Applying the
// same epoch again would drop the change in flight although the controller
// may still apply it, and the high watermark would then follow an ISR the
// controller no longer has. A follower's fetch position is in FetchPosition.
func (s *State) MetadataChange(ps PartitionState, cache []EpochEntry, now time.Time, localLEO int64) Effects {
	if ps.PartitionEpoch <= s.partitionEpoch {
		return Effects{}
	}
	switch {
	case ps.Leader == s.cfg.BrokerID:
		eff, _ := s.BecomeLeader(ps, now, localLEO)
		return eff
	case slices.Contains(ps.Replicas, s.cfg.BrokerID):
		s.BecomeFollower(ps, cache, localLEO)
		return Effects{}
	default:
		s.role, s.leader = RoleNone, ps.Leader
		s.leaderEpoch, s.partitionEpoch = ps.LeaderEpoch, ps.PartitionEpoch
		s.replicas, s.isr, s.pending = slices.Clone(ps.Replicas), nil, nil
		s.recovery = ps.LeaderRecovery
		s.leaderEpochStart = UndefinedOffset
		clear(s.followers)
		return Effects{}
	}
}

// BecomeLeader makes the local replica the leader, as Kafka's
// Partition.makeLeader. A partition epoch older than the known one is
// ignored (applied false). The ISR becomes the committed one (a change in
// flight is dropped: its answer will be ignored). In a new leader epoch the
// epoch starts at the local log end (EpochStart) and every follower's state
// is reset as Kafka's Replica.resetReplicaState: in-sync followers count as
// caught up now, others as never. The high watermark may advance at once
// (the ISR may be the leader alone). A partition registered Recovering
// (an unclean election) is Recovered on this leader at once, as Kafka's
// makeLeader, which runs no log recovery: every AlterPartition it sends
// says so, and the controller then accepts an ISR of more than the leader.
func (s *State) BecomeLeader(ps PartitionState, now time.Time, localLEO int64) (eff Effects, applied bool) {
	if ps.PartitionEpoch < s.partitionEpoch {
		return Effects{}, false
	}
	nowMs := now.UnixMilli()
	isNewLeader := s.role != RoleLeader
	isNewEpoch := ps.LeaderEpoch > s.leaderEpoch
	s.logEndOffset = localLEO
	s.highWatermark = min(s.highWatermark, localLEO)
	s.setAssignment(ps.Replicas, true)
	s.isr, s.pending = sortedUnion(ps.ISR), nil
	eff.Recovered = ps.LeaderRecovery == Recovering
	s.recovery = Recovered
	if isNewEpoch {
		start := localLEO
		eff.EpochStart = &EpochEntry{Epoch: ps.LeaderEpoch, StartOffset: start}
		for id, f := range s.followers {
			inSync := slices.Contains(ps.ISR, id)
			caught := int64(0)
			if inSync {
				caught = nowMs
			}
			if isNewLeader {
				*f = FollowerState{LogStartOffset: UndefinedOffset, LogEndOffset: UndefinedOffset,
					LastFetchLeaderLogEndOffset: UndefinedOffset, LastCaughtUpTimeMs: caught, BrokerEpoch: -1}
			} else {
				// Unlike Kafka's resetReplicaState, the follower's log end
				// from the earlier epoch is forgotten too: a leader that
				// missed other leaders' epochs in one merged metadata delta
				// would otherwise count a follower's end from before that
				// follower truncated to another leader's log, and commit
				// records the follower no longer holds. The high watermark
				// waits for one fetch in the new epoch instead.
				f.LogEndOffset = UndefinedOffset
				f.LastFetchLeaderLogEndOffset = start
				f.LastFetchTimeMs = caught
				f.LastCaughtUpTimeMs = caught
			}
		}
		s.leaderEpoch = ps.LeaderEpoch
		s.leaderEpochStart = start
	}
	s.role, s.leader = RoleLeader, s.cfg.BrokerID
	s.partitionEpoch = ps.PartitionEpoch
	eff.HighWatermarkMoved = s.maybeIncrementHighWatermark(nowMs)
	return eff, true
}

// FetchPosition is where a follower fetches from next: its log end with
// the latest epoch of its epoch cache, for the leader's divergence check.
type FetchPosition struct {
	Leader           int32
	LeaderEpoch      int32
	FetchOffset      int64
	LastFetchedEpoch int32
}

// BecomeFollower makes the local replica a follower of ps.Leader, as
// Kafka's Partition.makeFollower: the ISR is cleared (only the leader
// tracks it) and the fetch restarts from the local log end with the latest
// cached epoch, so the leader answers with the diverging epoch the follower
// must truncate to (TruncationFor) before it appends. A partition epoch
// older than the known one is ignored (applied false).
func (s *State) BecomeFollower(ps PartitionState, cache []EpochEntry, localLEO int64) (pos FetchPosition, applied bool) {
	if ps.PartitionEpoch < s.partitionEpoch {
		return s.fetchPosition(cache), false
	}
	s.role, s.leader = RoleFollower, ps.Leader
	s.leaderEpoch, s.partitionEpoch = ps.LeaderEpoch, ps.PartitionEpoch
	s.leaderEpochStart = UndefinedOffset
	s.setAssignment(ps.Replicas, false)
	s.isr, s.pending = nil, nil
	s.recovery = ps.LeaderRecovery
	s.logEndOffset = localLEO
	s.highWatermark = min(s.highWatermark, localLEO)
	return s.fetchPosition(cache), true
}

func (s *State) fetchPosition(cache []EpochEntry) FetchPosition {
	last := UndefinedEpoch
	if len(cache) > 0 {
		last = cache[len(cache)-1].Epoch
	}
	return FetchPosition{Leader: s.leader, LeaderEpoch: s.leaderEpoch, FetchOffset: s.logEndOffset, LastFetchedEpoch: last}
}

func (s *State) setAssignment(replicas []int32, leader bool) {
	s.replicas = slices.Clone(replicas)
	if !leader {
		clear(s.followers)
		return
	}
	for _, id := range replicas {
		if id != s.cfg.BrokerID && s.followers[id] == nil {
			s.followers[id] = &FollowerState{LogStartOffset: UndefinedOffset, LogEndOffset: UndefinedOffset,
				LastFetchLeaderLogEndOffset: UndefinedOffset, BrokerEpoch: -1}
		}
	}
	for id := range s.followers {
		if !slices.Contains(replicas, id) || id == s.cfg.BrokerID {
			delete(s.followers, id)
		}
	}
}

// Truncated records a local truncation to newLEO (a follower after
// TruncationFor, or any replica after a log recovery). The high watermark
// follows it down.
func (s *State) Truncated(newLEO int64) {
	s.logEndOffset = newLEO
	s.highWatermark = min(s.highWatermark, newLEO)
}

// TruncatedFully records that the local log was emptied and restarted at
// offset, as Kafka's truncateFullyAndStartAt.
func (s *State) TruncatedFully(offset int64) {
	s.logStartOffset, s.logEndOffset, s.highWatermark = offset, offset, offset
}

// LogStartMoved records a new local log start (retention, DeleteRecords).
func (s *State) LogStartMoved(offset int64) {
	s.logStartOffset = offset
	s.highWatermark = max(s.highWatermark, min(offset, s.logEndOffset))
}

// LeaderHighWatermark is a follower learning the leader's high watermark
// from a fetch answer, after appending the answer's records: its own is
// the leader's bounded by its log, as Kafka's UnifiedLog.updateHighWatermark
// (it may go down: a new leader may know an older one).
func (s *State) LeaderHighWatermark(hw int64) Effects {
	next := min(max(hw, s.logStartOffset), s.logEndOffset)
	moved := next != s.highWatermark
	s.highWatermark = next
	return Effects{HighWatermarkMoved: moved}
}

// effectiveMinISR is Kafka's Partition.effectiveMinIsr: min.insync.replicas
// bounded by the replication factor.
func (s *State) effectiveMinISR() int {
	return min(s.cfg.MinInSyncReplicas, len(s.followers)+1)
}

// underMinISR is Kafka's Partition.isUnderMinIsr: the committed ISR.
func (s *State) underMinISR() bool {
	return s.role == RoleLeader && len(s.isr) < s.effectiveMinISR()
}

// CheckAppend refuses an acks=all produce before the append when the
// committed ISR is smaller than min.insync.replicas, as Kafka's
// Partition.appendRecordsToLeader.
func (s *State) CheckAppend(acks int16) error {
	if s.role != RoleLeader {
		return ErrNotLeaderOrFollower
	}
	if acks == -1 && len(s.isr) < s.effectiveMinISR() {
		return ErrNotEnoughReplicas
	}
	return nil
}

// LocalAppend records the leader's (or a follower's) log end after an
// append. On a leader the high watermark may advance (an ISR of one).
func (s *State) LocalAppend(newLEO int64, now time.Time) Effects {
	s.logEndOffset = newLEO
	if s.role != RoleLeader {
		return Effects{}
	}
	return Effects{HighWatermarkMoved: s.maybeIncrementHighWatermark(now.UnixMilli())}
}

// CheckAcks is an acks=all produce's completion check for the records
// ending at requiredOffset, as Kafka's checkEnoughReplicasReachOffset:
// done once the high watermark reaches it, with
// NOT_ENOUGH_REPLICAS_AFTER_APPEND if the maximal ISR shrank below
// min.insync.replicas meanwhile; not done otherwise.
func (s *State) CheckAcks(requiredOffset int64) (done bool, err error) {
	if s.role != RoleLeader {
		return false, ErrNotLeaderOrFollower
	}
	if s.highWatermark < requiredOffset {
		return false, nil
	}
	if len(s.MaximalISR()) < s.effectiveMinISR() {
		return true, ErrNotEnoughReplicasAfterAppend
	}
	return true, nil
}

// maybeIncrementHighWatermark is Kafka's Partition.maybeIncrementLeaderHW:
// never while the committed ISR is under min.insync.replicas (Kafka 4's
// strict min ISR); otherwise the minimum log end of the maximal ISR and of
// every caught-up eligible follower about to join it (so a follower
// catching up is not outrun), never backwards.
func (s *State) maybeIncrementHighWatermark(nowMs int64) bool {
	if s.underMinISR() {
		return false
	}
	maximal := s.MaximalISR()
	hw := s.logEndOffset
	for id, f := range s.followers {
		if f.LogEndOffset >= hw {
			continue
		}
		if slices.Contains(maximal, id) ||
			(f.isCaughtUp(s.logEndOffset, nowMs, s.cfg.ReplicaLagTimeMax) && s.isrEligible(id)) {
			hw = f.LogEndOffset
		}
	}
	if hw > s.highWatermark {
		s.highWatermark = hw
		return true
	}
	return false
}

// isrEligible is Kafka's Partition.isReplicaIsrEligible (KIP-841): not
// fenced, not shutting down, and fetching with the registered broker epoch
// (or -1, which skips the check).
func (s *State) isrEligible(id int32) bool {
	f, ok := s.followers[id]
	if !ok {
		return false
	}
	b, ok := s.brokers[id]
	if !ok || b.Fenced || b.ShuttingDown {
		return false
	}
	return f.BrokerEpoch == -1 || f.BrokerEpoch == b.Epoch
}

// FetchRequest is one partition of a follower's Fetch.
type FetchRequest struct {
	ReplicaID   int32
	BrokerEpoch int64 // ReplicaState.ReplicaEpoch, -1 unknown
	// CurrentLeaderEpoch is the follower's leader epoch, -1 to skip the
	// check.
	CurrentLeaderEpoch int32
	FetchOffset        int64
	LogStartOffset     int64
	LastFetchedEpoch   int32 // UndefinedEpoch to skip the divergence check
}

// FetchResult is the leader's answer to a follower's fetch position. The
// shell reads records from FetchOffset unless Err or Diverging is set.
type FetchResult struct {
	Err            error
	Diverging      *EpochEndOffset
	HighWatermark  int64
	LogStartOffset int64
	LogEndOffset   int64
	Effects
}

// FollowerFetch is a follower's fetch at the leader, as Kafka's
// Partition.fetchRecords for a follower: epochs and membership are checked,
// the fetch position is checked against the leader's epoch cache (a
// diverging follower gets the point to truncate to and no state change),
// then the follower's fetch state is updated (Kafka's
// updateFollowerFetchState), the ISR may expand, and the high watermark
// may advance.
func (s *State) FollowerFetch(req FetchRequest, cache []EpochEntry, now time.Time) FetchResult {
	res := FetchResult{HighWatermark: s.highWatermark, LogStartOffset: s.logStartOffset, LogEndOffset: s.logEndOffset}
	if s.role != RoleLeader {
		res.Err = ErrNotLeaderOrFollower
		return res
	}
	switch {
	case req.CurrentLeaderEpoch >= 0 && req.CurrentLeaderEpoch < s.leaderEpoch:
		res.Err = ErrFencedLeaderEpoch
		return res
	case req.CurrentLeaderEpoch > s.leaderEpoch:
		res.Err = ErrUnknownLeaderEpoch
		return res
	}
	f, ok := s.followers[req.ReplicaID]
	if !ok {
		res.Err = ErrNotLeaderOrFollower
		return res
	}
	if req.LastFetchedEpoch != UndefinedEpoch {
		div, err := DivergingEpoch(cache, s.logStartOffset, s.logEndOffset, req.LastFetchedEpoch, req.FetchOffset)
		if err != nil {
			res.Err = err
			return res
		}
		if div != nil {
			res.Diverging = div
			return res
		}
	}
	if req.FetchOffset < s.logStartOffset || req.FetchOffset > s.logEndOffset {
		res.Err = ErrOffsetOutOfRange
		return res
	}
	// As Kafka's Replica.updateFetchStateOrThrow: a fetch with an older
	// broker epoch than the registered one is from a previous incarnation.
	if b, ok := s.brokers[req.ReplicaID]; ok && req.BrokerEpoch != -1 && b.Epoch > req.BrokerEpoch {
		res.Err = ErrNotLeaderOrFollower
		return res
	}
	nowMs := now.UnixMilli()
	prevLEO := f.LogEndOffset
	switch {
	case req.FetchOffset >= s.logEndOffset:
		f.LastCaughtUpTimeMs = max(f.LastCaughtUpTimeMs, nowMs)
	case req.FetchOffset >= f.LastFetchLeaderLogEndOffset:
		f.LastCaughtUpTimeMs = max(f.LastCaughtUpTimeMs, f.LastFetchTimeMs)
	}
	f.LogStartOffset = req.LogStartOffset
	f.LogEndOffset = req.FetchOffset
	f.LastFetchLeaderLogEndOffset = max(s.logEndOffset, f.LastFetchLeaderLogEndOffset)
	f.LastFetchTimeMs = nowMs
	f.BrokerEpoch = req.BrokerEpoch

	res.AlterPartition = s.maybeExpandISR(req.ReplicaID)
	if prevLEO != f.LogEndOffset {
		res.HighWatermarkMoved = s.maybeIncrementHighWatermark(nowMs)
	}
	res.HighWatermark = s.highWatermark
	return res
}

// maybeExpandISR is Kafka's Partition.maybeExpandIsr: a follower not in
// the ISR, eligible, at or past the high watermark and past the start of
// the current leader epoch (so it holds every record the leader may have
// committed) is proposed for the ISR, one change in flight at a time.
func (s *State) maybeExpandISR(id int32) *AlterPartition {
	if s.pending != nil || slices.Contains(s.isr, id) || !s.isrEligible(id) {
		return nil
	}
	leo := s.followers[id].LogEndOffset
	if leo < s.highWatermark || s.leaderEpochStart == UndefinedOffset || leo < s.leaderEpochStart {
		return nil
	}
	return s.propose(true, sortedUnion(s.isr, []int32{id}))
}

// Tick shrinks the ISR of followers out of sync for longer than
// replica.lag.time.max.ms, as Kafka's Partition.maybeShrinkIsr (run every
// half lag time by ReplicaManager): a follower is out of sync unless its
// log end equals the leader's or it caught up within the lag time.
func (s *State) Tick(now time.Time) Effects {
	out := s.OutOfSyncReplicas(now)
	if len(out) == 0 {
		return Effects{}
	}
	isr := slices.DeleteFunc(slices.Clone(s.isr), func(id int32) bool { return slices.Contains(out, id) })
	return Effects{AlterPartition: s.propose(false, isr)}
}

// OutOfSyncReplicas is Kafka's Partition.getOutOfSyncReplicas: the ISR
// followers out of sync at now, none while a change is in flight.
func (s *State) OutOfSyncReplicas(now time.Time) []int32 {
	if s.role != RoleLeader || s.pending != nil {
		return nil
	}
	var out []int32
	for _, id := range s.isr {
		if id == s.cfg.BrokerID {
			continue
		}
		f, ok := s.followers[id]
		if !ok || !f.isCaughtUp(s.logEndOffset, now.UnixMilli(), s.cfg.ReplicaLagTimeMax) {
			out = append(out, id)
		}
	}
	return out
}

// propose makes an ISR change pending and the request for it, with each
// member's broker epoch as Kafka's addBrokerEpochToIsr.
func (s *State) propose(expand bool, isr []int32) *AlterPartition {
	s.seq++
	req := AlterPartition{Seq: s.seq, LeaderID: s.cfg.BrokerID, LeaderEpoch: s.leaderEpoch, PartitionEpoch: s.partitionEpoch,
		LeaderRecovery: s.recovery}
	for _, id := range isr {
		epoch := int64(-1)
		if id == s.cfg.BrokerID {
			if b, ok := s.brokers[id]; ok {
				epoch = b.Epoch
			}
		} else if f, ok := s.followers[id]; ok {
			epoch = f.BrokerEpoch
		}
		req.NewISR = append(req.NewISR, BrokerState{BrokerID: id, BrokerEpoch: epoch})
	}
	s.pending = &pending{expand: expand, newISR: isr, request: req}
	r := req
	r.NewISR = slices.Clone(req.NewISR)
	return &r
}

// AlterPartitionResult applies the controller's answer to an
// AlterPartition, as Kafka's Partition.submitAlterPartition completion. An
// answer to a request no longer in flight (metadata moved the partition
// on) is ignored. On success with the current leader epoch and a partition
// epoch not older than the known one, the ISR is committed and the high
// watermark may advance. INELIGIBLE_REPLICA and OPERATION_NOT_ATTEMPTED
// roll back to the committed ISR (the controller says it applied nothing);
// FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION and the other known errors
// leave the change pending until new metadata replaces it; any other error
// sends the same request again.
func (s *State) AlterPartitionResult(res AlterResult, now time.Time) Effects {
	if s.pending == nil || s.pending.request.Seq != res.Seq || s.role != RoleLeader {
		return Effects{}
	}
	if res.Err != nil {
		switch {
		case errors.Is(res.Err, ErrIneligibleReplica), errors.Is(res.Err, ErrOperationNotAttempted):
			s.pending = nil
		case errors.Is(res.Err, ErrFencedLeaderEpoch), errors.Is(res.Err, ErrInvalidUpdateVersion),
			errors.Is(res.Err, ErrUnknownTopicOrPartition), errors.Is(res.Err, ErrUnknownTopicID),
			errors.Is(res.Err, ErrInvalidRequest), errors.Is(res.Err, ErrNewLeaderElected):
		default:
			r := s.pending.request
			r.NewISR = slices.Clone(r.NewISR)
			return Effects{AlterPartition: &r}
		}
		return Effects{}
	}
	if res.LeaderEpoch != s.leaderEpoch || res.PartitionEpoch < s.partitionEpoch {
		return Effects{}
	}
	s.isr, s.pending = sortedUnion(res.ISR), nil
	s.partitionEpoch = res.PartitionEpoch
	s.recovery = res.LeaderRecovery
	return Effects{HighWatermarkMoved: s.maybeIncrementHighWatermark(now.UnixMilli())}
}

func sortedUnion(sets ...[]int32) []int32 {
	var out []int32
	for _, set := range sets {
		out = append(out, set...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

package replica

// UndefinedEpoch and UndefinedOffset are Kafka's UNDEFINED_EPOCH and
// UNDEFINED_EPOCH_OFFSET: no epoch, no end offset.
const (
	UndefinedEpoch  int32 = -1
	UndefinedOffset int64 = -1
)

// EpochEntry is one entry of a log's leader epoch cache: the first offset
// written in Epoch.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// EpochEndOffset is an (epoch, end offset) answer of OffsetForLeaderEpoch or
// a Fetch response's DivergingEpoch.
type EpochEndOffset struct {
	Epoch     int32
	EndOffset int64
}

// EndOffsetFor is the end offset of epoch in a log whose epoch cache is
// cache (ascending by epoch) and whose end is logEndOffset, as Kafka's
// LeaderEpochFileCache.endOffsetFor: the latest epoch ends at the log end;
// an older epoch ends where the next larger cached epoch starts and is
// answered with the largest cached epoch not above it; an epoch below every
// cached one is answered with itself and the first cached start; an
// undefined or too large epoch is undefined.
func EndOffsetFor(cache []EpochEntry, logEndOffset int64, epoch int32) EpochEndOffset {
	undefined := EpochEndOffset{Epoch: UndefinedEpoch, EndOffset: UndefinedOffset}
	if epoch == UndefinedEpoch || len(cache) == 0 {
		return undefined
	}
	if cache[len(cache)-1].Epoch == epoch {
		return EpochEndOffset{Epoch: epoch, EndOffset: logEndOffset}
	}
	higher := -1
	for i, e := range cache {
		if e.Epoch > epoch {
			higher = i
			break
		}
	}
	switch {
	case higher < 0:
		return undefined
	case higher == 0:
		return EpochEndOffset{Epoch: epoch, EndOffset: cache[0].StartOffset}
	default:
		return EpochEndOffset{Epoch: cache[higher-1].Epoch, EndOffset: cache[higher].StartOffset}
	}
}

// DivergingEpoch is a leader's check of a follower's fetch position
// against its own log, as Kafka's Partition.readRecords for Fetch v12+
// (KIP-595's lastFetchedEpoch): it returns the leader's end of fetchEpoch
// when the follower's log diverges from the leader's (the leader's epoch is
// older than fetchEpoch, or ends before fetchOffset), and nil when the
// follower may read at fetchOffset. An epoch the leader cannot place, or a
// fetch offset below the log start, is ErrOffsetOutOfRange.
func DivergingEpoch(cache []EpochEntry, logStartOffset, logEndOffset int64, fetchEpoch int32, fetchOffset int64) (*EpochEndOffset, error) {
	eo := EndOffsetFor(cache, logEndOffset, fetchEpoch)
	if eo.EndOffset == UndefinedOffset || eo.Epoch == UndefinedEpoch {
		return nil, ErrOffsetOutOfRange
	}
	if fetchOffset < logStartOffset {
		return nil, ErrOffsetOutOfRange
	}
	if eo.Epoch < fetchEpoch || eo.EndOffset < fetchOffset {
		return &eo, nil
	}
	return nil, nil
}

// Truncation is what a follower must do to its log before fetching again.
type Truncation struct {
	// Offset is the log end offset to truncate to (or, when Full, the
	// offset the emptied log starts at).
	Offset int64
	// Full truncates the whole log and restarts it at Offset, as Kafka's
	// truncateFullyAndStartAt.
	Full bool
	// Complete is false when the follower did not know the leader's epoch
	// and must fetch again from Offset to find the true divergence point.
	Complete bool
}

// TruncationFor is the truncation a follower whose log has epoch cache
// cache, end logEndOffset and high watermark highWatermark needs after the
// leader answered a fetch with diverging, as Kafka's
// AbstractFetcherThread.getOffsetTruncationState.
func TruncationFor(cache []EpochEntry, logEndOffset, highWatermark int64, diverging EpochEndOffset) Truncation {
	switch {
	case diverging.EndOffset == UndefinedOffset:
		return Truncation{Offset: highWatermark, Complete: true}
	case diverging.Epoch == UndefinedEpoch:
		return Truncation{Offset: min(diverging.EndOffset, logEndOffset), Complete: true}
	}
	local := EndOffsetFor(cache, logEndOffset, diverging.Epoch)
	if local.EndOffset == UndefinedOffset {
		// The follower does not track epochs that old; the leader's
		// answer is below what the follower asked for, so its end offset
		// is safe (as Kafka's None case).
		return Truncation{Offset: min(diverging.EndOffset, logEndOffset), Complete: true}
	}
	if local.Epoch != diverging.Epoch {
		return Truncation{Offset: min(local.EndOffset, logEndOffset), Complete: false}
	}
	return Truncation{Offset: min(local.EndOffset, diverging.EndOffset, logEndOffset), Complete: true}
}

// OutOfRangeTruncation is what a follower does when the leader answers its
// fetch with OFFSET_OUT_OF_RANGE, as Kafka's
// AbstractFetcherThread.fetchOffsetAndTruncate: a follower ahead of the
// leader's log end truncates to it (possible only after an unclean
// election); one behind the leader's log start (the leader deleted what it
// needs) empties its log and restarts at the leader's log start.
func OutOfRangeTruncation(logEndOffset, leaderLogStart, leaderLogEnd int64) Truncation {
	if leaderLogEnd < logEndOffset {
		return Truncation{Offset: leaderLogEnd, Complete: true}
	}
	if logEndOffset < leaderLogStart {
		return Truncation{Offset: leaderLogStart, Full: true, Complete: true}
	}
	// In range after all (the leader's log moved): fetch again from here.
	return Truncation{Offset: logEndOffset, Complete: true}
}

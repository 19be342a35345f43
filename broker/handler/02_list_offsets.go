package handler

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/partition"
)

// ListOffsets: v1-11
//
// Kafka 4's floor is v1 (KIP-896).
//   - v2: IsolationLevel (KIP-98)
//   - v4: CurrentLeaderEpoch and LeaderEpoch (KIP-320)
//   - v6: flexible
//   - v7: MAX_TIMESTAMP -3 (KIP-734)
//   - v8: EARLIEST_LOCAL -4 (KIP-405; equals earliest without tiering)
//   - v9: LATEST_TIERED -5 (KIP-1005; -1 without tiering)
//   - v10: TimeoutMillis (KIP-1075; nothing here is remote, so unused)
//   - v11: EARLIEST_PENDING_UPLOAD -6 (KIP-1023; offset -1 and epoch -1
//     without tiering, as UnifiedLog.fetchEarliestPendingUploadOffset)
//
// A special timestamp the request's version does not know, or a negative
// one that is none of them, answers UNSUPPORTED_VERSION for its partition
// before the partition is looked up; a partition listed more than once is
// answered once, INVALID_REQUEST (ReplicaManager.fetchOffset keys its
// answers by partition).
//
// Only the leader answers (NOT_LEADER_OR_FOLLOWER elsewhere), even a
// consumer that fetches from a follower (KIP-392), except a request with
// the debugging replica id -2, which any replica answers from its log end,
// as KafkaApis.handleListOffsetRequest.
func init() { register(2, 1, 11, handleListOffsets) }

// debuggingReplicaID is ListOffsetsRequest.DEBUGGING_REPLICA_ID.
const debuggingReplicaID = -2

// Special timestamps of ListOffsetsRequest.
const (
	latestTimestamp                = -1
	earliestTimestamp              = -2
	maxTimestamp                   = -3
	earliestLocalTimestamp         = -4
	latestTieredTimestamp          = -5
	earliestPendingUploadTimestamp = -6
)

// timestampMinVersion is the first ListOffsets version that knows each
// special timestamp (ReplicaManager.timestampMinSupportedVersion).
var timestampMinVersion = map[int64]int16{
	latestTimestamp:                1,
	earliestTimestamp:              1,
	maxTimestamp:                   7,
	earliestLocalTimestamp:         8,
	latestTieredTimestamp:          9,
	earliestPendingUploadTimestamp: 11,
}

// timestampUnsupported is ReplicaManager.isListOffsetsTimestampUnsupported.
func timestampUnsupported(ts int64, version int16) bool {
	if ts >= 0 {
		return false
	}
	v, ok := timestampMinVersion[ts]
	return !ok || version < v
}

func handleListOffsets(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.ListOffsetsRequest)
	resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
	resp.SetVersion(r.Version)
	iso := partition.ReadHighWatermark
	switch {
	case r.ReplicaID >= 0 || r.ReplicaID == debuggingReplicaID:
		// No isolation for a follower or a debugging client.
		iso = partition.ReadLogEnd
	case r.IsolationLevel == 1:
		iso = partition.ReadCommitted
	}
	// As KafkaApis.handleListOffsetRequest: a partition listed twice.
	type tp struct {
		topic string
		part  int32
	}
	seen, dup := map[tp]bool{}, map[tp]bool{}
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			k := tp{rt.Topic, rp.Partition}
			dup[k] = dup[k] || seen[k]
			seen[k] = true
		}
	}
	for _, rt := range r.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		// As KafkaApis.handleListOffsetRequest: DESCRIBE on the topic.
		allowed := env.authorizeTopic(req, acl.Describe, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
			k := tp{rt.Topic, rp.Partition}
			switch {
			case !allowed:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case dup[k] && !seen[k]:
				continue // answered once, at its first occurrence
			case dup[k]:
				seen[k] = false
				sp.ErrorCode = kerr.InvalidRequest.Code
			case timestampUnsupported(rp.Timestamp, r.Version):
				sp.ErrorCode = kerr.UnsupportedVersion.Code
			default:
				sp.ErrorCode = listOffset(env, r.Version, rt.Topic, rp, iso, r.ReplicaID == debuggingReplicaID, &sp)
			}
			env.Metrics.Error(req.Key, sp.ErrorCode)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// listOffset is Partition.fetchOffsetForTimestamp: offsets beyond the last
// fetchable offset of the isolation level are never returned.
func listOffset(env *Env, version int16, topic string, rp kmsg.ListOffsetsRequestTopicPartition, iso partition.Isolation,
	anyReplica bool, sp *kmsg.ListOffsetsResponseTopicPartition) int16 {
	p := env.Partitions.Get(log.TopicPartition{Topic: topic, Partition: rp.Partition})
	if code := env.replicaCode(topic, rp.Partition, p, anyReplica); code != 0 {
		return code
	}
	if code := checkLeaderEpoch(rp.CurrentLeaderEpoch, p.LeaderEpoch()); code != 0 {
		return code
	}
	epoch := p.LeaderEpoch()
	fetchable := p.Bound(iso)
	switch ts := rp.Timestamp; {
	case ts == latestTimestamp:
		sp.Offset, sp.LeaderEpoch = fetchable, epoch
	case ts == earliestTimestamp || ts == earliestLocalTimestamp:
		sp.Offset, sp.LeaderEpoch = p.LogStartOffset(), epoch
	case ts == maxTimestamp:
		off, t := p.Log().MaxTimestamp()
		if off >= 0 {
			sp.Offset, sp.Timestamp, sp.LeaderEpoch = off, t, epoch
		}
	case ts == latestTieredTimestamp, ts == earliestPendingUploadTimestamp:
		// No tiered storage: Kafka answers offset -1, epoch -1.
	case ts < 0:
		// Unreachable: timestampUnsupported refused it.
		return kerr.UnsupportedVersion.Code
	default:
		off, t, e, ok := p.Log().OffsetForTimestamp(ts)
		if ok && off < fetchable {
			sp.Offset, sp.Timestamp, sp.LeaderEpoch = off, t, e
		}
	}
	if version < 4 {
		sp.LeaderEpoch = -1
	}
	return 0
}

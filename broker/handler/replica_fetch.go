package handler

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/replica"
	"github.com/cascade-kafka/cascade/broker/replication"
)

// Replication is ISR replication of a cluster node's partitions with more
// than one replica (broker/replication's Manager). Env.Replication nil, or
// a partition it does not replicate, is the single node's behaviour: the
// leader alone is the ISR.
type Replication interface {
	// Replicated reports whether tp has replicas on other brokers.
	Replicated(tp log.TopicPartition) bool
	// FollowerFetch records a follower's fetch of tp at fetchOffset and
	// returns the high watermark after it (-1 for a partition not
	// replicated).
	FollowerFetch(tp log.TopicPartition, replicaID int32, brokerEpoch int64, fetchOffset, logStartOffset int64) (int64, error)
	// CheckAppend refuses an acks=all produce while the ISR is under
	// min.insync.replicas.
	CheckAppend(tp log.TopicPartition, acks int16) error
	// Appended records a leader append.
	Appended(tp log.TopicPartition)
	// AwaitAcks waits for the high watermark to reach requiredOffset.
	AwaitAcks(ctx context.Context, tp log.TopicPartition, requiredOffset int64, deadline time.Time) error
	// ReadReplicas returns, when this node leads tp, itself and the
	// in-sync followers a consumer fetching at fetchOffset may read from
	// (KIP-392); ok is false otherwise.
	ReadReplicas(tp log.TopicPartition, fetchOffset int64) (leader replication.ReadReplica, followers []replication.ReadReplica, ok bool)
}

func init() {
	registerErrorCode(replica.ErrNotEnoughReplicas, kerr.NotEnoughReplicas.Code)
	registerErrorCode(replica.ErrNotEnoughReplicasAfterAppend, kerr.NotEnoughReplicasAfterAppend.Code)
	registerErrorCode(replica.ErrNotLeaderOrFollower, kerr.NotLeaderForPartition.Code)
	registerErrorCode(replica.ErrOffsetOutOfRange, kerr.OffsetOutOfRange.Code)
	registerErrorCode(replica.ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch.Code)
	registerErrorCode(replica.ErrUnknownLeaderEpoch, kerr.UnknownLeaderEpoch.Code)
	registerErrorCode(replication.ErrRequestTimedOut, kerr.RequestTimedOut.Code)
}

// replicated reports whether tp is replicated to other brokers.
func (env *Env) replicated(tp log.TopicPartition) bool {
	return env.Replication != nil && env.Replication.Replicated(tp)
}

// followerFetch is a replica's Fetch as the leader serves it, after each
// read: the first read records every partition's fetch offset with the
// replication state machine (Kafka's updateFollowerFetchState, once per
// request), which may advance the high watermark, answered at once; and
// when the follower's known high watermark (v18, KIP-1166) is behind the
// leader's the fetch does not wait. It returns whether to answer now.
func (env *Env) followerFetch(r *kmsg.FetchRequest, parts []*fetchPart, record bool) bool {
	if env.Replication == nil {
		return false
	}
	replicaID, brokerEpoch := r.ReplicaID, int64(-1)
	if r.Version >= 15 {
		replicaID, brokerEpoch = r.ReplicaState.ID, r.ReplicaState.Epoch
	}
	var known map[sessionKey]int64
	if r.Version >= 18 {
		known = map[sessionKey]int64{}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				k := sessionKey{topic: t.Topic, partition: p.Partition}
				if r.Version >= 13 {
					k = sessionKey{id: t.TopicID, partition: p.Partition}
				}
				known[k] = p.HighWatermark
			}
		}
	}
	now := false
	for _, fp := range parts {
		if fp.p == nil || fp.code != 0 || fp.diverging != nil {
			continue
		}
		tp := log.TopicPartition{Topic: fp.topic, Partition: fp.cp.key.partition}
		if record {
			hw, err := env.Replication.FollowerFetch(tp, replicaID, brokerEpoch, fp.cp.fetchOffset, fp.cp.logStartOffset)
			if err != nil {
				fp.release()
				fp.code = ErrorCode(err)
				now = true
				continue
			}
			if hw > fp.res.HighWatermark {
				fp.res.HighWatermark = hw
				now = true
			}
		}
		if hw, ok := known[fp.cp.key]; ok && hw >= 0 && hw < fp.res.HighWatermark {
			now = true
		}
	}
	return now
}

// pendingAck is one partition of an acks=all produce waiting for the ISR.
type pendingAck struct {
	tp       log.TopicPartition
	required int64
	// topic and part index the partition's answer in the response.
	topic, part int
}

// awaitAcks is Kafka's DelayedProduce: every partition appended with
// acks=all is answered once the high watermark passes its records, with
// NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER or, after the
// request's timeout, REQUEST_TIMED_OUT instead when so. It returns ctx's
// error when the connection closed meanwhile.
func (env *Env) awaitAcks(ctx context.Context, resp *kmsg.ProduceResponse, timeoutMs int32, pending []pendingAck) error {
	deadline := env.now().Add(time.Duration(max(timeoutMs, 0)) * time.Millisecond)
	for _, pa := range pending {
		err := env.Replication.AwaitAcks(ctx, pa.tp, pa.required, deadline)
		if err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		if code := ErrorCode(err); code != 0 {
			resp.Topics[pa.topic].Partitions[pa.part].ErrorCode = code
		}
	}
	return nil
}

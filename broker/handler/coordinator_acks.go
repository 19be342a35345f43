package handler

import (
	"context"
	"errors"
	"time"

	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/replica"
)

// On a cluster the coordinators' internal topics are replicated like any
// topic, so a coordinator answers a write only once it is committed: the
// high watermark of its partition has passed the write, as Kafka's
// CoordinatorRuntime completes a write event when the high watermark
// reaches its offset, and TransactionStateManager appends with acks=-1.
// The wait runs beside the coordinator's loop, which goes on serving other
// requests (and the state machines' pending transitions keep a second
// write of the same group or transactional id out meanwhile). A client
// that saw a write acknowledged finds it on whichever replica of the
// partition becomes leader next, since that leader is taken from the ISR.

// Coordinator write timeouts, Kafka's defaults: a group write waits at
// most offsets.commit.timeout.ms (the CoordinatorRuntime's write timeout),
// a transaction state write and a marker request.timeout.ms
// (TransactionStateManager.appendTransactionToLog, and the WriteTxnMarkers
// handler's appendRecords).
const (
	groupWriteTimeout = 5 * time.Second
	txnWriteTimeout   = 30 * time.Second
	// markerWriteTimeout is below peerTimeout, so that a remote
	// coordinator gets the answer before its request times out.
	markerWriteTimeout = 8 * time.Second
)

// checkCoordinatorAppend refuses a coordinator write to a replicated
// partition before its append when acks=all could not be met: the ISR is
// under min.insync.replicas (replica.ErrNotEnoughReplicas) or this node
// does not lead it (replica.ErrNotLeaderOrFollower), as Kafka's
// Partition.appendRecordsToLeader for requiredAcks=-1. A partition that is
// not replicated passes.
func (env *Env) checkCoordinatorAppend(tp log.TopicPartition) error {
	if !env.replicated(tp) {
		return nil
	}
	return env.Replication.CheckAppend(tp, -1)
}

// coordinatorAppended tells replication of a coordinator's append to tp
// ending before end, and returns the offset the high watermark must reach
// before the write is answered: -1 when tp is not replicated (the leader
// alone holds it, and its append is the commit).
func (env *Env) coordinatorAppended(tp log.TopicPartition, info log.AppendInfo) int64 {
	if !env.replicated(tp) {
		return -1
	}
	env.Replication.Appended(tp)
	return info.LastOffset + 1
}

// awaitCoordinatorWrite waits, bounded by timeout, until the high
// watermark of tp reaches required. Its errors are replication's:
// replica.ErrNotLeaderOrFollower when this node stopped leading tp,
// replica.ErrNotEnoughReplicasAfterAppend when the write is committed
// while the ISR is under min.insync.replicas, the timeout, or ctx's error
// when the coordinator stops.
func (env *Env) awaitCoordinatorWrite(ctx context.Context, tp log.TopicPartition, required int64, timeout time.Duration) error {
	if required < 0 {
		return nil
	}
	return env.Replication.AwaitAcks(ctx, tp, required, env.now().Add(timeout))
}

// committedAfterAppend reports whether an acks=all wait ended with the
// write committed although the ISR shrank under min.insync.replicas
// meanwhile: the high watermark passed it, which is all Kafka's
// CoordinatorRuntime waits for (its appends use requiredAcks=1).
func committedAfterAppend(err error) bool {
	return errors.Is(err, replica.ErrNotEnoughReplicasAfterAppend)
}

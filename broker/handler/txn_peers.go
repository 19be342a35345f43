package handler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/txn"
)

// On a cluster a transaction's partitions, its transactional id's
// coordinator and its group's coordinator may be on different nodes. As
// Kafka, the coordinator sends each marker to the leader of its partition
// (TransactionMarkerChannelManager: WriteTxnMarkers), and the leader of a
// partition a transactional batch or offset commit arrives at asks the
// transactional id's coordinator whether the partition is in the
// transaction (AddPartitionsToTxnManager: AddPartitionsToTxn v4+). Both go
// through Cluster.

// peerTimeout bounds one inter-broker request of a transaction.
const peerTimeout = 10 * time.Second

// errMarkerRetriable wraps the failures of a remote marker that a later
// attempt may get past: no live leader, a leader that moved, a broker that
// did not answer.
var errMarkerRetriable = errors.New("handler: marker not written yet")

// partitionKnown reports whether the topic-partition exists: hosted here on
// a single node, in the metadata image on a cluster (where its leader may
// be another node), as Kafka's coordinator checks its metadata cache.
func (env *Env) partitionKnown(topic string, part int32) bool {
	if env.Cluster == nil {
		return env.Partitions.Get(log.TopicPartition{Topic: topic, Partition: part}) != nil
	}
	t, ok := env.Meta.Image().Topic(topic)
	return ok && part >= 0 && int(part) < len(t.Partitions)
}

// remoteLeader returns the node that leads tp when it is another node of a
// cluster; remote is false on a single node, for a partition led here, and
// for one the image does not have (the local write drops its marker, as
// Kafka drops markers of deleted partitions). A partition without a leader
// is errMarkerRetriable.
func (c *TxnCoordinator) remoteLeader(tp txn.TopicPartition) (node int32, remote bool, err error) {
	if c.env.Cluster == nil {
		return 0, false, nil
	}
	t, ok := c.env.Meta.Image().Topic(tp.Topic)
	if !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
		return 0, false, nil
	}
	switch leader := t.Partitions[tp.Partition].Leader; {
	case leader == c.env.NodeID:
		return 0, false, nil
	case leader < 0:
		return 0, false, fmt.Errorf("%w: %s has no leader", errMarkerRetriable, tp)
	default:
		return leader, true, nil
	}
}

// writeMarkerTo writes one marker of mk to tp: in-process when this node
// leads tp, else with WriteTxnMarkers to its leader.
func (c *TxnCoordinator) writeMarkerTo(tp txn.TopicPartition, mk txn.Markers) error {
	node, remote, err := c.remoteLeader(tp)
	if err != nil {
		return err
	}
	if !remote {
		return c.WriteMarker(tp.Topic, tp.Partition, mk.ProducerID, mk.ProducerEpoch, mk.Commit, mk.CoordinatorEpoch)
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.SetVersion(1)
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = mk.ProducerID, mk.ProducerEpoch, mk.Commit, mk.CoordinatorEpoch
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = tp.Topic, []int32{tp.Partition}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
	defer cancel()
	resp, err := c.env.Cluster.WriteTxnMarkers(ctx, node, req)
	if err != nil {
		return fmt.Errorf("%w: WriteTxnMarkers to node %d: %v", errMarkerRetriable, node, err)
	}
	if len(resp.Markers) != 1 || len(resp.Markers[0].Topics) != 1 || len(resp.Markers[0].Topics[0].Partitions) != 1 {
		return fmt.Errorf("%w: WriteTxnMarkers answer of node %d does not match its request", errMarkerRetriable, node)
	}
	switch code := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; code {
	case 0:
		return nil
	case kerr.NotLeaderForPartition.Code, kerr.UnknownTopicOrPartition.Code, kerr.NotEnoughReplicas.Code,
		kerr.NotEnoughReplicasAfterAppend.Code, kerr.RequestTimedOut.Code, kerr.KafkaStorageError.Code,
		kerr.CoordinatorNotAvailable.Code:
		// As TransactionMarkerRequestCompletionHandler: retried until
		// the partition has a leader that takes it, or is deleted.
		return fmt.Errorf("%w: node %d: %v", errMarkerRetriable, node, kerr.ErrorForCode(code))
	default:
		return fmt.Errorf("WriteTxnMarkers to node %d: %w", node, kerr.ErrorForCode(code))
	}
}

// remoteCoordinator returns the node coordinating transactionalID when it
// is another live node of a cluster.
func (c *TxnCoordinator) remoteCoordinator(transactionalID string) (int32, bool) {
	if c.env.Cluster == nil {
		return 0, false
	}
	t, ok := c.env.Meta.Image().Topic(TransactionStateTopic)
	if !ok || len(t.Partitions) == 0 {
		return 0, false
	}
	leader := t.Partitions[txn.PartitionFor(transactionalID, int32(len(t.Partitions)))].Leader
	return leader, leader >= 0 && leader != c.env.NodeID
}

// remoteAddPartition asks the coordinator on node whether tp is in the
// producer's transaction (add false: AddPartitionsToTxn v5 VerifyOnly) or
// adds it (add true, transactions v2), as Kafka's AddPartitionsToTxnManager,
// and returns the answer as the txn error the local coordinator would give.
func (c *TxnCoordinator) remoteAddPartition(ctx context.Context, node int32, transactionalID string, pid int64, epoch int16, tp txn.TopicPartition, add bool) error {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(5)
	t := kmsg.NewAddPartitionsToTxnRequestTransaction()
	t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.VerifyOnly = transactionalID, pid, epoch, !add
	tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tt.Topic, tt.Partitions = tp.Topic, []int32{tp.Partition}
	t.Topics = append(t.Topics, tt)
	req.Transactions = append(req.Transactions, t)
	ctx, cancel := context.WithTimeout(ctx, peerTimeout)
	defer cancel()
	resp, err := c.env.Cluster.AddPartitionsToTxn(ctx, node, req)
	if err != nil {
		return fmt.Errorf("%w: AddPartitionsToTxn to node %d: %v", txn.ErrCoordinatorNotAvailable, node, err)
	}
	if resp.ErrorCode != 0 {
		return txnErrorFor(resp.ErrorCode)
	}
	if len(resp.Transactions) != 1 || len(resp.Transactions[0].Topics) != 1 || len(resp.Transactions[0].Topics[0].Partitions) != 1 {
		return fmt.Errorf("%w: AddPartitionsToTxn answer of node %d does not match its request", txn.ErrCoordinatorNotAvailable, node)
	}
	return txnErrorFor(resp.Transactions[0].Topics[0].Partitions[0].ErrorCode)
}

// txnErrorFor maps a code a remote coordinator answered to the txn error
// the local coordinator gives for it.
func txnErrorFor(code int16) error {
	for _, e := range []struct {
		code int16
		err  error
	}{
		{kerr.NotCoordinator.Code, txn.ErrNotCoordinator},
		{kerr.CoordinatorNotAvailable.Code, txn.ErrCoordinatorNotAvailable},
		{kerr.CoordinatorLoadInProgress.Code, txn.ErrCoordinatorLoading},
		{kerr.ConcurrentTransactions.Code, txn.ErrConcurrentTransactions},
		{kerr.ProducerFenced.Code, txn.ErrProducerFenced},
		{kerr.InvalidProducerEpoch.Code, txn.ErrProducerFenced},
		{kerr.InvalidProducerIDMapping.Code, txn.ErrInvalidProducerIDMapping},
		{kerr.InvalidTxnState.Code, txn.ErrInvalidTxnState},
		{kerr.TransactionAbortable.Code, txn.ErrTransactionAbortable},
	} {
		if e.code == code {
			return fmt.Errorf("%w (from the coordinator)", e.err)
		}
	}
	if code == 0 {
		return nil
	}
	return fmt.Errorf("%w: coordinator answered %v", txn.ErrUnknown, kerr.ErrorForCode(code))
}

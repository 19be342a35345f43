package handler

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/txn"
)

// markerAnswer answers a one-partition WriteTxnMarkers with code.
func markerAnswer(req *kmsg.WriteTxnMarkersRequest, code int16) *kmsg.WriteTxnMarkersResponse {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	m := kmsg.NewWriteTxnMarkersResponseMarker()
	m.ProducerID = req.Markers[0].ProducerID
	mt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
	mt.Topic = req.Markers[0].Topics[0].Topic
	mp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
	mp.Partition, mp.ErrorCode = req.Markers[0].Topics[0].Partitions[0], code
	mt.Partitions = append(mt.Partitions, mp)
	m.Topics = append(m.Topics, mt)
	resp.Markers = append(resp.Markers, m)
	return resp
}

// A partition led by another node gets its marker with WriteTxnMarkers,
// retried while the leader answers a retriable error, at the coordinator
// epoch; the transaction completes once it is written.
func TestClusterMarkersGoToTheLeader(t *testing.T) {
	c := newClusterTestEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var sent []*kmsg.WriteTxnMarkersRequest
	var nodes []int32
	c.cluster.markers = func(node int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
		sent, nodes = append(sent, req), append(nodes, node)
		if len(sent) == 1 {
			return markerAnswer(req, kerr.NotLeaderForPartition.Code), nil
		}
		return markerAnswer(req, 0), nil
	}
	id := keyOn(t, "txn", 0)
	var pid int64
	var epoch int16
	eventually(t, "InitProducerId", func() bool {
		var err error
		pid, epoch, err = c.env.Txn.InitProducerID(ctx, id, 60000, -1, -1)
		return err == nil
	})
	remote := txn.TopicPartition{Topic: "remote", Partition: 0}
	if err := c.env.Txn.AddPartitions(ctx, id, pid, epoch, []txn.TopicPartition{remote}, 0); err != nil {
		t.Fatalf("adding a partition led by another node: %v", err)
	}
	if _, _, err := c.env.Txn.EndTxn(ctx, id, pid, epoch, true, 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the transaction complete", func() bool {
		d, err := c.env.Txn.DescribeTransaction(ctx, id)
		return err == nil && d.State == txn.CompleteCommit
	})
	c.cluster.mu.Lock()
	defer c.cluster.mu.Unlock()
	if len(sent) != 2 {
		t.Fatalf("%d WriteTxnMarkers sent, want 2 (one retry)", len(sent))
	}
	m := sent[1].Markers[0]
	if nodes[1] != 2 || m.ProducerID != pid || m.ProducerEpoch != epoch || !m.Committed || m.CoordinatorEpoch != 7 ||
		m.Topics[0].Topic != "remote" || m.Topics[0].Partitions[0] != 0 {
		t.Fatalf("marker to node %d: %+v", nodes[1], m)
	}
}

// A transactional append to a partition led here, for a transactional id
// coordinated by another node, is verified there (AddPartitionsToTxn v5),
// and the answer is the local coordinator's error for its code.
func TestClusterRemoteVerification(t *testing.T) {
	c := newClusterTestEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id := keyOn(t, "txn", 1) // coordinated by node 2
	tp := txn.TopicPartition{Topic: "data", Partition: 0}
	for _, tc := range []struct {
		add  bool
		code int16
		want error
	}{
		{false, 0, nil},
		{true, 0, nil},
		{false, kerr.TransactionAbortable.Code, txn.ErrTransactionAbortable},
		{false, kerr.ConcurrentTransactions.Code, txn.ErrConcurrentTransactions},
		{true, kerr.ProducerFenced.Code, txn.ErrProducerFenced},
	} {
		var got *kmsg.AddPartitionsToTxnRequest
		var node int32
		c.cluster.mu.Lock()
		c.cluster.adds = func(n int32, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error) {
			got, node = req, n
			resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
			st := kmsg.NewAddPartitionsToTxnResponseTransaction()
			st.TransactionalID = req.Transactions[0].TransactionalID
			tt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			tt.Topic = req.Transactions[0].Topics[0].Topic
			sp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
			sp.Partition, sp.ErrorCode = req.Transactions[0].Topics[0].Partitions[0], tc.code
			tt.Partitions = append(tt.Partitions, sp)
			st.Topics = append(st.Topics, tt)
			resp.Transactions = append(resp.Transactions, st)
			return resp, nil
		}
		c.cluster.mu.Unlock()
		release, err := c.env.Txn.BeginTransactionalAppend(ctx, id, 42, 3, tp, tc.add)
		if release != nil {
			release()
		}
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("add %v, coordinator code %d: %v, want %v", tc.add, tc.code, err, tc.want)
		}
		if got == nil || node != 2 || got.GetVersion() != 5 || len(got.Transactions) != 1 {
			t.Fatalf("add %v: request to node %d: %+v", tc.add, node, got)
		}
		if tx := got.Transactions[0]; tx.TransactionalID != id || tx.ProducerID != 42 || tx.ProducerEpoch != 3 || tx.VerifyOnly == tc.add {
			t.Errorf("add %v: transaction %+v", tc.add, tx)
		}
	}
	// A coordinator that cannot be reached leaves the producer to retry.
	c.cluster.mu.Lock()
	c.cluster.adds = nil
	c.cluster.mu.Unlock()
	if _, err := c.env.Txn.BeginTransactionalAppend(ctx, id, 42, 3, tp, false); !errors.Is(err, txn.ErrCoordinatorNotAvailable) {
		t.Errorf("unreachable coordinator: %v, want COORDINATOR_NOT_AVAILABLE", err)
	}
}

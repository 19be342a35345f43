package handler_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

func markerReq(version int16, tv int8, pid int64, epoch int16, commit bool, topic string) *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = version
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.TransactionVersion = pid, epoch, commit, tv
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{0}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	return req
}

func markerCode(r rawTxn, req *kmsg.WriteTxnMarkersRequest) int16 {
	return r.req(req).(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode
}

// TestWriteTxnMarkersTransactionVersion checks WriteTxnMarkers v2
// (KIP-1228): a transactions v2 marker at the epoch of a transaction still
// open in the partition is refused, since every v2 transaction ends with an
// epoch bump (ProducerAppendInfo.checkProducerEpoch); a v1 marker at that
// epoch ends the transaction, and a v2 marker at the same epoch once it is
// ended is a retry and accepted.
func TestWriteTxnMarkersTransactionVersion(t *testing.T) {
	b := brokertest.Start(t)
	createTopic(t, b, "m", 1)
	r := newRawTxn(t, b)
	ip := r.init("markers", 4, 60000)
	if ip.ErrorCode != 0 {
		t.Fatalf("init: %v", kerr.ErrorForCode(ip.ErrorCode))
	}
	pid, epoch := ip.ProducerID, ip.ProducerEpoch
	if codes := r.add(3, "markers", pid, epoch, "m", 0); codes[0] != 0 {
		t.Fatalf("add: %v", kerr.ErrorForCode(codes[0]))
	}
	if c := r.produce("markers", pid, epoch, 0, "m", 0, "a"); c != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(c))
	}
	if c := markerCode(r, markerReq(2, 2, pid, epoch, false, "m")); c != kerr.InvalidProducerEpoch.Code {
		t.Errorf("tv2 marker at the open transaction's epoch: %v", kerr.ErrorForCode(c))
	}
	// The same marker sent at v1, which carries no transaction version,
	// is checked as transactions v1 are: it ends the transaction.
	if c := markerCode(r, markerReq(1, 2, pid, epoch, false, "m")); c != 0 {
		t.Errorf("v1 marker: %v", kerr.ErrorForCode(c))
	}
	if c := markerCode(r, markerReq(2, 2, pid, epoch, false, "m")); c != 0 {
		t.Errorf("tv2 retried marker after the transaction ended: %v", kerr.ErrorForCode(c))
	}
	if c := markerCode(r, markerReq(2, 2, pid, epoch-1, false, "m")); c != kerr.InvalidProducerEpoch.Code {
		t.Errorf("tv2 marker below the epoch: %v", kerr.ErrorForCode(c))
	}
	if c := markerCode(r, markerReq(2, 2, pid, epoch, false, "absent")); c != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown partition: %v", kerr.ErrorForCode(c))
	}
}

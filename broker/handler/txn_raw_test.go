package handler_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/broker/txn"
)

// rawTxn drives the transaction APIs request by request at chosen
// versions, sent straight to the broker, checking the codes Kafka answers.
type rawTxn struct{ *txnWire }

func newRawTxn(t *testing.T, b *brokertest.Broker) rawTxn {
	return rawTxn{newTxnWire(t, b.Addr())}
}

// req sends req straight to the broker at exactly req's version.
func (r rawTxn) req(req kmsg.Request) kmsg.Response {
	r.t.Helper()
	return r.direct(req)
}

func (r rawTxn) init(id string, version int16, timeoutMs int32) *kmsg.InitProducerIDResponse {
	return r.req(initProducerIDRequest(version, id, timeoutMs, -1, -1)).(*kmsg.InitProducerIDResponse)
}

// add sends the client form of AddPartitionsToTxn (v0-3) and returns the
// code of each partition.
func (r rawTxn) add(version int16, id string, pid int64, epoch int16, topic string, parts ...int32) map[int32]int16 {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = version
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, parts
	req.Topics = append(req.Topics, rt)
	resp := r.req(req).(*kmsg.AddPartitionsToTxnResponse)
	out := map[int32]int16{}
	for _, st := range resp.Topics {
		for _, sp := range st.Partitions {
			out[sp.Partition] = sp.ErrorCode
		}
	}
	return out
}

// verify sends the batched broker form of AddPartitionsToTxn with
// VerifyOnly for t-0 and u-0 and returns the code of each.
func (r rawTxn) verify(version int16, id string, pid int64, epoch int16) map[string]int16 {
	resp := r.req(brokerAddPartitionsRequest(version, id, pid, epoch, true, "t", "u")).(*kmsg.AddPartitionsToTxnResponse)
	out := map[string]int16{}
	for _, st := range resp.Transactions[0].Topics {
		for _, sp := range st.Partitions {
			out[fmt.Sprintf("%s-%d", st.Topic, sp.Partition)] = sp.ErrorCode
		}
	}
	return out
}

func (r rawTxn) end(version int16, id string, pid int64, epoch int16, commit bool) int16 {
	return r.req(endTxnRequest(version, id, pid, epoch, commit)).(*kmsg.EndTxnResponse).ErrorCode
}

// produce appends one transactional batch with Produce v9.
func (r rawTxn) produce(id string, pid int64, epoch int16, seq int32, topic string, part int32, values ...string) int16 {
	r.t.Helper()
	return produceCode(r.req(txnProduceRequest(r.t, 9, id, pid, epoch, seq, topic, part, values...)))
}

// begin opens a transaction for id (InitProducerId v4, AddPartitionsToTxn
// v3 of partition 0 of topic) and produces values into it at epoch 0 and
// sequence 0, failing the test on any error. It returns the producer id.
func (r rawTxn) begin(id string, timeoutMs int32, topic string, values ...string) int64 {
	r.t.Helper()
	ip := r.init(id, 4, timeoutMs)
	if ip.ErrorCode != 0 {
		r.t.Fatalf("init: %v", kerr.ErrorForCode(ip.ErrorCode))
	}
	pid := ip.ProducerID
	if codes := r.add(3, id, pid, 0, topic, 0); codes[0] != 0 {
		r.t.Fatalf("add: %v", codes)
	}
	if code := r.produce(id, pid, 0, 0, topic, 0, values...); code != 0 {
		r.t.Fatalf("produce: %v", kerr.ErrorForCode(code))
	}
	return pid
}

// fetch reads partition 0 of topic at read_committed and returns its last
// stable offset and aborted transactions.
func (r rawTxn) fetch(topic string) (int64, []kmsg.FetchResponseTopicPartitionAbortedTransaction) {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.IsolationLevel, req.MaxBytes, req.MaxWaitMillis = 11, 1, 1<<20, 10
	req.ReplicaID = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = 1<<20, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := r.req(req).(*kmsg.FetchResponse)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		r.t.Fatalf("fetch: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	return p.LastStableOffset, p.AbortedTransactions
}

// txnStart returns the CurrentTxnStartOffset DescribeProducers reports for
// pid on partition 0 of topic (KIP-664's way to find hanging transactions).
func (r rawTxn) txnStart(topic string, pid int64) int64 {
	r.t.Helper()
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	req.Topics = append(req.Topics, rt)
	resp := r.req(req).(*kmsg.DescribeProducersResponse)
	for _, p := range resp.Topics[0].Partitions[0].ActiveProducers {
		if p.ProducerID == pid {
			return p.CurrentTxnStartOffset
		}
	}
	r.t.Fatalf("producer %d not active on %s-0", pid, topic)
	return 0
}

func TestTxnRawProtocol(t *testing.T) {
	b := brokertest.Start(t)
	createTopic(t, b, "t", 2)
	createTopic(t, b, "u", 1)
	r := newRawTxn(t, b)

	// Before any transaction, reads find nothing and create nothing.
	d0 := kmsg.NewPtrDescribeTransactionsRequest()
	d0.TransactionalIDs = []string{"raw"}
	if c := r.req(d0).(*kmsg.DescribeTransactionsResponse).TransactionStates[0].ErrorCode; c != kerr.TransactionalIDNotFound.Code {
		t.Errorf("describe before any transaction: %v", kerr.ErrorForCode(c))
	}
	if l := r.req(kmsg.NewPtrListTransactionsRequest()).(*kmsg.ListTransactionsResponse); l.ErrorCode != 0 || len(l.TransactionStates) != 0 {
		t.Errorf("list before any transaction: %+v", l)
	}
	if codes := r.add(3, "raw", 1, 0, "t", 0); codes[0] != kerr.InvalidProducerIDMapping.Code {
		t.Errorf("add before any transaction: %v", kerr.ErrorForCode(codes[0]))
	}
	if tl, err := b.Admin(t).ListTopics(txnCtx(t), "__transaction_state"); err != nil || tl.Has("__transaction_state") {
		t.Errorf("__transaction_state exists before InitProducerId: %v", err)
	}
	if resp := r.init("raw", 4, 900001); resp.ErrorCode != kerr.InvalidTransactionTimeout.Code {
		t.Errorf("timeout above max: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if resp := r.init("", 4, 1000); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("empty id: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	ip := r.init("raw", 4, 60000)
	if ip.ErrorCode != 0 || ip.ProducerEpoch != 0 {
		t.Fatalf("init: %v epoch %d", kerr.ErrorForCode(ip.ErrorCode), ip.ProducerEpoch)
	}
	pid := ip.ProducerID

	// An unknown topic fails its partition and stops the rest.
	codes := r.add(3, "raw", pid, 0, "nope", 0)
	if codes[0] != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown topic: %v", kerr.ErrorForCode(codes[0]))
	}
	if codes := r.add(3, "raw", pid, 0, "t", 0, 1); codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("add: %v", codes)
	}
	// The broker form (v4+, VerifyOnly) checks membership without adding.
	for _, c := range []struct {
		version int16
		want    int16
	}{{4, kerr.InvalidTxnState.Code}, {5, kerr.TransactionAbortable.Code}} {
		got := r.verify(c.version, "raw", pid, 0)
		if got["t-0"] != 0 || got["u-0"] != c.want {
			t.Errorf("verify v%d = %v, want t-0 ok and u-0 %v", c.version, got, kerr.ErrorForCode(c.want))
		}
	}
	if got := r.verify(5, "raw", pid, 3); got["t-0"] != kerr.ProducerFenced.Code {
		t.Errorf("verify with a stale epoch = %v", got)
	}
	if code := r.produce("raw", pid, 0, 0, "t", 0, "a", "b"); code != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(code))
	}
	if lso, _ := r.fetch("t"); lso != 0 {
		t.Errorf("LSO with an open transaction at 0 = %d", lso)
	}
	if start := r.txnStart("t", pid); start != 0 {
		t.Errorf("DescribeProducers: open transaction starts at %d, want 0", start)
	}
	// Fencing errors by version (KIP-588).
	if code := r.end(1, "raw", pid, 7, true); code != kerr.InvalidProducerEpoch.Code {
		t.Errorf("EndTxn v1 stale epoch: %v", kerr.ErrorForCode(code))
	}
	if code := r.end(3, "raw", pid, 7, true); code != kerr.ProducerFenced.Code {
		t.Errorf("EndTxn v3 stale epoch: %v", kerr.ErrorForCode(code))
	}
	if code := r.end(3, "raw", pid+1, 0, true); code != kerr.InvalidProducerIDMapping.Code {
		t.Errorf("EndTxn wrong producer id: %v", kerr.ErrorForCode(code))
	}
	if code := r.end(3, "raw", pid, 0, false); code != 0 {
		t.Fatalf("abort: %v", kerr.ErrorForCode(code))
	}
	// The markers are written in the background; the LSO moves past them.
	waitFor(t, func() bool { lso, _ := r.fetch("t"); return lso == 3 })
	if start := r.txnStart("t", pid); start != -1 {
		t.Errorf("DescribeProducers after abort: transaction starts at %d, want -1", start)
	}
	_, aborted := r.fetch("t")
	if len(aborted) != 1 || aborted[0].ProducerID != pid || aborted[0].FirstOffset != 0 {
		t.Errorf("aborted transactions = %+v", aborted)
	}
	// Ending again with the same result succeeds once complete.
	waitFor(t, func() bool { return r.end(3, "raw", pid, 0, false) == 0 })
	if code := r.end(3, "raw", pid, 0, true); code != kerr.InvalidTxnState.Code {
		t.Errorf("commit after abort: %v", kerr.ErrorForCode(code))
	}

	// A hanging transaction is ended by WriteTxnMarkers (KIP-664).
	if codes := r.add(3, "raw", pid, 0, "t", 1); codes[1] != 0 {
		t.Fatalf("add: %v", codes)
	}
	if code := r.produce("raw", pid, 0, 0, "t", 1, "h"); code != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(code))
	}
	wm := kmsg.NewPtrWriteTxnMarkersRequest()
	wm.Version = 1
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = pid, 0, false, 0
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = "t", []int32{1, 9}
	m.Topics = append(m.Topics, mt)
	wm.Markers = append(wm.Markers, m)
	wr := r.req(wm).(*kmsg.WriteTxnMarkersResponse)
	got := map[int32]int16{}
	for _, p := range wr.Markers[0].Topics[0].Partitions {
		got[p.Partition] = p.ErrorCode
	}
	if got[1] != 0 || got[9] != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("WriteTxnMarkers codes = %v", got)
	}

	// DescribeTransactions of an unknown id.
	dr := kmsg.NewPtrDescribeTransactionsRequest()
	dr.Version = 0
	dr.TransactionalIDs = []string{"nobody", "raw"}
	dresp := r.req(dr).(*kmsg.DescribeTransactionsResponse)
	if c := dresp.TransactionStates[0].ErrorCode; c != kerr.TransactionalIDNotFound.Code {
		t.Errorf("describe unknown: %v", kerr.ErrorForCode(c))
	}
	if s := dresp.TransactionStates[1]; s.ErrorCode != 0 || s.State != "Ongoing" || s.ProducerID != pid {
		t.Errorf("describe raw: %+v", s)
	}
	lr := kmsg.NewPtrListTransactionsRequest()
	lr.Version = 2
	pat := "r.w"
	lr.TransactionalIDPattern = &pat
	lr.StateFilters = []string{"Ongoing", "Bogus"}
	lresp := r.req(lr).(*kmsg.ListTransactionsResponse)
	if len(lresp.TransactionStates) != 1 || lresp.TransactionStates[0].TransactionalID != "raw" ||
		len(lresp.UnknownStateFilters) != 1 {
		t.Errorf("list = %+v", lresp)
	}
	bad := "("
	lr.TransactionalIDPattern = &bad
	if c := r.req(lr).(*kmsg.ListTransactionsResponse).ErrorCode; c != kerr.InvalidRegularExpression.Code {
		t.Errorf("bad pattern: %v", kerr.ErrorForCode(c))
	}

	// The last stable offset and the aborted list survive a restart.
	b.Restart(t)
	r = newRawTxn(t, b)
	lso, aborted := r.fetch("t")
	if lso != 3 || len(aborted) != 1 || aborted[0].ProducerID != pid || aborted[0].FirstOffset != 0 {
		t.Errorf("after restart: LSO %d, aborted %+v", lso, aborted)
	}
}

// TestTxnProduceRacingEndTxn checks that transactional appends racing the
// end of their transaction never land after its marker: each append is
// verified with the coordinator and ordered before the marker, or refused.
func TestTxnProduceRacingEndTxn(t *testing.T) {
	b := brokertest.Start(t)
	createTopic(t, b, "t", 1)
	r := newRawTxn(t, b)
	for round := 0; round < 5; round++ {
		id := fmt.Sprintf("race-%d", round)
		pid := r.begin(id, 60000, "t", "first")
		stop := produceUntilRefused(func(seq int32) int16 { return r.produce(id, pid, 0, seq, "t", 0, "racing") })
		time.Sleep(time.Duration(round) * 5 * time.Millisecond)
		if code := r.end(3, id, pid, 0, true); code != 0 {
			t.Fatalf("end: %v", kerr.ErrorForCode(code))
		}
		time.Sleep(20 * time.Millisecond)
		stop()
	}
	// Read everything back, markers included: after a producer's marker,
	// no data from that producer may follow.
	checkNoDataAfterMarkers(t, b, "t", 5, 3*time.Second, nil)
}

// TestTxnRestartCompletesPrepared restarts the broker with a transaction
// logged in PrepareCommit whose markers were never written: the loaded
// coordinator writes them, as Kafka's loadTransactionsForTxnTopicPartition.
func TestTxnRestartCompletesPrepared(t *testing.T) {
	b := brokertest.Start(t)
	createTopic(t, b, "t", 1)
	r := newRawTxn(t, b)
	pid := r.begin("prep", 60000, "t", "p1", "p2")
	// Log the commit decision as the coordinator would, but write no
	// markers: the broker "crashed" between the two.
	v, err := txn.EncodeValue(txn.Value{ProducerID: pid, ProducerEpoch: 0, TimeoutMs: 60000, State: txn.PrepareCommit,
		Partitions: []txn.TopicPartition{{Topic: "t", Partition: 0}}, PreviousProducerID: -1, NextProducerID: -1,
		NextProducerEpoch: -1, LastUpdateMs: time.Now().UnixMilli(), StartMs: time.Now().UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	admin := b.Client(t, kgo.ClientID("__admin_client"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	rec := &kgo.Record{Topic: "__transaction_state", Partition: txn.PartitionFor("prep", 50), Key: txn.EncodeKey("prep"), Value: v}
	if err := admin.ProduceSync(txnCtx(t), rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if lso, _ := r.fetch("t"); lso != 0 {
		t.Fatalf("LSO before restart = %d", lso)
	}
	b.Restart(t)
	r = newRawTxn(t, b)
	waitFor(t, func() bool { lso, _ := r.fetch("t"); return lso == 3 })
	if got := consumeFor(t, b, "t", true, time.Second); !equal(got, []string{"p1", "p2"}) {
		t.Errorf("read_committed after restart: %v", got)
	}
	waitFor(t, func() bool { return describe(t, b, "prep").State == "CompleteCommit" })
}

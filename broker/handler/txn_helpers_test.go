package handler_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/broker/record"
)

// txnWire sends requests at exactly their version to a broker named by
// address. franz-go negotiates the highest version both sides support, so
// each (key, version) gets its own client whose maximum for the key is that
// version. The raw transaction tests of transactions v1 (rawTxn) and v2
// (v2Wire) build their request helpers on it.
// It is safe for concurrent use, so a test may produce from a goroutine
// while it ends the transaction.
type txnWire struct {
	t    *testing.T
	seed string

	mu      sync.Mutex
	node    int // the single broker's node id; -1 until looked up
	clients map[[2]int16]*kgo.Client
}

func newTxnWire(t *testing.T, seed string) *txnWire {
	return &txnWire{t: t, seed: seed, node: -1, clients: map[[2]int16]*kgo.Client{}}
}

// client returns a franz-go client for the wire's broker, closed with the
// test.
func (w *txnWire) client(opts ...kgo.Opt) *kgo.Client {
	w.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(w.seed)}, opts...)...)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(cl.Close)
	return cl
}

// versioned returns the client whose maximum version for req's key is req's
// version.
func (w *txnWire) versioned(req kmsg.Request) *kgo.Client {
	w.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	k := [2]int16{req.Key(), req.GetVersion()}
	cl := w.clients[k]
	if cl == nil {
		v := kversion.Stable()
		v.SetMaxKeyVersion(req.Key(), req.GetVersion())
		cl = w.client(kgo.MaxVersions(v))
		w.clients[k] = cl
	}
	return cl
}

// routed sends req at exactly its version, letting franz-go route it (to
// the transaction or group coordinator, or the partition leader).
func (w *txnWire) routed(req kmsg.Request) kmsg.Response {
	w.t.Helper()
	resp, err := w.versioned(req).Request(txnCtx(w.t), req)
	return w.answer(req, resp, err)
}

// direct sends req at exactly its version to the (single) broker itself,
// bypassing franz-go's routing, which rewrites the broker form of
// AddPartitionsToTxn into the client form and looks up coordinators first.
func (w *txnWire) direct(req kmsg.Request) kmsg.Response {
	w.t.Helper()
	resp, err := w.versioned(req).Broker(w.nodeID()).Request(txnCtx(w.t), req)
	return w.answer(req, resp, err)
}

// nodeID returns the node id of the wire's single broker, asking it once.
func (w *txnWire) nodeID() int {
	w.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.node < 0 {
		m, err := kadm.NewClient(w.client()).BrokerMetadata(txnCtx(w.t))
		if err != nil || len(m.Brokers) != 1 {
			w.t.Fatalf("metadata: %v %v", m.Brokers, err)
		}
		w.node = int(m.Brokers[0].NodeID)
	}
	return w.node
}

// answer fails the test when req got no response or one at another
// version, and returns the response otherwise.
func (w *txnWire) answer(req kmsg.Request, resp kmsg.Response, err error) kmsg.Response {
	w.t.Helper()
	if err != nil {
		w.t.Fatalf("%T: %v", req, err)
	}
	if resp.GetVersion() != req.GetVersion() {
		w.t.Fatalf("%T sent at v%d, want v%d", req, resp.GetVersion(), req.GetVersion())
	}
	return resp
}

// initProducerIDRequest asks for a producer id for transactional id with
// the given transaction timeout: pid and epoch are -1 for a new producer,
// or the current ones to bump the epoch (KIP-360).
func initProducerIDRequest(version int16, id string, timeoutMs int32, pid int64, epoch int16) *kmsg.InitProducerIDRequest {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = version
	req.TransactionalID, req.TransactionTimeoutMillis = &id, timeoutMs
	req.ProducerID, req.ProducerEpoch = pid, epoch
	return req
}

// endTxnRequest commits or aborts the transaction of id.
func endTxnRequest(version int16, id string, pid int64, epoch int16, commit bool) *kmsg.EndTxnRequest {
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = version
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	return req
}

// brokerAddPartitionsRequest is the broker form of AddPartitionsToTxn (v4+,
// KIP-890) for partition 0 of each topic: with verifyOnly it checks that the
// partitions are in the transaction; without it (transactions v2) it adds
// them, as a partition leader does for a Produce v12.
func brokerAddPartitionsRequest(version int16, id string, pid int64, epoch int16, verifyOnly bool, topics ...string) *kmsg.AddPartitionsToTxnRequest {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = version
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = id, pid, epoch, verifyOnly
	for _, topic := range topics {
		tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		tt.Topic, tt.Partitions = topic, []int32{0}
		tx.Topics = append(tx.Topics, tt)
	}
	req.Transactions = append(req.Transactions, tx)
	return req
}

// txnProduceRequest carries one transactional batch holding values, with
// the producer's id, epoch and base sequence, to one partition with
// acks=all.
func txnProduceRequest(t *testing.T, version int16, id string, pid int64, epoch int16, seq int32, topic string, part int32, values ...string) *kmsg.ProduceRequest {
	t.Helper()
	var recs []record.Rec
	for _, v := range values {
		recs = append(recs, record.Rec{Timestamp: 1, Value: []byte(v)})
	}
	s := record.NewSpec(recs...)
	s.Transactional, s.ProducerID, s.ProducerEpoch, s.BaseSequence = true, pid, epoch, seq
	batch, err := record.Build(s)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.TransactionID, req.Acks, req.TimeoutMillis = &id, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = part, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// produceCode is the error code of the first partition of a Produce
// response.
func produceCode(resp kmsg.Response) int16 {
	return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
}

// produceUntilRefused calls produce with sequence numbers 1, 2, ... in a
// goroutine until it answers an error code or stop is called. stop waits
// for the goroutine and returns the code that ended it, or 0 when stop did.
// The racing tests use it to produce while EndTxn runs.
func produceUntilRefused(produce func(seq int32) int16) (stop func() int16) {
	quit := make(chan struct{})
	done := make(chan int16, 1)
	go func() {
		for seq := int32(1); ; seq++ {
			select {
			case <-quit:
				done <- 0
				return
			default:
			}
			if code := produce(seq); code != 0 {
				done <- code
				return
			}
		}
	}()
	return func() int16 {
		close(quit)
		return <-done
	}
}

// checkNoDataAfterMarkers reads topic from the start at read_uncommitted,
// control records included, until it has seen markers transaction markers
// or timeout passes, and fails the test if a data record of a producer
// follows that producer's marker: an append racing EndTxn must be ordered
// before the marker or refused. onMarker, when not nil, checks each marker.
func checkNoDataAfterMarkers(t *testing.T, b *brokertest.Broker, topic string, markers int, timeout time.Duration, onMarker func(*kgo.Record)) {
	t.Helper()
	cl := b.Client(t, kgo.ConsumeTopics(topic), kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	ended := map[int64]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for seen := 0; seen < markers; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("saw %d markers", seen)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			if rec.Attrs.IsControl() {
				if onMarker != nil {
					onMarker(rec)
				}
				ended[rec.ProducerID] = true
				seen++
				return
			}
			if ended[rec.ProducerID] {
				t.Errorf("record %q of producer %d at offset %d lands after its marker", rec.Value, rec.ProducerID, rec.Offset)
			}
		})
	}
}

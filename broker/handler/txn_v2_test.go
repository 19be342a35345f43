package handler_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/matrix/apachekafka"
	"github.com/cascade-kafka/cascade/matrix/clients/java"
	"github.com/cascade-kafka/cascade/matrix/driver"
)

// The tests in this file cover transactions v2 (KIP-890 part 2), which
// Kafka 4 clients use when ApiVersions finalizes transaction.version 2:
// Produce v12 and TxnOffsetCommit v5 add their partitions implicitly, and
// EndTxn v5 bumps the epoch at every commit and abort. v2Sequence sends the
// same raw requests the Java producer sends (InitProducerId v5, Produce
// v12, TxnOffsetCommit v5, EndTxn v5, no AddPartitionsToTxn or
// AddOffsetsToTxn) and records the answers with producer ids replaced by
// names, so that Cascade's transcript is compared with Apache Kafka's.

// v2Wire sends the transactions v2 requests at exact versions to any
// broker by address, letting franz-go route each one.
type v2Wire struct{ *txnWire }

func newV2Wire(t *testing.T, seed string) v2Wire {
	return v2Wire{newTxnWire(t, seed)}
}

// init sends InitProducerId v5: pid and epoch are -1 for a new producer.
func (w v2Wire) init(id string, pid int64, epoch int16) *kmsg.InitProducerIDResponse {
	return w.routed(initProducerIDRequest(5, id, 60000, pid, epoch)).(*kmsg.InitProducerIDResponse)
}

// produce appends one transactional batch to partition 0 with Produce v12,
// which adds the partition to the transaction implicitly.
func (w v2Wire) produce(id string, pid int64, epoch int16, seq int32, topic string, values ...string) int16 {
	w.t.Helper()
	return produceCode(w.routed(txnProduceRequest(w.t, 12, id, pid, epoch, seq, topic, 0, values...)))
}

// end sends EndTxn v5, whose response carries the bumped epoch.
func (w v2Wire) end(id string, pid int64, epoch int16, commit bool) *kmsg.EndTxnResponse {
	return w.routed(endTxnRequest(5, id, pid, epoch, commit)).(*kmsg.EndTxnResponse)
}

func (w v2Wire) txnOffsetCommit(id string, pid int64, epoch int16, group, topic string, offset int64) int16 {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = 5
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = id, group, pid, epoch
	req.Generation = -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = 0, offset, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return w.routed(req).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

// describe returns the transaction's state, epoch and partitions (topics
// only, since __consumer_offsets partitions differ by partition count).
func (w v2Wire) describe(id string) string {
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	s := w.routed(req).(*kmsg.DescribeTransactionsResponse).TransactionStates[0]
	var topics []string
	for _, t := range s.Topics {
		topics = append(topics, fmt.Sprintf("%s%v", t.Topic, len(t.Partitions)))
	}
	sort.Strings(topics)
	return fmt.Sprintf("%s %s epoch=%d %v", codeName(s.ErrorCode), s.State, s.ProducerEpoch, topics)
}

func codeName(code int16) string {
	if code == 0 {
		return "OK"
	}
	if e := kerr.ErrorForCode(code); e != nil {
		return e.(*kerr.Error).Message
	}
	return fmt.Sprint(code)
}

// retriable reports the codes a producer retries while the previous
// transaction's markers are written.
func retriable(code int16) bool {
	return code == kerr.ConcurrentTransactions.Code || code == kerr.NotEnoughReplicas.Code ||
		code == kerr.CoordinatorLoadInProgress.Code || code == kerr.CoordinatorNotAvailable.Code
}

// until repeats op while it answers a retriable code, as clients do.
func until(t *testing.T, op func() int16) int16 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code := op()
		if !retriable(code) || time.Now().After(deadline) {
			return code
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// v2Sequence runs the transactions v2 conversation against the broker at
// seed, on a topic and ids it creates, and returns the transcript.
func v2Sequence(t *testing.T, seed string) []string {
	w := newV2Wire(t, seed)
	adm := kadm.NewClient(w.client())
	topic, id, group := "v2t", "v2-txn", "v2-group"
	if resp, err := adm.CreateTopics(txnCtx(t), 1, 1, nil, topic); err != nil || resp[topic].Err != nil {
		t.Fatalf("create topic: %v %v", err, resp[topic].Err)
	}
	var out []string
	logf := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	pids := map[int64]string{}
	name := func(pid int64) string {
		if pid < 0 {
			return fmt.Sprint(pid)
		}
		if _, ok := pids[pid]; !ok {
			pids[pid] = fmt.Sprintf("P%d", len(pids))
		}
		return pids[pid]
	}

	// ApiVersions: the feature the Java producer keys transactions v2 on.
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version, av.ClientSoftwareName, av.ClientSoftwareVersion = 4, "cascade-test", "1"
	avr := w.routed(av).(*kmsg.ApiVersionsResponse)
	for _, f := range avr.FinalizedFeatures {
		if f.Name == "transaction.version" {
			logf("finalized transaction.version %d-%d", f.MinVersionLevel, f.MaxVersionLevel)
		}
	}
	for _, k := range avr.ApiKeys {
		switch k.ApiKey {
		case 0, 26:
			logf("api %d max>=%v", k.ApiKey, k.MaxVersion >= map[int16]int16{0: 12, 26: 5}[k.ApiKey])
		}
	}

	ip := w.init(id, -1, -1)
	pid := ip.ProducerID
	logf("init %s %s epoch=%d", codeName(ip.ErrorCode), name(ip.ProducerID), ip.ProducerEpoch)
	// Produce v12 adds the partition without AddPartitionsToTxn; the
	// second batch finds the transaction open in the partition.
	logf("produce e0 s0 %s", codeName(w.produce(id, pid, 0, 0, topic, "a")))
	logf("produce e0 s1 %s", codeName(w.produce(id, pid, 0, 1, topic, "b")))
	logf("describe %s", w.describe(id))
	// TxnOffsetCommit v5 adds the group's offsets partition.
	logf("txn-offset-commit %s", codeName(w.txnOffsetCommit(id, pid, 0, group, topic, 2)))
	logf("describe %s", w.describe(id))
	e := w.end(id, pid, 0, true)
	logf("commit e0 %s %s epoch=%d", codeName(e.ErrorCode), name(e.ProducerID), e.ProducerEpoch)
	// A retry of the commit with the old epoch answers the new one.
	var er *kmsg.EndTxnResponse
	until(t, func() int16 { er = w.end(id, pid, 0, true); return er.ErrorCode })
	logf("commit retry e0 %s %s epoch=%d", codeName(er.ErrorCode), name(er.ProducerID), er.ProducerEpoch)
	logf("describe %s", w.describe(id))
	// The old epoch is fenced from the partition.
	logf("produce e0 s2 %s", codeName(w.produce(id, pid, 0, 2, topic, "late")))
	// An abort without any partition bumps the epoch; a commit of
	// nothing is invalid.
	e = w.end(id, pid, 1, false)
	logf("empty abort e1 %s %s epoch=%d", codeName(e.ErrorCode), name(e.ProducerID), e.ProducerEpoch)
	until(t, func() int16 { er = w.end(id, pid, 2, true); return er.ErrorCode })
	logf("empty commit e2 %s", codeName(er.ErrorCode))
	// An aborted transaction at epoch 2.
	logf("produce e2 s0 %s", codeName(until(t, func() int16 { return w.produce(id, pid, 2, 0, topic, "c") })))
	e = w.end(id, pid, 2, false)
	logf("abort e2 %s %s epoch=%d", codeName(e.ErrorCode), name(e.ProducerID), e.ProducerEpoch)
	// KIP-360: InitProducerId with the current id and epoch bumps it.
	var ir *kmsg.InitProducerIDResponse
	until(t, func() int16 { ir = w.init(id, pid, 3); return ir.ErrorCode })
	logf("init resume e3 %s %s epoch=%d", codeName(ir.ErrorCode), name(ir.ProducerID), ir.ProducerEpoch)
	// A new producer of the id fences an open transaction: the
	// coordinator aborts it as transactions v2 do (one bump, 4 to 5), and
	// the retried InitProducerId bumps again.
	logf("produce e4 s0 %s", codeName(until(t, func() int16 { return w.produce(id, pid, 4, 0, topic, "d") })))
	ir = w.init(id, -1, -1)
	logf("init fence %s", codeName(ir.ErrorCode))
	until(t, func() int16 { ir = w.init(id, -1, -1); return ir.ErrorCode })
	logf("init fence retried %s %s epoch=%d", codeName(ir.ErrorCode), name(ir.ProducerID), ir.ProducerEpoch)
	e = w.end(id, pid, 4, true)
	logf("zombie commit e4 %s", codeName(e.ErrorCode))
	logf("zombie produce e4 s1 %s", codeName(w.produce(id, pid, 4, 1, topic, "z")))
	logf("zombie txn-offset-commit e4 %s", codeName(w.txnOffsetCommit(id, pid, 4, group, topic, 9)))
	// A batch older than the partition's epoch for the producer is refused
	// before the coordinator is asked, whatever the transactional id.
	logf("unknown id produce %s", codeName(w.produce("v2-nobody", pid, 0, 0, topic, "u")))
	logf("unknown id and producer produce %s", codeName(w.produce("v2-nobody", 1<<40, 0, 0, topic, "u")))
	logf("unknown id txn-offset-commit %s", codeName(w.txnOffsetCommit("v2-nobody", pid, 0, group, topic, 9)))
	logf("unknown id abort %s", codeName(w.end("v2-nobody", pid, 0, false).ErrorCode))
	logf("describe %s", w.describe(id))

	// The broker form of AddPartitionsToTxn (v4+) without VerifyOnly adds
	// partitions for a transactions v2 producer, as a partition leader
	// does on a Produce v12.
	ip2 := w.init("v2-add", -1, -1)
	add := brokerAddPartitionsRequest(5, "v2-add", ip2.ProducerID, ip2.ProducerEpoch, false, topic)
	ar := w.direct(add).(*kmsg.AddPartitionsToTxnResponse)
	logf("broker add %s %s", codeName(ar.ErrorCode), codeName(ar.Transactions[0].Topics[0].Partitions[0].ErrorCode))
	logf("describe %s", w.describe("v2-add"))
	e = w.end("v2-add", ip2.ProducerID, ip2.ProducerEpoch, false)
	logf("abort %s epoch=%d", codeName(e.ErrorCode), e.ProducerEpoch)

	// The log: data and markers with their epochs.
	cl := w.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.KeepControlRecords(), kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var recs []string
	for markers := 0; markers < 4 && ctx.Err() == nil; {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if r.Attrs.IsControl() {
				markers++
				v = "ABORT"
				if len(r.Key) >= 4 && binary.BigEndian.Uint16(r.Key[2:]) == 1 {
					v = "COMMIT"
				}
			}
			recs = append(recs, fmt.Sprintf("%d:%s/%s/e%d", r.Offset, v, name(r.ProducerID), r.ProducerEpoch))
		})
	}
	logf("log %s", strings.Join(recs, " "))
	// The offset committed in the transaction is visible.
	var committed int64 = -1
	for ctx.Err() == nil && committed < 0 {
		os, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			if o, ok := os.Lookup(topic, 0); ok && o.Err == nil {
				committed = o.At
			}
		}
		if committed < 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	logf("committed offset %d", committed)
	return out
}

// v2Transcript is what Apache Kafka 4 answers to v2Sequence (checked by
// TestTxnV2SequenceMatchesKafka).
var v2Transcript = []string{
	"finalized transaction.version 2-2",
	"api 0 max>=true",
	"api 26 max>=true",
	"init OK P0 epoch=0",
	"produce e0 s0 OK",
	"produce e0 s1 OK",
	"describe OK Ongoing epoch=0 [v2t1]",
	"txn-offset-commit OK",
	"describe OK Ongoing epoch=0 [__consumer_offsets1 v2t1]",
	"commit e0 OK P0 epoch=1",
	"commit retry e0 OK P0 epoch=1",
	"describe OK CompleteCommit epoch=1 []",
	"produce e0 s2 INVALID_PRODUCER_EPOCH",
	"empty abort e1 OK P0 epoch=2",
	"empty commit e2 INVALID_TXN_STATE",
	"produce e2 s0 OK",
	"abort e2 OK P0 epoch=3",
	"init resume e3 OK P0 epoch=4",
	"produce e4 s0 OK",
	"init fence CONCURRENT_TRANSACTIONS",
	"init fence retried OK P0 epoch=6",
	"zombie commit e4 PRODUCER_FENCED",
	"zombie produce e4 s1 INVALID_PRODUCER_EPOCH",
	"zombie txn-offset-commit e4 INVALID_PRODUCER_EPOCH",
	"unknown id produce INVALID_PRODUCER_EPOCH",
	"unknown id and producer produce INVALID_PRODUCER_ID_MAPPING",
	"unknown id txn-offset-commit INVALID_PRODUCER_EPOCH",
	"unknown id abort INVALID_PRODUCER_ID_MAPPING",
	"describe OK Empty epoch=6 []",
	"broker add OK OK",
	"describe OK Ongoing epoch=0 [v2t1]",
	"abort OK epoch=1",
	"log 0:a/P0/e0 1:b/P0/e0 2:COMMIT/P0/e1 3:c/P0/e2 4:ABORT/P0/e3 5:d/P0/e4 6:ABORT/P0/e5 7:ABORT/P1/e1",
	"committed offset 2",
}

func checkTranscript(t *testing.T, got []string) {
	t.Helper()
	for i := 0; i < max(len(got), len(v2Transcript)); i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(v2Transcript) {
			w = v2Transcript[i]
		}
		if g != w {
			t.Errorf("step %d:\n got %q\nwant %q", i, g, w)
		}
	}
}

func TestTxnV2Sequence(t *testing.T) {
	b := brokertest.Start(t)
	checkTranscript(t, v2Sequence(t, b.Addr()))
}

// TestTxnV2SequenceMatchesKafka runs v2Sequence against Apache Kafka 4 (the
// oracle, provisioned by matrix/apachekafka): its answers are the
// transcript Cascade is held to. Skipped under -short and when Java or
// Maven is missing.
func TestTxnV2SequenceMatchesKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Apache Kafka")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dist, err := apachekafka.Ensure(ctx)
	if err != nil {
		t.Skipf("apache kafka unavailable: %v", err)
	}
	k, err := dist.StartBroker(ctx, apachekafka.BrokerOptions{})
	if err != nil {
		t.Fatalf("start apache kafka: %v", err)
	}
	t.Cleanup(func() {
		if err := k.Stop(); err != nil {
			t.Logf("stop apache kafka: %v", err)
		}
	})
	checkTranscript(t, v2Sequence(t, k.Addr()))
}

// TestTxnV2ProduceRacingEndTxn checks the ordering guarantee under
// transactions v2: Produce v12 batches racing EndTxn v5 either land before
// the transaction's marker or are refused (after the marker the old epoch
// is fenced); none lands after it. Only each producer's first batch asks
// the coordinator; the rest find the transaction open in the partition.
func TestTxnV2ProduceRacingEndTxn(t *testing.T) {
	b := brokertest.Start(t)
	createTopic(t, b, "t", 1)
	w := newV2Wire(t, b.Addr())
	for round := 0; round < 5; round++ {
		id := fmt.Sprintf("race2-%d", round)
		ip := w.init(id, -1, -1)
		if ip.ErrorCode != 0 {
			t.Fatalf("init: %v", kerr.ErrorForCode(ip.ErrorCode))
		}
		pid := ip.ProducerID
		if code := w.produce(id, pid, 0, 0, "t", "first"); code != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(code))
		}
		stop := produceUntilRefused(func(seq int32) int16 { return w.produce(id, pid, 0, seq, "t", "racing") })
		time.Sleep(time.Duration(round) * 5 * time.Millisecond)
		e := w.end(id, pid, 0, true)
		if e.ErrorCode != 0 || e.ProducerID != pid || e.ProducerEpoch != 1 {
			t.Fatalf("end: %v pid %d epoch %d", kerr.ErrorForCode(e.ErrorCode), e.ProducerID, e.ProducerEpoch)
		}
		time.Sleep(20 * time.Millisecond)
		if code := stop(); code != 0 && code != kerr.InvalidProducerEpoch.Code && code != kerr.NotEnoughReplicas.Code {
			t.Errorf("racing produce after EndTxn answered %v", kerr.ErrorForCode(code))
		}
	}
	checkNoDataAfterMarkers(t, b, "t", 5, 5*time.Second, func(rec *kgo.Record) {
		if rec.ProducerEpoch != 1 {
			t.Errorf("marker of producer %d at epoch %d, want the bumped 1", rec.ProducerID, rec.ProducerEpoch)
		}
	})
}

// TestTxnV2FranzGo checks that franz-go, which uses transactions v2 when
// the broker finalizes transaction.version 2 (KIP-890 part 2), commits and
// aborts through Cascade: every EndTxn bumps the epoch, which
// DescribeTransactions shows, and read_committed sees only committed data.
func TestTxnV2FranzGo(t *testing.T) {
	b := brokertest.Start(t)
	createTopic(t, b, "t", 2)
	p := txnProducer(t, b, "fg-v2")
	produceTxn(t, p, true, "c1", "c2")
	produceTxn(t, p, false, "a1")
	produceTxn(t, p, true, "c3")
	// An abort with nothing produced is allowed in v2 and bumps too.
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.EndTransaction(txnCtx(t), kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		d := describe(t, b, "fg-v2")
		return d.State == "CompleteCommit" || d.State == "CompleteAbort"
	})
	if d := describe(t, b, "fg-v2"); d.ProducerEpoch < 3 {
		t.Errorf("after three transactions the epoch is %d: the client did not use transactions v2", d.ProducerEpoch)
	}
	got := consumeFor(t, b, "t", true, time.Second)
	sort.Strings(got)
	if !equal(got, []string{"c1", "c2", "c3"}) {
		t.Errorf("read_committed saw %v", got)
	}
}

// TestTxnV2JavaClient runs the Java producer (kafka-clients 4, through the
// matrix's Java driver) against Cascade. Seeing transaction.version 2
// finalized, it uses transactions v2: Produce v12 without
// AddPartitionsToTxn and EndTxn v5, so each committed or aborted
// transaction leaves its id at epoch 1, where transactions v1 would leave
// 0. Skipped under -short and when Java or Maven is missing.
func TestTxnV2JavaClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a JVM")
	}
	b := brokertest.Start(t)
	createTopic(t, b, "t", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := java.Ensure(ctx); err != nil {
		t.Skipf("java driver unavailable: %v", err)
	}
	d, err := java.Open(ctx, b.Addr())
	if err != nil {
		t.Fatalf("java driver: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Logf("close java driver: %v", err)
		}
	})
	recs := func(values ...string) []driver.Record {
		var out []driver.Record
		for i, v := range values {
			out = append(out, driver.Record{Partition: int32(i % 2), Value: []byte(v)})
		}
		return out
	}
	for _, c := range []struct {
		id     string
		abort  bool
		values []string
	}{
		{"java-commit", false, []string{"c1", "c2", "c3"}},
		{"java-abort", true, []string{"a1", "a2"}},
	} {
		res, err := d.Produce(ctx, driver.Produce{Topic: "t", Acks: -1, TransactionalID: c.id, TxnAbort: c.abort,
			Records: recs(c.values...)})
		if err != nil {
			t.Fatalf("%s: %v", c.id, err)
		}
		for i, del := range res.Deliveries {
			if del.Error != nil {
				t.Errorf("%s record %d: %+v", c.id, i, del.Error)
			}
		}
		want := "CompleteCommit"
		if c.abort {
			want = "CompleteAbort"
		}
		waitFor(t, func() bool { return describe(t, b, c.id).State == want })
		if ds := describe(t, b, c.id); ds.ProducerEpoch != 1 {
			t.Errorf("%s ended at epoch %d, want 1 (transactions v2 bump the epoch at EndTxn)", c.id, ds.ProducerEpoch)
		}
	}
	var got []string
	for part := int32(0); part < 2; part++ {
		res, err := d.Consume(ctx, driver.Consume{Topic: "t", Partition: part, From: -2, Count: 10, TimeoutMs: 1500,
			Isolation: "read_committed"})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Records {
			got = append(got, string(r.Value))
		}
	}
	sort.Strings(got)
	if !equal(got, []string{"c1", "c2", "c3"}) {
		t.Errorf("read_committed through the Java consumer saw %v", got)
	}
}

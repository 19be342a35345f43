package handler_test

import (
	"encoding/binary"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/broker/record"
)

// validateWire starts a broker with topic "ts" and returns a wire to it.
func validateWire(t *testing.T) *txnWire {
	t.Helper()
	b := brokertest.Start(t)
	if _, err := b.Admin(t).CreateTopic(txnCtx(t), 1, 1, nil, "ts"); err != nil {
		t.Fatal(err)
	}
	return newTxnWire(t, b.Addr())
}

// tsBatch builds a batch of records with timestamps ts whose header claims
// maxTimestamp claimed (CRC matching the claim).
func tsBatch(t *testing.T, codec record.Codec, claimed int64, ts ...int64) []byte {
	t.Helper()
	var recs []record.Rec
	for _, v := range ts {
		recs = append(recs, record.Rec{Timestamp: v, Value: []byte("v")})
	}
	s := record.NewSpec(recs...)
	s.Codec = codec
	b, err := record.Build(s)
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint64(b[35:], uint64(claimed))
	b.UpdateCRC()
	return b
}

// produceRaw sends one batch to ts-0 with Produce v9 and returns the
// partition's answer.
func produceRaw(t *testing.T, w *txnWire, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "ts"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return w.direct(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

// listOffset answers ListOffsets v7 for ts-0 at timestamp ts.
func listOffset(t *testing.T, w *txnWire, ts int64) (offset, timestamp int64) {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = 7, -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "ts"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, ts, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	p := w.direct(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("ListOffsets(%d): %v", ts, kerr.ErrorForCode(p.ErrorCode))
	}
	return p.Offset, p.Timestamp
}

// fetchBatches fetches ts-0 from offset 0 with Fetch v12.
func fetchBatches(t *testing.T, w *txnWire) []record.Batch {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxBytes, req.SessionEpoch = 12, -1, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "ts"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = 0, 1<<20, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	p := w.direct(req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	var out []record.Batch
	for set := p.RecordBatches; len(set) > 0; {
		b, rest, err := record.Next(set)
		if err != nil {
			t.Fatal(err)
		}
		out, set = append(out, b), rest
	}
	return out
}

// TestProduceStoresTrueMaxTimestamp: a batch whose header's maxTimestamp
// is smaller than a record's is stored with the true maximum, and
// ListOffsets by timestamp and for the max timestamp find that record.
func TestProduceStoresTrueMaxTimestamp(t *testing.T) {
	w := validateWire(t)
	now := time.Now().UnixMilli()
	if p := produceRaw(t, w, tsBatch(t, record.CodecLZ4, now-50_000, now-30_000, now-10_000, now-20_000)); p.ErrorCode != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	bs := fetchBatches(t, w)
	if len(bs) != 1 || bs[0].MaxTimestamp() != now-10_000 || bs[0].ValidateStored() != nil {
		t.Fatalf("stored batches %d, max timestamp %d (want %d)", len(bs), bs[0].MaxTimestamp(), now-10_000)
	}
	if o, ts := listOffset(t, w, now-15_000); o != 1 || ts != now-10_000 {
		t.Fatalf("ListOffsets by timestamp: offset %d ts %d, want 1 %d", o, ts, now-10_000)
	}
	if o, ts := listOffset(t, w, -3); o != 1 || ts != now-10_000 {
		t.Fatalf("ListOffsets MAX_TIMESTAMP: offset %d ts %d, want 1 %d", o, ts, now-10_000)
	}
}

// TestProduceRecordBeyondAfterMax: one record beyond
// message.timestamp.after.max.ms in a batch whose header is in range is
// INVALID_TIMESTAMP, with the record's index and Kafka's messages.
func TestProduceRecordBeyondAfterMax(t *testing.T) {
	w := validateWire(t)
	now := time.Now().UnixMilli()
	future := now + 2*time.Hour.Milliseconds()
	p := produceRaw(t, w, tsBatch(t, record.CodecNone, now, now, future, now))
	if p.ErrorCode != kerr.InvalidTimestamp.Code {
		t.Fatalf("produce: %v, want INVALID_TIMESTAMP", kerr.ErrorForCode(p.ErrorCode))
	}
	if p.ErrorMessage == nil || *p.ErrorMessage != "One or more records have been rejected due to invalid timestamp" {
		t.Fatalf("error message %v", p.ErrorMessage)
	}
	if len(p.ErrorRecords) != 1 || p.ErrorRecords[0].RelativeOffset != 1 || p.ErrorRecords[0].ErrorMessage == nil ||
		!strings.HasPrefix(*p.ErrorRecords[0].ErrorMessage, "Timestamp "+strconv.FormatInt(future, 10)+" of message with offset 1 is out of range. The timestamp should be within [") {
		t.Fatalf("record errors %+v", p.ErrorRecords)
	}
	if bs := fetchBatches(t, w); len(bs) != 0 {
		t.Fatalf("%d batches stored", len(bs))
	}
}

// TestProduceZstdWindowCorrupt: a few hundred bytes of zstd declaring a
// 512 MiB window are CORRUPT_MESSAGE, and the broker goes on serving.
func TestProduceZstdWindowCorrupt(t *testing.T) {
	w := validateWire(t)
	now := time.Now().UnixMilli()
	plain := tsBatch(t, record.CodecNone, now, now)
	data := record.Batch(plain).Payload()
	frame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 19 << 3} // window 2^29
	h := uint32(1 | len(data)<<3)
	frame = append(append(frame, byte(h), byte(h>>8), byte(h>>16)), data...)
	b := append(append([]byte(nil), plain[:record.HeaderSize]...), frame...)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-record.LogOverhead))
	b[22] |= byte(record.CodecZstd)
	record.Batch(b).UpdateCRC()
	if p := produceRaw(t, w, b); p.ErrorCode != kerr.CorruptMessage.Code {
		t.Fatalf("produce: %v, want CORRUPT_MESSAGE", kerr.ErrorForCode(p.ErrorCode))
	}
	if p := produceRaw(t, w, tsBatch(t, record.CodecZstd, now, now)); p.ErrorCode != 0 {
		t.Fatalf("legitimate zstd batch: %v", kerr.ErrorForCode(p.ErrorCode))
	}
}

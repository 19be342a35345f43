package bench

import (
	"bytes"
	"context"
	"hash/crc32"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/broker/record"
)

func TestCRCCombine(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 40, 1000, 131072} {
		a, b := make([]byte, 40), make([]byte, n)
		for i := range a {
			a[i] = byte(r.Uint32())
		}
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		want := crc32.Checksum(append(bytes.Clone(a), b...), castagnoli)
		got := crcCombine(crc32.Checksum(a, castagnoli), crc32.Checksum(b, castagnoli), crcShift(n))
		if got != want {
			t.Errorf("len %d: combined %08x, want %08x", n, got, want)
		}
	}
}

// stamped returns a send's batch as the raw producer frames it.
func stamped(ts *rawTemplates, first int64, count int, seq int32) []byte {
	tp := ts.template(first, count)
	var h [batchHeaderBytes]byte
	ts.stamp(&h, tp, first, 7, 0, seq)
	return append(h[:], tp.records...)
}

// TestRawBatchesAreKafkaBatches checks the raw producer's batches with
// the broker's own record package, an implementation it shares no code
// with: the header and CRC as a broker validates them, and every record's
// value intact after decompression.
func TestRawBatchesAreKafkaBatches(t *testing.T) {
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		w := tinyWorkload()
		w.Compression, w.Records, w.Producers = codec, 1000, 3
		ts, err := newRawTemplates(w)
		if err != nil {
			t.Fatal(err)
		}
		for _, count := range []int{ts.perBatch, int(333 % int64(ts.perBatch))} {
			b := record.Batch(stamped(ts, 4242, count, 99))
			if err := b.Validate(); err != nil {
				t.Fatalf("%s, %d records: %v", codec, count, err)
			}
			if b.BaseTimestamp() != ts.epoch+4242 || b.ProducerID() != 7 || b.BaseSequence() != 99 ||
				b.RecordCount() != int32(count) || int(b.Codec()) != int(rawCodecs[codec]) {
				t.Errorf("%s: header %d %d %d %d", codec, b.BaseTimestamp(), b.ProducerID(), b.BaseSequence(), b.RecordCount())
			}
			it, err := b.Records(64<<20, nil)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for r, ok := it.Next(); ok; r, ok = it.Next() {
				if _, ok := ParsePayload(r.Value, w.PayloadBytes); !ok || r.OffsetDelta != int32(n) {
					t.Fatalf("%s: record %d corrupt", codec, n)
				}
				n++
			}
			if it.Err() != nil || n != count {
				t.Fatalf("%s: %d records, %v", codec, n, it.Err())
			}
		}
	}
}

// TestRawCheck feeds the consumer's batch check good and bad batches.
func TestRawCheck(t *testing.T) {
	w := tinyWorkload()
	w.Records, w.Producers = 1000, 1
	ts, err := newRawTemplates(w)
	if err != nil {
		t.Fatal(err)
	}
	n := ts.perBatch
	good := stamped(ts, int64(n), n, 0)
	flipped := bytes.Clone(good)
	flipped[len(flipped)-10] ^= 1
	wrongRecords := stamped(ts, int64(n), n, 0)
	other := ts.full[(mix64(uint64(n))+1)%rawFullTemplates]
	copy(wrongRecords[batchHeaderBytes:], other.records)
	var h [batchHeaderBytes]byte
	ts.stamp(&h, other, int64(n), 7, 0, 0) // a valid CRC over the wrong records
	wrongRecords = append(h[:], other.records...)
	short := stamped(ts, 1000-int64(1000%n), 1000%n, 0)
	tests := []struct {
		name    string
		batches [][]byte
		want    Verification
	}{
		{"good", [][]byte{good}, Verification{Expected: 1000, Consumed: int64(n), Missing: 1000 - int64(n)}},
		{"short", [][]byte{short}, Verification{Expected: 1000, Consumed: int64(1000 % n), Missing: 1000 - int64(1000%n)}},
		{"twice", [][]byte{good, good}, Verification{Expected: 1000, Consumed: 2 * int64(n), Missing: 1000 - int64(n), Duplicates: int64(n)}},
		{"bit flip", [][]byte{flipped}, Verification{Expected: 1000, Consumed: int64(n), Missing: 1000, Corrupt: int64(n)}},
		{"wrong records", [][]byte{wrongRecords}, Verification{Expected: 1000, Consumed: int64(n), Missing: 1000, Corrupt: int64(n)}},
		{"beyond the run", [][]byte{stamped(ts, 1000, n, 0)}, Verification{Expected: 1000, Consumed: int64(n), Missing: 1000, Unexpected: int64(n)}},
	}
	for _, tc := range tests {
		v := newVerifier(1000, w.PayloadBytes)
		for _, b := range tc.batches {
			if got := ts.check(b, v); got != n && tc.name != "short" {
				t.Errorf("%s: check counted %d records", tc.name, got)
			}
		}
		got := v.result()
		got.FirstMissing = nil
		if got.Expected != tc.want.Expected || got.Consumed != tc.want.Consumed || got.Missing != tc.want.Missing ||
			got.Duplicates != tc.want.Duplicates || got.Corrupt != tc.want.Corrupt || got.Unexpected != tc.want.Unexpected {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func rawWorkload() Workload {
	w := tinyWorkload()
	w.Client = ClientRaw
	w.Records, w.BatchBytes = 5000, 8<<10
	return w
}

// rawRuns runs the raw client against inst: once clean, then with a
// planted loss, duplicate and corruption, each of which must fail
// verification with exactly the records of the planted batch.
func rawRuns(t *testing.T, inst *Instance) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, c := range []struct{ codec, acks string }{{"lz4", "all"}, {"none", "all"}, {"zstd", "1"}, {"none", "0"}} {
		w := rawWorkload()
		w.Compression, w.Acks = c.codec, c.acks
		res, err := Run(ctx, "raw", inst, w, 1, Options{PlantLoss: -1})
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		// With acks=0 a send counts as acknowledged once written, as
		// franz-go's promise does.
		if !res.Verified || res.AckLatencyMs.Count != w.Records || res.Verification.Consumed != w.Records {
			t.Fatalf("%+v: verified=%v, %d latencies, %+v", c, res.Verified, res.AckLatencyMs.Count, res.Verification)
		}
	}
	w := rawWorkload()
	n := int64(rawPerBatch(w))
	// Record 1234 lies in a full batch of producer 0 (2500 records).
	first := 1234 / n * n
	for _, tc := range []struct {
		name string
		o    Options
		want Verification
	}{
		{"loss", Options{PlantLoss: 1234}, Verification{Consumed: w.Records - n, Missing: n}},
		{"duplicate", Options{PlantLoss: -1, PlantDuplicate: 1234}, Verification{Consumed: w.Records + n, Duplicates: n}},
		{"corruption", Options{PlantLoss: -1, PlantCorrupt: 1234}, Verification{Consumed: w.Records, Missing: n, Corrupt: n}},
	} {
		res, err := Run(ctx, "raw", inst, w, 1, tc.o)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		v := res.Verification
		if res.Verified || v.Consumed != tc.want.Consumed || v.Missing != tc.want.Missing ||
			v.Duplicates != tc.want.Duplicates || v.Corrupt != tc.want.Corrupt || v.Unexpected != 0 {
			t.Errorf("%s planted in records %d..%d: verified=%v %+v", tc.name, first, first+n-1, res.Verified, v)
		}
		if tc.want.Missing > 0 && (len(v.FirstMissing) == 0 || int64(v.FirstMissing[0]) != first) {
			t.Errorf("%s: first missing %v, want %d", tc.name, v.FirstMissing, first)
		}
	}
}

func TestRawClientCascade(t *testing.T) {
	b := brokertest.Start(t)
	rawRuns(t, &Instance{Addr: b.Addr()})
}

func TestRawClientKfake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rawRuns(t, &Instance{Addr: c.ListenAddrs()[0], InMemory: true})
}

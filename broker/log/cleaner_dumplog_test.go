package log_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/record"
)

// TestKafkaDumpLogReadsCleanedSegment compacts a log holding every codec,
// tombstones and an aborted transaction, then runs Apache Kafka's
// DumpLogSegments over the cleaned segment: it must read every batch
// (re-encoded ones, empty ones and ones carrying a delete horizon) with
// valid CRCs and list exactly the records Cascade serves. Skipped under
// -short (needs java and the cached Kafka jars).
func TestKafkaDumpLogReadsCleanedSegment(t *testing.T) {
	tool := needDumpLog(t)
	dir := t.TempDir()
	now := time.UnixMilli(1_700_000_000_000)
	cfg := log.DefaultConfig()
	cfg.CleanupPolicy = log.PolicyCompact
	cfg.MinCleanableDirtyRatio = 0
	cfg.IndexIntervalBytes = 100
	m, err := log.Open(dir, log.Options{Clock: func() time.Time { return now }, RetentionCheckInterval: -1, CleanerBackoff: -1,
		ConfigFor: func(log.TopicPartition) log.Config { return cfg }})
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Create(log.TopicPartition{Topic: "dumpc", Partition: 0}, [16]byte{8}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := now.UnixMilli()
	add := func(s record.Spec) {
		t.Helper()
		appendSpec(t, l, s, 1)
	}
	for round := 0; round < 2; round++ {
		for i, c := range dumpLogCodecs {
			recs := make([]record.Rec, 4)
			for j := range recs {
				recs[j] = record.Rec{Timestamp: ts + int64(j), Key: []byte(fmt.Sprintf("key-%d-%d", i, j%3)),
					Value: []byte(strings.Repeat("v", 20+j+round)), Headers: []record.Header{{Key: []byte("h"), Value: []byte("x")}}}
				if round == 1 && j == 3 {
					recs[j].Value = nil // a tombstone
				}
			}
			s := record.NewSpec(recs...)
			s.Codec = c
			add(s)
		}
	}
	s := record.NewSpec(record.Rec{Timestamp: ts, Key: []byte("tk"), Value: []byte("aborted")})
	s.ProducerID, s.ProducerEpoch, s.BaseSequence, s.Transactional = 1000, 0, 0, true
	add(s)
	if _, err := l.Append(record.ControlBatch(1000, 0, false, 3, ts), 1); err != nil {
		t.Fatal(err)
	}
	add(record.NewSpec(record.Rec{Timestamp: ts, Key: []byte("last"), Value: []byte("x")}))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := m.CleanOnce(); err != nil || !ok {
		t.Fatal(ok, err)
	}
	var offsets []int64
	res, err := l.Read(0, 1<<20, 1<<62, true)
	if err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	for _, r := range res.Regions {
		if _, err := r.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		r.Release()
	}
	horizons := 0
	for set := []byte(buf.String()); len(set) > 0; {
		b, rest, err := record.Next(set)
		if err != nil {
			t.Fatal(err)
		}
		set = rest
		if b.HasDeleteHorizon() {
			horizons++
		}
		it, err := b.Records(1<<20, nil)
		if err != nil {
			t.Fatal(err)
		}
		for r, ok := it.Next(); ok; r, ok = it.Next() {
			offsets = append(offsets, r.OffsetIn(b))
		}
	}
	if horizons == 0 {
		t.Fatal("no batch carries a delete horizon after cleaning tombstones")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	tool.check(t, filepath.Join(dir, "dumpc-0"), offsets,
		"compresscodec: zstd", "compresscodec: lz4", "endTxnMarker: ABORT", "count: 0")
}

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

// TestKafkaDumpLogReadsSegment writes a segment with every codec,
// transactional batches and transaction markers, then runs Apache Kafka's
// own DumpLogSegments over the .log, .index and .timeindex files and checks
// that it lists every batch and record and reports no error. It needs java
// and mvn (jars from Maven Central), so it is skipped under -short.
func TestKafkaDumpLogReadsSegment(t *testing.T) {
	tool := needDumpLog(t)
	dir := t.TempDir()
	m, err := log.Open(dir, log.Options{RetentionCheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	cfg := log.DefaultConfig()
	cfg.IndexIntervalBytes = 100
	l, err := m.Create(log.TopicPartition{Topic: "dump", Partition: 0}, [16]byte{7}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var offsets []int64
	ts := time.Now().UnixMilli()
	add := func(s record.Spec) {
		t.Helper()
		info := appendSpec(t, l, s, 2)
		for o := info.FirstOffset; o <= info.LastOffset; o++ {
			offsets = append(offsets, o)
		}
	}
	for i, c := range dumpLogCodecs {
		recs := make([]record.Rec, 4)
		for j := range recs {
			recs[j] = record.Rec{Timestamp: ts + int64(j), Key: []byte(fmt.Sprintf("key-%d-%d", i, j)),
				Value: []byte(strings.Repeat("v", 50+j)), Headers: []record.Header{{Key: []byte("h"), Value: []byte("x")}}}
		}
		s := record.NewSpec(recs...)
		s.Codec = c
		add(s)
	}
	for _, commit := range []bool{true, false} {
		s := record.NewSpec(record.Rec{Timestamp: ts, Key: []byte("tk"), Value: []byte("tv")}, record.Rec{Timestamp: ts, Value: []byte("tv2")})
		s.ProducerID, s.ProducerEpoch, s.BaseSequence, s.Transactional = 1000, 0, 0, true
		if !commit {
			s.BaseSequence = 2
		}
		add(s)
		b := record.ControlBatch(1000, 0, commit, 3, ts)
		info, err := l.Append(b, 2)
		if err != nil {
			t.Fatal(err)
		}
		offsets = append(offsets, info.FirstOffset)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	tool.check(t, filepath.Join(dir, "dump-0"), offsets,
		"compresscodec: gzip", "compresscodec: snappy", "compresscodec: lz4", "compresscodec: zstd",
		"endTxnMarker: COMMIT coordinatorEpoch: 3", "endTxnMarker: ABORT coordinatorEpoch: 3", "isTransactional: true")
}

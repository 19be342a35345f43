package log_test

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/record"
	"github.com/cascade-kafka/cascade/matrix/apachekafka"
)

// TestKafkaDumpLogReadsSegment writes a segment with every codec,
// transactional batches and transaction markers, then runs Apache Kafka's
// own DumpLogSegments over the .log, .index and .timeindex files and checks
// that it lists every batch and record and reports no error. It needs java
// and mvn (jars from Maven Central), so it is skipped under -short.
func TestKafkaDumpLogReadsSegment(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Apache Kafka's DumpLogSegments (needs java and the cached jars)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dist, err := apachekafka.Ensure(ctx)
	if err != nil {
		t.Skipf("Apache Kafka unavailable: %v", err)
	}
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
		b, err := record.Build(s)
		if err != nil {
			t.Fatal(err)
		}
		info, err := l.Append(b, 2)
		if err != nil {
			t.Fatal(err)
		}
		for o := info.FirstOffset; o <= info.LastOffset; o++ {
			offsets = append(offsets, o)
		}
	}
	for i, c := range []record.Codec{record.CodecNone, record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd} {
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
	seg := filepath.Join(dir, "dump-0", "00000000000000000000")
	out, err := dist.DumpLog(ctx, seg+".log", seg+".index", seg+".timeindex")
	if err != nil {
		t.Fatalf("DumpLog: %v\n%s", err, out)
	}
	for _, bad := range []string{"Exception", "isvalid: false", "Mismatches", "mismatch", "Found out of order", "is not equal to"} {
		if strings.Contains(out, bad) {
			t.Fatalf("DumpLogSegments reported %q:\n%s", bad, out)
		}
	}
	recordRe := regexp.MustCompile(`(?m)^\| offset: (\d+)`)
	got := recordRe.FindAllStringSubmatch(out, -1)
	if len(got) != len(offsets) {
		t.Fatalf("DumpLogSegments listed %d records, want %d:\n%s", len(got), len(offsets), out)
	}
	for i, g := range got {
		if g[1] != fmt.Sprint(offsets[i]) {
			t.Fatalf("record %d at offset %s, want %d", i, g[1], offsets[i])
		}
	}
	for _, want := range []string{"compresscodec: gzip", "compresscodec: snappy", "compresscodec: lz4", "compresscodec: zstd",
		"endTxnMarker: COMMIT coordinatorEpoch: 3", "endTxnMarker: ABORT coordinatorEpoch: 3", "isTransactional: true"} {
		if !strings.Contains(out, want) {
			t.Errorf("DumpLogSegments output lacks %q", want)
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Log(out)
	}
}

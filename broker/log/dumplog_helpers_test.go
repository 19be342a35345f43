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

// dumpLogCodecs lists every codec a produced batch may carry, in the order
// the DumpLogSegments tests write them.
var dumpLogCodecs = []record.Codec{record.CodecNone, record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd}

// dumpLogTool is Apache Kafka's DumpLogSegments with the context it runs
// under.
type dumpLogTool struct {
	ctx  context.Context
	dist *apachekafka.Dist
}

// needDumpLog returns the cached Apache Kafka distribution whose
// DumpLogSegments the test runs. It skips the test under -short and when
// Apache Kafka (java and the jars) is unavailable.
func needDumpLog(t *testing.T) dumpLogTool {
	t.Helper()
	if testing.Short() {
		t.Skip("runs Apache Kafka's DumpLogSegments (needs java and the cached jars)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	dist, err := apachekafka.Ensure(ctx)
	if err != nil {
		t.Skipf("Apache Kafka unavailable: %v", err)
	}
	return dumpLogTool{ctx: ctx, dist: dist}
}

// appendSpec builds s and appends it to l at leaderEpoch, failing the test
// on any error.
func appendSpec(t *testing.T, l *log.Log, s record.Spec, leaderEpoch int32) log.AppendInfo {
	t.Helper()
	b, err := record.Build(s)
	if err != nil {
		t.Fatal(err)
	}
	info, err := l.Append(b, leaderEpoch)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// dumpLogRecordRE matches one record line of DumpLogSegments'
// --print-data-log output and captures its offset.
var dumpLogRecordRE = regexp.MustCompile(`(?m)^\| offset: (\d+)`)

// check runs DumpLogSegments over the first segment (base offset 0) of
// partition directory partDir: its .log, .index and .timeindex files. The
// tool must report no error or mismatch, list exactly the records at
// offsets, in order, and print every string in wants. The output is logged
// when the test fails or runs verbose.
func (d dumpLogTool) check(t *testing.T, partDir string, offsets []int64, wants ...string) {
	t.Helper()
	seg := filepath.Join(partDir, "00000000000000000000")
	out, err := d.dist.DumpLog(d.ctx, seg+".log", seg+".index", seg+".timeindex")
	if err != nil {
		t.Fatalf("DumpLog: %v\n%s", err, out)
	}
	// The phrases DumpLogSegments prints for a corrupt batch or for an
	// index entry that disagrees with the log.
	for _, bad := range []string{"Exception", "isvalid: false", "Mismatches", "mismatch", "Found out of order", "is not equal to"} {
		if strings.Contains(out, bad) {
			t.Fatalf("DumpLogSegments reported %q:\n%s", bad, out)
		}
	}
	got := dumpLogRecordRE.FindAllStringSubmatch(out, -1)
	if len(got) != len(offsets) {
		t.Fatalf("DumpLogSegments listed %d records, Cascade holds %d:\n%s", len(got), len(offsets), out)
	}
	for i, g := range got {
		if g[1] != fmt.Sprint(offsets[i]) {
			t.Fatalf("record %d at offset %s, want %d", i, g[1], offsets[i])
		}
	}
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("DumpLogSegments output lacks %q", want)
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Log(out)
	}
}

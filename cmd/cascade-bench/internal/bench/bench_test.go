package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/cascade-kafka/cascade/matrix/apachekafka"
)

// kfakeHelperEnv makes the test binary act as the kfake helper process, as
// "cascade-bench kfake-serve" does.
const kfakeHelperEnv = "CASCADE_BENCH_KFAKE_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(kfakeHelperEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := ServeKfake(ctx, os.Stdout)
		stop()
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestPayloadDeterministicDistinctIncompressible(t *testing.T) {
	const size = 1024
	a, b, c := make([]byte, size), make([]byte, size), make([]byte, size)
	Payload(a, 7, 42)
	Payload(b, 7, 42)
	Payload(c, 7, 43)
	if !bytes.Equal(a, b) {
		t.Fatal("same seed and id gave different payloads")
	}
	if bytes.Equal(a[headerBytes:], c[headerBytes:]) {
		t.Fatal("different ids gave the same payload body")
	}
	if id, ok := ParsePayload(a, size); !ok || id != 42 {
		t.Fatalf("ParsePayload = %d, %v; want 42, true", id, ok)
	}
	// Many records back to back, as a batch holds them: no codec Kafka
	// uses may shrink them by more than a few percent.
	var batch []byte
	for id := uint64(0); id < 200; id++ {
		v := make([]byte, size)
		Payload(v, 1, id)
		batch = append(batch, v...)
	}
	enc, _ := zstd.NewWriter(nil)
	if z := len(enc.EncodeAll(batch, nil)); z < len(batch)*97/100 {
		t.Errorf("zstd shrank %d payload bytes to %d", len(batch), z)
	}
	lz := make([]byte, lz4.CompressBlockBound(len(batch)))
	n, err := lz4.CompressBlock(batch, lz, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 && n < len(batch)*97/100 { // n == 0 means incompressible.
		t.Errorf("lz4 shrank %d payload bytes to %d", len(batch), n)
	}
}

func TestParsePayloadRejects(t *testing.T) {
	const size = 100
	good := make([]byte, size)
	Payload(good, 1, 5)
	flip := bytes.Clone(good)
	flip[50] ^= 1
	idChanged := bytes.Clone(good)
	idChanged[7] ^= 1
	for name, v := range map[string][]byte{
		"short":     good[:size-1],
		"long":      append(bytes.Clone(good), 0),
		"bit flip":  flip,
		"too small": good[:4],
	} {
		if _, ok := ParsePayload(v, size); ok {
			t.Errorf("%s: accepted", name)
		}
	}
	// The checksum covers the body only; a changed id is caught by the
	// verifier as a duplicate or an unexpected id, which the next test does.
	if id, ok := ParsePayload(idChanged, size); !ok || id != 4 {
		t.Errorf("id change: got %d, %v", id, ok)
	}
}

func TestVerifier(t *testing.T) {
	const size = 64
	val := func(id uint64) []byte {
		v := make([]byte, size)
		Payload(v, 1, id)
		return v
	}
	tests := []struct {
		name string
		ids  []uint64
		want Verification
	}{
		{"all once", []uint64{0, 1, 2, 3}, Verification{Expected: 4, Consumed: 4}},
		{"one lost", []uint64{0, 1, 3}, Verification{Expected: 4, Consumed: 3, Missing: 1, FirstMissing: []uint64{2}}},
		{"duplicate", []uint64{0, 1, 1, 2, 3}, Verification{Expected: 4, Consumed: 5, Duplicates: 1}},
		{"unexpected", []uint64{0, 1, 2, 3, 9}, Verification{Expected: 4, Consumed: 5, Unexpected: 1}},
	}
	for _, tc := range tests {
		v := newVerifier(4, size)
		for _, id := range tc.ids {
			v.see(val(id))
		}
		got := v.result()
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(tc.want)
		if !bytes.Equal(gj, wj) {
			t.Errorf("%s: got %s, want %s", tc.name, gj, wj)
		}
		if got.OK() != (tc.name == "all once") {
			t.Errorf("%s: OK() = %v", tc.name, got.OK())
		}
	}
	v := newVerifier(1, size)
	bad := val(0)
	bad[size-1] ^= 0xff
	v.see(bad)
	if r := v.result(); r.Corrupt != 1 || r.Missing != 1 || r.OK() {
		t.Errorf("corrupt value: %+v", r)
	}
}

func TestSummarize(t *testing.T) {
	l := newLatencies(1000)
	for i := 1000; i >= 1; i-- { // Out of order on purpose.
		l.record(time.Duration(i) * time.Millisecond)
	}
	got := summarize(l)
	want := Latency{Count: 1000, Mean: 500.5, P50: 500, P95: 950, P99: 990, P999: 999, Max: 1000}
	if got != want {
		t.Errorf("summarize = %+v, want %+v", got, want)
	}
	if z := summarize(newLatencies(3)); z != (Latency{}) {
		t.Errorf("empty = %+v", z)
	}
}

func TestMedianAndRatios(t *testing.T) {
	cpu := func(v float64) *float64 { return &v }
	rss := func(v int64) *int64 { return &v }
	runs := []RunResult{
		{Target: "cascade", ProduceRecordsPerS: 300, BrokerCPUSeconds: cpu(1), BrokerRSSPeakBytes: rss(10), Verified: true},
		{Target: "cascade", ProduceRecordsPerS: 100, BrokerCPUSeconds: cpu(3), BrokerRSSPeakBytes: rss(30), Verified: true},
		{Target: "cascade", ProduceRecordsPerS: 200, BrokerCPUSeconds: cpu(2), BrokerRSSPeakBytes: rss(20), Verified: true},
		{Target: "cascade", ProduceRecordsPerS: 9999, Error: "failed runs are left out"},
		{Target: "other", ProduceRecordsPerS: 100, BrokerCPUSeconds: cpu(4), BrokerRSSPeakBytes: rss(80), Verified: true},
	}
	c, _ := median("cascade", runs)
	o, _ := median("other", runs)
	if c.Runs != 3 || c.ProduceRecordsPerS != 200 || *c.BrokerCPUSeconds != 2 || !c.AllVerified {
		t.Fatalf("median = %+v", c)
	}
	rs, _ := ratios([]Median{c, o}, nil)
	if len(rs) != 1 || rs[0].ProduceRecordsPerS != 2 || *rs[0].BrokerCPUSeconds != 0.5 || *rs[0].BrokerRSSPeakBytes != 0.25 {
		t.Fatalf("ratios = %+v", rs)
	}
}

// buildCascade builds ./cmd/cascade for the end-to-end tests.
func buildCascade(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cascade")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/cascade-kafka/cascade/cmd/cascade").CombinedOutput()
	if err != nil {
		t.Fatalf("building cascade: %v\n%s", err, out)
	}
	return bin
}

func tinyWorkload() Workload {
	w := DefaultWorkload()
	w.Records, w.PayloadBytes, w.Partitions = 2000, 256, 3
	w.Producers, w.Consumers = 2, 2
	w.Compression, w.LingerMs, w.BatchBytes = "lz4", 2, 16<<10
	w.Timeout = 20 * time.Second
	return w
}

// TestCompareCascade runs a tiny workload through the whole tool against a
// Cascade process and checks verification, the JSON shape, and that a
// planted loss is caught.
func TestCompareCascade(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	cascade := Cascade{Bin: buildCascade(t), WorkDir: dir, FlushMs: 500}
	kfake := Kfake{Exe: os.Args[0], Env: []string{kfakeHelperEnv + "=1"}, WorkDir: dir}
	w := tinyWorkload()
	w.WarmupRecords = 300
	rep, err := Compare(ctx, []Target{cascade, kfake}, w, CompareOptions{
		Rounds: 1, LimitsDir: dir, DiskProbeBytes: 4 << 20,
		Options: Options{PlantLoss: -1},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Runs {
		if !r.Verified {
			t.Errorf("%s not verified: %+v", r.Target, r.Verification)
		}
		if r.AckLatencyMs.Count != w.Records {
			t.Errorf("%s: %d latency samples, want %d", r.Target, r.AckLatencyMs.Count, w.Records)
		}
		if r.BrokerCPUSeconds == nil || r.BrokerRSSPeakBytes == nil || *r.BrokerRSSPeakBytes <= 0 {
			t.Errorf("%s: no broker CPU/RSS", r.Target)
		}
	}
	if d := rep.Runs[0].DiskBytes; rep.Runs[0].Target != "cascade" || d == nil || *d < w.Records*int64(w.PayloadBytes) {
		t.Errorf("cascade disk bytes = %v, want at least the payload", d)
	}

	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Workload map[string]any   `json:"workload"`
		Runs     []map[string]any `json:"runs"`
		Limits   map[string]any   `json:"limits"`
		Ratios   []map[string]any `json:"ratios"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Workload["records"] != float64(2000) || doc.Workload["compression"] != "lz4" {
		t.Errorf("workload = %v", doc.Workload)
	}
	if len(doc.Runs) != 2 || len(doc.Ratios) != 1 {
		t.Fatalf("runs %d, ratios %d; want 2, 1", len(doc.Runs), len(doc.Ratios))
	}
	for _, k := range []string{"target", "round", "produce_records_per_s", "consume_records_per_s", "ack_latency_ms",
		"broker_cpu_s", "broker_rss_peak_bytes", "verified", "broker_cpu_produce_s_per_gib", "client_cpu_produce_s_per_m_records"} {
		if _, ok := doc.Runs[0][k]; !ok {
			t.Errorf("run lacks %q: %s", k, b)
		}
	}
	lat, _ := doc.Runs[0]["ack_latency_ms"].(map[string]any)
	for _, k := range []string{"p50", "p95", "p99", "p99_9", "max"} {
		if v, ok := lat[k].(float64); !ok || v <= 0 {
			t.Errorf("ack_latency_ms.%s = %v", k, lat[k])
		}
	}
	for _, k := range []string{"disk_write_bytes_per_s", "disk_write_sync_every_bytes_per_s", "loopback_bytes_per_s"} {
		if v, ok := doc.Limits[k].(float64); !ok || v <= 0 {
			t.Errorf("limits.%s = %v", k, doc.Limits[k])
		}
	}

	if c := rep.Runs[0].BrokerCPUProduceSeconds; c == nil {
		t.Error("no per-phase CPU")
	}

	// A planted loss: record 1234 is counted as sent but never sent.
	w.WarmupRecords = 0
	inst, err := cascade.Start(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Stop()
	res, err := Run(ctx, "cascade", inst, w, 2, Options{PlantLoss: 1234})
	if err != nil {
		t.Fatal(err)
	}
	v := res.Verification
	if res.Verified || v.Missing != 1 || len(v.FirstMissing) != 1 || v.FirstMissing[0] != 1234 || v.Consumed != w.Records-1 {
		t.Errorf("planted loss not reported: verified=%v %+v", res.Verified, v)
	}

	// The same broker through librdkafka, reached as an external cluster
	// by address only, so its disk use comes from DescribeLogDirs.
	w.Client = ClientConfluent
	res, err = Run(ctx, "external", &Instance{Addr: inst.Addr}, w, 3, Options{PlantLoss: -1})
	if err != nil || !res.Verified {
		t.Errorf("confluent-kafka-go run: err %v, %+v", err, res.Verification)
	}
	if res.DiskSource != "DescribeLogDirs" || res.DiskBytes == nil || *res.DiskBytes < w.Records*int64(w.PayloadBytes) {
		t.Errorf("external disk bytes = %v from %q", res.DiskBytes, res.DiskSource)
	}
	if res.BrokerCPUSeconds != nil {
		t.Error("broker CPU reported for a broker the tool did not start")
	}
}

// TestCompareCascadeCluster runs the tiny workload against a three-node
// Cascade cluster with an RF=3 topic (min.insync.replicas 2): bootstrap
// from every node, CPU and memory of the three processes, and the disk of
// three copies.
func TestCompareCascadeCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node Cascade cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := tinyWorkload()
	w.Nodes, w.ReplicationFactor, w.MinInsyncReplicas = 3, 3, 2
	c := Cascade{Bin: buildCascade(t), WorkDir: t.TempDir(), Nodes: w.Nodes}
	inst, err := c.Start(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Stop()
	if len(inst.Seeds()) != 3 || len(inst.Pids) != 3 || len(inst.DataDirs) != 3 {
		t.Fatalf("cluster instance: seeds %v, pids %v, data dirs %v", inst.Seeds(), inst.Pids, inst.DataDirs)
	}
	res, err := Run(ctx, "cascade", inst, w, 1, Options{PlantLoss: -1})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Verified {
		t.Errorf("not verified: %+v", res.Verification)
	}
	if res.BrokerCPUSeconds == nil || *res.BrokerCPUSeconds <= 0 {
		t.Errorf("broker CPU %v", res.BrokerCPUSeconds)
	}
	if d := res.DiskBytes; d == nil || *d < 3*w.Records*int64(w.PayloadBytes) {
		t.Errorf("disk bytes %v from %q, want three copies of the payload", d, res.DiskSource)
	}
	// The raw client finds each partition's leader among the three nodes.
	w.Client = ClientRaw
	res, err = Run(ctx, "cascade", inst, w, 2, Options{PlantLoss: -1})
	if err != nil || !res.Verified {
		t.Errorf("raw client on the cluster: err %v, %+v", err, res.Verification)
	}
}

// TestCompareApacheKafka runs the tiny workload against Apache Kafka from
// the matrix's jars; its start-up alone takes seconds, so -short skips it.
func TestCompareApacheKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Apache Kafka")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dist, err := apachekafka.Ensure(ctx)
	if err != nil {
		t.Skipf("Apache Kafka unavailable: %v", err)
	}
	dir := t.TempDir()
	rep, err := Compare(ctx, []Target{ApacheKafka{Dist: dist, WorkDir: dir, FlushMs: 500}}, tinyWorkload(),
		CompareOptions{Rounds: 1, Options: Options{PlantLoss: -1}})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Runs[0]
	if !r.Verified || r.BrokerRSSPeakBytes == nil || r.DiskBytes == nil {
		t.Errorf("apache-kafka run: %+v", r)
	}
}

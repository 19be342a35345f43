package matrix

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

func TestMurmur2KafkaVectors(t *testing.T) {
	// Expected values from Kafka's UtilsTest.testMurmur2.
	for _, tc := range []struct {
		in   string
		want int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	} {
		if got := Murmur2([]byte(tc.in)); got != tc.want {
			t.Errorf("Murmur2(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestJavaPartitionMatchesFranzGo(t *testing.T) {
	// franz-go's key partitioner is documented as Kafka's; agreeing with
	// it on many keys and partition counts guards JavaPartition.
	p := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for i := 0; i < 2000; i++ {
		key := []byte(fmt.Sprintf("key-%d-%x", i, i*7919))
		for _, n := range []int{1, 3, 12, 1000, math.MaxInt32} {
			want := p.Partition(&kgo.Record{Key: key}, n)
			if got := JavaPartition(key, int32(n)); int(got) != want {
				t.Fatalf("JavaPartition(%q, %d) = %d, franz-go says %d", key, n, got, want)
			}
		}
	}
}

func TestValueLenForBatch(t *testing.T) {
	for _, size := range []int{100, 200, 1000, 65536, 1048588} {
		v := valueLenForBatch(size)
		if v < 0 {
			t.Fatalf("no value length fills a %d-byte batch", size)
		}
		body := 5 + varintLen(int64(v)) + v
		if got := 61 + varintLen(int64(body)) + body; got != size {
			t.Errorf("size %d: value %d gives batch %d", size, v, got)
		}
	}
	for _, tc := range []struct {
		v    int64
		want int
	}{{0, 1}, {-1, 1}, {63, 1}, {64, 2}, {-65, 2}, {8191, 2}, {8192, 3}} {
		if got := varintLen(tc.v); got != tc.want {
			t.Errorf("varintLen(%d) = %d, want %d", tc.v, got, tc.want)
		}
	}
}

func TestCompareRecord(t *testing.T) {
	base := driver.Record{Key: []byte("k"), Value: []byte{}, TimestampMs: 5,
		Headers: []driver.Header{{Key: "h", Value: nil}}}
	if err := compareRecord(base, base); err != nil {
		t.Fatalf("identical records differ: %v", err)
	}
	for name, mut := range map[string]func(*driver.Record){
		"empty value read as null": func(r *driver.Record) { r.Value = nil },
		"key changed":              func(r *driver.Record) { r.Key = []byte("x") },
		"timestamp":                func(r *driver.Record) { r.TimestampMs = 6 },
		"null header read empty":   func(r *driver.Record) { r.Headers = []driver.Header{{Key: "h", Value: []byte{}}} },
		"header lost":              func(r *driver.Record) { r.Headers = nil },
	} {
		got := base
		mut(&got)
		if err := compareRecord(base, got); err == nil {
			t.Errorf("%s: not detected", name)
		}
	}
}

// TestRecordShapesSplit checks that scenario 2's shapes carry no null
// header value (so a client that cannot send one still runs them) while
// the null-header-value record keeps a null next to an empty value.
func TestRecordShapesSplit(t *testing.T) {
	var emptyHeader bool
	for i, r := range shapes("t") {
		for _, h := range r.Headers {
			if h.Value == nil {
				t.Errorf("shape %d has a null value in header %q", i, h.Key)
			}
			emptyHeader = emptyHeader || (h.Value != nil && len(h.Value) == 0)
		}
	}
	if !emptyHeader {
		t.Error("the shapes lost their empty-valued header")
	}
	var null, empty bool
	for _, h := range nullHeaderRecord("t", baseTimestamp).Headers {
		null = null || h.Value == nil
		empty = empty || (h.Value != nil && len(h.Value) == 0)
	}
	if !null || !empty {
		t.Errorf("null-header-value record: null header %v, empty header %v; want both", null, empty)
	}
}

func TestSelectedTargets(t *testing.T) {
	t.Setenv("MATRIX_BOOTSTRAP", "")
	t.Setenv("MATRIX_TARGETS", "")
	if got := SelectedTargets(); !reflect.DeepEqual(got, []string{"apache-kafka", "cascade"}) {
		t.Errorf("default targets %v", got)
	}
	t.Setenv("MATRIX_TARGETS", " cascade, external ,apache-kafka,cascade")
	if got := SelectedTargets(); !reflect.DeepEqual(got, []string{"apache-kafka", "cascade", "external"}) {
		t.Errorf("targets %v: the oracle must come first, duplicates dropped", got)
	}
	t.Setenv("MATRIX_TARGETS", "cascade-cluster,cascade,apache-kafka-cluster,apache-kafka")
	if got := SelectedTargets(); !reflect.DeepEqual(got, []string{"apache-kafka", "apache-kafka-cluster", "cascade-cluster", "cascade"}) {
		t.Errorf("targets %v: both oracles must come first", got)
	}
	for target, want := range map[string]string{"cascade": "apache-kafka", "external": "apache-kafka", "cascade-cluster": "apache-kafka-cluster", "apache-kafka": "", "apache-kafka-cluster": ""} {
		if got := OracleOf(target); got != want {
			t.Errorf("OracleOf(%s) = %q, want %q", target, got, want)
		}
	}
	t.Setenv("MATRIX_CLIENTS", "sarama")
	if got := SelectedClients([]string{"a", "b"}); !reflect.DeepEqual(got, []string{"sarama"}) {
		t.Errorf("clients %v", got)
	}
}

func TestStartTargetErrors(t *testing.T) {
	t.Setenv("MATRIX_BOOTSTRAP", "")
	if _, err := StartTarget(context.Background(), t, "external"); !errors.Is(err, ErrTargetUnavailable) {
		t.Errorf("external without MATRIX_BOOTSTRAP: %v", err)
	}
	if _, err := StartTarget(context.Background(), t, "nope"); !errors.Is(err, ErrTargetUnavailable) {
		t.Errorf("unknown target: %v", err)
	}
	saved := CascadeStarter
	CascadeStarter = nil
	defer func() { CascadeStarter = saved }()
	if _, err := StartTarget(context.Background(), t, "cascade"); !errors.Is(err, ErrTargetUnavailable) {
		t.Errorf("cascade without a starter: %v", err)
	}
}

func sampleReports() []TargetReport {
	return []TargetReport{
		{Target: TargetApacheKafka, BrokerVersion: "Apache Kafka 4.4.0", Cells: []Cell{
			{Scenario: "1.admin", Client: "a", Status: StatusPass},
			{Scenario: "3.cross", Client: "a", Peer: "b", Status: StatusPass},
			{Scenario: "5.x", Client: "b", Status: StatusUnsupported, Detail: "no <x>"},
			{Scenario: "7.y", Client: "b", Status: StatusClientFault, Detail: "commits unpolled records"},
			{Scenario: "7.z", Client: "b", Status: StatusClientFault, Detail: "commits unpolled records"},
		}},
		{Target: TargetCascade, BrokerVersion: "Cascade", Cells: []Cell{
			{Scenario: "1.admin", Client: "a", Status: StatusPass},
			{Scenario: "3.cross", Client: "a", Peer: "b", Status: StatusFail, Detail: "offset 3: value <bad>"},
			{Scenario: "5.x", Client: "b", Status: StatusUnsupported, Detail: "no <x>"},
			// A client defect that showed on one target only is the
			// client's timing, not a difference; a failure is one.
			{Scenario: "7.y", Client: "b", Status: StatusPass},
			{Scenario: "7.z", Client: "b", Status: StatusFail, Detail: "timeout"},
		}},
	}
}

func TestDifferencesAndReports(t *testing.T) {
	reps := sampleReports()
	diffs := Differences(reps)
	if len(diffs) != 2 || diffs[0].Scenario != "3.cross" || diffs[0].Target != TargetCascade ||
		diffs[0].OracleStatus != StatusPass || diffs[0].TargetStatus != StatusFail ||
		diffs[1].Scenario != "7.z" || diffs[1].OracleStatus != StatusClientFault {
		t.Fatalf("differences %+v", diffs)
	}
	if d := Differences(reps[1:]); d != nil {
		t.Errorf("differences without an oracle: %+v", d)
	}
	dir := t.TempDir()
	if err := WriteReports(dir, reps); err != nil {
		t.Fatal(err)
	}
	var back TargetReport
	b, err := os.ReadFile(filepath.Join(dir, "cascade.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &back); err != nil || back.Target != "cascade" || len(back.Cells) != 5 {
		t.Fatalf("cascade.json round trip: %v %+v", err, back)
	}
	md, err := os.ReadFile(filepath.Join(dir, "cascade.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Differences from Apache Kafka (2)", "| 3.cross → read by b |", "❌ fail", "offset 3: value <bad>"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("cascade.md lacks %q:\n%s", want, md)
		}
	}
	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Differences from Apache Kafka (2)", `class="cell fail diff"`, `class="cell client-fault"`, "value &lt;bad&gt;", "<th>apache-kafka</th><th>cascade</th>"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
	if strings.Contains(string(page), "<bad>") {
		t.Error("index.html does not escape details")
	}
}

// fakeDriver answers data-path commands with canned results.
type fakeDriver struct {
	driver.Driver
	produce driver.ProduceResult
	err     error
}

func (f *fakeDriver) Info() driver.Info { return driver.Info{Library: "fake"} }
func (f *fakeDriver) Close() error      { return nil }

func (f *fakeDriver) Produce(context.Context, driver.Produce) (driver.ProduceResult, error) {
	return f.produce, f.err
}

func (f *fakeDriver) Consume(context.Context, driver.Consume) (driver.ConsumeResult, error) {
	next := int64(3) // A marker at offset 2 follows the records.
	return driver.ConsumeResult{HighWatermark: 2, Records: []driver.Record{{Offset: 0, Value: []byte("v0")}, {Offset: 1, Value: nil}}, Next: &next}, nil
}

func (f *fakeDriver) GroupConsume(context.Context, driver.GroupConsume) (driver.GroupConsumeResult, error) {
	recs := []driver.Record{{Partition: 1, Offset: 3, Value: []byte("g3")}, {Partition: 0, Offset: 0, Value: []byte("g0")}, {Partition: 1, Offset: 4, Value: []byte("g4")}}
	return driver.GroupConsumeResult{Records: recs, Committed: driver.NextOffsets(recs)}, nil
}

func (f *fakeDriver) FetchCommitted(context.Context, driver.FetchCommitted) (int64, error) {
	return 5, nil
}

func (f *fakeDriver) ListOffsets(context.Context, driver.ListOffsets) (driver.ListOffsetsResult, error) {
	return driver.ListOffsetsResult{Offset: 2}, nil
}

func TestHistoryFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	h, err := NewHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeDriver{produce: driver.ProduceResult{Deliveries: []driver.Delivery{
		{Partition: 0, Offset: 0},
		{Partition: 0, Offset: -1, Error: &driver.Error{Code: "MESSAGE_TOO_LARGE"}},
		{Partition: 0, Offset: -1},
	}}}
	d := Record(f, h, "c-1")
	ctx := context.Background()
	big := []byte(strings.Repeat("x", 300))
	if _, err := d.Produce(ctx, driver.Produce{Topic: "t", Acks: -1, Records: []driver.Record{
		{Value: []byte("v0")}, {Value: big}, {Value: []byte("v2")}, {Value: nil}}}); err != nil {
		t.Fatal(err)
	}
	f.err = context.DeadlineExceeded
	if _, err := d.Produce(ctx, driver.Produce{Topic: "t", Records: []driver.Record{{Value: []byte("v3")}}}); err == nil {
		t.Fatal("error not passed through")
	}
	if _, err := d.Consume(ctx, driver.Consume{Topic: "t", From: 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ListOffsets(ctx, driver.ListOffsets{Topic: "t", Kind: "latest"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.GroupConsume(ctx, driver.GroupConsume{Group: "g", Topic: "t", Commit: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.FetchCommitted(ctx, driver.FetchCommitted{Group: "g", Topic: "t", Partition: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Produce(WithoutHistory(ctx), driver.Produce{Topic: "t", Records: []driver.Record{{Value: []byte("hidden")}}}); err == nil {
		t.Fatal("error not passed through")
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var ops []map[string]any
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		ops = append(ops, m)
	}
	want := []struct{ op, outcome, value string }{
		{"produce", "ok", "v0"},
		{"produce", "fail", "sha256:"},
		{"produce", "unknown", "v2"}, // acks=0-like: no offset reported.
		{"produce", "unknown", "v3"}, // Timed out: may have been applied.
		{"fetch", "ok", ""},
		{"list_offsets", "ok", ""},
		{"fetch", "ok", ""}, // Group consume: partition 1, from 3.
		{"fetch", "ok", ""}, // Partition 0, from 0.
		{"commit", "ok", ""},
		{"commit", "ok", ""},
		{"fetch_committed", "ok", ""},
	}
	if len(ops) != len(want) {
		t.Fatalf("%d history lines, want %d: %v", len(ops), len(want), ops)
	}
	for i, w := range want {
		o := ops[i]
		if o["op"] != w.op || o["outcome"] != w.outcome || !strings.HasPrefix(fmt.Sprint(o["value"]), w.value) {
			t.Errorf("line %d = %v, want op %s outcome %s value %s...", i, o, w.op, w.outcome, w.value)
		}
		if o["client"] != "c-1" || o["call_ns"].(float64) > o["return_ns"].(float64) {
			t.Errorf("line %d: client or times wrong: %v", i, o)
		}
	}
	if ops[0]["offset"] != float64(0) {
		t.Errorf("acknowledged produce without offset: %v", ops[0])
	}
	recs := ops[4]["records"].([]any)
	if len(recs) != 2 || recs[1].(map[string]any)["value"] != "null:t-0@1" || ops[4]["high_watermark"] != float64(2) || ops[4]["isolation"] != "read_uncommitted" || ops[4]["next"] != float64(3) {
		t.Errorf("fetch line %v: want two records, the null one as a stand-in, high watermark 2, next 3", ops[4])
	}
	if ops[5]["kind"] != "latest" || ops[5]["offset"] != float64(2) {
		t.Errorf("list_offsets line %v", ops[5])
	}
	if ops[6]["partition"] != float64(1) || ops[6]["from"] != float64(3) || len(ops[6]["records"].([]any)) != 2 {
		t.Errorf("group fetch line %v: want partition 1 from 3 with two records", ops[6])
	}
	if ops[8]["group"] != "g" || ops[8]["partition"] != float64(0) || ops[8]["offset"] != float64(1) ||
		ops[9]["partition"] != float64(1) || ops[9]["offset"] != float64(5) {
		t.Errorf("commit lines %v %v: want next offsets 1 and 5", ops[8], ops[9])
	}
	if ops[10]["offset"] != float64(5) || ops[10]["group"] != "g" {
		t.Errorf("fetch_committed line %v", ops[10])
	}
}

func TestRunCellStatuses(t *testing.T) {
	name := "fake-run-client"
	driver.Register(name, func(context.Context, string) (driver.Driver, error) { return &fakeDriver{}, nil })
	t.Cleanup(func() { driver.Unregister(name) })
	e := NewEnv("apache-kafka", "x")
	scen := []Scenario{
		{ID: "a", Run: func(context.Context, *Env, driver.Driver) (string, error) { return "fine", nil }},
		{ID: "b", Run: func(context.Context, *Env, driver.Driver) (string, error) { return "", errors.New("boom") }},
		{ID: "c", Run: func(context.Context, *Env, driver.Driver) (string, error) { return "", driver.Unsupported("lacks it") }},
		{ID: "d", Run: func(context.Context, *Env, driver.Driver) (string, error) { panic("bad driver") }},
		{ID: "e", Pair: func(_ context.Context, _ *Env, p, c driver.Driver) (string, error) { return "pair", nil }},
		{ID: "f", Run: func(context.Context, *Env, driver.Driver) (string, error) {
			return "", fmt.Errorf("%w: commits what it never returned", ErrClientFault)
		}},
	}
	var progress strings.Builder
	cells, _ := Run(context.Background(), e, []string{name, "missing-client"}, scen, nil, &progress)
	status := map[string]string{}
	for _, c := range cells {
		status[c.Key()] = c.Status
	}
	want := map[string]string{
		"a|" + name + "|": StatusPass, "b|" + name + "|": StatusFail, "c|" + name + "|": StatusUnsupported,
		"d|" + name + "|": StatusFail, "e|" + name + "|" + name: StatusPass, "f|" + name + "|": StatusClientFault,
		"a|missing-client|": StatusFail, "e|" + name + "|missing-client": StatusFail,
	}
	for k, w := range want {
		if status[k] != w {
			t.Errorf("cell %s = %q, want %q", k, status[k], w)
		}
	}
	if !strings.Contains(progress.String(), "[apache-kafka 1/") {
		t.Errorf("no progress lines: %q", progress.String())
	}
}

func TestHistoryTransactions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	h, err := NewHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeDriver{produce: driver.ProduceResult{Deliveries: []driver.Delivery{{Partition: 0, Offset: 0}}}}
	d := Record(f, h, "c")
	for _, abort := range []bool{false, true} {
		if _, err := d.Produce(context.Background(), driver.Produce{Topic: "t", TransactionalID: "tx", TxnAbort: abort,
			Records: []driver.Record{{Value: []byte(fmt.Sprint("v", abort))}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	want := []string{`"op":"produce"`, `"op":"end_txn"`, `"op":"produce"`, `"op":"end_txn"`}
	if len(lines) != len(want) {
		t.Fatalf("%d lines:\n%s", len(lines), b)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d = %s, want %s", i, lines[i], w)
		}
	}
	if !strings.Contains(lines[0], `"txn":"c/tx#1"`) || !strings.Contains(lines[1], `"txn":"c/tx#1"`) || !strings.Contains(lines[1], `"commit":true`) {
		t.Errorf("first transaction lines %s / %s", lines[0], lines[1])
	}
	if !strings.Contains(lines[3], `"txn":"c/tx#2"`) || !strings.Contains(lines[3], `"commit":false`) {
		t.Errorf("aborted transaction line %s", lines[3])
	}
}

// rereadDriver returns a group read that goes back in a partition, as a
// member does when it gets a partition again after a rebalance.
type rereadDriver struct{ fakeDriver }

func (rereadDriver) GroupConsume(context.Context, driver.GroupConsume) (driver.GroupConsumeResult, error) {
	return driver.GroupConsumeResult{Records: []driver.Record{
		{Partition: 0, Offset: 0, Value: []byte("a")}, {Partition: 0, Offset: 1, Value: []byte("b")},
		{Partition: 0, Offset: 0, Value: []byte("a")}, {Partition: 0, Offset: 1, Value: []byte("b")}}}, nil
}

func TestHistoryGroupRereadStartsNewFetch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	h, err := NewHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	d := Record(&rereadDriver{}, h, "c")
	if _, err := d.GroupConsume(context.Background(), driver.GroupConsume{Group: "g", Topic: "t"}); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `"from":0`) {
		t.Fatalf("want two fetch lines, the second from 0 again:\n%s", b)
	}
}

type fakeInstance struct {
	addr    string
	stopped *int
}

func (f fakeInstance) Bootstrap() string { return f.addr }
func (f fakeInstance) Version() string   { return "fake" }
func (f fakeInstance) Stop() error       { *f.stopped++; return nil }

func TestStartTargetWithOverrides(t *testing.T) {
	saved := CascadeStarter
	defer func() { CascadeStarter = saved }()
	var got map[string]string
	stops := 0
	CascadeStarter = func(_ context.Context, _ testing.TB, ov map[string]string) (Instance, error) {
		got = ov
		return fakeInstance{"x:1", &stops}, nil
	}
	if _, err := StartTargetWith(context.Background(), t, TargetCascade, VariantOverrides); err != nil {
		t.Fatal(err)
	}
	for k, v := range BrokerOverrides {
		if w, ok := VariantOverrides[k]; ok {
			v = w
		}
		if got[k] != v {
			t.Errorf("override %s = %q, want %q", k, got[k], v)
		}
	}
	if got["auto.create.topics.enable"] != "true" || got["log.retention.check.interval.ms"] != BrokerOverrides["log.retention.check.interval.ms"] {
		t.Errorf("variant overrides missing: %v", got)
	}
	if BrokerOverrides["auto.create.topics.enable"] != "false" {
		t.Errorf("StartTargetWith changed BrokerOverrides: %v", BrokerOverrides)
	}
	if _, err := StartTarget(context.Background(), t, TargetCascade); err != nil || got["auto.create.topics.enable"] != "false" {
		t.Errorf("plain start: overrides %v, %v", got, err)
	}
	t.Setenv("MATRIX_BOOTSTRAP", "h:1")
	if _, err := StartTargetWith(context.Background(), t, TargetExternal, VariantOverrides); !errors.Is(err, ErrTargetUnavailable) {
		t.Errorf("external variant: %v, want ErrTargetUnavailable", err)
	}
}

func TestEnvVariant(t *testing.T) {
	e := NewEnv("t", "b:1")
	if _, err := e.Variant(context.Background()); !errors.Is(err, ErrTargetUnavailable) {
		t.Errorf("variant without SetVariant: %v", err)
	}
	e = NewEnv("t", "b:1")
	starts, stops := 0, 0
	e.SetVariant(func(context.Context) (Instance, error) {
		starts++
		return fakeInstance{"v:2", &stops}, nil
	})
	for i := 0; i < 2; i++ {
		if bs, err := e.Variant(context.Background()); err != nil || bs != "v:2" {
			t.Fatalf("variant: %q %v", bs, err)
		}
	}
	if starts != 1 {
		t.Errorf("variant started %d times, want once", starts)
	}
	if err := e.StopVariant(); err != nil || stops != 1 {
		t.Errorf("stop: %v, %d stops", err, stops)
	}
	if err := e.StopVariant(); err != nil || stops != 1 {
		t.Errorf("second stop: %v, %d stops", err, stops)
	}
	e = NewEnv("t", "b:1")
	e.SetVariant(func(context.Context) (Instance, error) { starts++; return nil, errors.New("boom") })
	for i := 0; i < 2; i++ {
		if _, err := e.Variant(context.Background()); err == nil || !strings.Contains(err.Error(), "boom") {
			t.Errorf("failed variant: %v", err)
		}
	}
	if starts != 2 {
		t.Errorf("a failed variant was retried: %d starts", starts)
	}
}

func TestMixedPeers(t *testing.T) {
	all := []string{"confluent-kafka-go", "franz-go", "java", "python-confluent-kafka", "python-kafka-python", "sarama"}
	for _, tc := range []struct {
		client   string
		selected []string
		want     string
	}{
		{"confluent-kafka-go", all, "java,franz-go"},
		{"python-confluent-kafka", all, "java,franz-go"},
		{"java", all, "franz-go,python-confluent-kafka"},
		{"franz-go", all, "java,python-confluent-kafka"},
		{"sarama", []string{"sarama", "python-kafka-python"}, "python-kafka-python,java"},
		{"franz-go-process", all, "java,python-confluent-kafka"},
	} {
		if got := strings.Join(mixedPeers(tc.client, tc.selected), ","); got != tc.want {
			t.Errorf("mixedPeers(%s, %v) = %s, want %s", tc.client, tc.selected, got, tc.want)
		}
	}
}

func TestDisjointCover(t *testing.T) {
	ok := []mixedMember{{id: "a", parts: []int32{0, 1}}, {id: "b", parts: []int32{2, 3}}, {id: "c", parts: []int32{4, 5}}}
	if err := disjointCover(ok); err != nil {
		t.Errorf("disjoint cover: %v", err)
	}
	for name, ms := range map[string][]mixedMember{
		"overlap": {{id: "a", parts: []int32{0, 1, 2}}, {id: "b", parts: []int32{2, 3, 4, 5}}},
		"missing": {{id: "a", parts: []int32{0, 1}}, {id: "b", parts: []int32{2, 3, 4}}},
		"empty":   {{id: "a", parts: []int32{0, 1, 2, 3, 4, 5}}, {id: "b"}},
	} {
		if err := disjointCover(ms); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestScheduleHoldsDrivers runs a plan of single and cross-client cells
// and checks that every cell ran once, that no driver served two cells at
// once, that no more than the parallel limit ran together, and that solo
// cells ran alone.
func TestScheduleHoldsDrivers(t *testing.T) {
	clients := []string{"a", "b", "c", "d"}
	var plan []plannedCell
	for i := 0; i < 3; i++ {
		for _, c := range clients {
			plan = append(plan, plannedCell{client: c})
			plan = append(plan, plannedCell{s: Scenario{ID: "solo", Solo: true}, client: c})
			for _, p := range clients {
				plan = append(plan, plannedCell{client: c, peer: p})
			}
		}
	}
	for _, parallel := range []int{1, 3, 8} {
		var (
			mu           sync.Mutex
			inUse        = map[string]int{}
			running, top int
			ran          int
			soloRunning  bool
		)
		schedule(plan, parallel, func(pc plannedCell) {
			mu.Lock()
			ran++
			running++
			top = max(top, running)
			if pc.s.Solo {
				soloRunning = true
			}
			if soloRunning && running > 1 {
				t.Errorf("parallel %d: a cell runs beside a solo cell", parallel)
			}
			held := []string{pc.client}
			if pc.peer != "" && pc.peer != pc.client {
				held = append(held, pc.peer)
			}
			for _, h := range held {
				if inUse[h]++; inUse[h] > 1 {
					t.Errorf("parallel %d: driver %s serves two cells at once", parallel, h)
				}
			}
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			for _, h := range held {
				inUse[h]--
			}
			running--
			if pc.s.Solo {
				soloRunning = false
			}
			mu.Unlock()
		})
		if ran != len(plan) {
			t.Errorf("parallel %d: %d cells ran, want %d", parallel, ran, len(plan))
		}
		if top > parallel || (parallel > 1 && top < 2) {
			t.Errorf("parallel %d: at most %d cells ran at once", parallel, top)
		}
	}
}

func TestClusterDifferencesJudgedByTheKafkaCluster(t *testing.T) {
	cell := func(s, status string) Cell { return Cell{Scenario: s, Client: "a", Status: status} }
	reps := []TargetReport{
		{Target: TargetApacheKafka, Cells: []Cell{cell("5.x", StatusPass), cell("8.y", StatusPass)}},
		{Target: TargetApacheKafkaCluster, Cells: []Cell{cell("5.x", StatusPass), cell("8.y", StatusUnsupported)}},
		{Target: TargetCascade, Cells: []Cell{cell("5.x", StatusPass), cell("8.y", StatusPass)}},
		{Target: TargetCascadeCluster, Cells: []Cell{cell("5.x", StatusFail), cell("8.y", StatusUnsupported)}},
	}
	diffs := Differences(reps)
	if len(diffs) != 1 || diffs[0].Target != TargetCascadeCluster || diffs[0].Oracle != TargetApacheKafkaCluster || diffs[0].Scenario != "5.x" {
		t.Fatalf("differences %+v, want only cascade-cluster's 5.x against apache-kafka-cluster", diffs)
	}
	if d := Differences([]TargetReport{reps[0], reps[3]}); d != nil {
		t.Errorf("cascade-cluster judged without its oracle: %+v", d)
	}
	md := Markdown(reps[3], diffs)
	if !strings.Contains(md, "## Differences from the Apache Kafka cluster (1)") || !strings.Contains(md, "apache-kafka-cluster pass, cascade-cluster fail") {
		t.Errorf("cascade-cluster.md:\n%s", md)
	}
	page := HTML(reps, diffs)
	if !strings.Contains(page, "<th>apache-kafka</th><th>apache-kafka-cluster</th><th>cascade</th><th>cascade-cluster</th>") {
		t.Error("index.html lacks the cluster targets' columns beside the single-node ones")
	}
}

func TestScenariosFor(t *testing.T) {
	all := []Scenario{{ID: "2.codec/none"}, {ID: "5.idempotent"}, {ID: "5.idempotent-lost-answer"}, {ID: "8.transactions"}, {ID: "11.leader-move", Cluster: true}}
	ids := func(ss []Scenario) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.ID)
		}
		return out
	}
	if got := ids(ScenariosFor(TargetCascade, all, false)); !reflect.DeepEqual(got, []string{"2.codec/none", "5.idempotent", "5.idempotent-lost-answer", "8.transactions"}) {
		t.Errorf("one broker runs %v", got)
	}
	if got := ids(ScenariosFor(TargetCascadeCluster, all, false)); !reflect.DeepEqual(got, []string{"5.idempotent", "8.transactions", "11.leader-move"}) {
		t.Errorf("a cluster runs %v by default", got)
	}
	if got := ids(ScenariosFor(TargetApacheKafkaCluster, all, true)); !reflect.DeepEqual(got, ids(all)) {
		t.Errorf("a cluster runs %v with the full catalogue", got)
	}
	t.Setenv(ClusterCatalogueEnv, "everything")
	if _, err := SelectedClusterCatalogue(); err == nil {
		t.Errorf("%s=everything accepted", ClusterCatalogueEnv)
	}
}

package driver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// TestMain lets this test binary act as an out-of-process driver: with
// MATRIX_TEST_SERVE set it serves the protocol on stdin/stdout with the
// in-memory driver below, which is how TestProcessRoundTrip exercises both
// ends of the protocol.
func TestMain(m *testing.M) {
	if client := os.Getenv("MATRIX_TEST_SERVE"); client != "" {
		err := driver.Serve(context.Background(), client, openMem, os.Stdin, os.Stdout)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// mem is a tiny in-memory Driver: one partition per topic, enough to test
// the protocol's encoding of every operation, null versus empty bytes, and
// errors.
type mem struct {
	mu     sync.Mutex
	topics map[string][]driver.Record
	cfg    map[string]map[string]string
}

func openMem(ctx context.Context, bootstrap string) (driver.Driver, error) {
	if bootstrap == "refuse" {
		return nil, &driver.Error{Code: "CLIENT_ERROR", Message: "refused"}
	}
	return &mem{topics: map[string][]driver.Record{}, cfg: map[string]map[string]string{}}, nil
}

func (m *mem) Client() string    { return "mem" }
func (m *mem) Info() driver.Info { return driver.Info{Library: "mem 1", Partitioner: "none"} }
func (m *mem) Close() error      { return nil }
func unknown(t string) error     { return &driver.Error{Code: "UNKNOWN_TOPIC_OR_PARTITION", Message: t} }
func (m *mem) lock() func()      { m.mu.Lock(); return m.mu.Unlock }
func (m *mem) has(t string) bool { _, ok := m.topics[t]; return ok }
func (m *mem) DeleteTopic(_ context.Context, t string) error {
	defer m.lock()()
	if !m.has(t) {
		return unknown(t)
	}
	delete(m.topics, t)
	return nil
}

func (m *mem) CreateTopic(_ context.Context, req driver.CreateTopic) error {
	defer m.lock()()
	if m.has(req.Topic) {
		return &driver.Error{Code: "TOPIC_ALREADY_EXISTS", Message: req.Topic}
	}
	m.topics[req.Topic] = nil
	m.cfg[req.Topic] = req.Configs
	return nil
}

func (m *mem) DescribeTopic(_ context.Context, t string) (driver.TopicInfo, error) {
	defer m.lock()()
	if !m.has(t) {
		return driver.TopicInfo{}, unknown(t)
	}
	return driver.TopicInfo{Topic: t, Partitions: 1}, nil
}

func (m *mem) CreatePartitions(context.Context, string, int32) error {
	return driver.Unsupported("mem has one partition per topic")
}

func (m *mem) DescribeConfigs(_ context.Context, t string) (map[string]string, error) {
	defer m.lock()()
	return m.cfg[t], nil
}

func (m *mem) AlterConfigs(_ context.Context, req driver.AlterConfigs) error {
	defer m.lock()()
	for k, v := range req.Set {
		m.cfg[req.Topic][k] = v
	}
	return nil
}

func (m *mem) Produce(_ context.Context, req driver.Produce) (driver.ProduceResult, error) {
	defer m.lock()()
	var res driver.ProduceResult
	for _, r := range req.Records {
		if !m.has(req.Topic) {
			res.Deliveries = append(res.Deliveries, driver.Delivery{Partition: 0, Offset: -1, Error: &driver.Error{Code: "UNKNOWN_TOPIC_OR_PARTITION"}})
			continue
		}
		r.Offset = int64(len(m.topics[req.Topic]))
		m.topics[req.Topic] = append(m.topics[req.Topic], r)
		res.Deliveries = append(res.Deliveries, driver.Delivery{Partition: 0, Offset: r.Offset})
	}
	return res, nil
}

func (m *mem) Consume(_ context.Context, req driver.Consume) (driver.ConsumeResult, error) {
	defer m.lock()()
	recs := m.topics[req.Topic]
	if req.From > int64(len(recs)) {
		return driver.ConsumeResult{Error: &driver.Error{Code: "OFFSET_OUT_OF_RANGE"}}, nil
	}
	return driver.ConsumeResult{Records: recs[req.From:], HighWatermark: int64(len(recs))}, nil
}

func (m *mem) ListOffsets(_ context.Context, req driver.ListOffsets) (driver.ListOffsetsResult, error) {
	defer m.lock()()
	return driver.ListOffsetsResult{Offset: int64(len(m.topics[req.Topic]))}, nil
}

func (m *mem) DeleteRecords(context.Context, driver.DeleteRecords) (int64, error) {
	return 0, errors.New("mem cannot delete records")
}

func (m *mem) GroupConsume(context.Context, driver.GroupConsume) (driver.GroupConsumeResult, error) {
	return driver.GroupConsumeResult{}, driver.Unsupported("mem has no groups")
}

func (m *mem) FetchCommitted(context.Context, driver.FetchCommitted) (int64, error) { return -1, nil }

func (m *mem) DeleteGroup(_ context.Context, g string) error {
	return &driver.Error{Code: "GROUP_ID_NOT_FOUND", Message: g}
}

func (m *mem) DescribeGroup(_ context.Context, g string) (driver.GroupDescription, error) {
	return driver.GroupDescription{Group: g, State: "Stable", Members: []driver.GroupMemberDetail{
		{MemberID: "m-1", ClientID: "mem", Assignment: []driver.TopicPartition{{Topic: "t", Partition: 0}}},
	}}, nil
}

func (m *mem) ListGroups(context.Context) ([]string, error) { return []string{"g", "h"}, nil }

func (m *mem) Transform(context.Context, driver.Transform) (driver.TransformResult, error) {
	return driver.TransformResult{}, driver.Unsupported("mem has no transactions")
}

// ProducerOpen accepts only the transactional id "ok"; ProducerSend
// appends the records and answers the producer name as the first
// delivery's error when asked to commit, so the test sees every field.
func (m *mem) ProducerOpen(_ context.Context, req driver.ProducerOpen) error {
	if req.TransactionalID != "ok" {
		return &driver.Error{Code: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", Message: req.TransactionalID}
	}
	return nil
}

func (m *mem) ProducerSend(ctx context.Context, req driver.ProducerSend) (driver.ProduceResult, error) {
	if req.End == driver.EndAbort {
		return driver.ProduceResult{}, &driver.Error{Code: "PRODUCER_FENCED", Message: req.Producer}
	}
	return m.Produce(ctx, driver.Produce{Topic: req.Topic, Records: req.Records, Acks: -1})
}

func (m *mem) ProducerClose(context.Context, string) error { return nil }

func startMem(t *testing.T, client, bootstrap string) (driver.Driver, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return driver.StartProcess(ctx, driver.ProcessSpec{Client: client, Argv: []string{os.Args[0], "-test.run=^$"},
		Env: []string{"MATRIX_TEST_SERVE=" + client}}, bootstrap)
}

func TestProcessRoundTrip(t *testing.T) {
	d, err := startMem(t, "mem", "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := d.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	ctx := context.Background()
	if got := d.Info(); got.Library != "mem 1" {
		t.Errorf("info %+v", got)
	}
	if err := d.CreateTopic(ctx, driver.CreateTopic{Topic: "t", Partitions: 1, ReplicationFactor: 1, Configs: map[string]string{"a": "b"}}); err != nil {
		t.Fatal(err)
	}
	err = d.CreateTopic(ctx, driver.CreateTopic{Topic: "t", Partitions: 1, ReplicationFactor: 1})
	if driver.Code(err) != "TOPIC_ALREADY_EXISTS" {
		t.Errorf("second create: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	if err := d.CreatePartitions(ctx, "t", 3); !errors.Is(err, driver.ErrUnsupported) {
		t.Errorf("create partitions: %v, want ErrUnsupported", err)
	}
	if err := d.AlterConfigs(ctx, driver.AlterConfigs{Topic: "t", Set: map[string]string{"c": "d"}}); err != nil {
		t.Fatal(err)
	}
	cfg, err := d.DescribeConfigs(ctx, "t")
	if err != nil || cfg["a"] != "b" || cfg["c"] != "d" {
		t.Errorf("configs %v %v", cfg, err)
	}
	recs := []driver.Record{
		{Partition: 0, Key: nil, Value: []byte{}, TimestampMs: 7},
		{Partition: 0, Key: []byte{}, Value: nil, Headers: []driver.Header{{Key: "n", Value: nil}, {Key: "e", Value: []byte{}}, {Key: "b", Value: []byte{0, 0xff}}}},
		{Partition: 0, Key: []byte("k"), Value: bytes.Repeat([]byte{0xfe}, 1<<20)},
	}
	res, err := d.Produce(ctx, driver.Produce{Topic: "t", Records: recs, Acks: -1})
	if err != nil || len(res.Deliveries) != 3 || res.Deliveries[2].Offset != 2 {
		t.Fatalf("produce %+v %v", res, err)
	}
	got, err := d.Consume(ctx, driver.Consume{Topic: "t", From: 0, Count: 3})
	if err != nil || len(got.Records) != 3 || got.HighWatermark != 3 {
		t.Fatalf("consume %+v %v", got, err)
	}
	for i, r := range got.Records {
		w := recs[i]
		if (r.Key == nil) != (w.Key == nil) || !bytes.Equal(r.Key, w.Key) || (r.Value == nil) != (w.Value == nil) || !bytes.Equal(r.Value, w.Value) || r.TimestampMs != w.TimestampMs {
			t.Errorf("record %d: key %v value len %d (nil %v), want key %v value len %d (nil %v)", i, r.Key, len(r.Value), r.Value == nil, w.Key, len(w.Value), w.Value == nil)
		}
		for j, h := range w.Headers {
			g := r.Headers[j]
			if g.Key != h.Key || (g.Value == nil) != (h.Value == nil) || !bytes.Equal(g.Value, h.Value) {
				t.Errorf("record %d header %d = %+v, want %+v", i, j, g, h)
			}
		}
	}
	cr, err := d.Consume(ctx, driver.Consume{Topic: "t", From: 9, Count: 1})
	if err != nil || cr.Error == nil || cr.Error.Code != "OFFSET_OUT_OF_RANGE" {
		t.Errorf("consume past end: %+v %v", cr, err)
	}
	if _, err := d.DeleteRecords(ctx, driver.DeleteRecords{Topic: "t", Before: 1}); err == nil || !strings.Contains(err.Error(), "mem cannot delete") {
		t.Errorf("delete records: %v", err)
	}
	if _, err := d.GroupConsume(ctx, driver.GroupConsume{Group: "g", Topic: "t"}); !errors.Is(err, driver.ErrUnsupported) {
		t.Errorf("group consume: %v, want ErrUnsupported", err)
	}
	if off, err := d.FetchCommitted(ctx, driver.FetchCommitted{Group: "g", Topic: "t"}); err != nil || off != -1 {
		t.Errorf("fetch committed: %d %v", off, err)
	}
	if err := d.DeleteGroup(ctx, "g"); driver.Code(err) != "GROUP_ID_NOT_FOUND" {
		t.Errorf("delete group: %v", err)
	}
	if gd, err := d.DescribeGroup(ctx, "g"); err != nil || gd.Group != "g" || gd.State != "Stable" || len(gd.Members) != 1 ||
		gd.Members[0].ClientID != "mem" || len(gd.Members[0].Assignment) != 1 || gd.Members[0].Assignment[0] != (driver.TopicPartition{Topic: "t", Partition: 0}) {
		t.Errorf("describe group: %+v %v", gd, err)
	}
	if gs, err := d.ListGroups(ctx); err != nil || strings.Join(gs, ",") != "g,h" {
		t.Errorf("list groups: %v %v", gs, err)
	}
	if err := d.ProducerOpen(ctx, driver.ProducerOpen{Producer: "p", TransactionalID: "no"}); driver.Code(err) != "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" {
		t.Errorf("producer open: %v", err)
	}
	if err := d.ProducerOpen(ctx, driver.ProducerOpen{Producer: "p", TransactionalID: "ok"}); err != nil {
		t.Errorf("producer open: %v", err)
	}
	if pr, err := d.ProducerSend(ctx, driver.ProducerSend{Producer: "p", Topic: "t", Records: recs[:1], End: driver.EndCommit}); err != nil || len(pr.Deliveries) != 1 || pr.Deliveries[0].Offset != 3 {
		t.Errorf("producer send: %+v %v", pr, err)
	}
	if _, err := d.ProducerSend(ctx, driver.ProducerSend{Producer: "p", Topic: "t", End: driver.EndAbort}); driver.Code(err) != "PRODUCER_FENCED" || !strings.Contains(err.Error(), "p") {
		t.Errorf("producer send abort: %v", err)
	}
	if err := d.ProducerClose(ctx, "p"); err != nil {
		t.Errorf("producer close: %v", err)
	}
	if _, err := d.Transform(ctx, driver.Transform{Group: "g", Input: "t", Output: "u"}); !errors.Is(err, driver.ErrUnsupported) {
		t.Errorf("transform: %v, want ErrUnsupported", err)
	}
	if err := d.DeleteTopic(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DescribeTopic(ctx, "t"); driver.Code(err) != "UNKNOWN_TOPIC_OR_PARTITION" {
		t.Errorf("describe deleted: %v", err)
	}
}

// TestProcessKill: a killed driver answers nothing more, and Close after
// Kill only reaps it.
func TestProcessKill(t *testing.T) {
	d, err := startMem(t, "mem", "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	k, ok := d.(driver.Killer)
	if !ok {
		t.Fatal("a process driver is not a Killer")
	}
	if err := k.Kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	if _, err := d.DescribeTopic(context.Background(), "t"); err == nil {
		t.Error("a killed driver answered")
	}
	if err := d.Close(); err != nil {
		t.Errorf("close after kill: %v", err)
	}
}

func TestProcessHelloErrors(t *testing.T) {
	if _, err := startMem(t, "mem", "refuse"); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("open failure not reported: %v", err)
	}
	// The program reports client "other" while started as "mem".
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := driver.StartProcess(ctx, driver.ProcessSpec{Client: "mem", Argv: []string{os.Args[0], "-test.run=^$"},
		Env: []string{"MATRIX_TEST_SERVE=other"}}, "x")
	if err == nil || !strings.Contains(err.Error(), `reports client "other"`) {
		t.Errorf("client mismatch not reported: %v", err)
	}
	_, err = driver.StartProcess(ctx, driver.ProcessSpec{Client: "mem", Argv: []string{"/nonexistent/driver"}}, "x")
	if err == nil {
		t.Error("missing program not reported")
	}
}

func TestProcessTimeoutBreaksDriver(t *testing.T) {
	// A program that reads commands and never answers.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := driver.StartProcess(ctx, driver.ProcessSpec{Client: "mute", Argv: []string{"sleep", "30"}}, "x")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hello to a mute program: %v, want deadline exceeded", err)
	}
	if time.Since(start) > 15*time.Second {
		t.Errorf("a mute driver took %v to give up", time.Since(start))
	}
}

func TestServeRejectsBadInput(t *testing.T) {
	var out bytes.Buffer
	in := strings.NewReader(`{"id":1,"op":"produce","args":{}}` + "\n" +
		`{"id":2,"op":"hello","args":{"bootstrap":"x","protocol":99}}` + "\n" +
		`{"id":3,"op":"hello","args":{"bootstrap":"x","protocol":1}}` + "\n" +
		`{"id":4,"op":"frobnicate"}` + "\n" +
		`{"id":5,"op":"produce","args":"not an object"}` + "\n" +
		`{"id":6,"op":"close"}` + "\n")
	if err := driver.Serve(context.Background(), "mem", openMem, in, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{`"ok":false`, `protocol 99`, `"ok":true`, `"code":"UNSUPPORTED"`, `produce arguments`, `"id":6,"ok":true`}
	if len(lines) != len(want) {
		t.Fatalf("%d answers, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("answer %d = %s, want it to contain %s", i+1, lines[i], w)
		}
	}
	if err := driver.Serve(context.Background(), "mem", openMem, strings.NewReader("garbage\n"), &out); err == nil {
		t.Error("garbage line accepted")
	}
}

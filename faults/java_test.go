package faults

import (
	"context"
	"errors"
	"testing"

	lin "github.com/cascade-kafka/cascade/linearizability"
	"github.com/cascade-kafka/cascade/matrix/driver"
)

// scriptedDriver answers produce and consume commands from a script, so
// the Java clients' mapping of driver answers to outcomes is tested without
// a JVM. Methods the workload does not call are left to the embedded nil
// interface.
type scriptedDriver struct {
	driver.Driver
	produce func(driver.Produce) (driver.ProduceResult, error)
	consume func(driver.Consume) (driver.ConsumeResult, error)
	closed  *int
}

func (s *scriptedDriver) Produce(_ context.Context, req driver.Produce) (driver.ProduceResult, error) {
	return s.produce(req)
}

func (s *scriptedDriver) Consume(_ context.Context, req driver.Consume) (driver.ConsumeResult, error) {
	return s.consume(req)
}

func (s *scriptedDriver) Close() error { *s.closed++; return nil }

// errBroken stands for a driver process that no longer answers: a plain
// error, not a *driver.Error.
var errBroken = errors.New("driver java: read produce answer: EOF")

func TestJavaProducerOutcomes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	delivered := func(d driver.Delivery) (driver.ProduceResult, error) {
		return driver.ProduceResult{Deliveries: []driver.Delivery{d}}, nil
	}
	script := []func() (driver.ProduceResult, error){
		func() (driver.ProduceResult, error) { return delivered(driver.Delivery{Offset: 5}) },
		func() (driver.ProduceResult, error) {
			return delivered(driver.Delivery{Offset: -1, Error: &driver.Error{Code: "CLIENT_TIMEOUT"}})
		},
		func() (driver.ProduceResult, error) {
			return delivered(driver.Delivery{Offset: -1, Error: &driver.Error{Code: "CLIENT_UNKNOWN_TOPIC"}})
		},
		func() (driver.ProduceResult, error) {
			return driver.ProduceResult{}, &driver.Error{Code: "CLIENT_ERROR"}
		},
		func() (driver.ProduceResult, error) { return driver.ProduceResult{}, errBroken },
		func() (driver.ProduceResult, error) { cancel(); return delivered(driver.Delivery{Offset: 6}) },
	}
	want := []struct {
		outcome string
		offset  int64
	}{{lin.OutcomeOK, 5}, {lin.OutcomeUnknown, -1}, {lin.OutcomeFail, -1}, {lin.OutcomeFail, -1},
		{lin.OutcomeUnknown, -1}, {lin.OutcomeOK, 6}}

	var buf syncBuffer
	opened, closed, n := 0, 0, 0
	var reqs []driver.Produce
	w := &Workload{Bootstrap: "proxy:9092", Topic: "t", Partitions: 2, Rec: lin.NewRecorder(&buf), JavaProducers: 1,
		Java: func(_ context.Context, bootstrap string) (driver.Driver, error) {
			if bootstrap != "proxy:9092" {
				t.Errorf("driver opened on %q", bootstrap)
			}
			opened++
			return &scriptedDriver{closed: &closed, produce: func(req driver.Produce) (driver.ProduceResult, error) {
				reqs = append(reqs, req)
				n++
				return script[n-1]()
			}}, nil
		}}
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	h, err := lin.Read(&buf.b)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != len(want) {
		t.Fatalf("%d operations recorded, want %d", len(h), len(want))
	}
	for i, o := range h {
		off := int64(-1)
		if o.Offset != nil {
			off = *o.Offset
		}
		if o.Outcome != want[i].outcome || off != want[i].offset || o.Op != lin.OpProduce || o.Value != string(reqs[i].Records[0].Value) {
			t.Errorf("op %d: %s %s offset %d value %q, want %s offset %d", i, o.Op, o.Outcome, off, o.Value, want[i].outcome, want[i].offset)
		}
		if r := reqs[i]; !r.Idempotent || r.Acks != -1 || len(r.Records) != 1 || r.Records[0].Partition != o.Partition {
			t.Errorf("command %d: %+v, want one idempotent acks=all record for partition %d", i, r, o.Partition)
		}
	}
	if opened != 2 || closed != 2 {
		t.Errorf("driver opened %d and closed %d times, want 2 and 2 (reopened once after it broke)", opened, closed)
	}
	if st := w.Stats(); st.Produced != 6 || st.Acked != 2 {
		t.Errorf("stats %+v, want 6 produced and 2 acknowledged", st)
	}
}

func TestJavaConsumerFetches(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	script := []func() (driver.ConsumeResult, error){
		func() (driver.ConsumeResult, error) {
			return driver.ConsumeResult{HighWatermark: 2, Records: []driver.Record{{Offset: 0, Value: []byte("a")}, {Offset: 1, Value: []byte("b")}}}, nil
		},
		func() (driver.ConsumeResult, error) { return driver.ConsumeResult{HighWatermark: -1}, nil },
		func() (driver.ConsumeResult, error) {
			return driver.ConsumeResult{HighWatermark: -1, Error: &driver.Error{Code: "OFFSET_OUT_OF_RANGE"}}, nil
		},
		func() (driver.ConsumeResult, error) { return driver.ConsumeResult{}, errBroken },
		func() (driver.ConsumeResult, error) { cancel(); return driver.ConsumeResult{HighWatermark: 0}, nil },
	}
	var buf syncBuffer
	closed, n := 0, 0
	var froms []int64
	w := &Workload{Bootstrap: "proxy:9092", Topic: "t", Partitions: 1, Rec: lin.NewRecorder(&buf), JavaConsumers: 1,
		Java: func(context.Context, string) (driver.Driver, error) {
			return &scriptedDriver{closed: &closed, consume: func(req driver.Consume) (driver.ConsumeResult, error) {
				froms = append(froms, req.From)
				n++
				return script[n-1]()
			}}, nil
		}}
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	h, err := lin.Read(&buf.b)
	if err != nil {
		t.Fatal(err)
	}
	wantFrom := []int64{0, 2, 2, 0, 0}
	wantOutcome := []string{lin.OutcomeOK, lin.OutcomeOK, lin.OutcomeFail, lin.OutcomeFail, lin.OutcomeOK}
	if len(h) != len(wantFrom) {
		t.Fatalf("%d operations recorded, want %d", len(h), len(wantFrom))
	}
	for i, o := range h {
		if froms[i] != wantFrom[i] || *o.From != wantFrom[i] || o.Outcome != wantOutcome[i] || o.Op != lin.OpFetch {
			t.Errorf("op %d: %s %s from %d (asked %d), want %s from %d", i, o.Op, o.Outcome, *o.From, froms[i], wantOutcome[i], wantFrom[i])
		}
	}
	if r := h[0].Records; len(r) != 2 || r[1] != (lin.Record{Offset: 1, Value: "b"}) || *h[0].HighWatermark != 2 {
		t.Errorf("first fetch recorded %+v hw %v", r, h[0].HighWatermark)
	}
	if h[1].HighWatermark != nil {
		t.Errorf("a high watermark the driver did not know (-1) was recorded as %d", *h[1].HighWatermark)
	}
}

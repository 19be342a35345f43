package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/cascade-kafka/cascade/faults/proxy"
	lin "github.com/cascade-kafka/cascade/linearizability"
)

// syncBuffer is a bytes.Buffer safe for the recorder's concurrent writes
// and a final read.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lostAnswersRun runs the workload for d against kfake through a proxy that
// loses 30% of Produce answers, drains, and checks the history.
func lostAnswersRun(t *testing.T, idempotent bool, d time.Duration) *lin.Report {
	t.Helper()
	cl, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "w"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	g := proxy.NewGroup(proxy.Options{Seed: 3})
	defer g.Close()
	p, err := g.Add("k", "127.0.0.1:0", cl.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	var buf syncBuffer
	rec := lin.NewRecorder(&buf)
	w := &Workload{Bootstrap: p.Addr(), Topic: "w", Partitions: 2, Producers: 2, Consumers: 1, Group: "g",
		Rec: rec, Seed: 3, NoIdempotence: !idempotent}
	if err := p.AddToxic(proxy.ToxicSpec{Name: "lost", Type: "kafka_drop_response",
		Attributes: json.RawMessage(`{"api_key":0,"trigger":"probability","p":0.3}`)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Reset(); err != nil {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer dcancel()
	if err := w.Drain(dctx); err != nil {
		t.Fatal(err)
	}
	h, err := lin.Read(&buf.b)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := lin.Check(h, lin.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	t.Logf("idempotent=%v: %d produced, %d acknowledged; %s", idempotent, st.Produced, st.Acked, rep.Summary())
	if st.Acked == 0 {
		t.Fatal("nothing acknowledged")
	}
	return rep
}

func TestWorkloadIdempotentSurvivesLostAnswers(t *testing.T) {
	if rep := lostAnswersRun(t, true, 2*time.Second); !rep.Valid() {
		t.Fatalf("idempotent producers through lost answers:\n%s", rep.Summary())
	}
}

func TestWorkloadCatchesDuplicatesWithoutIdempotence(t *testing.T) {
	rep := lostAnswersRun(t, false, 2*time.Second)
	if rep.Count(lin.KindDuplicate) == 0 {
		t.Fatalf("lost answers without idempotence produced no duplicate report:\n%s", rep.Summary())
	}
}

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
// loses 30% of Produce answers, drains, and checks the history. Idempotent
// runs add a confluent-kafka-go producer to franz-go's.
func lostAnswersRun(t *testing.T, idempotent bool, d time.Duration) (*lin.Report, []lin.Op) {
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
	if idempotent {
		w.ConfluentProducers = 1
	}
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
	return rep, h
}

func TestWorkloadIdempotentSurvivesLostAnswers(t *testing.T) {
	rep, h := lostAnswersRun(t, true, 2*time.Second)
	if !rep.Valid() {
		t.Fatalf("idempotent producers through lost answers:\n%s", rep.Summary())
	}
	for _, c := range []string{"producer-", "confluent-"} {
		if acked(h, c) == 0 {
			t.Errorf("no %s* produce was acknowledged", c)
		}
	}
}

func TestWorkloadCatchesDuplicatesWithoutIdempotence(t *testing.T) {
	rep, _ := lostAnswersRun(t, false, 2*time.Second)
	if rep.Count(lin.KindDuplicate) == 0 {
		t.Fatalf("lost answers without idempotence produced no duplicate report:\n%s", rep.Summary())
	}
}

func TestWorkloadTransactionsSurviveLostAnswers(t *testing.T) {
	cl, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "w"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	g := proxy.NewGroup(proxy.Options{Seed: 5})
	defer g.Close()
	p, err := g.Add("k", "127.0.0.1:0", cl.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	var buf syncBuffer
	w := &Workload{Bootstrap: p.Addr(), Topic: "w", Partitions: 2, Consumers: 2, TxnProducers: 1, Group: "g",
		Rec: lin.NewRecorder(&buf), Seed: 5}
	for _, f := range ProxyFaults(p) {
		if f.Name == "lost-txn-answers" {
			if err := f.Apply(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	fired, err := p.Fired("lost-endtxn")
	if err != nil || fired == 0 {
		t.Errorf("no EndTxn answer was lost (%d, %v)", fired, err)
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
	ends, committedReads := 0, 0
	open := map[string]bool{} // transactions without end_txn
	for _, o := range h {
		switch {
		case o.Op == lin.OpProduce && o.Txn != "":
			if _, seen := open[o.Txn]; !seen {
				open[o.Txn] = true
			}
		case o.Op == lin.OpEndTxn:
			open[o.Txn] = false
			if o.Outcome == lin.OutcomeOK {
				ends++
			}
		case o.Op == lin.OpFetch && o.Isolation == lin.ReadCommitted && len(o.Records) > 0:
			committedReads++
		}
	}
	left := 0
	for _, o := range open {
		if o {
			left++
		}
	}
	t.Logf("%d transactions ended, %d left open, %d read_committed fetches with records; %s", ends, left, committedReads, rep.Summary())
	if ends == 0 || committedReads == 0 || acked(h, "txn-producer-") == 0 {
		t.Error("the transactional workload did not run")
	}
	if left == 0 {
		t.Error("no transaction was left open for the coordinator to abort")
	}
	if !rep.Valid() {
		t.Errorf("transactions through lost answers:\n%s", rep.Summary())
	}
}

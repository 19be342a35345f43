package handler_test

import (
	"context"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

// TestTxnGroupTransactSessionExactlyOnce runs franz-go's
// consume-transform-produce loop (GroupTransactSession: TxnOffsetCommit
// with AddOffsetsToTxn, read_committed input) across a member that dies
// mid-transaction: every input record appears exactly once in the
// committed output.
func TestTxnGroupTransactSessionExactlyOnce(t *testing.T) {
	b := brokertest.Start(t, map[string]string{
		"group.initial.rebalance.delay.ms":                            "0",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100",
	})
	createTopic(t, b, "in", 2)
	createTopic(t, b, "out", 2)
	const n = 100
	ctx := txnCtx(t)
	src := b.Client(t, kgo.DefaultProduceTopic("in"))
	for i := 0; i < n; i++ {
		if err := src.ProduceSync(ctx, kgo.StringRecord(strconv.Itoa(i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	session := func(id string) *kgo.GroupTransactSession {
		s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(b.Addr()), kgo.TransactionalID(id),
			kgo.TransactionTimeout(2*time.Second), kgo.ConsumerGroup("eos"), kgo.ConsumeTopics("in"),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
			kgo.DefaultProduceTopic("out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(100*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// step consumes up to 10 records and produces them to out in one
	// transaction; with end false the member dies before ending it.
	step := func(s *kgo.GroupTransactSession, end bool) int {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := s.PollRecords(pctx, 10)
		cancel()
		if err := s.Begin(); err != nil {
			t.Fatal(err)
		}
		got := 0
		fs.EachRecord(func(r *kgo.Record) {
			got++
			if err := s.ProduceSync(ctx, kgo.StringRecord(string(r.Value))).FirstErr(); err != nil {
				t.Errorf("produce: %v", err)
			}
		})
		if !end {
			return got
		}
		if _, err := s.End(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("end: %v", err)
		}
		return got
	}

	a := session("eos-a")
	for done := 0; done < 30; {
		done += step(a, true)
	}
	if step(a, false) == 0 {
		t.Fatal("the dying member consumed nothing")
	}
	a.Close() // dies with its transaction open: aborted at its timeout

	bsess := session("eos-b")
	defer bsess.Close()
	idle := 0
	for idle < 3 {
		if step(bsess, true) == 0 {
			idle++
		} else {
			idle = 0
		}
	}
	got := consumeFor(t, b, "out", true, 3*time.Second)
	seen := map[string]int{}
	for _, v := range got {
		seen[v]++
	}
	var bad []string
	for i := 0; i < n; i++ {
		if c := seen[strconv.Itoa(i)]; c != 1 {
			bad = append(bad, strconv.Itoa(i)+"x"+strconv.Itoa(c))
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 || len(got) != n {
		t.Errorf("output has %d records; not exactly once: %v", len(got), bad)
	}
}

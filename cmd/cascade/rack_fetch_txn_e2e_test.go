package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterReadCommittedFromFollower checks that a follower serves a
// read_committed consumer as the leader would (KIP-392 with KIP-98): its
// last stable offset and aborted transactions come from the replicated
// log, so a franz-go consumer in rack-c reading through node 3 gets every
// committed record once and none of an aborted transaction, and node 1,
// the leader, serves it no records.
func TestClusterReadCommittedFromFollower(t *testing.T) {
	c, admins := startRackCluster(t, "replica.fetch.wait.max.ms=200")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic = "rack-txn"
	c.createAssigned(topic)

	tp, err := kgo.NewClient(kgo.SeedBrokers(c.seeds...), kgo.TransactionalID("rack-txn"),
		kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(30*time.Second), kgo.RetryTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	var want []string
	for i, commit := range []bool{true, false, true} {
		if err := tp.BeginTransaction(); err != nil {
			t.Fatalf("BeginTransaction: %v", err)
		}
		var rs []*kgo.Record
		for j := range 5 {
			v := fmt.Sprintf("txn%d-%d", i, j)
			rs = append(rs, &kgo.Record{Value: []byte(v)})
			if commit {
				want = append(want, v)
			}
		}
		if err := tp.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce in transaction %d: %v", i, err)
		}
		if err := tp.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("EndTransaction %d (commit %v): %v", i, commit, err)
		}
	}
	// 15 records and three markers: the follower's last stable offset
	// reaches 18 once it has every marker and the leader's high watermark.
	waitFor(t, 30*time.Second, "node 3's last stable offset at 18", func() bool {
		p := c.rawFetch(3, topic, 18, "", 0)
		return p.ErrorCode == 0 && p.LastStableOffset == 18
	})

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds...), kgo.Rack(rackOf(3)),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := &tally{counts: map[string]int{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got.add(string(r.Value)) })
			if all, _ := got.check(want); all {
				return
			}
		}
	}()
	got.await(t, 60*time.Second, "reading the committed records from rack-c", want)
	cancel()
	<-done
	leader := fetchRecordBytes(t, admins[0], topic, "consumer")
	inRack := fetchRecordBytes(t, admins[2], topic, "consumer")
	if leader != 0 || inRack == 0 {
		t.Errorf("read_committed consumer in rack-c: record bytes by node 1 %v, node 3 %v; want only node 3's", leader, inRack)
	}
}

package handler_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/broker/group"
	"github.com/cascade-kafka/cascade/broker/handler"
)

// TestGroupTxnOffsets drives the group coordinator's side of transactional
// offset commits: TxnOffsetCommit writes a transactional batch that stays
// pending (UNSTABLE_OFFSET_COMMIT under RequireStable) until a commit marker
// is written to __consumer_offsets; an aborted transaction's offsets never
// appear; both survive a restart.
func TestGroupTxnOffsets(t *testing.T) {
	b := brokertest.Start(t, groupProps)
	const topic, groupID = "events", "txg"
	setupTopic(t, b, topic, 1, 1)
	env := b.Handlers()
	ctx := groupCtx(t, 10*time.Second)
	if err := env.Groups.EnsureLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	part := group.PartitionFor(groupID, b.Handlers().Config.OffsetsTopicNumPartitions)
	commit := func(pid int64, offset int64) {
		t.Helper()
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.Version = 3
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = "tx", groupID, pid, 0, -1
		req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: offset, LeaderEpoch: -1}}}}
		resp := env.Groups.Do(ctx, &handler.Request{Key: 28, Version: 3, Msg: req}).(*kmsg.TxnOffsetCommitResponse)
		if c := resp.Topics[0].Partitions[0].ErrorCode; c != 0 {
			t.Fatalf("txn offset commit: %v", kerr.ErrorForCode(c))
		}
	}
	fetch := func() (int64, int16) {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 8
		req.RequireStable = true
		req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: groupID, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: topic, Partitions: []int32{0}}}}}
		resp, err := req.RequestWith(ctx, b.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Groups[0].Topics[0].Partitions[0]
		return p.Offset, p.ErrorCode
	}
	commit(11, 1)
	commit(11, 2) // a second batch of the same producer: sequences must follow
	if _, code := fetch(); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("pending offset fetched with error %d, want UNSTABLE_OFFSET_COMMIT", code)
	}
	if err := env.Txn.WriteMarker("__consumer_offsets", part, 11, 0, true, 0); err != nil {
		t.Fatalf("commit marker: %v", err)
	}
	waitGroup(t, 5*time.Second, "committed offset", func() bool { o, c := fetch(); return o == 2 && c == 0 })
	commit(12, 50)
	if err := env.Txn.WriteMarker("__consumer_offsets", part, 12, 0, false, 0); err != nil {
		t.Fatalf("abort marker: %v", err)
	}
	waitGroup(t, 5*time.Second, "aborted offset dropped", func() bool { o, c := fetch(); return o == 2 && c == 0 })
	commit(13, 70) // left pending across the restart
	b.Restart(t)
	env = b.Handlers()
	if o, c := fetch(); c != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("after restart: offset %d error %d, want UNSTABLE_OFFSET_COMMIT", o, c)
	}
	if err := env.Txn.WriteMarker("__consumer_offsets", part, 13, 0, true, 0); err != nil {
		t.Fatalf("commit marker: %v", err)
	}
	waitGroup(t, 5*time.Second, "offset committed after restart", func() bool { o, c := fetch(); return o == 70 && c == 0 })
}

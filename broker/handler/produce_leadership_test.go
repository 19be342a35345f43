package handler

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/metadata"
	"github.com/cascade-kafka/cascade/broker/record"
)

// produceData sends one idempotent batch (producer 110, sequence seq) to
// data-0 with Produce v11 and returns the partition's answer.
func produceData(t *testing.T, env *Env, seq int32) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	s := record.NewSpec(record.Rec{Timestamp: 1000, Value: []byte("j0-333")})
	s.ProducerID, s.ProducerEpoch, s.BaseSequence = 110, 0, seq
	b, err := record.Build(s)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "data"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, b
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return call(t, env, req, 11).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

// TestClusterProduceAfterLeadershipMoved checks a produce whose leadership
// check passed on an image in which this broker still led, and whose append
// came after the partition became a follower (the leadership moved by a
// controlled shutdown while the request was in the handler): as Kafka's
// Partition.appendRecordsToLeader it is NOT_LEADER_OR_FOLLOWER with the log
// start offset unknown, and nothing is appended. Once the image moved, the
// check against it answers the same and names the new leader (KIP-951).
func TestClusterProduceAfterLeadershipMoved(t *testing.T) {
	c := newClusterTestEnv(t)
	p := c.env.Partitions.Get(log.TopicPartition{Topic: "data", Partition: 0})
	// As the replication shell makes a replicated partition's leader.
	p.SetReplicated(true)
	if err := p.MakeLeader(p.LeaderEpoch()); err != nil {
		t.Fatal(err)
	}
	if sp := produceData(t, c.env, 0); sp.ErrorCode != 0 || sp.BaseOffset != 0 {
		t.Fatalf("first produce: code %d at %d", sp.ErrorCode, sp.BaseOffset)
	}
	// The shell makes it a follower (StopLeading) before this produce's
	// append, after its check against the image that still named it.
	p.StopLeading()
	sp := produceData(t, c.env, 1)
	if sp.ErrorCode != kerr.NotLeaderForPartition.Code || sp.BaseOffset != -1 || sp.LogStartOffset != -1 {
		t.Fatalf("produce to a demoted partition: code %d, base offset %d, log start %d; want NOT_LEADER_OR_FOLLOWER, -1, -1",
			sp.ErrorCode, sp.BaseOffset, sp.LogStartOffset)
	}
	if p.LogEndOffset() != 1 {
		t.Fatalf("log end %d after the refused produce, want 1", p.LogEndOffset())
	}

	// The controller moves the leadership to broker 2 (as a
	// reassignment onto it, then a controlled shutdown of this broker).
	c.apply(t, metadata.PartitionChangeRecord{TopicID: c.ids["data"], Partition: 0, Replicas: []int32{1, 2},
		ISR: []int32{1, 2}, Leader: 2, LeaderRecoveryState: metadata.LeaderRecoveryNoChange})
	sp = produceData(t, c.env, 1)
	if sp.ErrorCode != kerr.NotLeaderForPartition.Code || sp.CurrentLeader.LeaderID != 2 {
		t.Fatalf("produce after the move: code %d, current leader %d; want NOT_LEADER_OR_FOLLOWER naming 2",
			sp.ErrorCode, sp.CurrentLeader.LeaderID)
	}
	if p.LogEndOffset() != 1 {
		t.Fatalf("log end %d after the refused produces, want 1", p.LogEndOffset())
	}
}

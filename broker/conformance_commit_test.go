package broker_test

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The conformance test of this file holds the offset commit validation of
// Kafka 4.4's ConsumerGroup.validateOffsetCommit against Apache Kafka 4.4: a
// consumer-protocol member whose epoch moved on (a second member joined and
// it revoked partitions) commits with its previous epoch. The commit lands
// for a partition it kept, assigned at or before that epoch, and fails with
// STALE_MEMBER_EPOCH, for every partition of the request, when one partition
// was revoked or assigned later.

// epochMember is one consumer-protocol member as a test drives it: its
// epoch and the partitions of its current assignment.
type epochMember struct {
	id      string
	epoch   int32
	topicID [16]byte
	owned   []int32
}

// heartbeat sends m's ConsumerGroupHeartbeat v1 reporting the partitions it
// owns, and applies the answer.
func (m *epochMember) heartbeat(t *testing.T, rc *rawConn, group, topic string) {
	t.Helper()
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.SetVersion(1)
	r.Group, r.MemberID, r.MemberEpoch = group, m.id, m.epoch
	if m.epoch == 0 {
		r.RebalanceTimeoutMillis = 30000
		r.SubscribedTopicNames = []string{topic}
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	} else {
		r.RebalanceTimeoutMillis = -1
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if len(m.owned) > 0 {
			r.Topics = append(r.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: m.topicID, Partitions: m.owned})
		}
	}
	resp := rc.do(r).(*kmsg.ConsumerGroupHeartbeatResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("ConsumerGroupHeartbeat of %s at epoch %d: %v", m.id, m.epoch, kerr.ErrorForCode(resp.ErrorCode))
	}
	m.epoch = resp.MemberEpoch
	if a := resp.Assignment; a != nil {
		m.owned = nil
		for _, tp := range a.Topics {
			m.topicID = tp.TopicID
			m.owned = append(m.owned, tp.Partitions...)
		}
		sort.Slice(m.owned, func(i, j int) bool { return m.owned[i] < m.owned[j] })
	}
}

// heartbeatUntil heartbeats m until done holds, for at most ten seconds.
func (m *epochMember) heartbeatUntil(t *testing.T, rc *rawConn, group, topic, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m.heartbeat(t, rc, group, topic)
		if done() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("member %s: %s: still at epoch %d owning %v", m.id, what, m.epoch, m.owned)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// movedMember is what one broker made of the scenario: member a's epoch
// before and after the second member joined, a partition it kept and one it
// revoked.
type movedMember struct {
	a                  *epochMember
	oldEpoch, newEpoch int32
	kept, revoked      int32
}

// moveEpoch builds on rc a consumer group where member aID owns all four
// partitions of topic, then lets member bID join and drives a through the
// revocation until its epoch moves on.
func moveEpoch(t *testing.T, rc *rawConn, group, topic, aID, bID string) movedMember {
	t.Helper()
	a := &epochMember{id: aID}
	a.heartbeatUntil(t, rc, group, topic, "owning every partition", func() bool { return a.epoch > 0 && len(a.owned) == 4 })
	old, before := a.epoch, append([]int32(nil), a.owned...)

	b := &epochMember{id: bID}
	b.heartbeat(t, rc, group, topic)
	a.heartbeatUntil(t, rc, group, topic, "moving past its epoch", func() bool { return a.epoch > old })

	mv := movedMember{a: a, oldEpoch: old, newEpoch: a.epoch, kept: -1, revoked: -1}
	for _, p := range before {
		if contains(a.owned, p) {
			if mv.kept < 0 {
				mv.kept = p
			}
		} else if mv.revoked < 0 {
			mv.revoked = p
		}
	}
	if mv.kept < 0 || mv.revoked < 0 {
		t.Fatalf("member %s owned %v at epoch %d and %v at epoch %d: need a kept and a revoked partition", aID, before, old, a.owned, a.epoch)
	}
	return mv
}

func contains(ps []int32, p int32) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// TestConformanceCommitOlderEpoch compares OffsetCommit (v8, v9 and v10)
// from a consumer-protocol member whose epoch moved on: the previous epoch
// commits a partition kept since then, fails with STALE_MEMBER_EPOCH for a
// revoked partition (and for the whole request when one partition of it is
// revoked), for an epoch older than the partition's assignment epoch, and
// for an epoch newer than the member's. An unknown member is
// UNKNOWN_MEMBER_ID and OffsetCommit below v9 is UNSUPPORTED_VERSION.
func TestConformanceCommitOlderEpoch(t *testing.T) {
	p := newPair(t)
	topic := conformanceTopic(t, "commit-epoch")
	group := topic + "-g"
	p.createBoth(t, topic, 4)
	p.findGroupCoordinator(t, group)
	aID, bID := clientMemberID(t), clientMemberID(t)
	k := moveEpoch(t, p.kafka, group, topic, aID, bID)
	c := moveEpoch(t, p.cascade, group, topic, aID, bID)
	t.Logf("kafka: epoch %d then %d, kept %d, revoked %d; cascade: epoch %d then %d, kept %d, revoked %d",
		k.oldEpoch, k.newEpoch, k.kept, k.revoked, c.oldEpoch, c.newEpoch, c.kept, c.revoked)
	if k.oldEpoch != c.oldEpoch || k.newEpoch != c.newEpoch {
		t.Errorf("member epochs: kafka %d then %d, cascade %d then %d", k.oldEpoch, k.newEpoch, c.oldEpoch, c.newEpoch)
	}

	type part struct {
		which  string // "kept" or "revoked"
		offset int64
	}
	commit := func(mv movedMember, v int16, member string, epoch int32, parts ...part) *kmsg.OffsetCommitRequest {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.SetVersion(v)
		r.Group, r.MemberID, r.Generation = group, member, epoch
		rt := kmsg.OffsetCommitRequestTopic{Topic: topic}
		if v >= 10 {
			rt.Topic, rt.TopicID = "", mv.a.topicID
		}
		for _, pt := range parts {
			n := mv.kept
			if pt.which == "revoked" {
				n = mv.revoked
			}
			rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: n, Offset: pt.offset, LeaderEpoch: -1, Metadata: kmsg.StringPtr("")})
		}
		r.Topics = []kmsg.OffsetCommitRequestTopic{rt}
		return r
	}
	kept, revoked := part{"kept", 5}, part{"revoked", 5}
	for _, tc := range []struct {
		name  string
		build func(mv movedMember) *kmsg.OffsetCommitRequest
		want  int16
	}{
		{"current epoch, revoked partition", func(mv movedMember) *kmsg.OffsetCommitRequest {
			return commit(mv, 9, aID, mv.newEpoch, revoked)
		}, 0},
		{"older epoch, kept partition", func(mv movedMember) *kmsg.OffsetCommitRequest {
			return commit(mv, 9, aID, mv.oldEpoch, kept)
		}, 0},
		{"older epoch, kept partition by id", func(mv movedMember) *kmsg.OffsetCommitRequest {
			return commit(mv, 10, aID, mv.oldEpoch, part{"kept", 6})
		}, 0},
		{"older epoch, revoked partition", func(mv movedMember) *kmsg.OffsetCommitRequest {
			return commit(mv, 9, aID, mv.oldEpoch, revoked)
		}, kerr.StaleMemberEpoch.Code},
		{"older epoch, kept and revoked", func(mv movedMember) *kmsg.OffsetCommitRequest {
			return commit(mv, 9, aID, mv.oldEpoch, part{"kept", 7}, revoked)
		}, kerr.StaleMemberEpoch.Code},
		{"epoch before the assignment", func(mv movedMember) *kmsg.OffsetCommitRequest {
			return commit(mv, 9, aID, mv.oldEpoch-1, kept)
		}, kerr.StaleMemberEpoch.Code},
		{"newer epoch", func(mv movedMember) *kmsg.OffsetCommitRequest {
			return commit(mv, 9, aID, mv.newEpoch+1, kept)
		}, kerr.StaleMemberEpoch.Code},
		{"v8", func(mv movedMember) *kmsg.OffsetCommitRequest {
			return commit(mv, 8, aID, mv.oldEpoch, kept)
		}, kerr.UnsupportedVersion.Code},
		{"unknown member", func(mv movedMember) *kmsg.OffsetCommitRequest {
			return commit(mv, 9, "unknown-member", mv.oldEpoch, kept)
		}, kerr.UnknownMemberID.Code},
	} {
		kr := p.kafka.do(tc.build(k)).(*kmsg.OffsetCommitResponse)
		cr := p.cascade.do(tc.build(c)).(*kmsg.OffsetCommitResponse)
		for _, d := range diffResponses(kr, cr) {
			t.Errorf("%s: %s", tc.name, d)
		}
		for _, rt := range kr.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != tc.want {
					t.Errorf("%s: kafka answered %v for partition %d, the test expects %v", tc.name,
						kerr.ErrorForCode(rp.ErrorCode), rp.Partition, kerr.ErrorForCode(tc.want))
				}
			}
		}
	}

	// The commits that landed are the ones OffsetFetch returns.
	fetched := func(rc *rawConn, mv movedMember) string {
		r := kmsg.NewPtrOffsetFetchRequest()
		r.SetVersion(8)
		r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: topic, Partitions: []int32{mv.kept, mv.revoked}}}}}
		resp := rc.do(r).(*kmsg.OffsetFetchResponse)
		if len(resp.Groups) != 1 || len(resp.Groups[0].Topics) != 1 {
			t.Fatalf("OffsetFetch: %+v", resp)
		}
		ps := resp.Groups[0].Topics[0].Partitions
		if len(ps) != 2 {
			t.Fatalf("OffsetFetch partitions: %+v", ps)
		}
		return fmt.Sprintf("kept=%d revoked=%d", ps[0].Offset, ps[1].Offset)
	}
	if kf, cf := fetched(p.kafka, k), fetched(p.cascade, c); kf != cf || kf != "kept=6 revoked=5" {
		t.Errorf("committed offsets: kafka %s, cascade %s, the test expects kept=6 revoked=5", kf, cf)
	}

	// TxnOffsetCommit validates the same way; before v6 a stale epoch is
	// ILLEGAL_GENERATION. The one commit that lands is then committed with
	// its transaction.
	txnID := topic + "-t"
	kp, cp := initTxnProducer(t, p.kafka, txnID), initTxnProducer(t, p.cascade, txnID)
	for _, tc := range []struct {
		name    string
		v       int16
		epoch   func(mv movedMember) int32
		revoked bool
		want    int16
	}{
		{"v6 older epoch, kept partition", 6, func(mv movedMember) int32 { return mv.oldEpoch }, false, 0},
		{"v6 older epoch, revoked partition", 6, func(mv movedMember) int32 { return mv.oldEpoch }, true, kerr.StaleMemberEpoch.Code},
		{"v5 older epoch, revoked partition", 5, func(mv movedMember) int32 { return mv.oldEpoch }, true, kerr.IllegalGeneration.Code},
		{"v6 epoch before the assignment", 6, func(mv movedMember) int32 { return mv.oldEpoch - 1 }, false, kerr.StaleMemberEpoch.Code},
		{"v5 epoch before the assignment", 5, func(mv movedMember) int32 { return mv.oldEpoch - 1 }, false, kerr.IllegalGeneration.Code},
	} {
		build := func(mv movedMember, pr txnProducer) *kmsg.TxnOffsetCommitRequest {
			n := mv.kept
			if tc.revoked {
				n = mv.revoked
			}
			return txnCommitReq(tc.v, txnID, pr, group, tc.epoch(mv), aID, topic, mv.a.topicID, n)
		}
		kr, _ := p.compareByID(t, tc.name, build(k, kp), build(c, cp))
		for _, rt := range kr.(*kmsg.TxnOffsetCommitResponse).Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != tc.want {
					t.Errorf("%s: kafka answered %v, the test expects %v", tc.name, kerr.ErrorForCode(rp.ErrorCode), kerr.ErrorForCode(tc.want))
				}
			}
		}
	}
	end := func(pr txnProducer) *kmsg.EndTxnRequest {
		r := kmsg.NewPtrEndTxnRequest()
		r.SetVersion(5)
		r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit = txnID, pr.id, pr.epoch, true
		return r
	}
	p.compareByID(t, "end transaction", end(kp), end(cp))
}

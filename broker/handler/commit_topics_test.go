package handler

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/metadata"
)

// TestCommitTopicFilter checks the topic checks OffsetCommit and
// TxnOffsetCommit share (KafkaApis.handleOffsetCommitRequest and
// handleTxnOffsetCommitRequest): a missing topic, a missing partition and
// an unknown topic id are refused before the coordinator, and the
// coordinator's answers (here COORDINATOR_NOT_AVAILABLE, as the Env has no
// coordinator) are merged after them under the same topic entry.
func TestCommitTopicFilter(t *testing.T) {
	env, _ := newAdminEnv(t, nil)
	call(t, env, createReq(topicReq("a", 2, 1)), 7)
	ta, ok := env.Meta.Image().Topic("a")
	if !ok {
		t.Fatal("topic a not created")
	}
	idA := [16]byte(ta.ID)
	unknownID := [16]byte{9}

	render := func(topics []string) string { return strings.Join(topics, " ") }
	unknown, noCoord := kerr.UnknownTopicOrPartition.Code, kerr.CoordinatorNotAvailable.Code

	commit := func(version int16, topics ...kmsg.OffsetCommitRequestTopic) string {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Group, r.Generation, r.Topics = "g", -1, topics
		var out []string
		for _, rt := range call(t, env, r, version).(*kmsg.OffsetCommitResponse).Topics {
			s := rt.Topic
			if version >= 10 {
				s = fmt.Sprintf("%x", rt.TopicID[:1])
			}
			for _, p := range rt.Partitions {
				s += fmt.Sprintf(" %d:%d", p.Partition, p.ErrorCode)
			}
			out = append(out, "["+s+"]")
		}
		return render(out)
	}
	ct := func(name string, id [16]byte, parts ...int32) kmsg.OffsetCommitRequestTopic {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = name, id
		for _, p := range parts {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition = p
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	}
	if got, want := commit(8, ct("a", [16]byte{}, 0, 5, 1), ct("zz", [16]byte{}, 0)),
		fmt.Sprintf("[a 5:%d 0:%d 1:%d] [zz 0:%d]", unknown, noCoord, noCoord, unknown); got != want {
		t.Errorf("OffsetCommit v8: %s, want %s", got, want)
	}
	if got, want := commit(8, ct("a", [16]byte{}, 1)), fmt.Sprintf("[a 1:%d]", noCoord); got != want {
		t.Errorf("OffsetCommit v8 all kept: %s, want %s", got, want)
	}
	if got, want := commit(10, ct("", unknownID, 0), ct("", idA, -1, 0)),
		fmt.Sprintf("[09 0:%d] [%x -1:%d 0:%d]", kerr.UnknownTopicID.Code, idA[:1], unknown, noCoord); got != want {
		t.Errorf("OffsetCommit v10: %s, want %s", got, want)
	}

	txnCommit := func(version int16, topics ...kmsg.TxnOffsetCommitRequestTopic) string {
		r := kmsg.NewPtrTxnOffsetCommitRequest()
		r.Group, r.TransactionalID, r.Generation, r.Topics = "g", "tx", -1, topics
		var out []string
		for _, rt := range call(t, env, r, version).(*kmsg.TxnOffsetCommitResponse).Topics {
			s := rt.Topic
			if version >= 6 {
				s = fmt.Sprintf("%x", rt.TopicID[:1])
			}
			for _, p := range rt.Partitions {
				s += fmt.Sprintf(" %d:%d", p.Partition, p.ErrorCode)
			}
			out = append(out, "["+s+"]")
		}
		return render(out)
	}
	tt := func(name string, id [16]byte, parts ...int32) kmsg.TxnOffsetCommitRequestTopic {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = name, id
		for _, p := range parts {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition = p
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	}
	if got, want := txnCommit(3, tt("zz", [16]byte{}, 0), tt("a", [16]byte{}, 2, 0)),
		fmt.Sprintf("[zz 0:%d] [a 2:%d 0:%d]", unknown, unknown, noCoord); got != want {
		t.Errorf("TxnOffsetCommit v3: %s, want %s", got, want)
	}
	if got, want := txnCommit(6, tt("", idA, 1), tt("", unknownID, 3)),
		fmt.Sprintf("[09 3:%d] [%x 1:%d]", kerr.UnknownTopicID.Code, idA[:1], noCoord); got != want {
		t.Errorf("TxnOffsetCommit v6: %s, want %s", got, want)
	}
	// Without a metadata image every topic is unknown.
	kept := filterCommitTopics((*metadata.Image)(nil), false, []kmsg.TxnOffsetCommitRequestTopic{tt("a", [16]byte{}, 0)},
		func(t *kmsg.TxnOffsetCommitRequestTopic) (*string, [16]byte, *[]kmsg.TxnOffsetCommitRequestTopicPartition) {
			return &t.Topic, t.TopicID, &t.Partitions
		},
		func(p *kmsg.TxnOffsetCommitRequestTopicPartition) int32 { return p.Partition },
		func(name string, _ [16]byte, part int32, code int16) {
			if name != "a" || part != 0 || code != unknown {
				t.Errorf("refused %s-%d with %d", name, part, code)
			}
		}, nil)
	if len(kept) != 0 {
		t.Errorf("kept %v without an image", kept)
	}
}

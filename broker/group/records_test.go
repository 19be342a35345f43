package group

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The expected bytes below are written out by hand from the JSON schemas in
// Kafka's group-coordinator/src/main/resources/common/message: int16 record
// type or version, int16-length strings for non-flexible versions, uvarint
// length+1 for compact strings and arrays, and an empty tagged-field section
// (0x00) closing each flexible struct.
func TestRecordBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"OffsetCommitKey", EncodeOffsetCommitKey(OffsetCommitKey{"g", "t", 3}),
			"0001 0001 67 0001 74 00000003"},
		{"OffsetCommitValue v3", EncodeOffsetCommitValue(OffsetCommitValue{Offset: 42, LeaderEpoch: 5, Metadata: "m", CommitTimestamp: 1000, ExpireTimestamp: -1}),
			"0003 000000000000002a 00000005 0001 6d 00000000000003e8"},
		{"OffsetCommitValue v1", EncodeOffsetCommitValue(OffsetCommitValue{Offset: 1, LeaderEpoch: 5, Metadata: "", CommitTimestamp: 2, ExpireTimestamp: 3}),
			"0001 0000000000000001 0000 0000000000000002 0000000000000003"},
		{"GroupMetadataKey", encodeGroupKey(RecordGroupMetadata, "g"), "0002 0001 67"},
		{"GroupMetadataValue v3", EncodeGroupMetadataValue(GroupMetadataValue{
			ProtocolType: "consumer", Generation: 1, Protocol: strp("range"), Leader: strp("m"), CurrentStateTimestamp: 7,
			Members: []MemberMetadata{{MemberID: "m", ClientID: "c", ClientHost: "h", RebalanceTimeout: 9, SessionTimeout: 8, Subscription: []byte{1}, Assignment: []byte{}}},
		}), "0003 0008 636f6e73756d6572 00000001 0005 72616e6765 0001 6d 0000000000000007 00000001" +
			"0001 6d ffff 0001 63 0001 68 00000009 00000008 00000001 01 00000000"},
		{"ConsumerGroupMetadataValue", encodeEpochValue(4), "0000 00000004 00"},
		{"ConsumerGroupMemberMetadataKey", encodeMemberKey(RecordConsumerGroupMemberMetadata, "g", "m"), "0005 0001 67 0001 6d"},
		{"ConsumerGroupMemberMetadataValue", EncodeConsumerMemberValue(ConsumerMemberValue{
			ClientID: "c", ClientHost: "h", SubscribedTopics: []string{"t"}, RebalanceTimeoutMs: 5, ServerAssignor: strp("range"),
		}), "0000 00 00 02 63 02 68 02 02 74 00 00000005 06 72616e6765 00"},
		{"ConsumerGroupTargetAssignmentMemberValue", EncodeTargetMemberValue([]TopicPartitions{{TopicID: [16]byte{1}, Partitions: []int32{0, 2}}}),
			"0000 02 01000000000000000000000000000000 03 00000000 00000002 00 00"},
		{"ConsumerGroupCurrentMemberAssignmentValue", EncodeCurrentAssignmentValue(CurrentAssignmentValue{
			MemberEpoch: 3, PreviousMemberEpoch: 2, State: memberUnrevoked,
			Assigned:          []TopicPartitions{{TopicID: [16]byte{1}, Partitions: []int32{0}}},
			PendingRevocation: []TopicPartitions{},
		}), "0000 00000003 00000002 01 02 01000000000000000000000000000000 02 00000000 00 01 00"},
	} {
		if want := unhex(t, tc.want); !bytes.Equal(tc.got, want) {
			t.Errorf("%s:\n got %x\nwant %x", tc.name, tc.got, want)
		}
	}
}

func TestRecordRoundTrip(t *testing.T) {
	oc := OffsetCommitValue{Offset: 9, LeaderEpoch: 2, Metadata: "meta", CommitTimestamp: 11, ExpireTimestamp: -1}
	if got, err := DecodeOffsetCommitValue(EncodeOffsetCommitValue(oc)); err != nil || got != oc {
		t.Fatalf("offset commit: %+v %v", got, err)
	}
	gm := GroupMetadataValue{ProtocolType: "consumer", Generation: 3, Protocol: strp("range"), Leader: strp("a"), CurrentStateTimestamp: 5,
		Members: []MemberMetadata{{MemberID: "a", GroupInstanceID: strp("i"), ClientID: "c", ClientHost: "/h", RebalanceTimeout: 1, SessionTimeout: 2, Subscription: []byte("s"), Assignment: []byte("x")}}}
	if got, err := DecodeGroupMetadataValue(EncodeGroupMetadataValue(gm)); err != nil || !reflect.DeepEqual(got, gm) {
		t.Fatalf("group metadata: %+v %v", got, err)
	}
	cm := ConsumerMemberValue{InstanceID: strp("i"), ClientID: "c", ClientHost: "h", SubscribedTopics: []string{"a", "b"}, SubscribedRegex: strp("x.*"), RebalanceTimeoutMs: 3}
	if got, err := DecodeConsumerMemberValue(EncodeConsumerMemberValue(cm)); err != nil || !reflect.DeepEqual(got, cm) {
		t.Fatalf("member: %+v %v", got, err)
	}
	// A classic member's metadata (tagged field 0), byte for byte as Apache
	// Kafka 4.4's generated ConsumerGroupMemberMetadataValue writes it.
	classic := ConsumerMemberValue{ClientID: "c", ClientHost: "/h", SubscribedTopics: []string{"t"}, RebalanceTimeoutMs: 3000,
		Classic: &ClassicMemberMetadata{SessionTimeoutMs: 10000, SupportedProtocols: []ClassicProtocol{{Name: "range", Metadata: []byte{0, 1, 2}}}}}
	const kafkaBytes = "000000000263032f680202740000000bb8000100120100002710020672616e6765040001020000"
	if got := hex.EncodeToString(EncodeConsumerMemberValue(classic)); got != kafkaBytes {
		t.Fatalf("classic member value\n got %s\nwant %s", got, kafkaBytes)
	}
	kb, _ := hex.DecodeString(kafkaBytes)
	if got, err := DecodeConsumerMemberValue(kb); err != nil || !reflect.DeepEqual(got, classic) {
		t.Fatalf("classic member: %+v %v", got, err)
	}
	ca := CurrentAssignmentValue{MemberEpoch: 4, PreviousMemberEpoch: 3, State: 2, Assigned: []TopicPartitions{{TopicID: [16]byte{9}, Partitions: []int32{1, 2}}}}
	got, err := DecodeCurrentAssignmentValue(EncodeCurrentAssignmentValue(ca))
	if err != nil || got.MemberEpoch != 4 || got.State != 2 || !reflect.DeepEqual(got.Assigned, ca.Assigned) || len(got.PendingRevocation) != 0 {
		t.Fatalf("current: %+v %v", got, err)
	}
	for _, k := range [][]byte{
		EncodeOffsetCommitKey(OffsetCommitKey{"g", "t", 1}),
		encodeGroupKey(RecordGroupMetadata, "g"),
		encodeMemberKey(RecordConsumerGroupCurrentMember, "g", "m"),
	} {
		if _, err := DecodeKey(k); err != nil {
			t.Fatalf("key %x: %v", k, err)
		}
	}
}

// Older and flexible versions Kafka may have written must still load.
func TestDecodeOtherVersions(t *testing.T) {
	v0 := unhex(t, "0000 0000000000000007 0001 6d 0000000000000005")
	got, err := DecodeOffsetCommitValue(v0)
	if err != nil || got.Offset != 7 || got.Metadata != "m" || got.CommitTimestamp != 5 || got.LeaderEpoch != -1 || got.ExpireTimestamp != -1 {
		t.Fatalf("v0: %+v %v", got, err)
	}
	// v4 is flexible: compact metadata string and a tagged-field section,
	// here carrying one unknown tag that must be skipped.
	v4 := unhex(t, "0004 0000000000000007 00000001 02 6d 0000000000000005 01 05 02 abcd")
	got, err = DecodeOffsetCommitValue(v4)
	if err != nil || got.Offset != 7 || got.LeaderEpoch != 1 || got.Metadata != "m" {
		t.Fatalf("v4: %+v %v", got, err)
	}
	gm0 := unhex(t, "0000 0008 636f6e73756d6572 00000001 ffff ffff 00000000")
	g, err := DecodeGroupMetadataValue(gm0)
	if err != nil || g.Protocol != nil || g.CurrentStateTimestamp != -1 || len(g.Members) != 0 {
		t.Fatalf("gm v0: %+v %v", g, err)
	}
}

func TestDecodeRejectsGarbage(t *testing.T) {
	for _, b := range [][]byte{
		nil, {0}, {0, 1, 0, 5, 'a'}, {0, 2, 0xff, 0xff},
	} {
		if _, err := DecodeKey(b); err == nil {
			t.Errorf("key %x decoded", b)
		}
	}
	if _, err := DecodeKey([]byte{0, 99}); !errors.Is(err, ErrUnknownRecordType) {
		t.Errorf("unknown type: %v", err)
	}
	// A huge member count must fail, not allocate.
	huge := unhex(t, "0003 0000 00000001 ffff ffff 0000000000000000 7fffffff")
	if _, err := DecodeGroupMetadataValue(huge); !errors.Is(err, ErrBadRecord) {
		t.Errorf("huge array: %v", err)
	}
	if _, err := DecodeOffsetCommitValue(unhex(t, "0009 00")); !errors.Is(err, ErrBadRecord) {
		t.Errorf("bad version: %v", err)
	}
	trailing := append(EncodeOffsetCommitValue(OffsetCommitValue{ExpireTimestamp: -1}), 0)
	if _, err := DecodeOffsetCommitValue(trailing); !errors.Is(err, ErrBadRecord) {
		t.Errorf("trailing: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(EncodeOffsetCommitValue(OffsetCommitValue{Offset: 1, ExpireTimestamp: -1}))
	f.Add(EncodeGroupMetadataValue(GroupMetadataValue{ProtocolType: "consumer", Members: []MemberMetadata{{MemberID: "a"}}}))
	f.Add(EncodeCurrentAssignmentValue(CurrentAssignmentValue{Assigned: []TopicPartitions{{Partitions: []int32{1}}}}))
	f.Add(EncodeConsumerMemberValue(ConsumerMemberValue{SubscribedTopics: []string{"a"}}))
	f.Add(EncodeConsumerMemberValue(ConsumerMemberValue{Classic: &ClassicMemberMetadata{SupportedProtocols: []ClassicProtocol{{Name: "r", Metadata: []byte{1}}}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = DecodeKey(b)
		_, _ = DecodeOffsetCommitValue(b)
		_, _ = DecodeGroupMetadataValue(b)
		_, _ = DecodeConsumerMemberValue(b)
		_, _ = DecodeTargetMemberValue(b)
		_, _ = DecodeCurrentAssignmentValue(b)
		c := New(DefaultConfig())
		_ = c.Replay(b, b)
	})
}

func TestPartitionFor(t *testing.T) {
	for _, tc := range []struct {
		group string
		n     int32
		want  int32
	}{
		{"", 50, 0},
		{"a", 50, 97 % 50},
		{"hello", 50, 99162322 % 50},
		{"hello world", 50, 1794106052 % 50},
		{"Aa", 50, 2112 % 50},
		// Java's "polygenelubricants".hashCode() is Integer.MIN_VALUE, which
		// Kafka's Utils.abs maps to 0.
		{"polygenelubricants", 50, 0},
		// U+1F600 is the UTF-16 pair D83D DE00: 0xD83D*31 + 0xDE00.
		{"\U0001F600", 1 << 30, 1772899},
	} {
		if got := PartitionFor(tc.group, tc.n); got != tc.want {
			t.Errorf("PartitionFor(%q, %d) = %d, want %d", tc.group, tc.n, got, tc.want)
		}
	}
}

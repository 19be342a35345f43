package share

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"reflect"
	"testing"
)

func strp(s string) *string { return &s }

// TestGoldenShareUpdate checks a ShareUpdateKey and ShareUpdateValue
// against bytes laid out by hand from Kafka's JSON schemas: the key is the
// record type 1, then GroupId (int16 length), TopicId (16 bytes) and
// Partition, non-flexible; the value is version 0, SnapshotEpoch,
// LeaderEpoch, StartOffset, the compact array of StateBatches (each
// FirstOffset, LastOffset, DeliveryState int8, DeliveryCount int16, empty
// tags), then the tagged fields with DeliveryCompleteCount as tag 0.
func TestGoldenShareUpdate(t *testing.T) {
	id := [16]byte{0: 0xaa, 15: 0xbb}
	key := EncodeStateKey(RecordShareUpdate, StateKey{Group: "g1", TopicID: id, Partition: 3})
	wantKey := "0001" + "0002" + "6731" + "aa0000000000000000000000000000bb" + "00000003"
	if got := hex.EncodeToString(key); got != wantKey {
		t.Errorf("key\n got %s\nwant %s", got, wantKey)
	}
	val := EncodeUpdateValue(UpdateValue{SnapshotEpoch: 2, LeaderEpoch: 5, StartOffset: 7, DeliveryCompleteCount: 1,
		StateBatches: []StateBatch{{FirstOffset: 8, LastOffset: 9, DeliveryState: 2, DeliveryCount: 1}}})
	wantVal := "0000" + "00000002" + "00000005" + "0000000000000007" +
		"02" + "0000000000000008" + "0000000000000009" + "02" + "0001" + "00" +
		"01" + "00" + "04" + "00000001"
	if got := hex.EncodeToString(val); got != wantVal {
		t.Errorf("value\n got %s\nwant %s", got, wantVal)
	}
	if typ, k, err := DecodeStateKey(key); err != nil || typ != RecordShareUpdate || k.Group != "g1" || k.TopicID != id || k.Partition != 3 {
		t.Errorf("decode key: %d %+v %v", typ, k, err)
	}
}

// TestGoldenCurrentAssignment checks a ShareGroupCurrentMemberAssignment
// key and value against bytes laid out by hand: type 14, GroupId,
// MemberId; version 0, MemberEpoch, PreviousMemberEpoch, State, compact
// array of TopicPartitions (TopicId, compact int32 array, tags), tags.
func TestGoldenCurrentAssignment(t *testing.T) {
	key := EncodeGroupKey(GroupKey{Type: RecordShareGroupCurrentMember, Group: "g", Member: "m"})
	if got, want := hex.EncodeToString(key), "000e"+"000167"+"00016d"; got != want {
		t.Errorf("key\n got %s\nwant %s", got, want)
	}
	id := [16]byte{15: 1}
	val := EncodeCurrentAssignmentValue(CurrentAssignmentValue{MemberEpoch: 4, PreviousMemberEpoch: 3, Assigned: []TopicPartitions{{TopicID: id, Partitions: []int32{0, 2}}}})
	want := "0000" + "00000004" + "00000003" + "00" + "02" + "00000000000000000000000000000001" + "03" + "00000000" + "00000002" + "00" + "00"
	if got := hex.EncodeToString(val); got != want {
		t.Errorf("value\n got %s\nwant %s", got, want)
	}
}

func TestStateRecordsRoundTrip(t *testing.T) {
	snaps := []SnapshotValue{
		{SnapshotEpoch: 1, StateEpoch: 2, LeaderEpoch: 3, StartOffset: 4, DeliveryCompleteCount: -1, CreateTimestamp: 5, WriteTimestamp: 6, StateBatches: []StateBatch{}},
		{StartOffset: -1, DeliveryCompleteCount: 9, StateBatches: []StateBatch{{1, 2, 0, 1}, {3, 9, 4, 5}}},
	}
	for _, v := range snaps {
		got, err := DecodeSnapshotValue(EncodeSnapshotValue(v))
		if err != nil || !reflect.DeepEqual(got, v) {
			t.Errorf("snapshot %+v: got %+v, %v", v, got, err)
		}
	}
	u := UpdateValue{SnapshotEpoch: 1, LeaderEpoch: -1, StartOffset: -1, DeliveryCompleteCount: -1, StateBatches: []StateBatch{{5, 5, 2, 3}}}
	if got, err := DecodeUpdateValue(EncodeUpdateValue(u)); err != nil || !reflect.DeepEqual(got, u) {
		t.Errorf("update: got %+v, %v", got, err)
	}
	k := StateKey{Group: "grp", TopicID: [16]byte{1, 2, 3}, Partition: 9}
	if typ, got, err := DecodeStateKey(EncodeStateKey(RecordShareSnapshot, k)); err != nil || typ != RecordShareSnapshot || got != k {
		t.Errorf("key: %d %+v %v", typ, got, err)
	}
}

func TestGroupRecordsRoundTrip(t *testing.T) {
	m := MemberMetadataValue{RackID: strp("r1"), ClientID: "c", ClientHost: "/h", SubscribedTopics: []string{"a", "b"}}
	if got, err := DecodeMemberMetadataValue(EncodeMemberMetadataValue(m)); err != nil || !reflect.DeepEqual(got, m) {
		t.Errorf("member: %+v %v", got, err)
	}
	m.RackID, m.SubscribedTopics = nil, []string{}
	if got, err := DecodeMemberMetadataValue(EncodeMemberMetadataValue(m)); err != nil || !reflect.DeepEqual(got, m) {
		t.Errorf("member without rack: %+v %v", got, err)
	}
	tps := []TopicPartitions{{TopicID: [16]byte{7}, Partitions: []int32{1, 2}}, {TopicID: [16]byte{8}, Partitions: []int32{}}}
	if got, err := DecodeTargetMemberValue(EncodeTargetMemberValue(tps)); err != nil || !reflect.DeepEqual(got, tps) {
		t.Errorf("target: %+v %v", got, err)
	}
	c := CurrentAssignmentValue{MemberEpoch: 5, PreviousMemberEpoch: 4, State: 0, Assigned: tps}
	if got, err := DecodeCurrentAssignmentValue(EncodeCurrentAssignmentValue(c)); err != nil || !reflect.DeepEqual(got, c) {
		t.Errorf("current: %+v %v", got, err)
	}
	gm := GroupMetadataValue{Epoch: 12, MetadataHash: -5}
	if got, err := DecodeGroupMetadataValue(EncodeGroupMetadataValue(gm)); err != nil || got != gm {
		t.Errorf("group metadata: %+v %v", got, err)
	}
	for _, tm := range []TargetMetadataValue{{AssignmentEpoch: 3}, {AssignmentEpoch: 4, AssignmentTimestamp: 1_700_000_000_000}} {
		if got, err := DecodeTargetMetadataValue(EncodeTargetMetadataValue(tm)); err != nil || got != tm {
			t.Errorf("target metadata %+v: %+v %v", tm, got, err)
		}
	}
	for _, k := range []GroupKey{{Type: RecordShareGroupMetadata, Group: "g"}, {Type: RecordShareGroupTargetMember, Group: "g", Member: "m"}} {
		if got, ok, err := DecodeGroupKey(EncodeGroupKey(k)); err != nil || !ok || got != k {
			t.Errorf("key %+v: %+v %v %v", k, got, ok, err)
		}
	}
	// A consumer group key (type 3) is not a share group's.
	if _, ok, err := DecodeGroupKey([]byte{0, 3, 0, 1, 'g'}); ok || err != nil {
		t.Errorf("consumer group key taken: %v %v", ok, err)
	}
}

// TestDecodeTruncated feeds every prefix of valid records to the decoders:
// each must fail cleanly.
func TestDecodeTruncated(t *testing.T) {
	full := [][]byte{
		EncodeSnapshotValue(SnapshotValue{DeliveryCompleteCount: 3, StateBatches: []StateBatch{{1, 2, 0, 1}}}),
		EncodeUpdateValue(UpdateValue{StateBatches: []StateBatch{{1, 2, 0, 1}}}),
		EncodeMemberMetadataValue(MemberMetadataValue{ClientID: "c", SubscribedTopics: []string{"t"}}),
		EncodeCurrentAssignmentValue(CurrentAssignmentValue{Assigned: []TopicPartitions{{Partitions: []int32{1}}}}),
	}
	decoders := []func([]byte) error{
		func(b []byte) error { _, err := DecodeSnapshotValue(b); return err },
		func(b []byte) error { _, err := DecodeUpdateValue(b); return err },
		func(b []byte) error { _, err := DecodeMemberMetadataValue(b); return err },
		func(b []byte) error { _, err := DecodeCurrentAssignmentValue(b); return err },
	}
	for i, b := range full {
		if err := decoders[i](b); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		for n := 0; n < len(b); n++ {
			if err := decoders[i](b[:n]); err == nil {
				t.Errorf("record %d cut at %d decoded", i, n)
			}
		}
		if err := decoders[i](append(bytes.Clone(b), 0)); err == nil {
			t.Errorf("record %d with a trailing byte decoded", i)
		}
	}
}

// FuzzDecode checks that no input crashes a decoder, and that what
// decodes re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add(EncodeSnapshotValue(SnapshotValue{DeliveryCompleteCount: 3, StateBatches: []StateBatch{{1, 2, 0, 1}}}))
	f.Add(EncodeUpdateValue(UpdateValue{DeliveryCompleteCount: -1}))
	f.Add(EncodeCurrentAssignmentValue(CurrentAssignmentValue{Assigned: []TopicPartitions{{Partitions: []int32{1}}}}))
	f.Add(EncodeStateKey(RecordShareSnapshot, StateKey{Group: "g"}))
	f.Add(EncodeTargetMetadataValue(TargetMetadataValue{AssignmentEpoch: 1, AssignmentTimestamp: 2}))
	f.Add(EncodeStatePartitionMetadataValue(StatePartitionMetadataValue{Initializing: []TopicPartitionsInfo{{TopicName: "t", Partitions: []int32{1}}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if v, err := DecodeSnapshotValue(b); err == nil && !bytes.Equal(EncodeSnapshotValue(v), b) {
			// Unknown tags are skipped, so only a record without them
			// must round-trip; re-decode the encoding at least.
			if _, err := DecodeSnapshotValue(EncodeSnapshotValue(v)); err != nil {
				t.Fatalf("re-decode: %v", err)
			}
		}
		_, _ = DecodeUpdateValue(b)
		_, _ = DecodeMemberMetadataValue(b)
		_, _ = DecodeCurrentAssignmentValue(b)
		_, _ = DecodeTargetMemberValue(b)
		_, _ = DecodeGroupMetadataValue(b)
		_, _ = DecodeTargetMetadataValue(b)
		_, _ = DecodeStatePartitionMetadataValue(b)
		_, _, _ = DecodeStateKey(b)
		_, _, _ = DecodeGroupKey(b)
	})
}

// TestKafkaBytes compares Cascade's encoding with the bytes Apache Kafka
// 4.4's generated classes (kafka-share-coordinator and
// kafka-group-coordinator, MessageUtil.toVersionPrefixedByteBuffer and
// toCoordinatorTypePrefixedByteBuffer) write for the same values, and
// decodes those bytes back.
func TestKafkaBytes(t *testing.T) {
	id := [16]byte{0: 0xaa, 15: 0xbb}
	id1 := [16]byte{15: 1}
	cases := []struct {
		name  string
		got   []byte
		kafka string
		check func(b []byte) error
	}{
		{"ShareSnapshotValue", EncodeSnapshotValue(SnapshotValue{SnapshotEpoch: 1, StateEpoch: 2, LeaderEpoch: 3, StartOffset: 4, DeliveryCompleteCount: -1,
			CreateTimestamp: 5, WriteTimestamp: 6, StateBatches: []StateBatch{{4, 6, 4, 3}}}),
			"000000000001000000020000000300000000000000040000000000000005000000000000000602000000000000000400000000000000060400030000",
			func(b []byte) error { _, err := DecodeSnapshotValue(b); return err }},
		{"ShareUpdateKey", EncodeStateKey(RecordShareUpdate, StateKey{Group: "g1", TopicID: id, Partition: 3}),
			"000100026731aa0000000000000000000000000000bb00000003",
			func(b []byte) error { _, _, err := DecodeStateKey(b); return err }},
		{"ShareUpdateValue", EncodeUpdateValue(UpdateValue{SnapshotEpoch: 2, LeaderEpoch: 5, StartOffset: 7, DeliveryCompleteCount: 1, StateBatches: []StateBatch{{8, 9, 2, 1}}}),
			"00000000000200000005000000000000000702000000000000000800000000000000090200010001000400000001",
			func(b []byte) error { _, err := DecodeUpdateValue(b); return err }},
		{"ShareGroupCurrentMemberAssignmentKey", EncodeGroupKey(GroupKey{Type: RecordShareGroupCurrentMember, Group: "g", Member: "m"}),
			"000e00016700016d",
			func(b []byte) error { _, _, err := DecodeGroupKey(b); return err }},
		{"ShareGroupCurrentMemberAssignmentValue", EncodeCurrentAssignmentValue(CurrentAssignmentValue{MemberEpoch: 4, PreviousMemberEpoch: 3, Assigned: []TopicPartitions{{TopicID: id1, Partitions: []int32{0, 2}}}}),
			"000000000004000000030002000000000000000000000000000000010300000000000000020000",
			func(b []byte) error { _, err := DecodeCurrentAssignmentValue(b); return err }},
		{"ShareGroupMetadataValue", EncodeGroupMetadataValue(GroupMetadataValue{Epoch: 12, MetadataHash: -5}),
			"00000000000cfffffffffffffffb00",
			func(b []byte) error { _, err := DecodeGroupMetadataValue(b); return err }},
		{"ShareGroupTargetAssignmentMetadataValue", EncodeTargetMetadataValue(TargetMetadataValue{AssignmentEpoch: 4, AssignmentTimestamp: 1_700_000_000_000}),
			"0000000000040100080000018bcfe56800",
			func(b []byte) error { _, err := DecodeTargetMetadataValue(b); return err }},
		{"ShareGroupMemberMetadataValue", EncodeMemberMetadataValue(MemberMetadataValue{ClientID: "c", ClientHost: "/h", SubscribedTopics: []string{"a", "b"}}),
			"0000000263032f68030261026200",
			func(b []byte) error { _, err := DecodeMemberMetadataValue(b); return err }},
		{"ShareGroupTargetAssignmentMemberValue", EncodeTargetMemberValue([]TopicPartitions{{TopicID: id1, Partitions: []int32{1}}}),
			"0000020000000000000000000000000000000102000000010000",
			func(b []byte) error { _, err := DecodeTargetMemberValue(b); return err }},
		{"ShareGroupStatePartitionMetadataKey", EncodeGroupKey(GroupKey{Type: RecordShareGroupStatePartitionMeta, Group: "g"}),
			"000f000167",
			func(b []byte) error { _, _, err := DecodeGroupKey(b); return err }},
		{"ShareGroupStatePartitionMetadataValue", EncodeStatePartitionMetadataValue(StatePartitionMetadataValue{
			Initializing: []TopicPartitionsInfo{{TopicID: id1, TopicName: "t", Partitions: []int32{0, 1}}},
			Initialized:  []TopicPartitionsInfo{{TopicID: [16]byte{15: 2}, TopicName: "u", Partitions: []int32{3}}},
			Deleting:     []TopicPartitionsInfo{{TopicID: id1, TopicName: "x"}}}),
			"0000020000000000000000000000000000000102740300000000000000010002000000000000000000000000000000020275020000000300020000000000000000000000000000000102780000",
			func(b []byte) error {
				v, err := DecodeStatePartitionMetadataValue(b)
				if err == nil && (len(v.Initializing) != 1 || v.Initialized[0].TopicName != "u" || v.Deleting[0].TopicName != "x") {
					err = fmt.Errorf("decoded %+v", v)
				}
				return err
			}},
	}
	for _, c := range cases {
		if got := hex.EncodeToString(c.got); got != c.kafka {
			t.Errorf("%s\n got   %s\n kafka %s", c.name, got, c.kafka)
		}
		b, _ := hex.DecodeString(c.kafka)
		if err := c.check(b); err != nil {
			t.Errorf("%s: decoding Kafka's bytes: %v", c.name, err)
		}
	}
}

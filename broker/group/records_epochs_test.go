package group

import (
	"bytes"
	"reflect"
	"testing"
)

// TestCurrentAssignmentEpochs checks tagged field 0 of
// ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions
// (AssignmentEpochs) against bytes Kafka 4.4's generated class wrote: two
// partitions assigned at epochs 2 and 3, one pending revocation without
// epochs.
func TestCurrentAssignmentEpochs(t *testing.T) {
	const kafka = "0000 00000003 00000002 01" +
		"02 01000000000000000000000000000000 03 00000000 00000005 01 00 09 03 00000002 00000003" +
		"02 01000000000000000000000000000000 02 00000001 00" +
		"00"
	want := unhex(t, kafka)
	v := CurrentAssignmentValue{
		MemberEpoch: 3, PreviousMemberEpoch: 2, State: memberUnrevoked,
		Assigned:          []TopicPartitions{{TopicID: [16]byte{1}, Partitions: []int32{0, 5}, AssignmentEpochs: []int32{2, 3}}},
		PendingRevocation: []TopicPartitions{{TopicID: [16]byte{1}, Partitions: []int32{1}}},
	}
	if got := EncodeCurrentAssignmentValue(v); !bytes.Equal(got, want) {
		t.Errorf("encode:\n got %x\nwant %x", got, want)
	}
	got, err := DecodeCurrentAssignmentValue(want)
	if err != nil || !reflect.DeepEqual(got, v) {
		t.Errorf("decode: %+v %v", got, err)
	}

	// AssignmentEpochs must be as long as Partitions, and its bytes must
	// fill the tag exactly.
	for name, b := range map[string]string{
		"short":    "0000 00000003 00000002 01 02 01000000000000000000000000000000 03 00000000 00000005 01 00 05 02 00000002 01 00",
		"trailing": "0000 00000003 00000002 01 02 01000000000000000000000000000000 02 00000000 01 00 06 02 00000002 ff 01 00",
		"overrun":  "0000 00000003 00000002 01 02 01000000000000000000000000000000 02 00000000 01 00 05 09 00000002 01 00",
	} {
		if _, err := DecodeCurrentAssignmentValue(unhex(t, b)); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

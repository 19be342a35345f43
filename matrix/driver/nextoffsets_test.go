package driver

import (
	"reflect"
	"testing"
)

func TestNextOffsets(t *testing.T) {
	got := NextOffsets([]Record{{Partition: 1, Offset: 4}, {Partition: 0, Offset: 7}, {Partition: 1, Offset: 2}, {Partition: 1, Offset: 5}})
	want := []PartitionOffset{{0, 8}, {1, 6}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("NextOffsets = %v, want %v", got, want)
	}
	if got := NextOffsets(nil); len(got) != 0 {
		t.Errorf("NextOffsets(nil) = %v", got)
	}
}

func TestCodeName(t *testing.T) {
	for code, want := range map[int16]string{36: "TOPIC_ALREADY_EXISTS", -1: "UNKNOWN_SERVER_ERROR", 1: "OFFSET_OUT_OF_RANGE", 32000: "UNKNOWN_CODE_32000"} {
		if got := CodeName(code); got != want {
			t.Errorf("CodeName(%d) = %q, want %q", code, got, want)
		}
	}
}

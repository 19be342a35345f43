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

package handler

import (
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/broker/replication"
)

func view(id int32, rack string, leo int64, since time.Duration) ReplicaView {
	return ReplicaView{ReadReplica: replication.ReadReplica{ID: id, LogEndOffset: leo, SinceCaughtUp: since}, Rack: rack}
}

// TestRackAwareReplicaSelector holds Select to Kafka's
// RackAwareReplicaSelector: the leader without a client rack or a replica
// in it, the leader when it is in the rack, else the rack's most caught-up
// replica.
func TestRackAwareReplicaSelector(t *testing.T) {
	leader := view(1, "a", 100, 0)
	for _, tc := range []struct {
		name     string
		rack     string
		replicas []ReplicaView
		want     int32
	}{
		{"no client rack", "", []ReplicaView{leader, view(2, "b", 100, 0)}, 1},
		{"no replica in the rack", "z", []ReplicaView{leader, view(2, "b", 100, 0)}, 1},
		{"leader in the rack", "a", []ReplicaView{leader, view(2, "a", 100, 0)}, 1},
		{"follower in the rack", "b", []ReplicaView{leader, view(2, "b", 90, 0), view(3, "c", 100, 0)}, 2},
		{"largest log end first", "b", []ReplicaView{leader, view(2, "b", 90, 0), view(3, "b", 95, time.Second)}, 3},
		{"then most recently caught up", "b", []ReplicaView{leader, view(2, "b", 95, time.Second), view(3, "b", 95, 0)}, 3},
		{"then lower id", "b", []ReplicaView{leader, view(3, "b", 95, 0), view(2, "b", 95, 0)}, 2},
	} {
		if got := (RackAwareReplicaSelector{}).Select(tc.rack, leader, tc.replicas); got.ID != tc.want {
			t.Errorf("%s: selected %d, want %d", tc.name, got.ID, tc.want)
		}
	}
	if _, err := NewReplicaSelector("com.example.Selector"); err == nil {
		t.Error("an unknown replica.selector.class was accepted")
	}
	if s, err := NewReplicaSelector(""); s != nil || err != nil {
		t.Errorf("no replica.selector.class: %v, %v; want none", s, err)
	}
}

package metadata

import (
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// clusterRecords is one of each cluster record, with the edge values the
// codec must keep apart (nil and empty lists, negative sentinels).
var clusterRecords = []Record{
	RegisterBrokerRecord{BrokerID: 2, IncarnationID: UUID{7}, BrokerEpoch: 41,
		Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092, SecurityProtocol: ProtocolPlaintext},
			{Name: "SSL", Host: "h", Port: 65535, SecurityProtocol: ProtocolSSL}},
		Features: []BrokerFeature{{Name: "metadata.version", MinSupportedVersion: 7, MaxSupportedVersion: 25}},
		Rack:     "a", Fenced: true, InControlledShutdown: false},
	RegisterBrokerRecord{BrokerID: 3, IncarnationID: UUID{8}, BrokerEpoch: 1 << 40},
	BrokerRegistrationChangeRecord{BrokerID: 2, BrokerEpoch: 41, Fenced: Unfence},
	BrokerRegistrationChangeRecord{BrokerID: 2, BrokerEpoch: 41, Fenced: FenceNone, InControlledShutdown: 1},
	UnregisterBrokerRecord{BrokerID: 3, BrokerEpoch: 1 << 40},
	PartitionChangeRecord{TopicID: UUID{1}, Partition: 0, ISR: []int32{1, 2}, Leader: NoLeaderChange,
		LeaderRecoveryState: LeaderRecoveryNoChange},
	PartitionChangeRecord{TopicID: UUID{1}, Partition: 1, ISR: []int32{}, Leader: NoLeader,
		Replicas: []int32{3, 2, 1}, LeaderRecoveryState: LeaderRecovering},
	PartitionRecord{TopicID: UUID{1}, Partition: 2, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1,
		LeaderRecoveryState: LeaderRecovering},
	// Eligible leader replicas (KIP-966): nil keeps, empty clears.
	PartitionChangeRecord{TopicID: UUID{1}, Partition: 1, ISR: []int32{}, Leader: NoLeader,
		LeaderRecoveryState: LeaderRecoveryNoChange, ELR: []int32{2, 3}, LastKnownELR: []int32{}},
	PartitionChangeRecord{TopicID: UUID{1}, Partition: 1, Leader: 2,
		LeaderRecoveryState: LeaderRecoveryNoChange, LastKnownELR: []int32{2}},
	PartitionRecord{TopicID: UUID{1}, Partition: 3, Replicas: []int32{1, 2}, ISR: []int32{}, Leader: NoLeader,
		ELR: []int32{1}, LastKnownELR: []int32{2}},
	// A reassignment (KIP-455): nil keeps, empty clears.
	PartitionChangeRecord{TopicID: UUID{1}, Partition: 1, Leader: NoLeaderChange, Replicas: []int32{2, 3, 1},
		LeaderRecoveryState: LeaderRecoveryNoChange, AddingReplicas: []int32{2, 3}, RemovingReplicas: []int32{1}},
	PartitionChangeRecord{TopicID: UUID{1}, Partition: 1, ISR: []int32{2, 3}, Leader: 2, Replicas: []int32{2, 3},
		LeaderRecoveryState: LeaderRecoveryNoChange, AddingReplicas: []int32{}, RemovingReplicas: []int32{}},
	PartitionRecord{TopicID: UUID{1}, Partition: 4, Replicas: []int32{2, 1}, ISR: []int32{1}, Leader: 1,
		ELR: []int32{}, LastKnownELR: []int32{}, AddingReplicas: []int32{2}, RemovingReplicas: []int32{1}},
}

func TestClusterRecordsRoundTrip(t *testing.T) {
	for _, rec := range clusterRecords {
		t.Run(strings.TrimPrefix(reflect.TypeOf(rec).String(), "metadata."), func(t *testing.T) {
			b := EncodeBatch([]Record{rec})
			got, err := DecodeBatch(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, []Record{rec}) {
				t.Fatalf("got %#v want %#v", got[0], rec)
			}
			for i := range b {
				if _, err := DecodeBatch(b[:i]); err == nil {
					t.Fatalf("truncated at %d decoded", i)
				}
			}
		})
	}
}

// TestPartitionRecordVersion checks that a recovered partition keeps the
// version 0 encoding older logs have, and a recovering one needs version 1.
func TestPartitionRecordVersion(t *testing.T) {
	v0 := EncodeBatch([]Record{PartitionRecord{TopicID: UUID{1}, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}})
	v1 := EncodeBatch([]Record{PartitionRecord{TopicID: UUID{1}, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderRecoveryState: 1}})
	if v0[1] != typePartition || v0[2] != 0 || v1[2] != partitionRecordV1 || len(v1) != len(v0)+1 {
		t.Fatalf("v0 %x v1 %x", v0, v1)
	}
	elr := EncodeBatch([]Record{PartitionRecord{TopicID: UUID{1}, Replicas: []int32{1}, ISR: []int32{}, Leader: NoLeader, ELR: []int32{1}}})
	if elr[2] != partitionRecordV2 {
		t.Fatalf("ELR written at version %d", elr[2])
	}
	bad := slices.Clone(v0)
	bad[2] = partitionRecordV2 + 1
	if _, err := DecodeBatch(bad); err == nil {
		t.Fatal("unknown version decoded")
	}
}

func TestApplyClusterRecords(t *testing.T) {
	id := UUID{9}
	img, err := Apply(Empty(), []Record{
		RegisterBrokerRecord{BrokerID: 1, IncarnationID: UUID{1}, BrokerEpoch: 5, Rack: "a", Fenced: true},
		RegisterBrokerRecord{BrokerID: 2, IncarnationID: UUID{2}, BrokerEpoch: 6},
		TopicRecord{Name: "t", ID: id},
		PartitionRecord{TopicID: id, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	next, err := Apply(img, []Record{
		BrokerRegistrationChangeRecord{BrokerID: 1, BrokerEpoch: 5, Fenced: Unfence},
		BrokerRegistrationChangeRecord{BrokerID: 2, BrokerEpoch: 6, InControlledShutdown: 1},
		PartitionChangeRecord{TopicID: id, Partition: 0, ISR: []int32{1}, Leader: NoLeaderChange, LeaderRecoveryState: LeaderRecoveryNoChange},
		PartitionChangeRecord{TopicID: id, Partition: 0, Leader: 2, LeaderRecoveryState: LeaderRecoveryNoChange},
	})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := img.Broker(1); !b.Fenced {
		t.Fatal("old image changed")
	}
	b1, _ := next.Broker(1)
	b2, _ := next.Broker(2)
	if b1.Fenced || !b1.Active() || b2.Active() || !b2.InControlledShutdown || b1.Rack != "a" {
		t.Fatalf("%+v %+v", b1, b2)
	}
	tp, _ := next.Topic("t")
	// One change keeps the leader (partition epoch only), one names it.
	want := Partition{Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 2, LeaderEpoch: 1, PartitionEpoch: 2}
	if !reflect.DeepEqual(tp.Partitions[0], want) {
		t.Fatalf("%+v", tp.Partitions[0])
	}
	if old, _ := img.Topic("t"); old.Partitions[0].PartitionEpoch != 0 {
		t.Fatal("old image's partition changed")
	}
	if ids := []int32{next.Brokers()[0].ID, next.Brokers()[1].ID}; !slices.Equal(ids, []int32{1, 2}) {
		t.Fatal(ids)
	}
	rebuilt, err := Apply(Empty(), next.Records())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rebuilt.Brokers(), next.Brokers()) {
		t.Fatalf("rebuilt brokers %+v", rebuilt.Brokers())
	}
	rt, _ := rebuilt.Topic("t")
	if !reflect.DeepEqual(rt, tp) {
		t.Fatalf("rebuilt %+v", rt)
	}
	gone, err := Apply(next, []Record{UnregisterBrokerRecord{BrokerID: 2, BrokerEpoch: 6}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := gone.Broker(2); ok || len(gone.Brokers()) != 1 {
		t.Fatal("not unregistered")
	}
	bad := [][]Record{
		{UnregisterBrokerRecord{BrokerID: 2, BrokerEpoch: 7}},
		{BrokerRegistrationChangeRecord{BrokerID: 1, BrokerEpoch: 4, Fenced: FenceBroker}},
		{BrokerRegistrationChangeRecord{BrokerID: 1, BrokerEpoch: 5, Fenced: 3}},
		{BrokerRegistrationChangeRecord{BrokerID: 9, BrokerEpoch: 5}},
		{RegisterBrokerRecord{BrokerID: -1}},
		{PartitionChangeRecord{TopicID: id, Partition: 1, Leader: NoLeaderChange, LeaderRecoveryState: LeaderRecoveryNoChange}},
		{PartitionChangeRecord{TopicID: UUID{3}, Leader: NoLeaderChange, LeaderRecoveryState: LeaderRecoveryNoChange}},
		{PartitionChangeRecord{TopicID: id, ISR: []int32{3}, Leader: NoLeaderChange, LeaderRecoveryState: LeaderRecoveryNoChange}},
		{PartitionChangeRecord{TopicID: id, Leader: 3, LeaderRecoveryState: LeaderRecoveryNoChange}},
		{PartitionChangeRecord{TopicID: id, Leader: -3, LeaderRecoveryState: LeaderRecoveryNoChange}},
		{PartitionChangeRecord{TopicID: id, Leader: NoLeaderChange, LeaderRecoveryState: 2}},
		{PartitionChangeRecord{TopicID: id, Leader: NoLeaderChange, LeaderRecoveryState: LeaderRecoveryNoChange, ELR: []int32{1}}},
		{PartitionChangeRecord{TopicID: id, Leader: NoLeaderChange, LeaderRecoveryState: LeaderRecoveryNoChange, ELR: []int32{3}}},
		{PartitionRecord{TopicID: id, Partition: 1, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1, ELR: []int32{1}}},
	}
	for _, recs := range bad {
		if _, err := Apply(next, recs); err == nil {
			t.Errorf("%+v applied", recs)
		}
	}
}

// TestPlace checks StripedReplicaPlacer's properties: replicas distinct,
// one per rack while racks remain, leaders unfenced and spread evenly.
func TestPlace(t *testing.T) {
	brokers := []UsableBroker{{1, "a", false}, {2, "a", false}, {3, "b", false}, {4, "b", false},
		{5, "c", false}, {6, "c", false}, {7, "c", true}}
	r := rand.New(rand.NewSource(3))
	got, err := Place(r, brokers, 50, 3)
	if err != nil {
		t.Fatal(err)
	}
	rackOf := map[int32]string{}
	for _, b := range brokers {
		rackOf[b.ID] = b.Rack
	}
	leaders := map[int32]int{}
	for _, replicas := range got {
		racks := map[string]bool{}
		for _, id := range replicas {
			racks[rackOf[id]] = true
		}
		if len(replicas) != 3 || len(racks) != 3 {
			t.Fatalf("replicas %v not one per rack", replicas)
		}
		leaders[replicas[0]]++
	}
	if leaders[7] != 0 {
		t.Fatal("fenced broker leads")
	}
	for id := int32(1); id <= 6; id++ {
		if leaders[id] < 6 || leaders[id] > 11 {
			t.Fatalf("leaders uneven: %v", leaders)
		}
	}
	again, _ := Place(rand.New(rand.NewSource(3)), brokers, 50, 3)
	if !reflect.DeepEqual(again, got) {
		t.Fatal("same seed, different placement")
	}
	for _, c := range []struct {
		brokers []UsableBroker
		rf      int
		msg     string
	}{
		{brokers, 8, "The target replication factor of 8 cannot be reached because only 7 broker(s) are registered or some brokers have all their log directories cordoned."},
		{[]UsableBroker{{1, "", true}}, 1, "All brokers are currently fenced."},
		{brokers, 0, "Invalid replication factor 0: the replication factor must be positive."},
	} {
		if _, err := Place(r, c.brokers, 1, c.rf); err == nil || err.Error() != c.msg {
			t.Errorf("rf %d: %v", c.rf, err)
		}
	}
}

// TestPlannerOnRegistrations plans a topic on an image's registrations:
// fenced brokers never lead and stay out of the ISR.
func TestPlannerOnRegistrations(t *testing.T) {
	img, err := Apply(Empty(), []Record{
		RegisterBrokerRecord{BrokerID: 1, BrokerEpoch: 1},
		RegisterBrokerRecord{BrokerID: 2, BrokerEpoch: 2, Fenced: true},
		RegisterBrokerRecord{BrokerID: 3, BrokerEpoch: 3, InControlledShutdown: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := &Planner{NumPartitions: 4, ReplicationFactor: 2, Cluster: Registrations{img},
		IDs: rand.New(rand.NewSource(1)), Placement: rand.New(rand.NewSource(1))}
	budget := MaxPartitionsPerRequest
	recs, topic, err := p.CreateTopic(img, CreateTopic{Name: "t", NumPartitions: -1, ReplicationFactor: -1}, &budget)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 5 || len(topic.Partitions) != 4 || budget != MaxPartitionsPerRequest-4 {
		t.Fatalf("%d records, %+v", len(recs), topic)
	}
	for _, part := range topic.Partitions {
		if part.Leader != 1 || !slices.Equal(part.ISR, []int32{1}) || len(part.Replicas) != 2 || slices.Contains(part.Replicas, 3) {
			t.Fatalf("%+v", part)
		}
	}
	_, _, err = p.CreateTopic(img, CreateTopic{Name: "u", NumPartitions: 1, ReplicationFactor: 3}, &budget)
	if err == nil || err.Error() != "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be reached because only 2 broker(s) are registered or some brokers have all their log directories cordoned." {
		t.Fatal(err)
	}
	_, _, err = p.CreateTopic(img, CreateTopic{Name: "u", NumPartitions: -1, ReplicationFactor: -1,
		Assignments: []Assignment{{0, []int32{2, 3}}}}, &budget)
	if err == nil || err.Error() != "All brokers specified in the manual partition assignment for partition 0 are fenced or in controlled shutdown." {
		t.Fatal(err)
	}
	img, err = Apply(img, recs)
	if err != nil {
		t.Fatal(err)
	}
	more, err := p.CreatePartitions(img, CreatePartitions{Name: "t", Count: 6}, &budget)
	if err != nil || len(more) != 2 {
		t.Fatal(more, err)
	}
}

func TestWellFormedAssignments(t *testing.T) {
	as := func(lists ...[]int32) []Assignment {
		var out []Assignment
		for i, l := range lists {
			out = append(out, Assignment{Partition: int32(i), Replicas: l})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		as   []Assignment
		want bool
	}{
		{"even", as([]int32{1, 2}, []int32{2, 3}), true},
		{"one", as([]int32{7}), true},
		{"broker twice", as([]int32{1, 1}), false},
		{"uneven", as([]int32{1}, []int32{2, 3}), false},
		{"empty", as([]int32{}), false},
		{"partition twice", []Assignment{{Partition: 0, Replicas: []int32{1}}, {Partition: 0, Replicas: []int32{2}}}, false},
	} {
		if got := WellFormedAssignments(tc.as); got != tc.want {
			t.Errorf("%s: got %v want %v", tc.name, got, tc.want)
		}
	}
}

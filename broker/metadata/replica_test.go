package metadata

import (
	"errors"
	"testing"

	"github.com/cascade-kafka/cascade/broker/acl"
)

// recordingWriter is a Writer that records the calls a replica store
// routes to it and hands out producer id blocks of 3.
type recordingWriter struct {
	creates []CreateTopic
	blocks  int
	next    int64
}

func (w *recordingWriter) CreateTopics(reqs []CreateTopic, _ bool) []CreateResult {
	w.creates = append(w.creates, reqs...)
	out := make([]CreateResult, len(reqs))
	for i, r := range reqs {
		out[i] = CreateResult{Name: r.Name, Err: &Error{Kind: ErrNotController, Message: "recorded"}}
	}
	return out
}
func (w *recordingWriter) DeleteTopics(reqs []DeleteTopic) []DeleteResult { return nil }
func (w *recordingWriter) CreatePartitions([]CreatePartitions, bool) []CreatePartitionsResult {
	return nil
}
func (w *recordingWriter) IncrementalAlterTopicConfigs(string, []ConfigOp, bool) error { return nil }
func (w *recordingWriter) AlterTopicConfigs(string, map[string]*string, bool) error    { return nil }
func (w *recordingWriter) CreateACLs([]acl.Binding) ([]error, error)                   { return nil, ErrNotController }
func (w *recordingWriter) DeleteACLs([]acl.Filter) ([]DeleteACLsResult, error) {
	return nil, ErrNotController
}
func (w *recordingWriter) AllocateProducerIDs() (int64, int64, error) {
	w.blocks++
	first := w.next
	w.next += 3
	return first, 3, nil
}

// TestReplicaRoutesWrites checks that a replica store plans nothing itself:
// topic writes and producer id blocks go to its Writer.
func TestReplicaRoutesWrites(t *testing.T) {
	w := &recordingWriter{next: 1000}
	s := NewReplica(w, Options{})
	if _, err := s.EnsureTopic("auto"); !errors.Is(err, ErrNotController) {
		t.Fatalf("EnsureTopic: %v, want the writer's error", err)
	}
	if len(w.creates) != 1 || w.creates[0].Name != "auto" || w.creates[0].NumPartitions != -1 {
		t.Fatalf("writer saw %+v", w.creates)
	}
	for i, want := range []int64{1000, 1001, 1002, 1003} {
		id, err := s.NextProducerID()
		if err != nil || id != want {
			t.Fatalf("producer id %d: %d, %v; want %d", i, id, err, want)
		}
	}
	if w.blocks != 2 {
		t.Fatalf("%d blocks allocated for 4 ids in blocks of 3", w.blocks)
	}
	if _, err := s.AllocateProducerIDs(10); err == nil {
		t.Fatal("a replica store reserved producer ids in its own image")
	}
}

// TestReplicaApplyCommitted checks the quorum's entry point: each batch is
// applied at its raft index and published to subscribers; a batch that does
// not apply changes nothing; a snapshot replaces the image.
func TestReplicaApplyCommitted(t *testing.T) {
	s := NewReplica(&recordingWriter{}, Options{})
	var seen []int64
	cancel := s.Subscribe(func(_, next *Image) { seen = append(seen, next.Offset) })
	defer cancel()
	id := UUID{1}
	if err := s.ApplyCommitted(3, EncodeBatch([]Record{ClusterIDRecord{ClusterID: "c"}})); err != nil {
		t.Fatal(err)
	}
	topic := []Record{TopicRecord{Name: "t", ID: id}, PartitionRecord{TopicID: id, Partition: 0, Replicas: []int32{2}, ISR: []int32{2}, Leader: 2}}
	if err := s.ApplyCommitted(7, EncodeBatch(topic)); err != nil {
		t.Fatal(err)
	}
	img := s.Image()
	if img.Offset != 7 || img.ClusterID != "c" {
		t.Fatalf("image at %d, cluster %q", img.Offset, img.ClusterID)
	}
	if tp, ok := img.Topic("t"); !ok || tp.Partitions[0].Leader != 2 {
		t.Fatalf("topic t: %+v %v", tp, ok)
	}
	if err := s.ApplyCommitted(8, EncodeBatch(topic)); err == nil {
		t.Fatal("a duplicate topic applied")
	}
	if err := s.ApplyCommitted(8, []byte{1, 2, 3}); err == nil {
		t.Fatal("a torn batch applied")
	}
	if s.Image().Offset != 7 {
		t.Fatalf("a failed batch moved the image to %d", s.Image().Offset)
	}
	if err := s.RestoreSnapshot(20, EncodeBatch(img.Records())); err != nil {
		t.Fatal(err)
	}
	if got := s.Image(); got.Offset != 20 || got.ClusterID != "c" {
		t.Fatalf("restored image at %d, cluster %q", got.Offset, got.ClusterID)
	} else if _, ok := got.Topic("t"); !ok {
		t.Fatal("restored image lost topic t")
	}
	if want := []int64{0, 3, 7, 20}; len(seen) != len(want) || seen[1] != 3 || seen[2] != 7 || seen[3] != 20 {
		t.Fatalf("subscriber saw offsets %v, want %v", seen, want)
	}
}

package metadata

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/metadata/journal"
)

func sp(s string) *string { return &s }

func openStore(t *testing.T, dir string, props map[string]string) *Store {
	t.Helper()
	b, err := config.New(props)
	if err != nil {
		t.Fatal(err)
	}
	st, err := Open(dir, Options{Broker: b, Rand: rand.New(rand.NewSource(1)), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestRecordsRoundTrip(t *testing.T) {
	recs := []Record{
		ClusterIDRecord{ClusterID: "abc"},
		FeatureLevelRecord{Name: "metadata.version", Level: 25},
		TopicRecord{Name: "t", ID: UUID{1, 2, 3}},
		PartitionRecord{TopicID: UUID{1, 2, 3}, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 7, PartitionEpoch: -1},
		ConfigRecord{ResourceType: ResourceTopic, ResourceName: "t", Name: "retention.ms", Value: sp("5")},
		ConfigRecord{ResourceType: ResourceTopic, ResourceName: "t", Name: "segment.ms"},
		ProducerIDsRecord{BrokerID: 1, BrokerEpoch: 9, NextProducerID: 1000},
		RemoveTopicRecord{TopicID: UUID{1, 2, 3}},
	}
	got, err := DecodeBatch(EncodeBatch(recs))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, recs) {
		t.Fatalf("got %+v", got)
	}
	b := EncodeBatch(recs)
	for i := 0; i < len(b); i++ {
		if _, err := DecodeBatch(b[:i]); err == nil {
			t.Fatalf("truncated at %d decoded", i)
		}
	}
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(EncodeBatch([]Record{TopicRecord{Name: "t", ID: UUID{1}}, PartitionRecord{TopicID: UUID{1}, Replicas: []int32{1, 2}}}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{1, typePartition, 0, 40})
	f.Add(EncodeBatch(clusterRecords))
	for _, rec := range clusterRecords {
		f.Add(EncodeBatch([]Record{rec}))
	}
	f.Add(EncodeBatch([]Record{UserScramCredentialRecord{Name: "alice", Mechanism: ScramSHA512, Salt: []byte("s"),
		StoredKey: []byte("k"), ServerKey: []byte("v"), Iterations: 4096}, RemoveUserScramCredentialRecord{Name: "alice", Mechanism: ScramSHA512}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := DecodeBatch(b)
		if err != nil {
			return
		}
		again, err := DecodeBatch(EncodeBatch(recs))
		if err != nil || len(again) != len(recs) {
			t.Fatalf("re-decode: %v", err)
		}
	})
}

func TestUUIDs(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	seen := map[UUID]bool{}
	for i := 0; i < 1000; i++ {
		u, err := newUUID(r)
		if err != nil {
			t.Fatal(err)
		}
		if u.IsZero() || seen[u] || u[6]>>4 != 4 || u[8]>>6 != 2 || strings.HasPrefix(u.String(), "-") {
			t.Fatalf("bad uuid %x", u)
		}
		seen[u] = true
	}
	if (UUID{}).String() != "AAAAAAAAAAAAAAAAAAAAAA" {
		t.Fatal((UUID{}).String())
	}
}

func TestApplyIsCopyOnWrite(t *testing.T) {
	id := UUID{9}
	a, err := Apply(Empty(), []Record{TopicRecord{Name: "t", ID: id},
		PartitionRecord{TopicID: id, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Apply(a, []Record{
		ConfigRecord{ResourceType: ResourceTopic, ResourceName: "t", Name: "retention.ms", Value: sp("1")},
		PartitionRecord{TopicID: id, Partition: 1, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	ta, _ := a.Topic("t")
	tb, _ := b.Topic("t")
	if len(ta.Partitions) != 1 || len(ta.Configs) != 0 || len(tb.Partitions) != 2 || tb.Configs["retention.ms"] != "1" {
		t.Fatalf("a=%+v b=%+v", ta, tb)
	}
	c, err := Apply(b, []Record{RemoveTopicRecord{TopicID: id}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Topic("t"); ok {
		t.Fatal("not removed")
	}
	if _, ok := b.TopicByID(id); !ok {
		t.Fatal("old image changed")
	}
	bad := [][]Record{
		{PartitionRecord{TopicID: UUID{5}}},
		{TopicRecord{Name: "t", ID: UUID{10}}},
		{TopicRecord{Name: "u", ID: UUID{}}},
		{PartitionRecord{TopicID: id, Partition: 5}},
		{ConfigRecord{ResourceType: ResourceTopic, ResourceName: "nope", Name: "x"}},
		{ProducerIDsRecord{NextProducerID: -1}},
	}
	for _, recs := range bad {
		if _, err := Apply(b, recs); err == nil {
			t.Errorf("%+v applied", recs)
		}
	}
	// Records rebuild the same image.
	rebuilt, err := Apply(Empty(), b.Records())
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := rebuilt.Topic("t")
	if !reflect.DeepEqual(rt, tb) {
		t.Fatalf("rebuilt %+v want %+v", rt, tb)
	}
}

func TestCreateTopics(t *testing.T) {
	st := openStore(t, t.TempDir(), map[string]string{"num.partitions": "3"})
	res := st.CreateTopics([]CreateTopic{
		{Name: "a", NumPartitions: 2, ReplicationFactor: 1, Configs: map[string]*string{"retention.ms": sp("1000")}},
		{Name: "b", NumPartitions: -1, ReplicationFactor: -1},
		{Name: "a", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "c", NumPartitions: 0, ReplicationFactor: 1},
		{Name: "d", NumPartitions: 1, ReplicationFactor: 3},
		{Name: "e", NumPartitions: 1, ReplicationFactor: 0},
		{Name: "bad name", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "f", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]*string{"retention.ms": sp("x")}},
		{Name: "g", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]*string{"nope": sp("1")}},
		{Name: "h", NumPartitions: -1, ReplicationFactor: -1, Assignments: []Assignment{{1, []int32{1}}, {0, []int32{1}}}},
		{Name: "i", NumPartitions: -1, ReplicationFactor: -1, Assignments: []Assignment{{0, []int32{2}}}},
		{Name: "j", NumPartitions: 2, ReplicationFactor: -1, Assignments: []Assignment{{0, []int32{1}}}},
		{Name: "k", NumPartitions: -1, ReplicationFactor: -1, Assignments: []Assignment{{0, []int32{1}}, {2, []int32{1}}}},
		{Name: "l", NumPartitions: 20000, ReplicationFactor: 1},
		{Name: "m", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]*string{"retention.ms": nil}},
		{Name: "n", NumPartitions: -1, ReplicationFactor: 1, Assignments: []Assignment{{0, []int32{1}}}},
		{Name: "o", NumPartitions: -1, ReplicationFactor: -1, Assignments: []Assignment{{0, []int32{1}}, {0, []int32{1}}}},
		{Name: "p", NumPartitions: -1, ReplicationFactor: -1, Assignments: []Assignment{{0, []int32{1, 1}}}},
		{Name: "q", NumPartitions: 0, ReplicationFactor: 0},
		{Name: "r", NumPartitions: 0, ReplicationFactor: 1, Configs: map[string]*string{"nope": sp("1")}},
	}, false)
	want := []struct {
		kind error
		msg  string
	}{
		{nil, ""},
		{nil, ""},
		{ErrTopicExists, "Topic 'a' already exists."},
		{ErrInvalidPartitions, "Number of partitions was set to an invalid non-positive value."},
		{ErrInvalidReplicationFactor, "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be reached because only 1 broker(s) are registered or some brokers have all their log directories cordoned."},
		{ErrInvalidReplicationFactor, "Replication factor must be larger than 0, or -1 to use the default value."},
		{ErrInvalidTopic, `Topic name is invalid: 'bad name' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'`},
		{ErrInvalidConfig, "Invalid value x for configuration retention.ms: Not a number of type LONG"},
		{ErrInvalidConfig, "Unknown topic config name: nope"},
		{nil, ""},
		{ErrInvalidReplicaAssignment, "The manual partition assignment includes broker 2, but no such broker is registered."},
		{ErrInvalidRequest, "A manual partition assignment was specified, but numPartitions was not set to -1."},
		{ErrInvalidReplicaAssignment, "partitions should be a consecutive 0-based integer sequence"},
		{ErrPolicyViolation, "Excessively large number of partitions per request."},
		{ErrInvalidConfig, "Null value not supported for topic configs: retention.ms"},
		{ErrInvalidRequest, "A manual partition assignment was specified, but replication factor was not set to -1."},
		{ErrInvalidReplicaAssignment, "Found multiple manual partition assignments for partition 0"},
		{ErrInvalidReplicaAssignment, "The manual partition assignment includes the broker 1 more than once."},
		{ErrInvalidReplicationFactor, "Replication factor must be larger than 0, or -1 to use the default value."},
		{ErrInvalidConfig, "Unknown topic config name: nope"},
	}
	for i, w := range want {
		r := res[i]
		if w.kind == nil {
			if r.Err != nil || r.Topic == nil || r.Topic.ID.IsZero() {
				t.Errorf("%d %s: %+v", i, r.Name, r)
			}
			continue
		}
		if !errors.Is(r.Err, w.kind) || r.Err.Error() != w.msg {
			t.Errorf("%d %s: got %v want %v: %s", i, r.Name, r.Err, w.kind, w.msg)
		}
	}
	img := st.Image()
	a, _ := img.Topic("a")
	b, _ := img.Topic("b")
	h, _ := img.Topic("h")
	if len(a.Partitions) != 2 || a.Configs["retention.ms"] != "1000" || len(b.Partitions) != 3 || len(h.Partitions) != 2 || img.NumTopics() != 3 {
		t.Fatalf("a=%+v b=%+v h=%+v", a, b, h)
	}
	if p := a.Partitions[1]; p.Leader != 1 || !reflect.DeepEqual(p.Replicas, []int32{1}) || !reflect.DeepEqual(p.ISR, []int32{1}) {
		t.Fatalf("%+v", p)
	}
	// Collisions and validate-only.
	res = st.CreateTopics([]CreateTopic{{Name: "x.y", NumPartitions: 1, ReplicationFactor: 1}}, false)
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	res = st.CreateTopics([]CreateTopic{
		{Name: "x_y", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "v", NumPartitions: 4, ReplicationFactor: 1},
	}, true)
	if !errors.Is(res[0].Err, ErrInvalidTopic) || res[0].Err.Error() != "Topic 'x_y' collides with existing topic: x.y" {
		t.Fatal(res[0].Err)
	}
	if res[1].Err != nil || len(res[1].Topic.Partitions) != 4 || res[1].Topic.ID.IsZero() {
		t.Fatalf("%+v", res[1])
	}
	if _, ok := st.Image().Topic("v"); ok {
		t.Fatal("validate-only created the topic")
	}
}

func TestTopicNames(t *testing.T) {
	cases := map[string]string{
		"":                       "Topic name is invalid: the empty string is not allowed",
		".":                      "Topic name is invalid: '.' is not allowed",
		"..":                     "Topic name is invalid: '..' is not allowed",
		strings.Repeat("a", 250): "Topic name is invalid: the length of '" + strings.Repeat("a", 250) + "' is longer than the max allowed length 249",
		"a/b":                    "Topic name is invalid: 'a/b' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'",
	}
	for name, want := range cases {
		if err := ValidateTopicName(name); err == nil || err.Error() != want {
			t.Errorf("%q: %v", name, err)
		}
	}
	for _, ok := range []string{"a", "A-b_c.d", strings.Repeat("z", 249), "__consumer_offsets"} {
		if err := ValidateTopicName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}

func TestDeleteAndPartitions(t *testing.T) {
	st := openStore(t, t.TempDir(), nil)
	st.CreateTopics([]CreateTopic{{Name: "a", NumPartitions: 1, ReplicationFactor: 1}, {Name: "b", NumPartitions: 1, ReplicationFactor: 1}}, false)
	bID := func() UUID { b, _ := st.Image().Topic("b"); return b.ID }()

	cp := st.CreatePartitions([]CreatePartitions{
		{Name: "a", Count: 3},
		{Name: "b", Count: 1},
		{Name: "zz", Count: 2},
		{Name: "b", Count: 3, Assignments: [][]int32{{1}}},
	}, false)
	wantCP := []string{"", "Topic already has 1 partition(s).", "UNKNOWN_TOPIC_OR_PARTITION",
		"Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."}
	for i, w := range wantCP {
		if (w == "" && cp[i].Err != nil) || (w != "" && (cp[i].Err == nil || cp[i].Err.Error() != w)) {
			t.Errorf("%d: %v", i, cp[i].Err)
		}
	}
	if a, _ := st.Image().Topic("a"); len(a.Partitions) != 3 || a.Partitions[2].Partition != 2 {
		t.Fatalf("%+v", a)
	}
	cp = st.CreatePartitions([]CreatePartitions{{Name: "a", Count: 2}}, false)
	if !errors.Is(cp[0].Err, ErrInvalidPartitions) || cp[0].Err.Error() != "The topic a currently has 3 partition(s); 2 would not be an increase." {
		t.Fatal(cp[0].Err)
	}
	cp = st.CreatePartitions([]CreatePartitions{{Name: "a", Count: 5}}, true)
	if a, _ := st.Image().Topic("a"); cp[0].Err != nil || len(a.Partitions) != 3 {
		t.Fatal("validate-only added partitions")
	}

	del := st.DeleteTopics([]DeleteTopic{{Name: "a"}, {ID: bID}, {Name: "a"}, {ID: UUID{7}}})
	if del[0].Err != nil || del[1].Err != nil || del[1].Name != "b" ||
		!errors.Is(del[2].Err, ErrUnknownTopic) || !errors.Is(del[3].Err, ErrUnknownTopicID) {
		t.Fatalf("%+v", del)
	}
	if st.Image().NumTopics() != 0 {
		t.Fatal("topics remain")
	}
}

func TestAlterConfigs(t *testing.T) {
	st := openStore(t, t.TempDir(), nil)
	st.CreateTopics([]CreateTopic{{Name: "a", NumPartitions: 1, ReplicationFactor: 1,
		Configs: map[string]*string{"retention.ms": sp("1000"), "segment.ms": sp("2000")}}}, false)
	cfg := func() map[string]string { a, _ := st.Image().Topic("a"); return a.Configs }

	if err := st.IncrementalAlterTopicConfigs("a", []ConfigOp{
		{Name: "retention.ms", Op: OpSet, Value: sp("5")},
		{Name: "segment.ms", Op: OpDelete},
		{Name: "cleanup.policy", Op: OpAppend, Value: sp("compact")},
	}, false); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"retention.ms": "5", "cleanup.policy": "delete,compact"}; !reflect.DeepEqual(cfg(), want) {
		t.Fatalf("%v", cfg())
	}
	if err := st.IncrementalAlterTopicConfigs("a", []ConfigOp{{Name: "cleanup.policy", Op: OpSubtract, Value: sp("delete")}}, false); err != nil {
		t.Fatal(err)
	}
	if cfg()["cleanup.policy"] != "compact" {
		t.Fatal(cfg())
	}
	errs := []struct {
		ops  []ConfigOp
		kind error
		msg  string
	}{
		{[]ConfigOp{{Name: "retention.ms", Op: OpAppend, Value: sp("1")}}, ErrInvalidConfig, "Can't APPEND to key retention.ms because its type is not LIST."},
		{[]ConfigOp{{Name: "nope", Op: OpSubtract, Value: sp("1")}}, ErrInvalidConfig, "Can't SUBTRACT to key nope because its type is not LIST."},
		{[]ConfigOp{{Name: "retention.ms", Op: OpSet, Value: sp("x")}}, ErrInvalidConfig, "Invalid value x for configuration retention.ms: Not a number of type LONG"},
		{[]ConfigOp{{Name: "nope", Op: OpSet, Value: sp("1")}}, ErrInvalidConfig, "Unknown topic config name: nope"},
		{[]ConfigOp{{Name: "retention.ms", Op: 9}}, ErrInvalidRequest, "Unknown operation type 9"},
	}
	for _, e := range errs {
		err := st.IncrementalAlterTopicConfigs("a", e.ops, false)
		if !errors.Is(err, e.kind) || err.Error() != e.msg {
			t.Errorf("%+v: %v", e.ops, err)
		}
	}
	if err := st.IncrementalAlterTopicConfigs("zz", nil, false); !errors.Is(err, ErrUnknownTopic) || err.Error() != "The topic 'zz' does not exist." {
		t.Fatal(err)
	}
	if err := st.AlterTopicConfigs("", nil, false); !errors.Is(err, ErrInvalidRequest) {
		t.Fatal(err)
	}
	if err := st.AlterTopicConfigs("a/b", nil, false); !errors.Is(err, ErrInvalidTopic) {
		t.Fatal(err)
	}
	// Validate-only changes nothing; legacy alter replaces everything.
	if err := st.IncrementalAlterTopicConfigs("a", []ConfigOp{{Name: "retention.ms", Op: OpSet, Value: sp("9")}}, true); err != nil || cfg()["retention.ms"] != "5" {
		t.Fatal(err, cfg())
	}
	if err := st.AlterTopicConfigs("a", map[string]*string{"flush.ms": sp("10")}, false); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"flush.ms": "10"}; !reflect.DeepEqual(cfg(), want) {
		t.Fatal(cfg())
	}
}

func TestPersistenceAndProducerIDs(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir, nil)
	clusterID := st.Image().ClusterID
	if clusterID == "" {
		t.Fatal("no cluster id")
	}
	st.CreateTopics([]CreateTopic{{Name: "a", NumPartitions: 2, ReplicationFactor: 1, Configs: map[string]*string{"retention.ms": sp("7")}}}, false)
	first, _ := st.NextProducerID()
	second, _ := st.NextProducerID()
	if first != 0 || second != 1 {
		t.Fatal(first, second)
	}
	var seen []int64
	cancel := st.Subscribe(func(prev, next *Image) { seen = append(seen, next.Offset) })
	if len(seen) != 1 {
		t.Fatal("subscribe did not replay the current image")
	}
	st.DeleteTopics([]DeleteTopic{{Name: "a"}})
	st.CreateTopics([]CreateTopic{{Name: "b", NumPartitions: 1, ReplicationFactor: 1}}, false)
	cancel()
	st.CreateTopics([]CreateTopic{{Name: "c", NumPartitions: 1, ReplicationFactor: 1}}, false)
	if len(seen) != 3 {
		t.Fatalf("subscriber saw %v", seen)
	}
	want := st.Image()
	st.Close()
	if err := st.CreateTopics([]CreateTopic{{Name: "d", NumPartitions: 1, ReplicationFactor: 1}}, false)[0].Err; !errors.Is(err, ErrStorage) {
		t.Fatalf("write after close: %v", err)
	}

	st2 := openStore(t, dir, nil)
	got := st2.Image()
	if got.ClusterID != clusterID || got.NumTopics() != 2 || got.Offset != want.Offset {
		t.Fatalf("reopened: %+v", got)
	}
	b1, _ := want.Topic("b")
	b2, _ := got.Topic("b")
	if !reflect.DeepEqual(b1, b2) {
		t.Fatalf("%+v != %+v", b1, b2)
	}
	// The block reserved before the restart is never reused.
	pid, err := st2.NextProducerID()
	if err != nil || pid != 1000 {
		t.Fatal(pid, err)
	}
	n, err := st2.AllocateProducerIDs(5)
	if err != nil || n != 2000 {
		t.Fatal(n, err)
	}
	st2.Close()

	// A different configured cluster id is refused.
	b, err := config.New(map[string]string{"cluster.id": "AAAAAAAAAAAAAAAAAAAAAA"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{Broker: b}); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatal(err)
	}
}

func TestTornTail(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir, nil)
	st.CreateTopics([]CreateTopic{{Name: "a", NumPartitions: 1, ReplicationFactor: 1}}, false)
	st.CreateTopics([]CreateTopic{{Name: "b", NumPartitions: 1, ReplicationFactor: 1}}, false)
	st.Close()
	path := filepath.Join(dir, journal.FileName)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Cut into the last frame: b's creation is lost, a survives.
	for cut := 1; cut < 20; cut += 5 {
		if err := os.WriteFile(path, data[:len(data)-cut], 0o644); err != nil {
			t.Fatal(err)
		}
		st2 := openStore(t, dir, nil)
		img := st2.Image()
		if _, ok := img.Topic("a"); !ok {
			t.Fatal("a lost")
		}
		if _, ok := img.Topic("b"); ok {
			t.Fatal("b survived a torn frame")
		}
		// The log accepts appends after the cut.
		if r := st2.CreateTopics([]CreateTopic{{Name: "c", NumPartitions: 1, ReplicationFactor: 1}}, false); r[0].Err != nil {
			t.Fatal(r[0].Err)
		}
		st2.Close()
		st3 := openStore(t, dir, nil)
		if _, ok := st3.Image().Topic("c"); !ok {
			t.Fatal("c lost")
		}
		st3.Close()
	}
	// A flipped bit in the last frame is treated the same way.
	data[len(data)-3] ^= 0x40
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	st4 := openStore(t, dir, nil)
	if _, ok := st4.Image().Topic("b"); ok {
		t.Fatal("corrupt frame applied")
	}
}

func TestCompaction(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 1,000 fsynced batches")
	}
	dir := t.TempDir()
	st := openStore(t, dir, nil)
	for i := 0; i < compactAfter/2; i++ {
		st.CreateTopics([]CreateTopic{{Name: "t", NumPartitions: 1, ReplicationFactor: 1}}, false)
		st.DeleteTopics([]DeleteTopic{{Name: "t"}})
	}
	st.CreateTopics([]CreateTopic{{Name: "keep", NumPartitions: 2, ReplicationFactor: 1}}, false)
	st.Close()
	before, _ := os.Stat(filepath.Join(dir, journal.FileName))
	st2 := openStore(t, dir, nil)
	after, _ := os.Stat(filepath.Join(dir, journal.FileName))
	if after.Size()*4 > before.Size() {
		t.Fatalf("not compacted: %d -> %d", before.Size(), after.Size())
	}
	if k, ok := st2.Image().Topic("keep"); !ok || len(k.Partitions) != 2 {
		t.Fatal("lost keep")
	}
	st2.Close()
	st3 := openStore(t, dir, nil)
	if _, ok := st3.Image().Topic("keep"); !ok {
		t.Fatal("lost keep after compaction")
	}
}

func TestConcurrentUse(t *testing.T) {
	st := openStore(t, t.TempDir(), nil)
	var wg sync.WaitGroup
	ids := make(chan int64, 400)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				st.EnsureTopic(fmt.Sprintf("t%d", i)) // all goroutines race for the same names
				id, err := st.NextProducerID()
				if err != nil {
					t.Error(err)
					return
				}
				ids <- id
				img := st.Image()
				for _, tp := range img.Topics() {
					if len(tp.Partitions) != 1 {
						t.Errorf("%s has %d partitions", tp.Name, len(tp.Partitions))
					}
				}
			}
		}(g)
	}
	wg.Wait()
	close(ids)
	seen := map[int64]bool{}
	for id := range ids {
		if seen[id] {
			t.Fatalf("producer id %d handed out twice", id)
		}
		seen[id] = true
	}
	if st.Image().NumTopics() != 25 {
		t.Fatalf("%d topics", st.Image().NumTopics())
	}
}

func TestConfiguredClusterID(t *testing.T) {
	st := openStore(t, t.TempDir(), map[string]string{"cluster.id": "MkU3OEVBNTcwNTJENDM2Qk"})
	if got := st.Image().ClusterID; got != "MkU3OEVBNTcwNTJENDM2Qk" {
		t.Fatalf("cluster id %q", got)
	}
	if v, ok := st.Image().Feature("metadata.version"); !ok || v != MetadataVersion {
		t.Fatalf("metadata.version %d %v", v, ok)
	}
}

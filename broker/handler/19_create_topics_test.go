package handler

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/metadata"
	"github.com/cascade-kafka/cascade/broker/partition"
)

// adminLog is an in-memory partition log for the admin handler tests: one
// offset per append, a settable log start, a size, producer state and a dir.
type adminLog struct {
	mu        sync.Mutex
	start     int64
	end       int64
	size      int64
	cfg       log.Config
	dir       string
	producers []log.ProducerInfo
}

func (l *adminLog) Append(records []byte, epoch int32) (log.AppendInfo, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	off := l.end
	l.end++
	l.size += int64(len(records))
	return log.AppendInfo{FirstOffset: off, LastOffset: off, LogAppendTime: -1, LogStartOffset: l.start, NumRecords: 1}, nil
}

func (l *adminLog) AppendFromClient(records []byte, epoch int32) (log.AppendInfo, error) {
	return l.Append(records, epoch)
}

func (l *adminLog) Read(offset int64, maxBytes int, maxOffset int64, minOne bool) (log.ReadResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if offset < l.start || offset > l.end {
		return log.ReadResult{}, log.ErrOffsetOutOfRange
	}
	return log.ReadResult{LogStartOffset: l.start, LogEndOffset: l.end}, nil
}

func (l *adminLog) LogStartOffset() int64 { l.mu.Lock(); defer l.mu.Unlock(); return l.start }
func (l *adminLog) LogEndOffset() int64   { l.mu.Lock(); defer l.mu.Unlock(); return l.end }
func (l *adminLog) FirstUnstableOffset() (int64, bool) {
	return 0, false
}
func (l *adminLog) OffsetForTimestamp(ts int64) (int64, int64, int32, bool) { return 0, 0, 0, false }
func (l *adminLog) MaxTimestamp() (int64, int64)                            { return -1, -1 }
func (l *adminLog) AbortedTxns(from, to int64) []log.AbortedTxn             { return nil }
func (l *adminLog) DeleteRecordsBefore(offset int64) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if offset > l.start {
		l.start = offset
	}
	return l.start, nil
}
func (l *adminLog) AppendAsFollower(records []byte) (log.AppendInfo, error) {
	return l.Append(records, -1)
}
func (l *adminLog) Truncate(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.end = min(l.end, max(offset, l.start))
	return nil
}
func (l *adminLog) TruncateFullyAndStartAt(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.start, l.end = offset, offset
	return nil
}
func (l *adminLog) EndOffsetForEpoch(int32) (int32, int64, bool)           { return -1, -1, false }
func (l *adminLog) AssignEpochStartOffset(epoch int32, offset int64) error { return nil }
func (l *adminLog) LatestEpoch() int32                                     { return -1 }
func (l *adminLog) HighWatermark() (int64, bool)                           { return 0, false }
func (l *adminLog) UpdateHighWatermark(hw int64) int64                     { return hw }
func (l *adminLog) Flush() error                                           { return nil }
func (l *adminLog) SetConfig(c log.Config)                                 { l.mu.Lock(); l.cfg = c; l.mu.Unlock() }
func (l *adminLog) Err() error                                             { return nil }
func (l *adminLog) Size() int64                                            { l.mu.Lock(); defer l.mu.Unlock(); return l.size }
func (l *adminLog) Dir() string                                            { return l.dir }
func (l *adminLog) ActiveProducers() []log.ProducerInfo                    { return l.producers }
func (l *adminLog) config() log.Config                                     { l.mu.Lock(); defer l.mu.Unlock(); return l.cfg }
func (l *adminLog) setProducers(p []log.ProducerInfo)                      { l.producers = p }

type adminLogs struct {
	mu   sync.Mutex
	dirs []string // partition p lives in dirs[p%len(dirs)]
	logs map[log.TopicPartition]*adminLog
}

func (m *adminLogs) Open(tp log.TopicPartition, id [16]byte, cfg log.Config) (partition.Log, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir := m.dirs[int(tp.Partition)%len(m.dirs)]
	l := &adminLog{cfg: cfg, dir: filepath.Join(dir, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))}
	m.logs[tp] = l
	return l, nil
}

func (m *adminLogs) Delete(tp log.TopicPartition) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.logs, tp)
	return nil
}

func (m *adminLogs) get(topic string, p int32) *adminLog {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.logs[log.TopicPartition{Topic: topic, Partition: p}]
}

// newAdminEnv builds an Env over a real metadata store and a partition
// manager kept in step with it by a subscription, as the composition root
// wires them.
func newAdminEnv(t *testing.T, props map[string]string) (*Env, *adminLogs) {
	t.Helper()
	dir := t.TempDir()
	if props == nil {
		props = map[string]string{}
	}
	props["log.dir"] = dir
	cfg, err := config.New(props)
	if err != nil {
		t.Fatal(err)
	}
	st, err := metadata.Open(filepath.Join(dir, metadata.DirName), metadata.Options{Broker: cfg, Rand: rand.New(rand.NewSource(1))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logs := &adminLogs{dirs: cfg.LogDirs, logs: map[log.TopicPartition]*adminLog{}}
	pm := partition.NewManager(logs)
	st.Subscribe(func(_, next *metadata.Image) {
		var specs []partition.Spec
		for _, tp := range next.Topics() {
			lc, err := config.TopicLogConfig(cfg, tp.Configs)
			if err != nil {
				t.Errorf("topic %s: %v", tp.Name, err)
				continue
			}
			for _, p := range tp.Partitions {
				specs = append(specs, partition.Spec{TP: log.TopicPartition{Topic: tp.Name, Partition: p.Partition},
					TopicID: tp.ID, LeaderEpoch: p.LeaderEpoch, Config: lc})
			}
		}
		if err := pm.Sync(specs); err != nil {
			t.Error(err)
		}
	})
	return &Env{NodeID: cfg.NodeID, Host: "127.0.0.1", Port: 9092, Config: cfg, Meta: st, Partitions: pm}, logs
}

// call runs the registered handler for msg at version.
func call(t *testing.T, env *Env, msg kmsg.Request, version int16) kmsg.Response {
	t.Helper()
	api, ok := Lookup(msg.Key(), version)
	if !ok {
		t.Fatalf("%s v%d not registered", kmsg.NameForKey(msg.Key()), version)
	}
	msg.SetVersion(version)
	// Round-trip through the codec so version-gated fields behave as on
	// the wire.
	dec := kmsg.RequestForKey(msg.Key())
	dec.SetVersion(version)
	if err := dec.ReadFrom(msg.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	resp, err := api.Fn(context.Background(), env, &Request{Key: msg.Key(), Version: version, ClientID: "test", Msg: dec})
	if err != nil {
		t.Fatal(err)
	}
	// And the response must encode at this version.
	resp.SetVersion(version)
	_ = resp.AppendTo(nil)
	return resp
}

func ptrTo(s string) *string { return &s }

func createReq(topics ...kmsg.CreateTopicsRequestTopic) *kmsg.CreateTopicsRequest {
	r := kmsg.NewPtrCreateTopicsRequest()
	r.TimeoutMillis = 5000
	r.Topics = topics
	return r
}

func topicReq(name string, partitions int32, rf int16, configs ...string) kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, partitions, rf
	for i := 0; i+1 < len(configs); i += 2 {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = configs[i], ptrTo(configs[i+1])
		t.Configs = append(t.Configs, c)
	}
	return t
}

func TestCreateTopicsHandler(t *testing.T) {
	env, logs := newAdminEnv(t, nil)
	r := createReq(
		topicReq("a", 2, 1, "retention.ms", "1000"),
		topicReq("b", -1, -1),
		topicReq("dup", 1, 1),
		topicReq("dup", 1, 1),
		topicReq("c", 1, 3),
		topicReq("d", 1, 1, "retention.ms", "x"),
		topicReq("e", 0, 1),
	)
	resp := call(t, env, r, 7).(*kmsg.CreateTopicsResponse)
	got := map[string]kmsg.CreateTopicsResponseTopic{}
	for _, rt := range resp.Topics {
		got[rt.Topic] = rt
	}
	if len(resp.Topics) != 6 {
		t.Fatalf("%d topics in response", len(resp.Topics))
	}
	a := got["a"]
	if a.ErrorCode != 0 || a.NumPartitions != 2 || a.ReplicationFactor != 1 || a.TopicID == [16]byte{} {
		t.Fatalf("a: %+v", a)
	}
	var retention *kmsg.CreateTopicsResponseTopicConfig
	for i := range a.Configs {
		if a.Configs[i].Name == "retention.ms" {
			retention = &a.Configs[i]
		}
	}
	if retention == nil || *retention.Value != "1000" || retention.Source != int8(kmsg.ConfigSourceDynamicTopicConfig) {
		t.Fatalf("retention: %+v", retention)
	}
	if b := got["b"]; b.ErrorCode != 0 || b.NumPartitions != 1 {
		t.Fatalf("b: %+v", b)
	}
	wantErr := map[string]struct {
		code int16
		msg  string
	}{
		"dup": {kerr.InvalidRequest.Code, "Duplicate topic name."},
		"c":   {kerr.InvalidReplicationFactor.Code, "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be reached because only 1 broker(s) are registered or some brokers have all their log directories cordoned."},
		"d":   {kerr.InvalidConfig.Code, "Invalid value x for configuration retention.ms: Not a number of type LONG"},
		"e":   {kerr.InvalidPartitions.Code, "Number of partitions was set to an invalid non-positive value."},
	}
	for name, w := range wantErr {
		rt := got[name]
		if rt.ErrorCode != w.code || rt.ErrorMessage == nil || *rt.ErrorMessage != w.msg || rt.NumPartitions != -1 {
			t.Errorf("%s: %d %v", name, rt.ErrorCode, rt.ErrorMessage)
		}
	}
	// The partition manager opened the logs with the topic's config.
	if l := logs.get("a", 1); l == nil || l.config().RetentionMs.Milliseconds() != 1000 {
		t.Fatal("log of a-1 not opened with retention.ms=1000")
	}
	// Existing topic; v4 leaves the v5 fields at their defaults.
	resp = call(t, env, createReq(topicReq("a", 1, 1)), 4).(*kmsg.CreateTopicsResponse)
	if rt := resp.Topics[0]; rt.ErrorCode != kerr.TopicAlreadyExists.Code || *rt.ErrorMessage != "Topic 'a' already exists." {
		t.Fatalf("%+v", rt)
	}
	// The metadata topic's name is refused as Kafka refuses it.
	resp = call(t, env, createReq(topicReq("__cluster_metadata", 1, 1)), 7).(*kmsg.CreateTopicsResponse)
	if rt := resp.Topics[0]; rt.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("%+v", rt)
	}
	// Validate-only creates nothing.
	r = createReq(topicReq("v", 3, 1))
	r.ValidateOnly = true
	resp = call(t, env, r, 7).(*kmsg.CreateTopicsResponse)
	if rt := resp.Topics[0]; rt.ErrorCode != 0 || rt.NumPartitions != 3 {
		t.Fatalf("%+v", rt)
	}
	if _, ok := env.Meta.Image().Topic("v"); ok {
		t.Fatal("validate-only created v")
	}
}

func TestDeleteTopicsHandler(t *testing.T) {
	env, logs := newAdminEnv(t, nil)
	call(t, env, createReq(topicReq("a", 1, 1), topicReq("b", 1, 1), topicReq("c", 1, 1)), 7)
	b, _ := env.Meta.Image().Topic("b")

	r := kmsg.NewPtrDeleteTopicsRequest()
	ta, tb, tu, tx := kmsg.NewDeleteTopicsRequestTopic(), kmsg.NewDeleteTopicsRequestTopic(), kmsg.NewDeleteTopicsRequestTopic(), kmsg.NewDeleteTopicsRequestTopic()
	ta.Topic = ptrTo("a")
	tb.TopicID = b.ID
	tu.TopicID = [16]byte{9}
	tx.Topic, tx.TopicID = ptrTo("c"), [16]byte{1}
	// Invalid entries are answered first, then deletions in order.
	r.Topics = append(r.Topics, tx, ta, tb, tu)
	resp := call(t, env, r, 6).(*kmsg.DeleteTopicsResponse)
	if len(resp.Topics) != 4 {
		t.Fatalf("%+v", resp.Topics)
	}
	if rt := resp.Topics[0]; rt.ErrorCode != kerr.InvalidRequest.Code || *rt.ErrorMessage != "You may not specify both topic name and topic id." {
		t.Fatalf("%+v", rt)
	}
	if rt := resp.Topics[1]; rt.ErrorCode != 0 || *rt.Topic != "a" {
		t.Fatalf("%+v", rt)
	}
	if rt := resp.Topics[2]; rt.ErrorCode != 0 || rt.Topic == nil || *rt.Topic != "b" || rt.TopicID != b.ID {
		t.Fatalf("by id: %+v", rt)
	}
	if rt := resp.Topics[3]; rt.ErrorCode != kerr.UnknownTopicID.Code || rt.Topic != nil {
		t.Fatalf("%+v", rt)
	}
	if logs.get("a", 0) != nil || logs.get("b", 0) != nil || logs.get("c", 0) == nil {
		t.Fatal("logs not deleted")
	}
	// v1 by name, with a duplicate and an unknown topic.
	r = kmsg.NewPtrDeleteTopicsRequest()
	r.TopicNames = []string{"c", "zz", "c"}
	resp = call(t, env, r, 1).(*kmsg.DeleteTopicsResponse)
	byName := map[string]kmsg.DeleteTopicsResponseTopic{}
	for _, rt := range resp.Topics {
		byName[*rt.Topic] = rt
	}
	if len(resp.Topics) != 2 || byName["zz"].ErrorCode != kerr.UnknownTopicOrPartition.Code || byName["zz"].ErrorMessage != nil ||
		byName["c"].ErrorCode != kerr.InvalidRequest.Code || *byName["c"].ErrorMessage != "Duplicate topic name." {
		t.Fatalf("%+v", resp.Topics)
	}
	if _, ok := env.Meta.Image().Topic("c"); !ok {
		t.Fatal("a topic named twice was deleted")
	}
	// From v5 an unknown topic carries the error's default message, as
	// Kafka's ApiError(UNKNOWN_TOPIC_OR_PARTITION).
	r.TopicNames = []string{"zz"}
	resp = call(t, env, r, 5).(*kmsg.DeleteTopicsResponse)
	if rt := resp.Topics[0]; rt.ErrorCode != kerr.UnknownTopicOrPartition.Code || rt.ErrorMessage == nil ||
		*rt.ErrorMessage != "This server does not host this topic-partition." {
		t.Fatalf("%+v", rt)
	}
	// Neither name nor id.
	r = kmsg.NewPtrDeleteTopicsRequest()
	r.Topics = append(r.Topics, kmsg.NewDeleteTopicsRequestTopic())
	resp = call(t, env, r, 6).(*kmsg.DeleteTopicsResponse)
	if rt := resp.Topics[0]; rt.ErrorCode != kerr.InvalidRequest.Code || *rt.ErrorMessage != "Neither topic name nor id were specified." {
		t.Fatalf("%+v", rt)
	}

	env2, _ := newAdminEnv(t, map[string]string{"delete.topic.enable": "false"})
	call(t, env2, createReq(topicReq("a", 1, 1)), 7)
	r = kmsg.NewPtrDeleteTopicsRequest()
	r.TopicNames = []string{"a"}
	resp = call(t, env2, r, 5).(*kmsg.DeleteTopicsResponse)
	if rt := resp.Topics[0]; rt.ErrorCode != kerr.TopicDeletionDisabled.Code {
		t.Fatalf("%+v", rt)
	}
	// Before v3 the same answer is INVALID_REQUEST.
	resp = call(t, env2, r, 2).(*kmsg.DeleteTopicsResponse)
	if rt := resp.Topics[0]; rt.ErrorCode != kerr.InvalidRequest.Code || *rt.Topic != "a" {
		t.Fatalf("%+v", rt)
	}
	if _, ok := env2.Meta.Image().Topic("a"); !ok {
		t.Fatal("deleted despite delete.topic.enable=false")
	}
}

func TestCreatePartitionsHandler(t *testing.T) {
	env, logs := newAdminEnv(t, nil)
	call(t, env, createReq(topicReq("a", 1, 1)), 7)
	r := kmsg.NewPtrCreatePartitionsRequest()
	add := func(name string, count int32) {
		tp := kmsg.NewCreatePartitionsRequestTopic()
		tp.Topic, tp.Count = name, count
		r.Topics = append(r.Topics, tp)
	}
	add("a", 3)
	add("zz", 2)
	add("d", 2)
	add("d", 3)
	resp := call(t, env, r, 3).(*kmsg.CreatePartitionsResponse)
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		codes[rt.Topic] = rt.ErrorCode
	}
	if len(resp.Topics) != 3 || codes["a"] != 0 || codes["zz"] != kerr.UnknownTopicOrPartition.Code || codes["d"] != kerr.InvalidRequest.Code {
		t.Fatalf("%+v", resp.Topics)
	}
	if logs.get("a", 2) == nil {
		t.Fatal("a-2 not opened")
	}
	r.Topics = nil
	add("a", 2)
	resp = call(t, env, r, 0).(*kmsg.CreatePartitionsResponse)
	if rt := resp.Topics[0]; rt.ErrorCode != kerr.InvalidPartitions.Code || *rt.ErrorMessage != "The topic a currently has 3 partition(s); 2 would not be an increase." {
		t.Fatalf("%+v", rt)
	}
}

func TestErrorCodesOfMetadata(t *testing.T) {
	err := &metadata.Error{Kind: metadata.ErrTopicExists, Message: "x"}
	if ErrorCode(err) != kerr.TopicAlreadyExists.Code || ErrorCode(errors.Join(err)) != kerr.TopicAlreadyExists.Code {
		t.Fatal(ErrorCode(err))
	}
}

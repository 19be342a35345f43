package handler

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/group"
	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/metadata"
	"github.com/cascade-kafka/cascade/broker/partition"
	"github.com/cascade-kafka/cascade/broker/record"
	"github.com/cascade-kafka/cascade/broker/txn"
)

// fakeCluster is a Cluster whose live brokers are fixed by the test and
// whose inter-broker requests the test answers (nil: refused).
type fakeCluster struct {
	live    []BrokerAddr
	mu      sync.Mutex
	markers func(node int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error)
	adds    func(node int32, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error)
}

func (f *fakeCluster) LiveBrokers() []BrokerAddr { return f.live }
func (f *fakeCluster) ControllerID() int32       { return 1 }

func (f *fakeCluster) WriteTxnMarkers(_ context.Context, node int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.markers == nil {
		return nil, errors.New("no other broker in this test")
	}
	return f.markers(node, req)
}

func (f *fakeCluster) AddPartitionsToTxn(_ context.Context, node int32, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.adds == nil {
		return nil, errors.New("no other broker in this test")
	}
	return f.adds(node, req)
}

// diskLogs opens real logs of one log dir for the partition manager.
type diskLogs struct{ m *log.Manager }

func (d diskLogs) Open(tp log.TopicPartition, id [16]byte, cfg log.Config) (partition.Log, error) {
	if l, ok := d.m.Get(tp); ok {
		l.SetConfig(cfg)
		return l, nil
	}
	return d.m.Create(tp, id, cfg)
}

func (d diskLogs) Delete(tp log.TopicPartition) error { return d.m.Delete(tp) }

// fixedWriter is the replica store's writer of a test that commits the
// image itself: topic writes are refused, producer ids are handed out.
type fixedWriter struct{ metadata.Writer }

func (fixedWriter) CreateTopics(reqs []metadata.CreateTopic, _ bool) []metadata.CreateResult {
	out := make([]metadata.CreateResult, len(reqs))
	for i, r := range reqs {
		out[i] = metadata.CreateResult{Name: r.Name, Err: errors.New("no controller in this test")}
	}
	return out
}

func (fixedWriter) AllocateProducerIDs() (int64, int64, error) { return 1000, 1000, nil }

// clusterTestEnv is node 1 of a cluster whose metadata the test commits:
// brokers 1 and 2 are live, 3 is not. Every internal topic has four
// partitions: 0 led by this node at leader epoch 7 (and replicated on 2,
// so the test can move it), 1 led by 2, 2 led by this node, 3 led by the
// dead 3. The data topic "data" has one partition, led here, "remote" one
// led by 2.
type clusterTestEnv struct {
	env     *Env
	cluster *fakeCluster
	st      *metadata.Store
	offset  int64
	ids     map[string]metadata.UUID
}

func newClusterTestEnv(t *testing.T) *clusterTestEnv {
	t.Helper()
	dir := t.TempDir()
	cfg, err := config.New(map[string]string{"log.dir": dir, "node.id": "1",
		"offsets.topic.num.partitions": "4", "transaction.state.log.num.partitions": "4"})
	if err != nil {
		t.Fatal(err)
	}
	st := metadata.NewReplica(fixedWriter{}, metadata.Options{Broker: cfg})
	lm, err := log.Open(filepath.Join(dir, "logs"), log.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lm.Close() })
	pm := partition.NewManager(diskLogs{lm})
	st.Subscribe(func(_, next *metadata.Image) {
		var specs []partition.Spec
		for _, tp := range next.Topics() {
			lc, err := config.TopicLogConfig(cfg, tp.Configs)
			if err != nil {
				t.Error(err)
				return
			}
			for _, p := range tp.Partitions {
				if slices.Contains(p.Replicas, 1) {
					specs = append(specs, partition.Spec{TP: log.TopicPartition{Topic: tp.Name, Partition: p.Partition},
						TopicID: tp.ID, LeaderEpoch: p.LeaderEpoch, Config: lc})
				}
			}
		}
		if err := pm.Sync(specs); err != nil {
			t.Error(err)
		}
	})
	c := &clusterTestEnv{st: st, ids: map[string]metadata.UUID{},
		cluster: &fakeCluster{live: []BrokerAddr{{ID: 1, Host: "127.0.0.1", Port: 9091}, {ID: 2, Host: "127.0.0.1", Port: 9092}}}}
	c.env = &Env{NodeID: 1, Host: "127.0.0.1", Port: 9091, Config: cfg, Meta: st, Partitions: pm,
		Cluster: c.cluster}
	var recs []metadata.Record
	for i, name := range []string{consumerOffsetsTopic, TransactionStateTopic} {
		id := metadata.UUID{byte(i + 1)}
		c.ids[name] = id
		recs = append(recs, metadata.TopicRecord{Name: name, ID: id},
			metadata.PartitionRecord{TopicID: id, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 7},
			metadata.PartitionRecord{TopicID: id, Partition: 1, Replicas: []int32{2}, ISR: []int32{2}, Leader: 2},
			metadata.PartitionRecord{TopicID: id, Partition: 2, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
			metadata.PartitionRecord{TopicID: id, Partition: 3, Replicas: []int32{3}, ISR: []int32{3}, Leader: 3})
	}
	c.ids["data"] = metadata.UUID{9}
	c.ids["remote"] = metadata.UUID{10}
	recs = append(recs, metadata.TopicRecord{Name: "data", ID: c.ids["data"]},
		metadata.PartitionRecord{TopicID: c.ids["data"], Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
		metadata.TopicRecord{Name: "remote", ID: c.ids["remote"]},
		metadata.PartitionRecord{TopicID: c.ids["remote"], Partition: 0, Replicas: []int32{2}, ISR: []int32{2}, Leader: 2})
	c.apply(t, recs...)

	c.env.Txn = NewTxnCoordinator(c.env, TxnCoordinatorConfig{})
	c.env.Groups = NewGroupCoordinator(c.env, GroupConfig(c.env))
	if err := c.env.Groups.Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.env.Txn.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.env.Groups.Close()
		c.env.Txn.Close()
	})
	return c
}

// apply commits one batch of records, as the metadata quorum would.
func (c *clusterTestEnv) apply(t *testing.T, recs ...metadata.Record) {
	t.Helper()
	c.offset++
	if err := c.st.ApplyCommitted(c.offset, metadata.EncodeBatch(recs)); err != nil {
		t.Fatal(err)
	}
}

// moveLeader makes leader the leader of partition 0 of topic, bumping its
// leader epoch.
func (c *clusterTestEnv) moveLeader(t *testing.T, topic string, leader int32) {
	t.Helper()
	c.apply(t, metadata.PartitionChangeRecord{TopicID: c.ids[topic], Partition: 0, Leader: leader,
		LeaderRecoveryState: metadata.LeaderRecoveryNoChange})
}

// keyOn returns an id whose partition of a four-partition topic is n.
func keyOn(t *testing.T, prefix string, n int32) string {
	t.Helper()
	for i := range 1000 {
		if id := fmt.Sprintf("%s-%d", prefix, i); group.PartitionFor(id, 4) == n {
			return id
		}
	}
	t.Fatalf("no %s id on partition %d", prefix, n)
	return ""
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestClusterFindCoordinatorNamesPartitionLeader(t *testing.T) {
	c := newClusterTestEnv(t)
	for typ := int8(0); typ <= 1; typ++ {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = typ
		for n := range int32(4) {
			req.CoordinatorKeys = append(req.CoordinatorKeys, keyOn(t, "key", n))
		}
		resp := call(t, c.env, req, 4).(*kmsg.FindCoordinatorResponse)
		want := []struct {
			node int32
			code int16
		}{{1, 0}, {2, 0}, {1, 0}, {-1, kerr.CoordinatorNotAvailable.Code}}
		for i, w := range want {
			got := resp.Coordinators[i]
			if got.NodeID != w.node || got.ErrorCode != w.code {
				t.Errorf("type %d, key on partition %d: node %d code %d, want node %d code %d", typ, i, got.NodeID, got.ErrorCode, w.node, w.code)
			}
		}
		if p := resp.Coordinators[1]; p.Host != "127.0.0.1" || p.Port != 9092 {
			t.Errorf("type %d: node 2 named at %s:%d", typ, p.Host, p.Port)
		}
		old := kmsg.NewPtrFindCoordinatorRequest()
		old.CoordinatorType, old.CoordinatorKey = typ, keyOn(t, "key", 1)
		if r := call(t, c.env, old, 3).(*kmsg.FindCoordinatorResponse); r.ErrorCode != 0 || r.NodeID != 2 || r.Port != 9092 {
			t.Errorf("type %d v3: %+v, want node 2", typ, r)
		}
	}
}

// groupCall sends one group request to the coordinator.
func groupCall(c *clusterTestEnv, msg kmsg.Request) kmsg.Response {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.env.Groups.Do(ctx, &Request{Key: msg.Key(), Version: msg.GetVersion(), Msg: msg, Conn: "127.0.0.1:1"})
}

func commitOffset(c *clusterTestEnv, g string, at int64) int16 {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.SetVersion(8)
	req.Group, req.Generation = g, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "data"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, at
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := groupCall(c, req).(*kmsg.OffsetCommitResponse)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// fetchOffset returns the group's committed offset of data-0 and the code.
func fetchOffset(c *clusterTestEnv, g string) (int64, int16) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(7)
	req.Group = g
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = "data", []int32{0}
	req.Topics = append(req.Topics, rt)
	resp := groupCall(c, req).(*kmsg.OffsetFetchResponse)
	if resp.ErrorCode != 0 {
		return -1, resp.ErrorCode
	}
	return resp.Topics[0].Partitions[0].Offset, resp.Topics[0].Partitions[0].ErrorCode
}

func TestClusterGroupCoordinatorFollowsLeadership(t *testing.T) {
	c := newClusterTestEnv(t)
	g0, g1, g3 := keyOn(t, "group", 0), keyOn(t, "group", 1), keyOn(t, "group", 3)
	if code := commitOffset(c, g1, 5); code != kerr.NotCoordinator.Code {
		t.Fatalf("commit for a group led by node 2: code %d, want NOT_COORDINATOR", code)
	}
	if _, code := fetchOffset(c, g3); code != kerr.NotCoordinator.Code {
		t.Fatalf("fetch for a group of a dead node: code %d, want NOT_COORDINATOR", code)
	}
	eventually(t, "commit for a group of a partition led here", func() bool { return commitOffset(c, g0, 5) == 0 })
	if at, code := fetchOffset(c, g0); code != 0 || at != 5 {
		t.Fatalf("fetch after commit: %d code %d", at, code)
	}

	// Leadership moves away: the partition is unloaded.
	c.moveLeader(t, consumerOffsetsTopic, 2)
	eventually(t, "NOT_COORDINATOR once node 2 leads", func() bool {
		_, code := fetchOffset(c, g0)
		return code == kerr.NotCoordinator.Code
	})
	// And back, at a new epoch: the partition is loaded from its log.
	c.moveLeader(t, consumerOffsetsTopic, 1)
	eventually(t, "offsets back once this node leads again", func() bool {
		at, code := fetchOffset(c, g0)
		return code == 0 && at == 5
	})

	// A request parked on a group of the partition (a join waiting out
	// the initial rebalance delay) answers NOT_COORDINATOR when the
	// partition is unloaded.
	gc := c.env.Groups
	join := kmsg.NewPtrJoinGroupRequest()
	join.SetVersion(3)
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = g0, 30000, 30000, "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 0, 0, 0}}}
	joined := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { joined <- groupCall(c, join).(*kmsg.JoinGroupResponse) }()
	eventually(t, "the join parked", func() bool {
		n := make(chan int)
		gc.calls <- func() { n <- len(gc.waiters) }
		return <-n == 1
	})
	c.moveLeader(t, consumerOffsetsTopic, 2)
	select {
	case r := <-joined:
		if r.ErrorCode != kerr.NotCoordinator.Code {
			t.Fatalf("parked join after the partition moved: code %d, want NOT_COORDINATOR", r.ErrorCode)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("parked join not answered after the partition moved")
	}
	c.moveLeader(t, consumerOffsetsTopic, 1)
	eventually(t, "offsets back again", func() bool {
		at, code := fetchOffset(c, g0)
		return code == 0 && at == 5
	})

	// While a partition loads, its groups answer
	// COORDINATOR_LOAD_IN_PROGRESS, and ListGroups too.
	loading := make(chan struct{})
	gc.calls <- func() {
		l := gc.lead.led[0]
		l.loading = true
		gc.lead.led[0] = l
		close(loading)
	}
	<-loading
	if _, code := fetchOffset(c, g0); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("fetch while loading: code %d, want COORDINATOR_LOAD_IN_PROGRESS", code)
	}
	if r := groupCall(c, kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse); r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("ListGroups while loading: code %d", r.ErrorCode)
	}
}

func TestClusterTxnCoordinatorFollowsLeadership(t *testing.T) {
	c := newClusterTestEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	here, there := keyOn(t, "txn", 0), keyOn(t, "txn", 1)
	if txn.PartitionFor(here, 4) != 0 {
		t.Fatal("group.PartitionFor and txn.PartitionFor disagree")
	}
	if _, _, err := c.env.Txn.InitProducerID(ctx, there, 60000, -1, -1); !errors.Is(err, txn.ErrNotCoordinator) {
		t.Fatalf("InitProducerId for an id led by node 2: %v, want NOT_COORDINATOR", err)
	}
	var pid int64
	var epoch int16
	eventually(t, "InitProducerId on a partition led here", func() bool {
		var err error
		pid, epoch, err = c.env.Txn.InitProducerID(ctx, here, 60000, -1, -1)
		if err != nil && !errors.Is(err, txn.ErrCoordinatorLoading) {
			t.Fatalf("InitProducerId: %v", err)
		}
		return err == nil
	})
	tp := txn.TopicPartition{Topic: "data", Partition: 0}
	if err := c.env.Txn.AddPartitions(ctx, here, pid, epoch, []txn.TopicPartition{tp}, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.env.Txn.EndTxn(ctx, here, pid, epoch, true, 0); err != nil {
		t.Fatal(err)
	}
	// The marker carries the coordinator epoch: the leader epoch of the
	// transactional id's __transaction_state partition.
	data := c.env.Partitions.Get(log.TopicPartition{Topic: "data", Partition: 0})
	var markers []record.Control
	eventually(t, "the commit marker in data-0", func() bool {
		markers = nil
		err := forEachBatch(data, data.LogStartOffset(), func(b record.Batch) error {
			if ctl, err := b.ControlOf(); err == nil {
				markers = append(markers, ctl)
			}
			return nil
		})
		return err == nil && len(markers) > 0
	})
	if len(markers) != 1 || markers[0].Type != record.ControlCommit || markers[0].CoordinatorEpoch != 7 {
		t.Fatalf("markers %+v, want one commit at coordinator epoch 7", markers)
	}

	c.moveLeader(t, TransactionStateTopic, 2)
	eventually(t, "NOT_COORDINATOR once node 2 leads", func() bool {
		_, err := c.env.Txn.DescribeTransaction(ctx, here)
		return errors.Is(err, txn.ErrNotCoordinator)
	})
	c.moveLeader(t, TransactionStateTopic, 1)
	eventually(t, "the transactional id back once this node leads again", func() bool {
		d, err := c.env.Txn.DescribeTransaction(ctx, here)
		return err == nil && d.ProducerID == pid
	})
}

func TestLeadershipFollow(t *testing.T) {
	for _, reload := range []bool{false, true} {
		t.Run(fmt.Sprintf("reloadOnNewEpoch=%v", reload), func(t *testing.T) {
			c := newClusterTestEnv(t)
			l := newLeadership(consumerOffsetsTopic, reload)
			var loaded, unloaded []int32
			follow := func() {
				loaded, unloaded = nil, nil
				l.follow(c.env, func(n int32) { unloaded = append(unloaded, n) },
					func(n int32, _ *partition.Partition, _ uint64, _ int32) { loaded = append(loaded, n) })
			}
			follow()
			if !slices.Equal(loaded, []int32{0, 2}) || unloaded != nil || l.code(0) != kerr.CoordinatorLoadInProgress.Code || l.code(1) != kerr.NotCoordinator.Code {
				t.Fatalf("first image: loaded %v unloaded %v", loaded, unloaded)
			}
			if _, ok := l.loaded(2, l.led[2].gen); !ok || l.code(2) != 0 {
				t.Fatalf("partition 2 not served after its load")
			}
			if l.stale(0, l.led[0].gen) || !l.stale(0, l.led[0].gen+99) {
				t.Fatal("stale generation not told apart")
			}
			gen0 := l.led[0].gen
			follow()
			if loaded != nil || unloaded != nil {
				t.Fatalf("same image: loaded %v unloaded %v", loaded, unloaded)
			}
			// A new leader epoch for a partition still led here.
			c.moveLeader(t, consumerOffsetsTopic, 1)
			follow()
			if reload && (!slices.Equal(loaded, []int32{0}) || !slices.Equal(unloaded, []int32{0}) || !l.stale(0, gen0)) {
				t.Fatalf("new epoch, reloading: loaded %v unloaded %v", loaded, unloaded)
			}
			if !reload && (loaded != nil || unloaded != nil || l.stale(0, gen0) || l.led[0].epoch != 8) {
				t.Fatalf("new epoch, kept: loaded %v unloaded %v, lead %+v", loaded, unloaded, l.led[0])
			}
			c.moveLeader(t, consumerOffsetsTopic, 2)
			follow()
			if loaded != nil || !slices.Equal(unloaded, []int32{0}) || l.code(0) != kerr.NotCoordinator.Code {
				t.Fatalf("moved away: loaded %v unloaded %v", loaded, unloaded)
			}
		})
	}
}

func TestInternalTopicFactorsOnCluster(t *testing.T) {
	c := newClusterTestEnv(t)
	c.env.Config.Cluster.Replication.OffsetsTopicReplicationFactor = 3
	c.env.Config.Cluster.Replication.TransactionStateLogRF = 3
	c.env.Config.Cluster.Replication.TransactionStateLogMinISR = 2
	single := *c.env
	single.Cluster = nil
	for _, tc := range []struct {
		name   string
		env    *Env
		spec   func(*Env) metadata.CreateTopic
		rf     int16
		minISR string // "" for none
	}{
		{"offsets on a cluster", c.env, (*Env).offsetsTopicSpec, 3, ""},
		{"transaction state on a cluster", c.env, (*Env).txnStateTopicSpec, 3, "2"},
		{"offsets on a single node", &single, (*Env).offsetsTopicSpec, single.Config.OffsetsTopicReplicationFactor, ""},
		{"transaction state on a single node", &single, (*Env).txnStateTopicSpec, single.Config.TransactionStateLogRF,
			fmt.Sprint(single.Config.TransactionStateLogMinISR)},
	} {
		got := tc.spec(tc.env)
		if got.ReplicationFactor != tc.rf || len(got.Assignments) != 0 {
			t.Errorf("%s: factor %d, assignments %v; want factor %d placed by the controller", tc.name, got.ReplicationFactor, got.Assignments, tc.rf)
		}
		if v := got.Configs["min.insync.replicas"]; (v == nil) != (tc.minISR == "") || (v != nil && *v != tc.minISR) {
			t.Errorf("%s: min.insync.replicas %v, want %q", tc.name, v, tc.minISR)
		}
	}
}

package controller

import (
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/cascade-kafka/cascade/broker/internal/scriptargs"
	"github.com/cascade-kafka/cascade/broker/metadata"
)

// TestScripts runs the data-driven scripts of testdata/. Each command runs
// one controller operation against the harness's image, applies the
// records it proposes, and prints them, the reply and the state they
// leave. Regenerate the expectations with -rewrite after a deliberate
// change, then review the diff.
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := newHarness(t)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return h.run(t, d)
		})
	})
}

const testClusterID = "test-cluster"

// harness drives a Controller as the quorum would: every proposed batch is
// applied at once, at the image's next offset.
type harness struct {
	cfg Config
	c   *Controller
	img *metadata.Image
	now time.Time
}

func newHarness(t testing.TB) *harness {
	h := &harness{now: time.UnixMilli(1_000_000)}
	h.cfg = DefaultConfig(100, rand.New(rand.NewSource(1)))
	h.img = metadata.Empty()
	h.apply(t, []metadata.Record{metadata.ClusterIDRecord{ClusterID: testClusterID},
		metadata.FeatureLevelRecord{Name: "metadata.version", Level: metadata.MetadataVersion}})
	h.restart(t)
	return h
}

// restart starts a new controller term on the same image.
func (h *harness) restart(t testing.TB) {
	c, err := New(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
}

func (h *harness) apply(t testing.TB, recs []metadata.Record) {
	t.Helper()
	if len(recs) == 0 {
		return
	}
	next, err := metadata.Apply(h.img, recs)
	if err != nil {
		t.Fatalf("proposed records do not apply: %v", err)
	}
	h.img = next
}

// args is a command's arguments: k=v pairs and bare words.
type args struct {
	kv  map[string]string
	pos []string
}

func parseArgs(d *datadriven.TestData) args {
	a := args{kv: map[string]string{}}
	for _, arg := range d.CmdArgs {
		if len(arg.Vals) == 0 {
			a.pos = append(a.pos, arg.Key)
		} else {
			a.kv[arg.Key] = strings.Join(arg.Vals, ",")
		}
	}
	return a
}

func (a args) int(t testing.TB, k string, def int64) int64 { return scriptargs.Int(t, a.kv, k, def) }

func (a args) ints(t testing.TB, k string) []int32 { return scriptargs.Ints(t, a.kv, k) }

func (a args) flag(k string) bool { return slices.Contains(a.pos, k) }

// topicPartition parses "t/0".
func topicPartition(t testing.TB, s string) (string, int32) {
	i := strings.LastIndexByte(s, '/')
	if i < 0 {
		t.Fatalf("want topic/partition, got %q", s)
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil {
		t.Fatal(err)
	}
	return s[:i], int32(n)
}

func incarnation(id, n int64) metadata.UUID { return metadata.UUID{byte(id), byte(n)} }

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	a := parseArgs(d)
	var out strings.Builder
	prev := h.img
	var recs []metadata.Record
	var err error
	reply := ""
	next := h.img.Offset + 1
	switch d.Cmd {
	case "config":
		if v, ok := a.kv["unclean"]; ok {
			h.cfg.UncleanLeaderElection = v == "true"
		}
		if v, ok := a.kv["elr"]; ok {
			h.cfg.EligibleLeaderReplicas = v == "true"
		}
		if v, ok := a.kv["rebalance"]; ok {
			h.cfg.AutoLeaderRebalance = v == "true"
		}
		if v, ok := a.kv["unclean-interval-ms"]; ok {
			ms, _ := strconv.Atoi(v)
			h.cfg.UncleanLeaderElectionInterval = time.Duration(ms) * time.Millisecond
		}
		if v, ok := a.kv["rebalance-interval-ms"]; ok {
			ms, _ := strconv.Atoi(v)
			h.cfg.LeaderImbalanceCheckInterval = time.Duration(ms) * time.Millisecond
		}
		h.cfg.DefaultReplicationFactor = int16(a.int(t, "rf", int64(h.cfg.DefaultReplicationFactor)))
		h.restart(t)
		return "ok"
	case "restart":
		h.restart(t)
		return "ok"
	case "register":
		id := a.int(t, "id", 1)
		req := RegisterBrokerRequest{BrokerID: int32(id), ClusterID: testClusterID, IncarnationID: incarnation(id, a.int(t, "inc", 1)),
			Listeners: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: uint16(9090 + id)}}, Rack: a.kv["rack"], PreviousBrokerEpoch: a.int(t, "prev", -1),
			Features: []metadata.BrokerFeature{{Name: "metadata.version", MinSupportedVersion: 1, MaxSupportedVersion: int16(a.int(t, "mv", int64(metadata.MetadataVersion)))}}}
		if v, ok := a.kv["cluster"]; ok {
			req.ClusterID = v
		}
		var r RegisterBrokerReply
		recs, r, err = h.c.RegisterBroker(h.img, h.now, next, req)
		reply = fmt.Sprintf("epoch=%d", r.BrokerEpoch)
	case "heartbeat":
		id := int32(a.int(t, "id", 1))
		req := HeartbeatRequest{BrokerID: id, BrokerEpoch: a.int(t, "epoch", h.epoch(id)),
			CurrentMetadataOffset: a.int(t, "offset", h.img.Offset), WantFence: a.flag("fence"), WantShutDown: a.flag("shutdown")}
		var r HeartbeatReply
		recs, r, err = h.c.BrokerHeartbeat(h.img, h.now, next, req)
		reply = fmt.Sprintf("caught-up=%v fenced=%v controlled-shutdown=%v should-shut-down=%v", r.IsCaughtUp, r.IsFenced, r.InControlledShutdown, r.ShouldShutDown)
	case "tick":
		h.now = h.now.Add(time.Duration(a.int(t, "ms", 0)) * time.Millisecond)
		var r TickReply
		recs, r, err = h.c.Tick(h.img, h.now)
		reply = fmt.Sprintf("fenced=%v elections=%d", r.Fenced, r.Elections)
	case "advance":
		h.now = h.now.Add(time.Duration(a.int(t, "ms", 0)) * time.Millisecond)
		return "ok"
	case "gone":
		id := int32(a.int(t, "id", 1))
		recs, err = h.c.BrokerGone(h.img, id, a.int(t, "epoch", -1))
	case "unregister":
		recs, err = h.c.UnregisterBroker(h.img, int32(a.int(t, "id", 1)))
	case "create-topic":
		req := metadata.CreateTopic{Name: a.pos[0], NumPartitions: int32(a.int(t, "partitions", -1)), ReplicationFactor: int16(a.int(t, "rf", -1))}
		if v, ok := a.kv["assign"]; ok {
			for i, part := range strings.Split(v, ";") {
				var replicas []int32
				for _, f := range strings.Split(part, ":") {
					n, _ := strconv.Atoi(f)
					replicas = append(replicas, int32(n))
				}
				req.Assignments = append(req.Assignments, metadata.Assignment{Partition: int32(i), Replicas: replicas})
			}
		}
		req.Configs = map[string]*string{}
		if v, ok := a.kv["unclean"]; ok {
			req.Configs["unclean.leader.election.enable"] = &v
		}
		if v, ok := a.kv["min-isr"]; ok {
			req.Configs["min.insync.replicas"] = &v
		}
		var res []metadata.CreateResult
		recs, res, err = h.c.CreateTopics(h.img, []metadata.CreateTopic{req}, a.flag("validate"))
		if err == nil {
			reply = errString(res[0].Err)
		}
	case "create-partitions":
		var res []metadata.CreatePartitionsResult
		recs, res, err = h.c.CreatePartitions(h.img, []metadata.CreatePartitions{{Name: a.pos[0], Count: int32(a.int(t, "count", 0))}}, false)
		if err == nil {
			reply = errString(res[0].Err)
		}
	case "delete-topic":
		var res []metadata.DeleteResult
		recs, res, err = h.c.DeleteTopics(h.img, []metadata.DeleteTopic{{Name: a.pos[0]}})
		if err == nil {
			reply = errString(res[0].Err)
		}
	case "set-config":
		var ops []metadata.ConfigOp
		for k, v := range a.kv {
			ops = append(ops, metadata.ConfigOp{Name: k, Op: metadata.OpSet, Value: &v})
		}
		recs, err = h.c.IncrementalAlterTopicConfigs(h.img, a.pos[0], ops)
	case "alter-partition":
		recs, reply, err = h.alterPartition(t, a)
	case "elect":
		typ := ElectPreferred
		if a.kv["type"] == "unclean" {
			typ = ElectUnclean
		}
		var topics []ElectTopic
		for _, p := range a.pos {
			name, i := topicPartition(t, p)
			topics = append(topics, ElectTopic{Topic: name, Partitions: []int32{i}})
		}
		var res []ElectResult
		recs, res, err = h.c.ElectLeaders(h.img, typ, topics)
		var parts []string
		for _, r := range res {
			parts = append(parts, fmt.Sprintf("%s/%d:%s", r.Topic, r.Partition, errString(r.Err)))
		}
		reply = strings.Join(parts, " ")
	case "reassign":
		name, i := topicPartition(t, a.pos[0])
		rp := ReassignPartition{Partition: i, Replicas: a.ints(t, "replicas")}
		if a.flag("cancel") {
			rp.Replicas = nil
		} else if rp.Replicas == nil {
			rp.Replicas = []int32{}
		}
		var res []ReassignResult
		recs, res, err = h.c.AlterPartitionReassignments(h.img, []ReassignTopic{{Topic: name, Partitions: []ReassignPartition{rp}}}, !a.flag("keep-rf"))
		if err == nil {
			reply = errString(res[0].Err)
		}
	case "list-reassignments":
		var parts []string
		for _, o := range ListPartitionReassignments(h.img, nil) {
			parts = append(parts, fmt.Sprintf("%s/%d replicas=%v adding=%v removing=%v", o.Topic, o.Partition, o.Replicas, o.AddingReplicas, o.RemovingReplicas))
		}
		if len(parts) == 0 {
			return "none"
		}
		return strings.Join(parts, "\n")
	case "alloc-pids":
		id := int32(a.int(t, "id", 1))
		var blk ProducerIDBlock
		recs, blk, err = h.c.AllocateProducerIDs(h.img, id, a.int(t, "epoch", h.epoch(id)))
		reply = fmt.Sprintf("first=%d size=%d", blk.First, blk.Size)
	case "state":
		return h.state(nil, nil)
	default:
		t.Fatalf("unknown command %q", d.Cmd)
	}
	if err != nil {
		return "error: " + errString(err)
	}
	h.apply(t, recs)
	brokers, parts := map[int32]bool{}, map[string]bool{}
	for _, r := range recs {
		fmt.Fprintf(&out, "+ %s\n", h.describe(prev, r))
		switch r := r.(type) {
		case metadata.RegisterBrokerRecord:
			brokers[r.BrokerID] = true
		case metadata.BrokerRegistrationChangeRecord:
			brokers[r.BrokerID] = true
		case metadata.PartitionRecord:
			parts[h.partName(r.TopicID, r.Partition)] = true
		case metadata.PartitionChangeRecord:
			parts[h.partName(r.TopicID, r.Partition)] = true
		}
	}
	if reply != "" {
		fmt.Fprintf(&out, "reply: %s\n", reply)
	}
	out.WriteString(h.state(brokers, parts))
	return strings.TrimRight(out.String(), "\n")
}

func (h *harness) epoch(id int32) int64 {
	if b, ok := h.img.Broker(id); ok {
		return b.Epoch
	}
	return -1
}

func (h *harness) alterPartition(t *testing.T, a args) ([]metadata.Record, string, error) {
	name, index := topicPartition(t, a.pos[0])
	tp, ok := h.img.Topic(name)
	var p metadata.Partition
	if ok && int(index) < len(tp.Partitions) {
		p = tp.Partitions[index]
	}
	id := int32(a.int(t, "id", int64(p.Leader)))
	pd := AlterPartitionData{Partition: index, LeaderEpoch: int32(a.int(t, "leader-epoch", int64(p.LeaderEpoch))),
		PartitionEpoch:      int32(a.int(t, "partition-epoch", int64(p.PartitionEpoch))),
		LeaderRecoveryState: int8(a.int(t, "lrs", 0))}
	for _, m := range a.ints(t, "isr") {
		pd.NewISR = append(pd.NewISR, BrokerState{BrokerID: m, BrokerEpoch: h.epoch(m)})
	}
	if stale, ok := a.kv["stale-member"]; ok {
		n, _ := strconv.Atoi(stale)
		for i := range pd.NewISR {
			if pd.NewISR[i].BrokerID == int32(n) {
				pd.NewISR[i].BrokerEpoch--
			}
		}
	}
	var topicID metadata.UUID
	if ok {
		topicID = tp.ID
	}
	recs, res, err := h.c.AlterPartition(h.img, AlterPartitionRequest{BrokerID: id, BrokerEpoch: a.int(t, "epoch", h.epoch(id)),
		Topics: []AlterPartitionTopic{{TopicID: topicID, Partitions: []AlterPartitionData{pd}}}})
	if err != nil {
		return nil, "", err
	}
	r := res[0]
	if r.Err != nil {
		return recs, errString(r.Err), nil
	}
	return recs, fmt.Sprintf("ok leader=%d isr=%v le=%d pe=%d lrs=%d", r.Leader, r.ISR, r.LeaderEpoch, r.PartitionEpoch, r.LeaderRecoveryState), nil
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	var kind string
	if e, ok := err.(*metadata.Error); ok {
		kind = e.Kind.Error()
		if e.Message != "" {
			return kind + ": " + e.Message
		}
		return kind
	}
	return err.Error()
}

func (h *harness) partName(id metadata.UUID, index int32) string {
	if t, ok := h.img.TopicByID(id); ok {
		return fmt.Sprintf("%s/%d", t.Name, index)
	}
	return fmt.Sprintf("%s/%d", id, index)
}

// describe renders a record, naming topics from the image before it.
func (h *harness) describe(prev *metadata.Image, r metadata.Record) string {
	topic := func(id metadata.UUID) string {
		if t, ok := h.img.TopicByID(id); ok {
			return t.Name
		}
		if t, ok := prev.TopicByID(id); ok {
			return t.Name
		}
		return id.String()
	}
	switch r := r.(type) {
	case metadata.RegisterBrokerRecord:
		return fmt.Sprintf("RegisterBroker id=%d epoch=%d inc=%x rack=%q fenced=%v shutdown=%v", r.BrokerID, r.BrokerEpoch,
			r.IncarnationID[:2], r.Rack, r.Fenced, r.InControlledShutdown)
	case metadata.BrokerRegistrationChangeRecord:
		change := map[int8]string{metadata.Unfence: " unfence", metadata.FenceBroker: " fence"}[r.Fenced]
		if r.InControlledShutdown == 1 {
			change += " controlled-shutdown"
		}
		return fmt.Sprintf("BrokerRegistrationChange id=%d epoch=%d%s", r.BrokerID, r.BrokerEpoch, change)
	case metadata.UnregisterBrokerRecord:
		return fmt.Sprintf("UnregisterBroker id=%d epoch=%d", r.BrokerID, r.BrokerEpoch)
	case metadata.TopicRecord:
		return fmt.Sprintf("Topic %s", r.Name)
	case metadata.PartitionRecord:
		return fmt.Sprintf("Partition %s/%d replicas=%v isr=%v leader=%d", topic(r.TopicID), r.Partition, r.Replicas, r.ISR, r.Leader)
	case metadata.PartitionChangeRecord:
		s := fmt.Sprintf("PartitionChange %s/%d", topic(r.TopicID), r.Partition)
		if r.Leader != metadata.NoLeaderChange {
			s += fmt.Sprintf(" leader=%d", r.Leader)
		}
		if r.ISR != nil {
			s += fmt.Sprintf(" isr=%v", r.ISR)
		}
		if r.Replicas != nil {
			s += fmt.Sprintf(" replicas=%v", r.Replicas)
		}
		if r.LeaderRecoveryState != metadata.LeaderRecoveryNoChange {
			s += fmt.Sprintf(" lrs=%d", r.LeaderRecoveryState)
		}
		if r.ELR != nil {
			s += fmt.Sprintf(" elr=%v", r.ELR)
		}
		if r.LastKnownELR != nil {
			s += fmt.Sprintf(" last-known-elr=%v", r.LastKnownELR)
		}
		if r.AddingReplicas != nil {
			s += fmt.Sprintf(" adding=%v", r.AddingReplicas)
		}
		if r.RemovingReplicas != nil {
			s += fmt.Sprintf(" removing=%v", r.RemovingReplicas)
		}
		return s
	case metadata.RemoveTopicRecord:
		return fmt.Sprintf("RemoveTopic %s", topic(r.TopicID))
	case metadata.ConfigRecord:
		v := "<deleted>"
		if r.Value != nil {
			v = *r.Value
		}
		return fmt.Sprintf("Config %s %s=%s", r.ResourceName, r.Name, v)
	case metadata.ProducerIDsRecord:
		return fmt.Sprintf("ProducerIds broker=%d epoch=%d next=%d", r.BrokerID, r.BrokerEpoch, r.NextProducerID)
	}
	return fmt.Sprintf("%T %+v", r, r)
}

// state renders the named brokers and partitions (all when both are nil).
func (h *harness) state(brokers map[int32]bool, parts map[string]bool) string {
	all := brokers == nil && parts == nil
	var out strings.Builder
	for _, b := range h.img.Brokers() {
		if !all && !brokers[b.ID] {
			continue
		}
		st := "unfenced"
		switch {
		case b.Fenced && b.InControlledShutdown:
			st = "fenced,shut-down"
		case b.Fenced:
			st = "fenced"
		case b.InControlledShutdown:
			st = "controlled-shutdown"
		}
		rack := ""
		if b.Rack != "" {
			rack = " rack=" + b.Rack
		}
		fmt.Fprintf(&out, "broker %d epoch=%d %s%s\n", b.ID, b.Epoch, st, rack)
	}
	for _, t := range h.img.Topics() {
		for i, p := range t.Partitions {
			name := fmt.Sprintf("%s/%d", t.Name, i)
			if !all && !parts[name] {
				continue
			}
			lrs := ""
			if len(p.ELR) > 0 {
				lrs += fmt.Sprintf(" elr=%v", p.ELR)
			}
			if len(p.LastKnownELR) > 0 {
				lrs += fmt.Sprintf(" last-known-elr=%v", p.LastKnownELR)
			}
			if p.LeaderRecoveryState == metadata.LeaderRecovering {
				lrs += " recovering"
			}
			if p.Reassigning() {
				lrs += fmt.Sprintf(" adding=%v removing=%v", p.AddingReplicas, p.RemovingReplicas)
			}
			fmt.Fprintf(&out, "%s leader=%d le=%d pe=%d isr=%v replicas=%v%s\n", name, p.Leader, p.LeaderEpoch, p.PartitionEpoch, p.ISR, p.Replicas, lrs)
		}
	}
	if all && out.Len() == 0 {
		return "empty"
	}
	return out.String()
}

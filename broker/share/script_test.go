package share

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/internal/scriptargs"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata scripts")

// TestScripts runs every data-driven script under testdata/; run with
// -rewrite to regenerate the expected output, then review the diff.
func TestScripts(t *testing.T) {
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, e := range entries {
		if name := e.Name(); strings.HasSuffix(name, ".txt") {
			ran++
			t.Run(name, func(t *testing.T) { runScript(t, filepath.Join("testdata", name)) })
		}
	}
	if ran == 0 {
		t.Fatal("no scripts under testdata")
	}
}

// runScript runs one script. The file is paragraphs split by blank
// lines; in each, comment lines, then the command, "----", and the
// expected output (none when the paragraph ends at "----").
func runScript(t *testing.T, path string) {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	var rewritten []string
	for n, para := range strings.Split(strings.TrimRight(string(raw), "\n"), "\n\n") {
		head, want, found := strings.Cut(para, "\n----")
		want = strings.TrimPrefix(want, "\n")
		lines := strings.Split(head, "\n")
		cmd := lines[len(lines)-1]
		if !found || strings.HasPrefix(cmd, "#") {
			t.Fatalf("%s: paragraph %d has no command and ----", path, n+1)
		}
		got := strings.TrimRight(h.run(cmd), "\n")
		if !*rewrite && got != want {
			t.Errorf("%s: %s\n got:\n%s\nwant:\n%s", path, cmd, got, want)
		}
		rewritten = append(rewritten, head+"\n----\n"+got)
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(strings.Join(rewritten, "\n\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// harness drives one share group "g" over one share-partition t-0: the
// group coordinator, the share-partition and the share coordinator, with
// the records of both internal topics kept for "restart".
type harness struct {
	t         *testing.T
	now       time.Time
	pcfg      PartitionConfig
	scfg      StateConfig
	gcfg      GroupConfig
	p         *Partition
	state     *StateCoordinator
	groups    *Groups
	topics    []Topic
	log       []Batch      // the data partition t-0
	aborted   []AbortedTxn // its aborted transactions
	lso, hwm  int64
	stateLog  []StateRecord // __share_group_state
	groupLog  []GroupRecord // __consumer_offsets
	nextID    uint64
	timestamp func(int64) int64
}

const (
	hGroup = "g"
)

func topicID(name string) (id [16]byte) {
	copy(id[:], name)
	return id
}

func topicName(id [16]byte) string { return strings.TrimRight(string(id[:]), "\x00") }

func (h *harness) key() StateKey { return StateKey{Group: hGroup, TopicID: topicID("t"), Partition: 0} }

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, now: time.UnixMilli(1_000_000), pcfg: DefaultPartitionConfig(), scfg: DefaultStateConfig(), gcfg: DefaultGroupConfig()}
	h.state = NewState(h.scfg)
	h.groups = NewGroups(h.gcfg)
	return h
}

func words(line string) (cmd string, pos []string, kv map[string]string) {
	f := strings.Fields(line)
	kv = map[string]string{}
	for _, w := range f[1:] {
		if k, v, ok := strings.Cut(w, "="); ok {
			kv[k] = v
		} else {
			pos = append(pos, w)
		}
	}
	return f[0], pos, kv
}

func (h *harness) run(line string) string {
	t := h.t
	cmd, pos, kv := words(line)
	var b strings.Builder
	switch cmd {
	case "config":
		h.pcfg.LockDuration = time.Duration(scriptargs.Int(t, kv, "lock", h.pcfg.LockDuration.Milliseconds())) * time.Millisecond
		h.pcfg.DeliveryCountLimit = int16(scriptargs.Int(t, kv, "limit", int64(h.pcfg.DeliveryCountLimit)))
		h.pcfg.MaxRecordLocks = int(scriptargs.Int(t, kv, "locks", int64(h.pcfg.MaxRecordLocks)))
		h.pcfg.ReadCommitted = kv["isolation"] == "read_committed"
		if v, ok := kv["reset"]; ok {
			h.pcfg.AutoOffsetReset = v
		}
		h.scfg.SnapshotUpdateRecordsPerSnapshot = int(scriptargs.Int(t, kv, "per-snapshot", int64(h.scfg.SnapshotUpdateRecordsPerSnapshot)))
		h.gcfg.MaxSize = int(scriptargs.Int(t, kv, "max-size", int64(h.gcfg.MaxSize)))
		h.gcfg.SessionTimeout = time.Duration(scriptargs.Int(t, kv, "session", h.gcfg.SessionTimeout.Milliseconds())) * time.Millisecond
		h.gcfg.AssignmentInterval = time.Duration(scriptargs.Int(t, kv, "assign-interval", h.gcfg.AssignmentInterval.Milliseconds())) * time.Millisecond
		h.state = NewState(h.scfg)
		h.groups = NewGroups(h.gcfg)
		h.groups.SetTopics(h.topics)
		return "ok"
	case "topics":
		h.topics = nil
		for _, p := range pos {
			name, n, _ := strings.Cut(p, ":")
			parts, err := strconv.Atoi(n)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			h.topics = append(h.topics, Topic{Name: name, ID: topicID(name), Partitions: int32(parts)})
		}
		h.groups.SetTopics(h.topics)
		return "ok"
	case "produce":
		// produce 0-9 [txn pid=7] [control pid=7]: a batch in t-0.
		first, last := offsetRange(t, pos[0])
		bt := Batch{BaseOffset: first, LastOffset: last, ProducerID: scriptargs.Int(t, kv, "pid", -1)}
		for _, p := range pos[1:] {
			bt.Transactional = bt.Transactional || p == "txn" || p == "control"
			bt.Control = bt.Control || p == "control"
		}
		h.log = append(h.log, bt)
		h.hwm = last + 1
		return fmt.Sprintf("hwm=%d", h.hwm)
	case "abort":
		h.aborted = append(h.aborted, AbortedTxn{ProducerID: scriptargs.Int(t, kv, "pid", 0), FirstOffset: scriptargs.Int(t, kv, "first", 0)})
		return "ok"
	case "timeindex":
		// timeindex offset=N: the log's first offset at or after any
		// timestamp is N (-1: none).
		o := scriptargs.Int(t, kv, "offset", -1)
		h.timestamp = func(int64) int64 { return o }
		return "ok"
	case "logstart":
		h.lso = scriptargs.Int(t, kv, "offset", 0)
		return "ok"
	case "initstate":
		// initstate start=N state=E: InitializeShareGroupState, as the
		// group coordinator sends it before the first fetch.
		h.initState(&b, scriptargs.Int(t, kv, "start", -1), int32(scriptargs.Int(t, kv, "state", 0)))
		return strings.TrimRight(b.String(), "\n")
	case "read":
		return h.readState(int32(scriptargs.Int(t, kv, "leader", 0)))
	case "summary":
		req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
		req.Version = 1
		req.GroupID = hGroup
		req.Topics = []kmsg.ReadShareGroupStateSummaryRequestTopic{{TopicID: h.key().TopicID,
			Partitions: []kmsg.ReadShareGroupStateSummaryRequestTopicPartition{{Partition: 0}}}}
		h.stepState(&b, req)
		return strings.TrimRight(b.String(), "\n")
	case "init":
		if _, ok := h.state.State(h.key()); !ok {
			h.initState(&b, -1, 0)
		}
		h.p = NewPartition(h.pcfg)
		var persisted *SnapshotValue
		if v, ok := h.state.State(h.key()); ok {
			persisted = &v
		}
		if err := h.p.Initialize(h.now, persisted, LogOffsets{LogStartOffset: h.lso, HighWatermark: h.hwm, OffsetForTimestamp: h.timestamp}); err != nil {
			return "error: " + err.Error()
		}
		fmt.Fprintf(&b, "spso=%d speo=%d next=%d\n", h.p.StartOffset(), h.p.EndOffset(), h.p.NextFetchOffset())
	case "fetch":
		// fetch member=a max=N: a ShareFetch reads from the next fetch
		// offset and acquires.
		from := h.p.NextFetchOffset()
		var batches []Batch
		for _, bt := range h.log {
			if bt.LastOffset >= from {
				batches = append(batches, bt)
			}
		}
		got, err := h.p.Acquire(h.now, scriptargs.Str(t, kv, "member"), batches, h.aborted, int(scriptargs.Int(t, kv, "max", 500)))
		if err != nil {
			return "error: " + err.Error()
		}
		var runs []string
		for _, a := range got {
			runs = append(runs, fmt.Sprintf("%d-%d(delivery %d)", a.FirstOffset, a.LastOffset, a.DeliveryCount))
		}
		fmt.Fprintf(&b, "acquired [%s]\n", strings.Join(runs, " "))
	case "ack":
		// ack member=a 0-4:accept 5:release 6-8:accept,reject,gap
		var acks []Ack
		for _, p := range pos {
			rng, types, _ := strings.Cut(p, ":")
			first, last := offsetRange(t, rng)
			a := Ack{FirstOffset: first, LastOffset: last}
			for _, ty := range strings.Split(types, ",") {
				a.Types = append(a.Types, ackType(t, ty))
			}
			acks = append(acks, a)
		}
		if err := h.p.Acknowledge(h.now, scriptargs.Str(t, kv, "member"), acks); err != nil {
			fmt.Fprintf(&b, "error: %v\n", err)
		} else {
			b.WriteString("ok\n")
		}
	case "release":
		h.p.ReleaseMember(scriptargs.Str(t, kv, "member"))
	case "tick":
		d, err := strconv.Atoi(pos[0])
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		h.now = h.now.Add(time.Duration(d) * time.Millisecond)
		if h.p != nil {
			h.p.Tick(h.now)
		}
		h.groups.Tick(h.now)
	case "show":
		return h.show()
	case "state":
		v, ok := h.state.State(h.key())
		if !ok {
			return "no state"
		}
		return fmt.Sprintf("snapshot-epoch=%d state-epoch=%d leader-epoch=%d start=%d complete=%d batches=%s",
			v.SnapshotEpoch, v.StateEpoch, v.LeaderEpoch, v.StartOffset, v.DeliveryCompleteCount, formatBatches(v.StateBatches))
	case "write":
		// write start=N batches=0-4:2:1 leader=E state=E: a direct
		// WriteShareGroupState to the share coordinator.
		req := writeRequest(h.key(), int32(scriptargs.Int(t, kv, "state", 0)), int32(scriptargs.Int(t, kv, "leader", 0)),
			StateWrite{StartOffset: scriptargs.Int(t, kv, "start", -1), DeliveryCompleteCount: -1, StateBatches: parseBatches(t, kv["batches"])})
		h.stepState(&b, req)
		return strings.TrimRight(b.String(), "\n")
	case "restart":
		// The broker restarts: every coordinator is rebuilt from its
		// internal topic and the share-partition from its state.
		h.state = NewState(h.scfg)
		for _, r := range h.stateLog {
			if err := h.state.Replay(r.Key, r.Value); err != nil {
				t.Fatalf("replay: %v", err)
			}
		}
		h.groups = NewGroups(h.gcfg)
		h.groups.SetTopics(h.topics)
		for _, r := range h.groupLog {
			if _, err := h.groups.Replay(r.Key, r.Value); err != nil {
				t.Fatalf("replay: %v", err)
			}
		}
		h.groups.LoadComplete(h.now)
		h.p = nil
		return fmt.Sprintf("replayed %d state records, %d group records", len(h.stateLog), len(h.groupLog))
	case "hb":
		// hb member=a epoch=0 sub=t,u rack=r
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.Version = 1
		req.GroupID = hGroup
		if v, ok := kv["group"]; ok {
			req.GroupID = v
		}
		req.MemberID = kv["member"]
		req.MemberEpoch = int32(scriptargs.Int(t, kv, "epoch", 0))
		if v, ok := kv["sub"]; ok {
			req.SubscribedTopicNames = []string{}
			if v != "" {
				req.SubscribedTopicNames = strings.Split(v, ",")
			}
		}
		if v, ok := kv["rack"]; ok {
			req.RackID = &v
		}
		h.nextID++
		if err := h.groups.Step(h.now, GroupRequest{ID: h.nextID, ClientID: "cli", ClientHost: "/127.0.0.1", Msg: req}); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	case "member":
		epoch, a, ok := h.groups.Member(hGroup, scriptargs.Str(t, kv, "member"))
		if !ok {
			return "no such member"
		}
		return fmt.Sprintf("epoch=%d assigned=%s", epoch, formatAssignment(a.list()))
	default:
		t.Fatalf("unknown command %q", cmd)
	}
	h.drain(&b)
	if b.Len() == 0 {
		return "(nothing)"
	}
	return b.String()
}

// drain carries out what the state machines asked: group records are
// logged, members that left release their records, and the
// share-partition's state is written through the share coordinator.
func (h *harness) drain(b *strings.Builder) {
	rd := h.groups.Ready()
	for _, r := range rd.Records {
		h.groupLog = append(h.groupLog, r)
		b.WriteString(formatGroupRecord(r) + "\n")
	}
	for _, r := range rd.Replies {
		b.WriteString(formatHeartbeat(r.Msg.(*kmsg.ShareGroupHeartbeatResponse)) + "\n")
	}
	for _, in := range rd.Initialize {
		fmt.Fprintf(b, "initialize %s %s%v state-epoch=%d start=%d\n", in.Group, topicName(in.TopicID), in.Partitions, in.StateEpoch, in.StartOffset)
		for _, part := range in.Partitions {
			if in.TopicID == h.key().TopicID && part == h.key().Partition {
				h.initState(b, in.StartOffset, in.StateEpoch)
			}
		}
		h.groups.Initialized(h.now, in.Group, in.TopicID, in.Partitions)
		for _, r := range h.groups.Ready().Records {
			h.groupLog = append(h.groupLog, r)
			b.WriteString(formatGroupRecord(r) + "\n")
		}
	}
	for _, l := range rd.Left {
		fmt.Fprintf(b, "left %s/%s\n", l.Group, l.Member)
		if h.p != nil {
			h.p.ReleaseMember(l.Member)
		}
	}
	if h.p == nil {
		return
	}
	if w := h.p.Ready(); w != nil {
		h.stepState(b, writeRequest(h.key(), w.StateEpoch, 0, *w))
	}
}

func (h *harness) initState(b *strings.Builder, start int64, stateEpoch int32) {
	req := kmsg.NewPtrInitializeShareGroupStateRequest()
	req.GroupID = hGroup
	req.Topics = []kmsg.InitializeShareGroupStateRequestTopic{{TopicID: h.key().TopicID,
		Partitions: []kmsg.InitializeShareGroupStateRequestTopicPartition{{Partition: 0, StateEpoch: stateEpoch, StartOffset: start}}}}
	h.stepState(b, req)
}

func (h *harness) readState(leader int32) string {
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = hGroup
	req.Topics = []kmsg.ReadShareGroupStateRequestTopic{{TopicID: h.key().TopicID,
		Partitions: []kmsg.ReadShareGroupStateRequestTopicPartition{{Partition: 0, LeaderEpoch: leader}}}}
	var b strings.Builder
	h.stepState(&b, req)
	return strings.TrimRight(b.String(), "\n")
}

// stepState feeds a share coordinator request, logs and prints its
// records, and prints its errors (and, for a read, the state read).
func (h *harness) stepState(b *strings.Builder, req kmsg.Request) {
	h.nextID++
	if err := h.state.Step(h.now, StateRequest{ID: h.nextID, Msg: req}); err != nil {
		h.t.Fatalf("state step: %v", err)
	}
	rd := h.state.Ready()
	for _, r := range rd.Records {
		h.stateLog = append(h.stateLog, r)
		b.WriteString(formatStateRecord(r) + "\n")
	}
	report := func(code int16, msg *string) {
		if code != 0 {
			fmt.Fprintf(b, "error %s\n", strings.TrimSpace(kerr.TypedErrorForCode(code).Message+" "+deref(msg)))
		}
	}
	for _, r := range rd.Replies {
		switch resp := r.Msg.(type) {
		case *kmsg.WriteShareGroupStateResponse:
			for _, tr := range resp.Topics {
				for _, pr := range tr.Partitions {
					report(pr.ErrorCode, pr.ErrorMessage)
				}
			}
		case *kmsg.InitializeShareGroupStateResponse:
			for _, tr := range resp.Topics {
				for _, pr := range tr.Partitions {
					report(pr.ErrorCode, pr.ErrorMessage)
				}
			}
		case *kmsg.ReadShareGroupStateSummaryResponse:
			for _, tr := range resp.Topics {
				for _, pr := range tr.Partitions {
					report(pr.ErrorCode, pr.ErrorMessage)
					fmt.Fprintf(b, "summary state-epoch=%d leader-epoch=%d start=%d complete=%d\n", pr.StateEpoch, pr.LeaderEpoch, pr.StartOffset, pr.DeliveryCompleteCount)
				}
			}
		case *kmsg.ReadShareGroupStateResponse:
			for _, tr := range resp.Topics {
				for _, pr := range tr.Partitions {
					report(pr.ErrorCode, pr.ErrorMessage)
					if pr.ErrorCode == 0 {
						var bs []StateBatch
						for _, sb := range pr.StateBatches {
							bs = append(bs, StateBatch{sb.FirstOffset, sb.LastOffset, sb.DeliveryState, sb.DeliveryCount})
						}
						fmt.Fprintf(b, "read state-epoch=%d start=%d batches=%s\n", pr.StateEpoch, pr.StartOffset, formatBatches(bs))
					}
				}
			}
		}
	}
}

// writeRequest builds the WriteShareGroupState a share-partition leader
// sends for a StateWrite.
func writeRequest(k StateKey, stateEpoch, leaderEpoch int32, w StateWrite) *kmsg.WriteShareGroupStateRequest {
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.Version = 1
	req.GroupID = k.Group
	p := kmsg.WriteShareGroupStateRequestTopicPartition{Partition: k.Partition, StateEpoch: stateEpoch, LeaderEpoch: leaderEpoch,
		StartOffset: w.StartOffset, DeliveryCompleteCount: w.DeliveryCompleteCount}
	for _, sb := range w.StateBatches {
		p.StateBatches = append(p.StateBatches, kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch{
			FirstOffset: sb.FirstOffset, LastOffset: sb.LastOffset, DeliveryState: sb.DeliveryState, DeliveryCount: sb.DeliveryCount})
	}
	req.Topics = []kmsg.WriteShareGroupStateRequestTopic{{TopicID: k.TopicID, Partitions: []kmsg.WriteShareGroupStateRequestTopicPartition{p}}}
	return req
}

// show prints the window: the SPSO, SPEO and next fetch offset, then runs
// of equal state, count and owner.
func (h *harness) show() string {
	p := h.p
	var b strings.Builder
	fmt.Fprintf(&b, "spso=%d speo=%d next=%d complete=%d", p.StartOffset(), p.EndOffset(), p.NextFetchOffset(), p.DeliveryCompleteCount())
	type run struct {
		first, last int64
		desc        string
	}
	var runs []run
	for o := p.StartOffset(); ; o++ {
		st, n, m, ok := p.Record(o)
		if !ok {
			break
		}
		d := fmt.Sprintf("%s/%d", st, n)
		if m != "" {
			d += "@" + m
		}
		if l := len(runs) - 1; l >= 0 && runs[l].desc == d {
			runs[l].last = o
			continue
		}
		runs = append(runs, run{o, o, d})
	}
	for _, r := range runs {
		fmt.Fprintf(&b, "\n  %d-%d %s", r.first, r.last, r.desc)
	}
	return b.String()
}

func offsetRange(t *testing.T, s string) (int64, int64) {
	a, z, ok := strings.Cut(s, "-")
	if !ok {
		z = a
	}
	first, err1 := strconv.ParseInt(a, 10, 64)
	last, err2 := strconv.ParseInt(z, 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("bad offset range %q", s)
	}
	return first, last
}

func ackType(t *testing.T, s string) AckType {
	switch s {
	case "gap":
		return AckGap
	case "accept":
		return AckAccept
	case "release":
		return AckRelease
	case "reject":
		return AckReject
	case "renew":
		return AckRenew
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("bad acknowledge type %q", s)
	}
	return AckType(n)
}

// parseBatches parses "0-4:2:1,5-9:0:0" (offsets:state:count).
func parseBatches(t *testing.T, s string) []StateBatch {
	var out []StateBatch
	for _, f := range strings.Split(s, ",") {
		if f == "" {
			continue
		}
		parts := strings.Split(f, ":")
		if len(parts) != 3 {
			t.Fatalf("bad batch %q", f)
		}
		first, last := offsetRange(t, parts[0])
		st, err1 := strconv.Atoi(parts[1])
		n, err2 := strconv.Atoi(parts[2])
		if err1 != nil || err2 != nil {
			t.Fatalf("bad batch %q", f)
		}
		out = append(out, StateBatch{FirstOffset: first, LastOffset: last, DeliveryState: int8(st), DeliveryCount: int16(n)})
	}
	return out
}

func formatBatches(bs []StateBatch) string {
	var parts []string
	for _, sb := range bs {
		parts = append(parts, fmt.Sprintf("%d-%d:%s/%d", sb.FirstOffset, sb.LastOffset, RecordState(sb.DeliveryState), sb.DeliveryCount))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func formatStateRecord(r StateRecord) string {
	typ, k, err := DecodeStateKey(r.Key)
	if err != nil {
		return fmt.Sprintf("bad key %x: %v", r.Key, err)
	}
	name := fmt.Sprintf("%s:%s:%d", k.Group, topicName(k.TopicID), k.Partition)
	switch typ {
	case RecordShareSnapshot:
		v, err := DecodeSnapshotValue(r.Value)
		return fmt.Sprintf("state p%d snapshot %s => snapshot-epoch=%d state-epoch=%d leader-epoch=%d start=%d complete=%d batches=%s err=%v",
			r.Partition, name, v.SnapshotEpoch, v.StateEpoch, v.LeaderEpoch, v.StartOffset, v.DeliveryCompleteCount, formatBatches(v.StateBatches), err)
	default:
		v, err := DecodeUpdateValue(r.Value)
		return fmt.Sprintf("state p%d update %s => snapshot-epoch=%d leader-epoch=%d start=%d complete=%d batches=%s err=%v",
			r.Partition, name, v.SnapshotEpoch, v.LeaderEpoch, v.StartOffset, v.DeliveryCompleteCount, formatBatches(v.StateBatches), err)
	}
}

func formatAssignment(tps []TopicPartitions) string {
	var parts []string
	for _, tp := range tps {
		parts = append(parts, fmt.Sprintf("%s%v", topicName(tp.TopicID), tp.Partitions))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, " ") + "}"
}

func formatInit(ts []TopicPartitionsInfo) string {
	var parts []string
	for _, t := range ts {
		parts = append(parts, fmt.Sprintf("%s%v", t.TopicName, t.Partitions))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

func formatGroupRecord(r GroupRecord) string {
	k, ok, err := DecodeGroupKey(r.Key)
	if err != nil || !ok {
		return fmt.Sprintf("bad key %x: %v", r.Key, err)
	}
	var name string
	var val any = "<tombstone>"
	switch k.Type {
	case RecordShareGroupMetadata:
		name = "share-epoch " + k.Group
		if r.Value != nil {
			v, err := DecodeGroupMetadataValue(r.Value)
			val = fmt.Sprintf("%d hash=%t err=%v", v.Epoch, v.MetadataHash != 0, err)
		}
	case RecordShareGroupTargetMetadata:
		name = "share-target-epoch " + k.Group
		if r.Value != nil {
			v, err := DecodeTargetMetadataValue(r.Value)
			val = fmt.Sprintf("%d at=%d err=%v", v.AssignmentEpoch, v.AssignmentTimestamp, err)
		}
	case RecordShareGroupMemberMetadata:
		name = "share-member " + k.Group + "/" + k.Member
		if r.Value != nil {
			v, err := DecodeMemberMetadataValue(r.Value)
			val = fmt.Sprintf("sub=%v rack=%s client=%s host=%s err=%v", v.SubscribedTopics, deref(v.RackID), v.ClientID, v.ClientHost, err)
		}
	case RecordShareGroupTargetMember:
		name = "share-target " + k.Group + "/" + k.Member
		if r.Value != nil {
			v, err := DecodeTargetMemberValue(r.Value)
			val = fmt.Sprintf("%s err=%v", formatAssignment(v), err)
		}
	case RecordShareGroupStatePartitionMeta:
		name = "share-state-partitions " + k.Group
		if r.Value != nil {
			v, err := DecodeStatePartitionMetadataValue(r.Value)
			val = fmt.Sprintf("initializing=%s initialized=%s err=%v", formatInit(v.Initializing), formatInit(v.Initialized), err)
		}
	case RecordShareGroupCurrentMember:
		name = "share-current " + k.Group + "/" + k.Member
		if r.Value != nil {
			v, err := DecodeCurrentAssignmentValue(r.Value)
			val = fmt.Sprintf("epoch=%d prev=%d state=%d assigned=%s err=%v", v.MemberEpoch, v.PreviousMemberEpoch, v.State, formatAssignment(v.Assigned), err)
		}
	}
	return fmt.Sprintf("rec p%d %s => %v", r.Partition, name, val)
}

// formatHeartbeat prints a ShareGroupHeartbeat response: the error, or
// the member, its epoch and the assignment when one is sent.
func formatHeartbeat(r *kmsg.ShareGroupHeartbeatResponse) string {
	var b strings.Builder
	b.WriteString("heartbeat")
	if r.ErrorCode != 0 {
		fmt.Fprintf(&b, " %s", kerr.TypedErrorForCode(r.ErrorCode).Message)
	}
	if r.ErrorMessage != nil {
		fmt.Fprintf(&b, " %q", *r.ErrorMessage)
	}
	if r.MemberID != nil {
		fmt.Fprintf(&b, " member=%s epoch=%d", *r.MemberID, r.MemberEpoch)
	}
	if r.HeartbeatIntervalMillis != 0 {
		fmt.Fprintf(&b, " interval=%d", r.HeartbeatIntervalMillis)
	}
	if r.Assignment != nil {
		var tps []TopicPartitions
		for _, tp := range r.Assignment.TopicPartitions {
			tps = append(tps, TopicPartitions{TopicID: tp.TopicID, Partitions: tp.Partitions})
		}
		fmt.Fprintf(&b, " assignment=%s", formatAssignment(tps))
	}
	return b.String()
}

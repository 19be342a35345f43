package group

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata expectations with the current output")

// TestScripts runs the data-driven scripts of testdata/: each block is a
// command, a "----" line, and the expected output up to a blank line. Run
// with -rewrite to regenerate the expectations after a deliberate change,
// then review the diff.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runScript(t, f) })
	}
}

type block struct {
	comment, cmd, want string
}

func parseScript(t *testing.T, path string) []block {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []block
	var cur *block
	inWant := false
	comment := ""

	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "#"):
			comment += line + "\n"
		case cur == nil && strings.TrimSpace(line) == "":
		case cur == nil:
			cur = &block{comment: comment, cmd: line}
			comment = ""
		case !inWant && line == "----":
			inWant = true
		case !inWant:
			cur.cmd += " " + strings.TrimSpace(line)
		case line == "":
			out = append(out, *cur)
			cur, inWant = nil, false
		default:
			cur.want += line + "\n"
		}
	}
	if cur != nil {
		out = append(out, *cur)
	}
	return out
}

func runScript(t *testing.T, path string) {
	blocks := parseScript(t, path)
	h := newHarness()
	var rewritten strings.Builder
	failed := false
	for _, b := range blocks {
		got := h.run(t, b.cmd)
		if *rewrite {
			fmt.Fprintf(&rewritten, "%s%s\n----\n%s\n", b.comment, b.cmd, got)
			continue
		}
		if got != b.want {
			t.Errorf("%s: %s\n--- got:\n%s--- want:\n%s", path, b.cmd, got, b.want)
			failed = true
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(rewritten.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_ = failed
}

type harness struct {
	cfg    Config
	c      *Coordinator
	now    time.Time
	nextID uint64
	log    []logEntry // every record and marker appended so far, for "restart"
	topics []Topic
	ids    int
}

// logEntry is one record, or one transaction marker, of the harness's log.
type logEntry struct {
	rec    Record
	marker bool
	commit bool
}

func newHarness() *harness {
	h := &harness{now: time.UnixMilli(1_000_000)}
	h.cfg = DefaultConfig()
	h.cfg.Rand = rand.New(rand.NewSource(1))
	h.reset()
	return h
}

func (h *harness) reset() {
	h.c = New(h.cfg)
	h.c.newID = func(client string) string {
		h.ids++
		return fmt.Sprintf("%s-%d", client, h.ids)
	}
	h.c.SetTopics(h.topics)
}

func topicID(name string) (id [16]byte) {
	copy(id[:], name)
	return id
}

func topicName(id [16]byte) string { return strings.TrimRight(string(id[:]), "\x00") }

// args splits "k=v" words; a word without "=" is positional.
func args(words []string) (pos []string, kv map[string]string) {
	kv = map[string]string{}
	for _, w := range words {
		if i := strings.IndexByte(w, '='); i > 0 {
			kv[w[:i]] = w[i+1:]
		} else {
			pos = append(pos, w)
		}
	}
	return pos, kv
}

// replay feeds the coordinator the logged records of the partitions in
// and returns how many it fed.
func (h *harness) replay(t *testing.T, in func(partition int32) bool) int {
	n := 0
	for _, e := range h.log {
		if !in(e.rec.Partition) {
			continue
		}
		n++
		var err error
		switch {
		case e.marker:
			h.c.CompleteTransaction(e.rec.Partition, e.rec.ProducerID, e.commit)
		case e.rec.Transactional:
			err = h.c.ReplayTransactional(e.rec.ProducerID, e.rec.Key, e.rec.Value)
		default:
			err = h.c.Replay(e.rec.Key, e.rec.Value)
		}
		if err != nil {
			t.Fatalf("replay: %v", err)
		}
	}
	return n
}

func atoi(s string, def int) int {
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

func optStr(kv map[string]string, k string) *string {
	if v, ok := kv[k]; ok {
		return &v
	}
	return nil
}

// consumerTopics parses "t:0,1+u:2".
func consumerTopics(s string) []kmsg.ConsumerMemberAssignmentTopic {
	var out []kmsg.ConsumerMemberAssignmentTopic
	for _, tps := range strings.Split(s, "+") {
		topic, parts, ok := strings.Cut(tps, ":")
		if !ok {
			continue
		}
		t := kmsg.ConsumerMemberAssignmentTopic{Topic: topic}
		for _, p := range list(parts) {
			t.Partitions = append(t.Partitions, int32(atoi(p, 0)))
		}
		out = append(out, t)
	}
	return out
}

// formatAssignment shows consumer protocol assignment bytes as
// assign(t[0 1]), and anything else quoted.
func formatAssignment(b []byte) string {
	var ca kmsg.ConsumerMemberAssignment
	if len(b) > 2 && ca.ReadFrom(b) == nil && string(ca.AppendTo(nil)) == string(b) {
		var parts []string
		for _, t := range ca.Topics {
			parts = append(parts, fmt.Sprintf("%s%v", t.Topic, t.Partitions))
		}
		return "assign(" + strings.Join(parts, " ") + ")"
	}
	return strconv.Quote(string(b))
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func list(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ",")
}

func subscription(topics []string) []byte {
	m := kmsg.ConsumerMemberMetadata{Version: 0, Topics: topics}
	return m.AppendTo(nil)
}

func (h *harness) run(t *testing.T, line string) string {
	words := strings.Fields(line)
	pos, kv := args(words[1:])
	group := ""
	for i, p := range pos {
		if p == `""` {
			pos[i] = ""
		}
	}
	if len(pos) > 0 {
		group = pos[0]
	}
	h.nextID++
	id := h.nextID
	client := kv["client"]
	if client == "" {
		client = "c"
	}
	step := func(m kmsg.Request) {
		if err := h.c.Step(h.now, Request{ID: id, ClientID: client, ClientHost: "/127.0.0.1", Msg: m}); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
	switch words[0] {
	case "config":
		for k, v := range kv {
			if k == "migration" {
				h.cfg.MigrationPolicy = v
				continue
			}
			d := time.Duration(atoi(v, 0)) * time.Millisecond
			switch k {
			case "initial-delay":
				h.cfg.InitialRebalanceDelay = d
			case "retention":
				h.cfg.OffsetsRetention = d
			case "check":
				h.cfg.OffsetsRetentionCheck = d
			case "consumer-session":
				h.cfg.ConsumerSessionTimeout = d
			case "max-size":
				h.cfg.MaxGroupSize = atoi(v, 0)
			default:
				t.Fatalf("unknown config %s", k)
			}
		}
		h.reset()
		return "ok\n"
	case "topics":
		h.topics = nil
		for _, p := range pos {
			name, n, _ := strings.Cut(p, ":")
			h.topics = append(h.topics, Topic{Name: name, ID: topicID(name), Partitions: int32(atoi(n, 1))})
		}
		h.c.SetTopics(h.topics)
		return "ok\n"
	case "deletetopics":
		var gone []Topic
		keep := h.topics[:0]
		for _, t := range h.topics {
			if contains(pos, t.Name) {
				gone = append(gone, t)
			} else {
				keep = append(keep, t)
			}
		}
		h.topics = keep
		h.c.SetTopics(h.topics)
		h.c.DeleteTopics(h.now, gone)
	case "deleteabsent":
		h.c.DeleteAbsentTopics(h.now)
	case "tick":
		h.now = h.now.Add(time.Duration(atoi(pos[0], 0)) * time.Millisecond)
		h.c.Tick(h.now)
	case "restart":
		h.reset()
		h.replay(t, func(int32) bool { return true })
		h.c.LoadComplete(h.now)
		return fmt.Sprintf("replayed %d records\n", len(h.log))
	case "reload":
		// reload p=N drops partition N's groups and replays its records,
		// as a node that just became the partition's leader loads it.
		n := int32(atoi(kv["p"], 0))
		h.c.Unload(n)
		replayed := h.replay(t, func(p int32) bool { return p == n })
		h.c.LoadPartitionComplete(h.now, n)
		return fmt.Sprintf("replayed %d records of p%d\n", replayed, n)
	case "join":
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version = int16(atoi(kv["v"], 9))
		req.Group, req.MemberID, req.InstanceID = group, kv["member"], optStr(kv, "instance")
		req.ProtocolType = "consumer"
		if v, ok := kv["type"]; ok {
			req.ProtocolType = v
		}
		req.SessionTimeoutMillis = int32(atoi(kv["session"], 10000))
		req.RebalanceTimeoutMillis = int32(atoi(kv["rebalance"], 30000))
		for _, p := range strings.Split(kv["protocols"], "|") {
			name, topics, _ := strings.Cut(p, ":")
			if name == "" {
				continue
			}
			meta := subscription(list(topics))
			if v, ok := kv["owned"]; ok {
				// owned=t:0,1+u:2 reports owned partitions (consumer
				// protocol v1).
				m := kmsg.ConsumerMemberMetadata{Version: 1, Topics: list(topics)}
				for _, tp := range consumerTopics(v) {
					m.OwnedPartitions = append(m.OwnedPartitions, kmsg.ConsumerMemberMetadataOwnedPartition{Topic: tp.Topic, Partitions: tp.Partitions})
				}
				meta = m.AppendTo(nil)
			}
			req.Protocols = append(req.Protocols, kmsg.JoinGroupRequestProtocol{Name: name, Metadata: meta})
		}
		step(req)
	case "sync":
		req := kmsg.NewPtrSyncGroupRequest()
		req.Version = int16(atoi(kv["v"], 5))
		req.Group, req.MemberID, req.InstanceID = group, kv["member"], optStr(kv, "instance")
		req.Generation = int32(atoi(kv["gen"], 0))
		req.ProtocolType, req.Protocol = optStr(kv, "ptype"), optStr(kv, "protocol")
		for _, a := range strings.Split(kv["assign"], ";") {
			m, v, ok := strings.Cut(a, ":")
			if ok {
				req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m, MemberAssignment: []byte(v)})
			}
		}
		// cassign=a-1@t:0,1+u:0;b-2@t:2 gives consumer protocol
		// assignments.
		for _, a := range strings.Split(kv["cassign"], ";") {
			m, v, ok := strings.Cut(a, "@")
			if ok {
				ca := kmsg.ConsumerMemberAssignment{Topics: consumerTopics(v)}
				req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m, MemberAssignment: ca.AppendTo(nil)})
			}
		}
		step(req)
	case "heartbeat":
		req := kmsg.NewPtrHeartbeatRequest()
		req.Version = int16(atoi(kv["v"], 4))
		req.Group, req.MemberID, req.InstanceID = group, kv["member"], optStr(kv, "instance")
		req.Generation = int32(atoi(kv["gen"], 0))
		step(req)
	case "leave":
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Version = int16(atoi(kv["v"], 5))
		req.Group = group
		if req.Version < 3 {
			req.MemberID = kv["member"]
		} else {
			for _, m := range list(kv["members"]) {
				mid, inst, ok := strings.Cut(m, "/")
				lm := kmsg.LeaveGroupRequestMember{MemberID: mid}
				if ok {
					lm.InstanceID = &inst
				}
				req.Members = append(req.Members, lm)
			}
		}
		step(req)
	case "commit":
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = int16(atoi(kv["v"], 9))
		req.Group, req.MemberID, req.InstanceID = group, kv["member"], optStr(kv, "instance")
		req.Generation = int32(atoi(kv["gen"], -1))
		req.RetentionTimeMillis = int64(atoi(kv["retention"], -1))
		byTopic := map[string][]kmsg.OffsetCommitRequestTopicPartition{}
		for _, p := range pos[1:] {
			tpart, off, _ := strings.Cut(p, ":")
			topic, part, _ := strings.Cut(tpart, "/")
			meta := "m"
			byTopic[topic] = append(byTopic[topic], kmsg.OffsetCommitRequestTopicPartition{Partition: int32(atoi(part, 0)), Offset: int64(atoi(off, 0)), LeaderEpoch: -1, Metadata: &meta})
		}
		for _, topic := range sortedKeys(byTopic) {
			req.Topics = append(req.Topics, kmsg.OffsetCommitRequestTopic{Topic: topic, TopicID: topicID(topic), Partitions: byTopic[topic]})
		}
		step(req)
	case "txncommit":
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.Version = int16(atoi(kv["v"], 4))
		req.TransactionalID, req.Group = "tx", group
		req.ProducerID, req.ProducerEpoch = int64(atoi(kv["pid"], 0)), int16(atoi(kv["pepoch"], 0))
		req.MemberID, req.InstanceID = kv["member"], optStr(kv, "instance")
		req.Generation = int32(atoi(kv["gen"], -1))
		for _, p := range pos[1:] {
			tpart, off, _ := strings.Cut(p, ":")
			topic, part, _ := strings.Cut(tpart, "/")
			var id [16]byte
			if req.Version >= 6 {
				id = topicID(topic)
			}
			req.Topics = append(req.Topics, kmsg.TxnOffsetCommitRequestTopic{Topic: topic, TopicID: id, Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: int32(atoi(part, 0)), Offset: int64(atoi(off, 0)), LeaderEpoch: -1}}})
		}
		step(req)
	case "marker":
		e := logEntry{rec: Record{Partition: h.c.Partition(group), ProducerID: int64(atoi(kv["pid"], 0))}, marker: true, commit: kv["commit"] == "true"}
		h.log = append(h.log, e)
		h.c.CompleteTransaction(e.rec.Partition, e.rec.ProducerID, e.commit)
		return "ok\n"
	case "fetch":
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = int16(atoi(kv["v"], 9))
		req.RequireStable = kv["stable"] == "1"
		var topics []kmsg.OffsetFetchRequestGroupTopic
		if len(pos) > 1 {
			byTopic := map[string][]int32{}
			for _, p := range pos[1:] {
				topic, part, _ := strings.Cut(p, "/")
				byTopic[topic] = append(byTopic[topic], int32(atoi(part, 0)))
			}
			for _, topic := range sortedKeys(byTopic) {
				topics = append(topics, kmsg.OffsetFetchRequestGroupTopic{Topic: topic, TopicID: topicID(topic), Partitions: byTopic[topic]})
			}
		}
		if req.Version >= 8 {
			req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group, MemberID: optStr(kv, "member"), MemberEpoch: int32(atoi(kv["epoch"], -1)), Topics: topics}}
		} else {
			req.Group = group
			for _, tt := range topics {
				req.Topics = append(req.Topics, kmsg.OffsetFetchRequestTopic{Topic: tt.Topic, Partitions: tt.Partitions})
			}
		}
		step(req)
	case "offdelete":
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = group
		for _, p := range pos[1:] {
			topic, part, _ := strings.Cut(p, "/")
			req.Topics = append(req.Topics, kmsg.OffsetDeleteRequestTopic{Topic: topic, Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: int32(atoi(part, 0))}}})
		}
		step(req)
	case "describe":
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version = int16(atoi(kv["v"], 5))
		req.Groups = pos
		step(req)
	case "list":
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = 5
		req.StatesFilter, req.TypesFilter = list(kv["states"]), list(kv["types"])
		step(req)
	case "delete":
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Version = 2
		req.Groups = pos
		step(req)
	case "cgh":
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = int16(atoi(kv["v"], 1))
		req.Group, req.MemberID, req.InstanceID = group, kv["member"], optStr(kv, "instance")
		req.MemberEpoch = int32(atoi(kv["epoch"], 0))
		req.RebalanceTimeoutMillis = int32(atoi(kv["rebalance"], -1))
		if v, ok := kv["sub"]; ok {
			req.SubscribedTopicNames = list(v)
		}
		req.SubscribedTopicRegex, req.ServerAssignor = optStr(kv, "regex"), optStr(kv, "assignor")
		if v, ok := kv["owned"]; ok {
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			for _, tps := range strings.Split(v, ";") {
				topic, parts, ok := strings.Cut(tps, ":")
				if !ok {
					continue
				}
				rt := kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: topicID(topic)}
				for _, p := range list(parts) {
					rt.Partitions = append(rt.Partitions, int32(atoi(p, 0)))
				}
				req.Topics = append(req.Topics, rt)
			}
		}
		step(req)
	case "cgdescribe":
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Version = 1
		req.Groups = pos
		step(req)
	default:
		t.Fatalf("unknown command %q", words[0])
	}
	rd := h.c.Ready()
	for _, r := range rd.Records {
		h.log = append(h.log, logEntry{rec: r})
	}
	var b strings.Builder
	for _, r := range rd.Records {
		b.WriteString(formatRecord(r))
		b.WriteByte('\n')
	}
	for _, r := range rd.Replies {
		fmt.Fprintf(&b, "#%d %s\n", r.ID, formatValue(reflect.ValueOf(r.Msg), ""))
	}
	if b.Len() == 0 {
		return "(nothing)\n"
	}
	return b.String()
}

func formatRecord(r Record) string {
	k, err := DecodeKey(r.Key)
	if err != nil {
		return fmt.Sprintf("bad key %x: %v", r.Key, err)
	}
	var key string
	var val any
	switch k.Type {
	case RecordOffsetCommit:
		key = fmt.Sprintf("offset %s %s/%d", k.Group, k.Topic, k.Partition)
		if r.Value != nil {
			v, err := DecodeOffsetCommitValue(r.Value)
			val = fmt.Sprintf("offset=%d epoch=%d meta=%q expire=%d err=%v", v.Offset, v.LeaderEpoch, v.Metadata, v.ExpireTimestamp, err)
		}
	case RecordGroupMetadata:
		key = "group " + k.Group
		if r.Value != nil {
			v, err := DecodeGroupMetadataValue(r.Value)
			var ms []string
			for _, m := range v.Members {
				ms = append(ms, fmt.Sprintf("%s(%s)=%s", m.MemberID, deref(m.GroupInstanceID), formatAssignment(m.Assignment)))
			}
			val = fmt.Sprintf("type=%s gen=%d protocol=%s leader=%s members=[%s] err=%v", v.ProtocolType, v.Generation, deref(v.Protocol), deref(v.Leader), strings.Join(ms, " "), err)
		}
	case RecordConsumerGroupMetadata, RecordConsumerGroupTargetMetadata:
		key = map[int16]string{RecordConsumerGroupMetadata: "cg-epoch ", RecordConsumerGroupTargetMetadata: "cg-target-epoch "}[k.Type] + k.Group
		if r.Value != nil {
			v, err := decodeEpochValue(r.Value)
			val = fmt.Sprintf("%d err=%v", v, err)
		}
	case RecordConsumerGroupPartitionMeta:
		key = "cg-partition-metadata " + k.Group
	case RecordConsumerGroupMemberMetadata:
		key = "cg-member " + k.Group + "/" + k.Member
		if r.Value != nil {
			v, err := DecodeConsumerMemberValue(r.Value)
			val = fmt.Sprintf("sub=%v regex=%s assignor=%s instance=%s err=%v", v.SubscribedTopics, deref(v.SubscribedRegex), deref(v.ServerAssignor), deref(v.InstanceID), err)
			if v.Classic != nil {
				var ps []string
				for _, p := range v.Classic.SupportedProtocols {
					ps = append(ps, p.Name)
				}
				val = fmt.Sprintf("%v classic(session=%d protocols=%s)", val, v.Classic.SessionTimeoutMs, strings.Join(ps, ","))
			}
		}
	case RecordConsumerGroupTargetMember:
		key = "cg-target " + k.Group + "/" + k.Member
		if r.Value != nil {
			v, err := DecodeTargetMemberValue(r.Value)
			val = fmt.Sprintf("%s err=%v", formatTPs(v), err)
		}
	case RecordConsumerGroupRegexResolution:
		key = "cg-regex " + k.Group + "/" + k.Regex
		if r.Value != nil {
			v, err := DecodeRegexValue(r.Value)
			val = fmt.Sprintf("topics=%v version=%d err=%v", v.Topics, v.Version, err)
		}
	case RecordConsumerGroupCurrentMember:
		key = "cg-current " + k.Group + "/" + k.Member
		if r.Value != nil {
			v, err := DecodeCurrentAssignmentValue(r.Value)
			val = fmt.Sprintf("epoch=%d prev=%d state=%d assigned=%s%s revoking=%s%s err=%v", v.MemberEpoch, v.PreviousMemberEpoch, v.State,
				formatTPs(v.Assigned), formatEpochs(v.Assigned), formatTPs(v.PendingRevocation), formatEpochs(v.PendingRevocation), err)
		}
	}
	if r.Value == nil {
		val = "<tombstone>"
	}
	txn := ""
	if r.Transactional {
		txn = fmt.Sprintf(" (txn pid %d epoch %d)", r.ProducerID, r.ProducerEpoch)
	}
	return fmt.Sprintf("rec p%d%s %s => %v", r.Partition, txn, key, val)
}

func formatTPs(tps []TopicPartitions) string {
	var parts []string
	for _, t := range tps {
		parts = append(parts, fmt.Sprintf("%s%v", topicName(t.TopicID), t.Partitions))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, " ") + "}"
}

// formatEpochs prints the assignment epochs of a current assignment record
// as "@{t[2 2]}", parallel to formatTPs, or nothing when none is written.
func formatEpochs(tps []TopicPartitions) string {
	var parts []string
	for _, t := range tps {
		if t.AssignmentEpochs != nil {
			parts = append(parts, fmt.Sprintf("%s%v", topicName(t.TopicID), t.AssignmentEpochs))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	sort.Strings(parts)
	return "@{" + strings.Join(parts, " ") + "}"
}

// formatValue prints a kmsg response compactly: zero fields, versions,
// throttles and tags are omitted, error codes are named, topic ids shown as
// names, and consumer protocol metadata decoded.
func formatValue(v reflect.Value, field string) string {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return "nil"
		}
		return formatValue(v.Elem(), field)
	case reflect.Struct:
		var parts []string
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			fv := v.Field(i)
			switch f.Name {
			case "Version", "ThrottleMillis", "UnknownTags", "AuthorizedOperations", "HeartbeatIntervalMillis":
				continue
			}
			if fv.IsZero() && f.Name != "Metadata" {
				continue
			}
			parts = append(parts, f.Name+":"+formatValue(fv, f.Name))
		}
		name := strings.TrimPrefix(v.Type().String(), "kmsg.")
		if strings.HasSuffix(name, "Response") {
			return strings.TrimSuffix(name, "Response") + "{" + strings.Join(parts, " ") + "}"
		}
		return "{" + strings.Join(parts, " ") + "}"
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			b := v.Bytes()
			if field == "ProtocolMetadata" {
				var m kmsg.ConsumerMemberMetadata
				if err := m.ReadFrom(b); err == nil {
					return "sub(" + strings.Join(m.Topics, ",") + ")"
				}
			}
			if field == "MemberAssignment" {
				return formatAssignment(b)
			}
			return strconv.Quote(string(b))
		}
		var parts []string
		for i := 0; i < v.Len(); i++ {
			parts = append(parts, formatValue(v.Index(i), field))
		}
		return "[" + strings.Join(parts, " ") + "]"
	case reflect.Array:
		if v.Len() == 16 {
			var id [16]byte
			reflect.Copy(reflect.ValueOf(&id).Elem(), v)
			return topicName(id)
		}
	case reflect.Int16:
		if field == "ErrorCode" {
			if e := kerr.TypedErrorForCode(int16(v.Int())); e != nil {
				return e.Message
			}
		}
	case reflect.String:
		return strconv.Quote(v.String())
	}
	return fmt.Sprint(v.Interface())
}

package txn

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cascade-kafka/cascade/broker/internal/scriptargs"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata scripts")

// TestScripts runs the data-driven scripts under testdata/. Each case is a
// command line, a "----" line, and the expected output up to a blank line;
// run with -rewrite to regenerate the expected output.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runScript(t, f) })
	}
}

type scriptCase struct {
	pre      []string // comments and blank lines before the command
	cmd      string
	expected string
}

func parseScript(t *testing.T, text string) (cases []scriptCase, trailer []string) {
	lines := strings.Split(text, "\n")
	var pre []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			pre = append(pre, l)
			continue
		}
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("line %d: command %q not followed by ----", i+1, l)
		}
		var exp []string
		j := i + 2
		for ; j < len(lines) && lines[j] != ""; j++ {
			exp = append(exp, lines[j])
		}
		cases = append(cases, scriptCase{pre: pre, cmd: l, expected: strings.Join(exp, "\n")})
		pre = nil
		i = j - 1
	}
	return cases, pre
}

func runScript(t *testing.T, path string) {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cases, trailer := parseScript(t, string(raw))
	h := newHarness()
	var out strings.Builder
	for _, c := range cases {
		got := strings.TrimRight(h.run(t, c.cmd), "\n")
		for _, p := range c.pre {
			out.WriteString(p + "\n")
		}
		out.WriteString(c.cmd + "\n----\n")
		if got != "" {
			out.WriteString(got + "\n")
		}
		if !*rewrite && got != c.expected {
			t.Errorf("%s: %s\n got:\n%s\nwant:\n%s", path, c.cmd, got, c.expected)
		}
	}
	for i, p := range trailer {
		if i < len(trailer)-1 || p != "" {
			out.WriteString(p + "\n")
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// harness drives a Coordinator like the runtime does: it appends writes to
// an in-memory __transaction_state (unless told to hold them) and replays
// that log on restart.
type harness struct {
	c       *Coordinator
	now     int64
	nextPID int64
	pidErr  bool
	log     [][2][]byte
	held    map[Op]Write
	tv      int16 // the finalized transaction.version
}

func newHarness() *harness {
	h := &harness{nextPID: 1000, held: map[Op]Write{}}
	h.c = h.newCoordinator()
	h.c.Loaded()
	return h
}

func (h *harness) newCoordinator() *Coordinator {
	return New(Config{MaxTimeoutMs: 900000, IDExpirationMs: 3600000, CoordinatorEpoch: 5, TransactionVersion: h.tv,
		NewProducerID: func() (int64, error) {
			if h.pidErr {
				return 0, errors.New("no ids left")
			}
			h.nextPID++
			return h.nextPID - 1, nil
		}})
}

type args map[string]string

func (a args) str(t *testing.T, k string) string { return scriptargs.Str(t, a, k) }

func (a args) int(t *testing.T, k string, def int64) int64 { return scriptargs.Int(t, a, k, def) }

func (a args) parts(t *testing.T) []TopicPartition {
	var out []TopicPartition
	for _, s := range strings.Split(a["parts"], ",") {
		if s == "" {
			continue
		}
		i := strings.LastIndexByte(s, '-')
		p, err := strconv.Atoi(s[i+1:])
		if i < 0 || err != nil {
			t.Fatalf("bad partition %q", s)
		}
		out = append(out, TopicPartition{Topic: s[:i], Partition: int32(p)})
	}
	return out
}

func (h *harness) run(t *testing.T, line string) string {
	fields := strings.Fields(line)
	a := args{}
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		a[k] = v
	}
	_, hold := a["hold"]
	var b strings.Builder
	switch fields[0] {
	case "init":
		out := h.c.InitProducerID(InitRequest{TransactionalID: a["id"], TimeoutMs: int32(a.int(t, "timeout", 60000)),
			ProducerID: a.int(t, "pid", -1), ProducerEpoch: int16(a.int(t, "epoch", -1))}, h.now)
		h.handle(&b, out, hold, a)
	case "add":
		out := h.c.AddPartitions(AddPartitionsRequest{TransactionalID: a["id"], ProducerID: a.int(t, "pid", -1),
			ProducerEpoch: int16(a.int(t, "epoch", -1)), Partitions: a.parts(t), TransactionVersion: int16(a.int(t, "tv", 0))}, h.now)
		h.handle(&b, out, hold, a)
	case "end":
		out := h.c.EndTxn(EndTxnRequest{TransactionalID: a["id"], ProducerID: a.int(t, "pid", -1),
			ProducerEpoch: int16(a.int(t, "epoch", -1)), Commit: a.str(t, "result") == "commit",
			TransactionVersion: int16(a.int(t, "tv", 0))}, h.now)
		h.handle(&b, out, hold, a)
	case "verify":
		res, err := h.c.Verify(VerifyRequest{TransactionalID: a["id"], ProducerID: a.int(t, "pid", -1),
			ProducerEpoch: int16(a.int(t, "epoch", -1)), Partitions: a.parts(t)})
		if err != nil {
			fmt.Fprintf(&b, "verify: %v\n", err)
			break
		}
		keys := make([]TopicPartition, 0, len(res))
		for tp := range res {
			keys = append(keys, tp)
		}
		sortPartitions(keys)
		for _, tp := range keys {
			fmt.Fprintf(&b, "verify %s: %v\n", tp, errString(res[tp]))
		}
	case "appended":
		op := Op(a.int(t, "op", 0))
		if _, ok := h.held[op]; !ok {
			fmt.Fprintf(&b, "op %d not held\n", op)
			break
		}
		w := h.held[op]
		delete(h.held, op)
		var err error
		if e, ok := a["err"]; ok {
			err = errors.New(e)
		} else {
			h.log = append(h.log, [2][]byte{w.Key, w.Value})
		}
		h.handle(&b, h.c.Appended(op, err), hold, a)
	case "markers":
		h.handle(&b, h.c.MarkersWritten(a.str(t, "id"), h.now), hold, a)
	case "advance":
		h.now += a.int(t, "ms", 0)
		fmt.Fprintf(&b, "now=%d\n", h.now)
	case "tick":
		h.now += a.int(t, "ms", 0)
		fmt.Fprintf(&b, "now=%d\n", h.now)
		h.handle(&b, h.c.Tick(h.now), hold, a)
	case "set-epoch":
		// Test-only: jump a producer's epoch to exercise exhaustion.
		h.c.txns[a.str(t, "id")].epoch = int16(a.int(t, "epoch", 0))
	case "server":
		// Sets the finalized transaction.version; the coordinator is
		// recreated, so use it before anything else.
		h.tv = int16(a.int(t, "tv", 0))
		h.c = h.newCoordinator()
		h.c.Loaded()
		fmt.Fprintf(&b, "transaction.version=%d\n", h.tv)
	case "pid-alloc":
		h.pidErr = a.str(t, "fail") == "true"
	case "describe":
		d, err := h.c.Describe(a["id"])
		if err != nil {
			fmt.Fprintf(&b, "describe: %v\n", err)
			break
		}
		writeDesc(&b, d)
	case "list":
		f := ListFilter{DurationMs: a.int(t, "duration", -1)}
		if s := a["states"]; s != "" {
			f.States = strings.Split(s, ",")
		}
		if s := a["pids"]; s != "" {
			for _, p := range strings.Split(s, ",") {
				n, _ := strconv.ParseInt(p, 10, 64)
				f.ProducerIDs = append(f.ProducerIDs, n)
			}
		}
		ds, unknown, err := h.c.List(f, h.now)
		if err != nil {
			fmt.Fprintf(&b, "list: %v\n", err)
		}
		for _, d := range ds {
			writeDesc(&b, d)
		}
		if len(unknown) > 0 {
			fmt.Fprintf(&b, "unknown states: %v\n", unknown)
		}
	case "restart":
		h.c = h.newCoordinator()
		h.held = map[Op]Write{}
		for _, kv := range h.log {
			if err := h.c.Replay(kv[0], kv[1]); err != nil {
				t.Fatalf("replay: %v", err)
			}
		}
		fmt.Fprintf(&b, "replayed %d records\n", len(h.log))
		if _, ok := a["loading"]; ok {
			break
		}
		h.handle(&b, h.c.Loaded(), hold, a)
	case "loaded":
		h.handle(&b, h.c.Loaded(), hold, a)
	default:
		t.Fatalf("unknown command %q", fields[0])
	}
	return b.String()
}

// handle prints an Output and, unless hold, appends its writes and handles
// what their completion returns (fail=true makes those appends fail).
func (h *harness) handle(b *strings.Builder, out Output, hold bool, a args) {
	if out.Reply != nil {
		r := out.Reply
		if r.Err != nil {
			fmt.Fprintf(b, "reply: %v\n", r.Err)
		} else {
			fmt.Fprintf(b, "reply: ok pid=%d epoch=%d\n", r.ProducerID, r.ProducerEpoch)
		}
	}
	for _, m := range out.Markers {
		res := "abort"
		if m.Commit {
			res = "commit"
		}
		fmt.Fprintf(b, "markers: %s %s pid=%d epoch=%d coordinator-epoch=%d %v\n",
			m.TransactionalID, res, m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Partitions)
	}
	for _, w := range out.Writes {
		fmt.Fprintf(b, "write op=%d %s\n", w.Op, describeWrite(w))
		if hold {
			h.held[w.Op] = w
			continue
		}
		var err error
		if a["fail"] == "true" {
			err = errors.New("append failed")
		} else {
			h.log = append(h.log, [2][]byte{w.Key, w.Value})
		}
		fmt.Fprintf(b, "appended op=%d\n", w.Op)
		h.handle(b, h.c.Appended(w.Op, err), false, a)
	}
}

func describeWrite(w Write) string {
	id, err := DecodeKey(w.Key)
	if err != nil {
		return "bad key: " + err.Error()
	}
	if w.Value == nil {
		return id + " tombstone"
	}
	v, err := DecodeValue(w.Value)
	if err != nil {
		return "bad value: " + err.Error()
	}
	s := fmt.Sprintf("%s %s pid=%d epoch=%d timeout=%d parts=%v start=%d update=%d",
		id, v.State, v.ProducerID, v.ProducerEpoch, v.TimeoutMs, v.Partitions, v.StartMs, v.LastUpdateMs)
	if v.Version >= 1 {
		// Transactions v2 fields, only in the flexible value.
		s += fmt.Sprintf(" prev=%d next=%d client-tv=%d", v.PreviousProducerID, v.NextProducerID, v.ClientTransactionVersion)
	}
	return s
}

func writeDesc(b *strings.Builder, d Description) {
	fmt.Fprintf(b, "%s %s pid=%d epoch=%d timeout=%d start=%d parts=%v\n",
		d.TransactionalID, d.State, d.ProducerID, d.ProducerEpoch, d.TimeoutMs, d.StartMs, d.Partitions)
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

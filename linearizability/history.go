package linearizability

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// Operation kinds, the values of Op.Op.
const (
	OpProduce        = "produce"
	OpFetch          = "fetch"
	OpListOffsets    = "list_offsets"
	OpCommit         = "commit"
	OpFetchCommitted = "fetch_committed"
	OpEndTxn         = "end_txn"
	// OpAssignment is a group member's ownership of partitions in one
	// generation: call_ns when the member received the assignment,
	// return_ns when it gave it up (revoked, lost, or the run ended).
	OpAssignment = "assignment"
)

// Outcomes, the values of Op.Outcome.
const (
	// OutcomeOK means the operation took effect and its outputs are known.
	OutcomeOK = "ok"
	// OutcomeFail means the operation certainly did not take effect.
	OutcomeFail = "fail"
	// OutcomeUnknown means the operation may or may not have taken effect
	// (a timeout, a cut connection).
	OutcomeUnknown = "unknown"
)

// Isolation levels of a fetch, the values of Op.Isolation.
const (
	ReadUncommitted = "read_uncommitted"
	ReadCommitted   = "read_committed"
)

// List offsets kinds, the values of Op.Kind.
const (
	KindEarliest = "earliest"
	KindLatest   = "latest"
)

// ErrMalformed is wrapped by every error that reports a history line which
// does not follow the format.
var ErrMalformed = errors.New("malformed history")

// Record is one record returned by a fetch.
type Record struct {
	Offset int64  `json:"offset"`
	Value  string `json:"value"`
}

// Op is one operation of a history, one JSON line. Which fields are set
// depends on Op.Op; README.md lists them.
type Op struct {
	Client    string `json:"client"`
	Op        string `json:"op"`
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition"`
	// Value is the unique value a produce wrote.
	Value string `json:"value,omitempty"`
	// Txn names the transaction a produce belongs to, or that an end_txn
	// ends. It names one transaction, not a transactional.id, so a producer
	// reusing its transactional.id writes a new name per transaction.
	Txn      string `json:"txn,omitempty"`
	CallNs   int64  `json:"call_ns"`
	ReturnNs int64  `json:"return_ns"`
	Outcome  string `json:"outcome"`
	// Offset is the offset a produce was acknowledged at, the answer of
	// list_offsets, the offset a commit wrote, or the offset
	// fetch_committed returned (-1 when the group has none).
	Offset *int64 `json:"offset,omitempty"`
	// From is the offset a fetch asked for.
	From          *int64   `json:"from,omitempty"`
	Isolation     string   `json:"isolation,omitempty"`
	Records       []Record `json:"records,omitempty"`
	HighWatermark *int64   `json:"high_watermark,omitempty"`
	// Next is where a fetch's client continues: one past the last batch
	// it returned, control batches (transaction markers) and, under
	// read_committed, aborted batches included. Optional; with it the
	// checker knows every offset in [From, Next) was passed over.
	Next *int64 `json:"next,omitempty"`
	// Kind is "earliest" or "latest" for list_offsets.
	Kind  string `json:"kind,omitempty"`
	Group string `json:"group,omitempty"`
	// Member is the group member id an assignment was given to.
	Member string `json:"member,omitempty"`
	// Generation is the group generation an assignment belongs to.
	Generation *int32 `json:"generation,omitempty"`
	// Partitions are the partitions of Topic an assignment gives Member;
	// empty when the member was given none of Topic's.
	Partitions []int32 `json:"partitions,omitempty"`
	// Commit is true when an end_txn commits and false when it aborts.
	Commit *bool `json:"commit,omitempty"`
	// Error describes why an operation failed or is unknown; checks
	// ignore it.
	Error *OpError `json:"error,omitempty"`
}

// OpError is the optional description of a failure: a Kafka error name or
// a client's error class as Code, and free text.
type OpError struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

// Int64 returns a pointer to v, for the optional fields of Op.
func Int64(v int64) *int64 { return &v }

// Int32 returns a pointer to v, for Op.Generation.
func Int32(v int32) *int32 { return &v }

// Bool returns a pointer to v, for Op.Commit.
func Bool(v bool) *bool { return &v }

// TP names one topic-partition.
type TP struct {
	Topic     string
	Partition int32
}

// String returns "topic-partition", as Kafka names partition directories.
func (tp TP) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// TP returns the topic-partition o acts on.
func (o *Op) TP() TP { return TP{o.Topic, o.Partition} }

// Validate reports whether o follows the format: a known op and outcome,
// return not before call, and the fields its op requires when it succeeded.
func (o *Op) Validate() error {
	switch o.Outcome {
	case OutcomeOK, OutcomeFail, OutcomeUnknown:
	default:
		return fmt.Errorf("%w: outcome %q", ErrMalformed, o.Outcome)
	}
	if o.ReturnNs < o.CallNs {
		return fmt.Errorf("%w: return_ns %d before call_ns %d", ErrMalformed, o.ReturnNs, o.CallNs)
	}
	ok := o.Outcome == OutcomeOK
	switch o.Op {
	case OpProduce:
		if o.Topic == "" || o.Value == "" {
			return fmt.Errorf("%w: produce needs topic and value", ErrMalformed)
		}
		if ok && o.Offset == nil {
			return fmt.Errorf("%w: acknowledged produce without offset", ErrMalformed)
		}
	case OpFetch:
		if o.Topic == "" || o.From == nil {
			return fmt.Errorf("%w: fetch needs topic and from", ErrMalformed)
		}
		switch o.Isolation {
		case "", ReadUncommitted, ReadCommitted:
		default:
			return fmt.Errorf("%w: isolation %q", ErrMalformed, o.Isolation)
		}
		if o.Next != nil {
			if *o.Next < *o.From {
				return fmt.Errorf("%w: fetch next %d below from %d", ErrMalformed, *o.Next, *o.From)
			}
			if n := len(o.Records); n > 0 && o.Records[n-1].Offset >= *o.Next {
				return fmt.Errorf("%w: fetch returned offset %d at or past its next %d", ErrMalformed, o.Records[n-1].Offset, *o.Next)
			}
		}
	case OpListOffsets:
		if o.Kind != KindEarliest && o.Kind != KindLatest {
			return fmt.Errorf("%w: list_offsets kind %q", ErrMalformed, o.Kind)
		}
		if ok && o.Offset == nil {
			return fmt.Errorf("%w: list_offsets without offset", ErrMalformed)
		}
	case OpCommit, OpFetchCommitted:
		if o.Group == "" || o.Topic == "" {
			return fmt.Errorf("%w: %s needs group and topic", ErrMalformed, o.Op)
		}
		if (o.Op == OpCommit || ok) && o.Offset == nil {
			return fmt.Errorf("%w: %s without offset", ErrMalformed, o.Op)
		}
	case OpEndTxn:
		if o.Txn == "" || o.Commit == nil {
			return fmt.Errorf("%w: end_txn needs txn and commit", ErrMalformed)
		}
	case OpAssignment:
		if o.Group == "" || o.Member == "" || o.Topic == "" || o.Generation == nil {
			return fmt.Errorf("%w: assignment needs group, member, topic and generation", ErrMalformed)
		}
		for _, p := range o.Partitions {
			if p < 0 {
				return fmt.Errorf("%w: assignment of partition %d", ErrMalformed, p)
			}
		}
	default:
		return fmt.Errorf("%w: op %q", ErrMalformed, o.Op)
	}
	return nil
}

// maxLine bounds one history line, so a corrupt file cannot make the reader
// allocate without limit.
const maxLine = 64 << 20

// Read parses a history from r: one JSON object per line, blank lines
// ignored. Every op is validated; the first bad line is reported with its
// number.
func Read(r io.Reader) ([]Op, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	var ops []Op
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var o Op
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrMalformed, line, err)
		}
		if err := o.Validate(); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		ops = append(ops, o)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading history line %d: %w", line+1, err)
	}
	return ops, nil
}

// ReadFile parses the history stored at path.
func ReadFile(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f)
}

// Write writes ops to w as JSON lines.
func Write(w io.Writer, ops []Op) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for i := range ops {
		if err := enc.Encode(&ops[i]); err != nil {
			return err
		}
	}
	return bw.Flush()
}

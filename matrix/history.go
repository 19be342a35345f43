package matrix

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// Op is one operation of a history, in the JSON-lines format shared with the
// fault suite and the checkers (linearizability/README.md).
type Op struct {
	Client        string     `json:"client"`
	Op            string     `json:"op"`
	Topic         string     `json:"topic,omitempty"`
	Partition     int32      `json:"partition"`
	Value         string     `json:"value,omitempty"`
	CallNs        int64      `json:"call_ns"`
	ReturnNs      int64      `json:"return_ns"`
	Outcome       string     `json:"outcome"`
	Offset        *int64     `json:"offset,omitempty"`
	From          *int64     `json:"from,omitempty"`
	Isolation     string     `json:"isolation,omitempty"`
	Records       []OpRecord `json:"records,omitempty"`
	HighWatermark *int64     `json:"high_watermark,omitempty"`
	Kind          string     `json:"kind,omitempty"`
	Txn           string     `json:"txn,omitempty"`
	Group         string     `json:"group,omitempty"`
	Commit        *bool      `json:"commit,omitempty"`
	// Next is where a fetch's client continues, markers included
	// (linearizability/README.md); only from drivers that expose it.
	Next *int64 `json:"next,omitempty"`
}

// OpRecord is one record a fetch returned.
type OpRecord struct {
	Offset int64  `json:"offset"`
	Value  string `json:"value"`
}

// History appends operations to a JSON-lines file. Times are nanoseconds
// since the History was created, on the orchestrator's monotonic clock,
// taken around each driver command.
type History struct {
	mu    sync.Mutex
	start time.Time
	f     *os.File
	w     *bufio.Writer
	err   error
}

// NewHistory creates (truncates) path.
func NewHistory(path string) (*History, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("matrix: history: %w", err)
	}
	return &History{start: time.Now(), f: f, w: bufio.NewWriter(f)}, nil
}

func (h *History) now() int64 { return int64(time.Since(h.start)) }

func (h *History) write(ops ...Op) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, op := range ops {
		if h.err != nil {
			return
		}
		b, err := json.Marshal(op)
		if err != nil {
			h.err = err
			return
		}
		b = append(b, '\n')
		if _, err := h.w.Write(b); err != nil {
			h.err = err
		}
	}
}

// Close flushes and closes the file and returns the first write error.
func (h *History) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	err := h.err
	if ferr := h.w.Flush(); err == nil {
		err = ferr
	}
	if cerr := h.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// historyValue renders a record value as the history's string: the bytes
// themselves when they are short UTF-8, else "sha256:" and the hex digest,
// which keeps values unique and the history small; a null value is "".
func historyValue(v []byte) string {
	if v == nil {
		return ""
	}
	if len(v) <= 256 && utf8.Valid(v) {
		return string(v)
	}
	sum := sha256.Sum256(v)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// outcome classifies a command error: a Kafka error answered by the broker
// means the operation was not applied ("fail"); timeouts and transport
// errors may have applied it ("unknown").
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return "unknown"
	}
	code := driver.Code(err)
	if code == "" || code == "CLIENT_TIMEOUT" || code == "REQUEST_TIMED_OUT" || code == "CLIENT_ERROR" {
		return "unknown"
	}
	return "fail"
}

func i64(v int64) *int64 { return &v }

// standIn is the history value of a record whose value is null or empty:
// unique per partition and offset, so the checkers see no gap, though they
// cannot tell a null from an empty value at that offset.
func standIn(topic string, partition int32, offset int64, v []byte) string {
	kind := "null"
	if v != nil {
		kind = "empty"
	}
	return fmt.Sprintf("%s:%s-%d@%d", kind, topic, partition, offset)
}

type noHistoryKey struct{}

// WithoutHistory returns a context whose commands the recorder skips. A
// scenario uses it for operations the history format does not model, such
// as reads after DeleteRecords moved the log start (the checkers would
// take the deleted records for lost writes).
func WithoutHistory(ctx context.Context) context.Context {
	return context.WithValue(ctx, noHistoryKey{}, true)
}

func skipHistory(ctx context.Context) bool { return ctx.Value(noHistoryKey{}) != nil }

// recorded wraps a Driver and writes produce, consume (as fetch) and
// list_offsets commands to a History. The client name in the history is the
// client id plus a per-run instance suffix.
type recorded struct {
	driver.Driver
	h      *History
	name   string
	txnSeq int
}

// Record wraps d so that its data-path commands are recorded in h under
// the given client name.
func Record(d driver.Driver, h *History, name string) driver.Driver {
	if h == nil {
		return d
	}
	return &recorded{Driver: d, h: h, name: name}
}

func (r *recorded) Produce(ctx context.Context, req driver.Produce) (driver.ProduceResult, error) {
	if skipHistory(ctx) {
		return r.Driver.Produce(ctx, req)
	}
	call := r.h.now()
	res, err := r.Driver.Produce(ctx, req)
	ret := r.h.now()
	// A transaction is named per command: the format's txn names one
	// transaction, not a transactional.id that several reuse.
	txn := ""
	if req.TransactionalID != "" {
		r.txnSeq++
		txn = fmt.Sprintf("%s/%s#%d", r.name, req.TransactionalID, r.txnSeq)
	}
	ops := make([]Op, 0, len(req.Records)+1)
	for i, rec := range req.Records {
		op := Op{Client: r.name, Op: "produce", Topic: req.Topic, Partition: rec.Partition,
			Value: historyValue(rec.Value), CallNs: call, ReturnNs: ret, Txn: txn}
		if len(rec.Value) == 0 {
			// Null and empty values are not unique; an acknowledged one
			// is recorded under a stand-in naming its offset, which the
			// fetch side derives the same way. Others are left out.
			if err != nil || i >= len(res.Deliveries) || res.Deliveries[i].Error != nil || res.Deliveries[i].Offset < 0 {
				continue
			}
			op.Value = standIn(req.Topic, res.Deliveries[i].Partition, res.Deliveries[i].Offset, rec.Value)
		}
		switch {
		case err != nil || i >= len(res.Deliveries):
			op.Outcome = outcome(err)
			if op.Outcome == "ok" {
				op.Outcome = "unknown"
			}
		default:
			dl := res.Deliveries[i]
			op.Partition = dl.Partition
			switch {
			case dl.Error != nil:
				op.Outcome = outcome(dl.Error)
			case dl.Offset < 0: // acks=0: sent, not acknowledged.
				op.Outcome = "unknown"
			default:
				op.Outcome, op.Offset = "ok", i64(dl.Offset)
			}
		}
		ops = append(ops, op)
	}
	if txn != "" {
		// The driver commits after every acknowledgement, else aborts; a
		// command error leaves the end unknown.
		commit := !req.TxnAbort
		for _, dl := range res.Deliveries {
			if dl.Error != nil {
				commit = false
			}
		}
		end := Op{Client: r.name, Op: "end_txn", Txn: txn, Commit: &commit, CallNs: call, ReturnNs: ret, Outcome: outcome(err)}
		ops = append(ops, end)
	}
	r.h.write(ops...)
	return res, err
}

func (r *recorded) Consume(ctx context.Context, req driver.Consume) (driver.ConsumeResult, error) {
	if skipHistory(ctx) {
		return r.Driver.Consume(ctx, req)
	}
	call := r.h.now()
	res, err := r.Driver.Consume(ctx, req)
	op := Op{Client: r.name, Op: "fetch", Topic: req.Topic, Partition: req.Partition, CallNs: call,
		ReturnNs: r.h.now(), From: i64(req.From), Isolation: req.Isolation, Outcome: "ok"}
	if op.Isolation == "" {
		op.Isolation = "read_uncommitted"
	}
	if err != nil {
		op.Outcome = outcome(err)
	} else if res.Error != nil {
		op.Outcome = "fail"
	}
	for _, rec := range res.Records {
		v := historyValue(rec.Value)
		if len(rec.Value) == 0 {
			v = standIn(req.Topic, req.Partition, rec.Offset, rec.Value) // See Produce.
		}
		op.Records = append(op.Records, OpRecord{Offset: rec.Offset, Value: v})
	}
	if res.HighWatermark >= 0 {
		op.HighWatermark = i64(res.HighWatermark)
	}
	if err == nil && res.Error == nil && res.Next != nil {
		op.Next = i64(*res.Next)
	}
	r.h.write(op)
	return res, err
}

func (r *recorded) ListOffsets(ctx context.Context, req driver.ListOffsets) (driver.ListOffsetsResult, error) {
	if skipHistory(ctx) {
		return r.Driver.ListOffsets(ctx, req)
	}
	call := r.h.now()
	res, err := r.Driver.ListOffsets(ctx, req)
	if req.Kind == "earliest" || req.Kind == "latest" {
		op := Op{Client: r.name, Op: "list_offsets", Topic: req.Topic, Partition: req.Partition,
			Kind: req.Kind, CallNs: call, ReturnNs: r.h.now(), Outcome: outcome(err)}
		if err == nil {
			op.Offset = i64(res.Offset)
		}
		r.h.write(op)
	}
	return res, err
}

func (r *recorded) GroupConsume(ctx context.Context, req driver.GroupConsume) (driver.GroupConsumeResult, error) {
	// Records read by a regex subscription do not say their topic, so
	// the history cannot place them.
	if skipHistory(ctx) || req.TopicRegex != "" {
		return r.Driver.GroupConsume(ctx, req)
	}
	call := r.h.now()
	res, err := r.Driver.GroupConsume(ctx, req)
	ret := r.h.now()
	// One fetch line per run of increasing offsets in a partition, from the
	// first offset read (the committed offset a member resumed from is not
	// observable); after a rebalance a member may read a partition again
	// from an earlier offset, which starts a new line.
	byPart := map[int32]*Op{}
	var lines []*Op
	for _, rec := range res.Records {
		op, ok := byPart[rec.Partition]
		if !ok || rec.Offset <= op.Records[len(op.Records)-1].Offset {
			op = &Op{Client: r.name, Op: "fetch", Topic: req.Topic, Partition: rec.Partition, CallNs: call, ReturnNs: ret,
				From: i64(rec.Offset), Isolation: "read_uncommitted", Outcome: "ok"}
			byPart[rec.Partition] = op
			lines = append(lines, op)
		}
		v := historyValue(rec.Value)
		if len(rec.Value) == 0 {
			v = standIn(req.Topic, rec.Partition, rec.Offset, rec.Value)
		}
		op.Records = append(op.Records, OpRecord{Offset: rec.Offset, Value: v})
	}
	ops := make([]Op, 0, len(lines)+len(res.Committed))
	for _, op := range lines {
		ops = append(ops, *op)
	}
	if req.Commit {
		commits := res.Committed
		if err != nil {
			commits = driver.NextOffsets(res.Records) // May or may not have been committed.
		}
		for _, c := range commits {
			ops = append(ops, Op{Client: r.name, Op: "commit", Group: req.Group, Topic: req.Topic, Partition: c.Partition,
				Offset: i64(c.Offset), CallNs: call, ReturnNs: ret, Outcome: outcome(err)})
		}
	}
	r.h.write(ops...)
	return res, err
}

func (r *recorded) FetchCommitted(ctx context.Context, req driver.FetchCommitted) (int64, error) {
	if skipHistory(ctx) {
		return r.Driver.FetchCommitted(ctx, req)
	}
	call := r.h.now()
	off, err := r.Driver.FetchCommitted(ctx, req)
	op := Op{Client: r.name, Op: "fetch_committed", Group: req.Group, Topic: req.Topic, Partition: req.Partition,
		CallNs: call, ReturnNs: r.h.now(), Outcome: outcome(err)}
	if err == nil {
		op.Offset = i64(off)
	}
	r.h.write(op)
	return off, err
}

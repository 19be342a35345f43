package linearizability

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

// Recorder writes a history as operations complete. It stamps call and
// return times in nanoseconds from one monotonic clock (Go's monotonic
// reading of a single start instant), so times of different goroutines are
// comparable. It is safe for concurrent use.
type Recorder struct {
	start time.Time

	mu  sync.Mutex
	enc *json.Encoder
	err error
	n   int
	// lastOK is each client's latest return of a successful operation
	// (assignments aside), for liveness watching during a run.
	lastOK map[string]int64
}

// Call marks the start of an operation; pass it to Recorder.End.
type Call struct{ ns int64 }

// NewRecorder returns a Recorder writing JSON lines to w. Callers that need
// the lines on disk wrap w in a buffered writer and flush it themselves.
func NewRecorder(w io.Writer) *Recorder {
	return &Recorder{start: time.Now(), enc: json.NewEncoder(w)}
}

// Now returns nanoseconds since the recorder started, on the monotonic clock.
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// Begin stamps the invocation of an operation.
func (r *Recorder) Begin() Call { return Call{ns: r.Now()} }

// End stamps the return of the operation begun with c, fills op's call_ns and
// return_ns, validates it and writes it. The first write error is sticky and
// is returned by every later End and by Err.
func (r *Recorder) End(c Call, op Op) error {
	op.CallNs = c.ns
	op.ReturnNs = r.Now()
	return r.Add(op)
}

// Add writes op with the times it already carries.
func (r *Recorder) Add(op Op) error {
	if err := op.Validate(); err != nil {
		return fmt.Errorf("recording %s by %s: %w", op.Op, op.Client, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	if err := r.enc.Encode(&op); err != nil {
		r.err = fmt.Errorf("writing history: %w", err)
		return r.err
	}
	r.n++
	if op.Outcome == OutcomeOK && op.Op != OpAssignment {
		if r.lastOK == nil {
			r.lastOK = map[string]int64{}
		}
		r.lastOK[op.Client] = max(r.lastOK[op.Client], op.ReturnNs)
	}
	return nil
}

// Progress returns, for every client that has completed an operation
// successfully, the return time of its latest success (assignment ops,
// which record ownership rather than progress, aside). Clients with no
// success are absent.
func (r *Recorder) Progress() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int64, len(r.lastOK))
	for c, t := range r.lastOK {
		out[c] = t
	}
	return out
}

// Len returns how many operations were written.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// Err returns the first write error, if any.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

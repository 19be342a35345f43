package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"
)

// Stream directions, as toxiproxy names them.
const (
	// Upstream is the client-to-broker direction (requests).
	Upstream = "upstream"
	// Downstream is the broker-to-client direction (responses).
	Downstream = "downstream"
)

// ErrClose is returned by a toxic to close the connection.
var ErrClose = errors.New("toxic closed the connection")

// Chunk is one piece of data travelling through a direction of a
// connection: a whole Kafka frame as read, or a piece of one once a toxic
// has sliced it.
type Chunk struct {
	Data []byte
	// Time is when the chunk was read from its socket.
	Time time.Time
	// EOF marks the end of the stream: the sender closed its side.
	EOF bool
	// req, on the first piece of a request frame, is registered as
	// awaiting a response when that piece is written upstream.
	req *pendingReq
}

// Split returns the piece [i, j) of c's data; only the first piece carries
// c's request bookkeeping.
func (c Chunk) Split(i, j int) Chunk {
	p := Chunk{Data: c.Data[i:j], Time: c.Time}
	if i == 0 {
		p.req = c.req
	}
	return p
}

// Stub is what a toxic sees of one connection direction.
type Stub struct {
	// Rand is the toxic's seeded random source, shared by its connections.
	Rand *Rand
	// State is the per-connection state from Stateful.NewState, or nil.
	State any
	// Done is closed when the connection closes or the toxic is removed.
	Done <-chan struct{}

	next  func(Chunk) error
	c     *conn
	until time.Time
}

// Next passes c on to the next toxic, or to the socket.
func (s *Stub) Next(c Chunk) error { return s.next(c) }

// Close closes both sides of the connection.
func (s *Stub) Close() { s.c.close() }

// Reset closes both sides with a TCP RST (SO_LINGER 0), as toxiproxy's
// reset_peer does.
func (s *Stub) Reset() { s.c.reset() }

// Sleep waits for d, or less when the toxic is removed meanwhile (data
// then flows on undelayed). It returns false when the connection closed.
func (s *Stub) Sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.Done:
		return true
	case <-s.c.done:
		return false
	}
}

// Expire waits for d and reports whether it fully elapsed with the toxic
// still installed and the connection open: the timer of a toxic that acts
// when time runs out (timeout, reset_peer).
func (s *Stub) Expire(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.Done:
		return false
	case <-s.c.done:
		return false
	}
}

// Toxic is a byte-level fault. Pipe receives every chunk of one direction of
// a connection the toxic applies to and decides what reaches the next stage
// (s.Next, any number of times). Returning an error closes the connection.
type Toxic interface {
	Pipe(s *Stub, c Chunk) error
}

// Stateful is implemented by toxics that keep per-connection state.
type Stateful interface {
	NewState() any
}

// Attacher is implemented by toxics that act without traffic (timers): Attach
// runs once per connection when the toxic starts applying to it, and should
// return promptly, starting a goroutine that ends when s.Done closes.
type Attacher interface {
	Attach(s *Stub)
}

// Rand is a goroutine-safe view of one toxic's seeded *rand.Rand.
type Rand struct {
	mu sync.Mutex
	r  *rand.Rand
}

// Float64 returns a number in [0, 1).
func (r *Rand) Float64() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.Float64()
}

// Int64N returns a number in [0, n); n <= 0 yields 0.
func (r *Rand) Int64N(n int64) int64 {
	if n <= 0 {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.Int64N(n)
}

var registry = map[string]func() any{}

// Register makes a toxic type available by name; new returns a fresh toxic
// whose exported fields are filled from the JSON attributes. The value is a
// Toxic (byte level) or a KafkaToxic.
func Register(name string, new func() any) {
	if _, dup := registry[name]; dup {
		panic("proxy: toxic type registered twice: " + name)
	}
	registry[name] = new
}

// ToxicTypes lists the registered toxic types.
func ToxicTypes() []string {
	var names []string
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ToxicSpec describes a toxic in toxiproxy's JSON.
type ToxicSpec struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Stream     string          `json:"stream"`
	Toxicity   float64         `json:"toxicity"`
	Attributes json.RawMessage `json:"attributes"`
}

// toxic is one installed toxic.
type toxic struct {
	spec    ToxicSpec
	impl    any // Toxic or KafkaToxic
	rnd     *Rand
	removed chan struct{}
	// kafka toxics' trigger state.
	mu    sync.Mutex
	calls int
	fired int
}

// newToxic validates spec, filling toxiproxy's defaults (stream downstream,
// name type_stream); toxicity must be given explicitly to differ from 1,
// since JSON cannot tell 0 from absent (toxiproxy behaves the same for
// toxics created without the field).
func newToxic(spec ToxicSpec, rnd *Rand, toxicitySet bool) (*toxic, error) {
	mk, ok := registry[spec.Type]
	if !ok {
		return nil, fmt.Errorf("unknown toxic type %q (have %v)", spec.Type, ToxicTypes())
	}
	if spec.Stream == "" {
		spec.Stream = Downstream
	}
	if spec.Stream != Upstream && spec.Stream != Downstream {
		return nil, fmt.Errorf("stream %q: want upstream or downstream", spec.Stream)
	}
	if spec.Name == "" {
		spec.Name = spec.Type + "_" + spec.Stream
	}
	if !toxicitySet {
		spec.Toxicity = 1
	}
	if spec.Toxicity < 0 || spec.Toxicity > 1 {
		return nil, fmt.Errorf("toxicity %v outside [0, 1]", spec.Toxicity)
	}
	impl := mk()
	if len(spec.Attributes) > 0 && string(spec.Attributes) != "null" {
		if err := json.Unmarshal(spec.Attributes, impl); err != nil {
			return nil, fmt.Errorf("toxic %s attributes: %w", spec.Name, err)
		}
	}
	if v, ok := impl.(interface{ validate() error }); ok {
		if err := v.validate(); err != nil {
			return nil, fmt.Errorf("toxic %s: %w", spec.Name, err)
		}
	}
	b, err := json.Marshal(impl)
	if err != nil {
		return nil, err
	}
	spec.Attributes = b
	return &toxic{spec: spec, impl: impl, rnd: rnd, removed: make(chan struct{})}, nil
}

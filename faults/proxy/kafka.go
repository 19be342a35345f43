package proxy

import (
	"fmt"
	"time"
)

// Request is what a Kafka-aware toxic sees of one request.
type Request struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      string
	// Body is the request body after the header.
	Body []byte
}

// Action is what a Kafka-aware toxic asks for one request. The zero Action
// forwards it untouched.
type Action struct {
	// ErrorCode, when non-zero, answers the request with this Kafka error
	// code instead of forwarding it.
	ErrorCode int16
	// DropResponse forwards the request and closes the connection when its
	// response arrives, so the broker applied it but the client never
	// learns so.
	DropResponse bool
	// DelayResponse holds the response (and, since responses are ordered,
	// every later one of the connection) this long.
	DelayResponse time.Duration
	// Fetch, "corrupt" or "duplicate", flips one byte of or duplicates the
	// first record batch of the Fetch response.
	Fetch string
}

// KafkaToxic is a fault that acts on whole Kafka requests. The proxy calls
// Act only for requests that match the toxic's api_key (and client_id when
// set) and on which its trigger fires.
type KafkaToxic interface {
	Act(r *Request) Action
}

// Match and Trigger are embedded by every Kafka-aware toxic; their JSON
// fields sit beside the toxic's own in the attributes.
type Match struct {
	// APIKey selects requests by key; -1 matches every key.
	APIKey int16 `json:"api_key"`
	// ClientID, when set, selects only requests from that client id.
	ClientID string `json:"client_id,omitempty"`
}

// Trigger decides on which matching calls a toxic fires.
type Trigger struct {
	// Trigger is "always" (the default), "once" (the first matching call),
	// "nth" (only the N-th), "times" (the first N) or "probability" (each
	// with probability P from the toxic's seeded source).
	Trigger string  `json:"trigger,omitempty"`
	N       int     `json:"n,omitempty"`
	P       float64 `json:"p,omitempty"`
}

func (t *Trigger) validate() error {
	switch t.Trigger {
	case "", "always", "once":
	case "nth", "times":
		if t.N <= 0 {
			return fmt.Errorf("trigger %s needs n > 0", t.Trigger)
		}
	case "probability":
		if t.P < 0 || t.P > 1 {
			return fmt.Errorf("trigger probability needs p in [0, 1]")
		}
	default:
		return fmt.Errorf("unknown trigger %q (always, once, nth, times, probability)", t.Trigger)
	}
	return nil
}

type matcher interface {
	match() *Match
	trigger() *Trigger
}

func (m *Match) match() *Match       { return m }
func (t *Trigger) trigger() *Trigger { return t }

// fire counts a matching call and reports whether the trigger fires on it.
func (tx *toxic) fire(t *Trigger) bool {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.calls++
	var ok bool
	switch t.Trigger {
	case "", "always":
		ok = true
	case "once":
		ok = tx.fired == 0
	case "nth":
		ok = tx.calls == t.N
	case "times":
		ok = tx.fired < t.N
	case "probability":
		ok = tx.rnd.Float64() < t.P
	}
	if ok {
		tx.fired++
	}
	return ok
}

// Fired returns how many times the toxic has fired.
func (tx *toxic) firedCount() int {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return tx.fired
}

func (m *Match) matches(r *Request) bool {
	return (m.APIKey < 0 || m.APIKey == r.Key) && (m.ClientID == "" || m.ClientID == r.ClientID)
}

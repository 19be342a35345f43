package proxy

import (
	"errors"
	"fmt"
	"time"
)

// ErrorToxic answers matching requests with ErrorCode instead of forwarding
// them (kafka_error). The response is built with kmsg at the request's
// version, echoing its topics and partitions, as a broker would answer.
type ErrorToxic struct {
	Match
	Trigger
	ErrorCode int16 `json:"error_code"`
}

// DropResponseToxic forwards matching requests and cuts the connection
// before their response reaches the client (kafka_drop_response): the lost
// answer that idempotent producers exist for.
type DropResponseToxic struct {
	Match
	Trigger
}

// DelayResponseToxic holds the response to matching requests for Delay
// milliseconds (kafka_delay_response).
type DelayResponseToxic struct {
	Match
	Trigger
	Delay int64 `json:"delay"`
}

// FetchCorruptToxic corrupts one byte of, or duplicates, the first record
// batch of a Fetch response (kafka_fetch_corrupt); Mode is "corrupt" (the
// default) or "duplicate". A corrupted byte lies in the CRC-covered part of
// the batch, so a client checking CRCs must notice.
type FetchCorruptToxic struct {
	Match
	Trigger
	Mode string `json:"mode"`
}

// RefuseConnectionToxic closes new client connections on accept, before any
// byte is read (kafka_refuse_connection). Its api_key is ignored.
type RefuseConnectionToxic struct {
	Match
	Trigger
}

func init() {
	Register("kafka_error", func() any { return &ErrorToxic{Match: Match{APIKey: -1}} })
	Register("kafka_drop_response", func() any { return &DropResponseToxic{Match: Match{APIKey: -1}} })
	Register("kafka_delay_response", func() any { return &DelayResponseToxic{Match: Match{APIKey: -1}} })
	Register("kafka_fetch_corrupt", func() any { return &FetchCorruptToxic{Match: Match{APIKey: 1}} })
	Register("kafka_refuse_connection", func() any { return &RefuseConnectionToxic{Match: Match{APIKey: -1}} })
}

// Act implements KafkaToxic.
func (t *ErrorToxic) Act(r *Request) Action { return Action{ErrorCode: t.ErrorCode} }

func (t *ErrorToxic) validate() error {
	if t.ErrorCode == 0 {
		return errors.New("kafka_error needs a non-zero error_code")
	}
	if t.APIKey < 0 {
		return errors.New("kafka_error needs an api_key")
	}
	if !canAnswerError(t.APIKey) {
		return fmt.Errorf("kafka_error cannot build an error response for api_key %d", t.APIKey)
	}
	return t.Trigger.validate()
}

// Act implements KafkaToxic.
func (t *DropResponseToxic) Act(r *Request) Action { return Action{DropResponse: true} }

func (t *DropResponseToxic) validate() error { return t.Trigger.validate() }

// Act implements KafkaToxic.
func (t *DelayResponseToxic) Act(r *Request) Action {
	return Action{DelayResponse: time.Duration(t.Delay) * time.Millisecond}
}

func (t *DelayResponseToxic) validate() error {
	if t.Delay <= 0 {
		return errors.New("kafka_delay_response needs delay > 0 (ms)")
	}
	return t.Trigger.validate()
}

// Act implements KafkaToxic.
func (t *FetchCorruptToxic) Act(r *Request) Action {
	if r.Key != 1 {
		return Action{}
	}
	return Action{Fetch: t.Mode}
}

func (t *FetchCorruptToxic) validate() error {
	switch t.Mode {
	case "":
		t.Mode = "corrupt"
	case "corrupt", "duplicate":
	default:
		return fmt.Errorf("kafka_fetch_corrupt mode %q: want corrupt or duplicate", t.Mode)
	}
	t.APIKey = 1
	return t.Trigger.validate()
}

// Act implements KafkaToxic; the proxy consults this toxic on accept, not
// per request.
func (t *RefuseConnectionToxic) Act(r *Request) Action { return Action{} }

func (t *RefuseConnectionToxic) validate() error { return t.Trigger.validate() }

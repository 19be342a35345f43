package driver

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ProtocolVersion is the version of the line-delimited JSON driver protocol
// (matrix/README.md, "Driver protocol"). A driver answers hello with the
// version it speaks; the orchestrator refuses a different one.
const ProtocolVersion = 1

// MaxLine bounds one protocol line. The largest command, a produce of
// records near 1 MiB each in base64, stays well below it.
const MaxLine = 64 << 20

// Command is one request line: {"id":1,"op":"produce","args":{...}}.
type Command struct {
	ID   int64           `json:"id"`
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args,omitempty"`
}

// Response is one answer line: {"id":1,"ok":true,"result":{...}} or
// {"id":1,"ok":false,"error":{"code":"...","message":"..."}}.
type Response struct {
	ID     int64           `json:"id"`
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *Error          `json:"error,omitempty"`
}

// Protocol operation names.
const (
	OpHello            = "hello"
	OpCreateTopic      = "create_topic"
	OpDeleteTopic      = "delete_topic"
	OpDescribeTopic    = "describe_topic"
	OpCreatePartitions = "create_partitions"
	OpDescribeConfigs  = "describe_configs"
	OpAlterConfigs     = "alter_configs"
	OpProduce          = "produce"
	OpConsume          = "consume"
	OpListOffsets      = "list_offsets"
	OpDeleteRecords    = "delete_records"
	OpGroupConsume     = "group_consume"
	OpFetchCommitted   = "fetch_committed"
	OpDeleteGroup      = "delete_group"
	OpDescribeGroup    = "describe_group"
	OpListGroups       = "list_groups"
	OpTransform        = "transform"
	OpProducerOpen     = "producer_open"
	OpProducerSend     = "producer_send"
	OpProducerClose    = "producer_close"
	OpClose            = "close"
)

// CodeUnsupported is the error code a driver answers for an operation or
// option its client library lacks; it maps to ErrUnsupported.
const CodeUnsupported = "UNSUPPORTED"

// Hello is the first command's arguments.
type Hello struct {
	Bootstrap string `json:"bootstrap"`
	Protocol  int    `json:"protocol"`
	// Security is how the driver's clients authenticate (WithSecurity);
	// absent for PLAINTEXT.
	Security *Security `json:"security,omitempty"`
}

// HelloResult is the driver's answer to hello.
type HelloResult struct {
	Client   string `json:"client"`
	Protocol int    `json:"protocol"`
	Info
}

// TopicArgs are the arguments of delete_topic, describe_topic and
// describe_configs.
type TopicArgs struct {
	Topic string `json:"topic"`
}

// CreatePartitionsArgs are the arguments of create_partitions.
type CreatePartitionsArgs struct {
	Topic string `json:"topic"`
	Total int32  `json:"total"`
}

// ConfigsResult is the result of describe_configs.
type ConfigsResult struct {
	Configs map[string]string `json:"configs"`
}

// GroupArgs are the arguments of delete_group.
type GroupArgs struct {
	Group string `json:"group"`
}

// ListGroupsResult is the result of list_groups.
type ListGroupsResult struct {
	Groups []string `json:"groups"`
}

// OffsetResult is the result of fetch_committed.
type OffsetResult struct {
	Offset int64 `json:"offset"`
}

// DeleteRecordsResult is the result of delete_records.
type DeleteRecordsResult struct {
	LowWatermark int64 `json:"low_watermark"`
}

// errorResponse turns a Go error into the protocol's error object.
func errorResponse(err error) *Error {
	var de *Error
	switch {
	case errors.Is(err, ErrUnsupported):
		return &Error{Code: CodeUnsupported, Message: err.Error()}
	case errors.As(err, &de):
		return de
	default:
		return &Error{Code: "CLIENT_ERROR", Message: err.Error()}
	}
}

// responseError turns the protocol's error object back into a Go error.
func responseError(op string, e *Error) error {
	if e == nil {
		return fmt.Errorf("driver: %s failed without an error object", op)
	}
	if e.Code == CodeUnsupported {
		return fmt.Errorf("%w: %s", ErrUnsupported, e.Message)
	}
	return e
}

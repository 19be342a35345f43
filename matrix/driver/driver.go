package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Driver is one Kafka client library behind a common set of operations.
// A Driver is bound to one bootstrap address; its methods may be called from
// one goroutine at a time. Every method maps one-to-one onto a command of the
// line-delimited JSON protocol in matrix/README.md, so an out-of-process
// driver (Python, Java) implements exactly the same contract.
//
// Kafka errors are returned as *Error with the Kafka error name, so that
// scenarios compare clients by Kafka's vocabulary rather than each
// library's. An operation the library lacks returns an error wrapping
// ErrUnsupported.
type Driver interface {
	// Client returns the fixed client id used in reports, such as "franz-go".
	Client() string
	// Info describes the library version and its defaults.
	Info() Info

	CreateTopic(ctx context.Context, req CreateTopic) error
	DeleteTopic(ctx context.Context, topic string) error
	DescribeTopic(ctx context.Context, topic string) (TopicInfo, error)
	CreatePartitions(ctx context.Context, topic string, total int32) error
	DescribeConfigs(ctx context.Context, topic string) (map[string]string, error)
	AlterConfigs(ctx context.Context, req AlterConfigs) error

	Produce(ctx context.Context, req Produce) (ProduceResult, error)
	Consume(ctx context.Context, req Consume) (ConsumeResult, error)
	ListOffsets(ctx context.Context, req ListOffsets) (ListOffsetsResult, error)
	DeleteRecords(ctx context.Context, req DeleteRecords) (int64, error)

	// GroupConsume joins a consumer group, consumes, optionally commits
	// what it returned, and leaves (a static member just closes).
	GroupConsume(ctx context.Context, req GroupConsume) (GroupConsumeResult, error)
	// FetchCommitted returns a group's committed offset for a partition,
	// or -1 when it has none.
	FetchCommitted(ctx context.Context, req FetchCommitted) (int64, error)
	// DeleteGroup deletes an empty consumer group.
	DeleteGroup(ctx context.Context, group string) error
	// DescribeGroup describes a consumer group through the client's admin
	// API (DescribeGroups, or ConsumerGroupDescribe where the client
	// prefers it): its state and members with their assignments.
	DescribeGroup(ctx context.Context, group string) (GroupDescription, error)
	// ListGroups lists the ids of the cluster's groups (ListGroups).
	ListGroups(ctx context.Context) ([]string, error)

	// Transform runs an exactly-once consume-transform-produce loop: a
	// read_committed group member copies records from one topic to
	// another in transactions that also carry the consumed offsets
	// (sendOffsetsToTransaction, KIP-98 and KIP-447).
	Transform(ctx context.Context, req Transform) (TransformResult, error)
	// ProducerOpen creates a long-lived transactional producer named by
	// the caller and initialises it (InitProducerId), which fences any
	// older producer with the same transactional id.
	ProducerOpen(ctx context.Context, req ProducerOpen) error
	// ProducerSend runs one transaction step on an open producer: begin,
	// produce the records and wait for their acknowledgements, then
	// commit, abort or leave the transaction open.
	ProducerSend(ctx context.Context, req ProducerSend) (ProduceResult, error)
	// ProducerClose closes a producer opened with ProducerOpen.
	ProducerClose(ctx context.Context, producer string) error

	// Close releases connections and, for process drivers, the process.
	Close() error
}

// Info describes a driver.
type Info struct {
	Library string `json:"library"` // e.g. "github.com/twmb/franz-go v1.22.3"
	// Partitioner names the library's default partitioner for keyed
	// records, e.g. "murmur2" (the Java client's), "fnv1a" (sarama's) or
	// "consistent_random" (librdkafka's crc32-based default).
	Partitioner string `json:"partitioner"`
}

// Opener starts a driver connected to bootstrap (host:port, comma list).
type Opener func(ctx context.Context, bootstrap string) (Driver, error)

var (
	regMu    sync.Mutex
	registry = map[string]Opener{}
)

// Register makes a driver available under a client id. It panics on a
// duplicate id, which is a programming error found at init.
func Register(client string, open Opener) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[client]; dup {
		panic("driver: duplicate registration of " + client)
	}
	registry[client] = open
}

// Lookup returns the opener for client: the selected runtime's (see
// RuntimeEnv) when it runs that client, else the one registered.
func Lookup(client string) (Opener, bool) {
	if o, ok := runtimeOpener(client); ok {
		return o, true
	}
	regMu.Lock()
	defer regMu.Unlock()
	o, ok := registry[client]
	return o, ok
}

// Clients returns the registered client ids, sorted.
func Clients() []string {
	regMu.Lock()
	defer regMu.Unlock()
	ids := make([]string, 0, len(registry))
	for id := range registry {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// ErrUnsupported marks an operation or option the client library lacks.
var ErrUnsupported = errors.New("unsupported by this client")

// Unsupported returns an error wrapping ErrUnsupported with a reason.
func Unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsupported, fmt.Sprintf(format, args...))
}

// Error is a Kafka error as a driver saw it. Code is Kafka's error name
// (as in org.apache.kafka.common.protocol.Errors, e.g.
// "TOPIC_ALREADY_EXISTS"), or a client-local name prefixed "CLIENT_" when
// the library failed before a broker answered (e.g.
// "CLIENT_RECORD_TOO_LARGE").
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// Code returns the Kafka error name carried by err, or "" when err carries
// none.
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Codecs lists the compression codecs, by Kafka's compression.type names.
var Codecs = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// CreateTopic is the create_topic command.
type CreateTopic struct {
	Topic             string            `json:"topic"`
	Partitions        int32             `json:"partitions"`
	ReplicationFactor int16             `json:"replication_factor"`
	Configs           map[string]string `json:"configs,omitempty"`
}

// TopicInfo is the describe_topic result.
type TopicInfo struct {
	Topic      string `json:"topic"`
	Partitions int32  `json:"partitions"`
}

// AlterConfigs is the alter_configs command: incremental SET and DELETE
// operations on a topic's configs (IncrementalAlterConfigs, KIP-339).
type AlterConfigs struct {
	Topic  string            `json:"topic"`
	Set    map[string]string `json:"set,omitempty"`
	Delete []string          `json:"delete,omitempty"`
}

// Header is a record header; a nil Value is a null header value.
type Header struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// Record is a record to produce or one consumed. Nil Key or Value means
// null; an empty non-nil slice means empty. In JSON, bytes are base64 and
// null is null.
type Record struct {
	Partition   int32    `json:"partition"` // -1: the client's partitioner chooses
	Key         []byte   `json:"key"`
	Value       []byte   `json:"value"`
	Headers     []Header `json:"headers,omitempty"`
	TimestampMs int64    `json:"timestamp_ms,omitempty"` // 0: the client's clock
	Offset      int64    `json:"offset"`                 // consumed records only
}

// Produce is the produce command. Records are sent in order by one producer
// instance created for the command with the given settings.
type Produce struct {
	Topic   string   `json:"topic"`
	Records []Record `json:"records"`
	// Codec is a compression.type name; "" means none.
	Codec string `json:"codec,omitempty"`
	// Acks is 0, 1 or -1 (all).
	Acks int `json:"acks"`
	// Idempotent enables the idempotent producer (KIP-98); it needs acks=-1.
	Idempotent bool `json:"idempotent,omitempty"`
	// MaxInFlight bounds in-flight requests per broker; 0 means the
	// client's default.
	MaxInFlight int `json:"max_in_flight,omitempty"`
	// LingerMs lets records batch together; 0 means the client's default.
	LingerMs int `json:"linger_ms,omitempty"`
	// TransactionalID, when set, wraps the records in one transaction,
	// committed after every record was acknowledged, aborted when one
	// failed or when TxnAbort is set.
	TransactionalID string `json:"transactional_id,omitempty"`
	// TxnAbort ends the transaction with an abort instead of a commit.
	TxnAbort bool `json:"txn_abort,omitempty"`
	// AutoCreate lets the producer ask the broker to create an unknown
	// topic (Metadata's AllowAutoTopicCreation); the drivers ask for no
	// auto-creation otherwise.
	AutoCreate bool `json:"auto_create,omitempty"`
}

// Delivery is the outcome of one produced record, in request order.
type Delivery struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"` // -1 when unknown (acks=0) or failed
	Error     *Error `json:"error,omitempty"`
}

// ProduceResult is the produce result.
type ProduceResult struct {
	Deliveries []Delivery `json:"deliveries"`
}

// Consume is the consume command: read one partition by assignment (no
// group) from an offset until Count records were read or TimeoutMs passed.
type Consume struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// From is an offset, or -2 for earliest, -1 for latest.
	From      int64  `json:"from"`
	Count     int    `json:"count"`
	TimeoutMs int    `json:"timeout_ms"`
	Isolation string `json:"isolation,omitempty"` // "read_uncommitted" (default) or "read_committed"
	// Reset is auto.offset.reset for an out-of-range From: "none" (the
	// default: the error is returned), "earliest" or "latest".
	Reset string `json:"reset,omitempty"`
	// Rack is the consumer's client.rack (KIP-392): with a replica
	// selector on the brokers, a follower in that rack may serve it.
	Rack string `json:"rack,omitempty"`
}

// ConsumeResult is the consume result. Error is set when the fetch
// failed with a Kafka error (e.g. OFFSET_OUT_OF_RANGE) instead of timing out.
type ConsumeResult struct {
	Records       []Record `json:"records"`
	HighWatermark int64    `json:"high_watermark"` // -1 when the client does not expose it
	Error         *Error   `json:"error,omitempty"`
	// Next, when the client exposes it, is where the client continues
	// after what it returned: one past the last record or control record
	// (transaction marker) it fetched, which may pass the last data
	// record. A lower bound is allowed; a value past where the client
	// really continues is not. Nil when unknown.
	Next *int64 `json:"next,omitempty"`
}

// ListOffsets is the list_offsets command. Kind is "earliest", "latest" or
// "timestamp" (the first offset whose timestamp is >= TimestampMs).
type ListOffsets struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Kind is "earliest", "latest", "timestamp" (the first offset at or
	// after TimestampMs) or "max_timestamp" (the offset of the record
	// with the largest timestamp, KIP-734; -1 in an empty partition).
	Kind        string `json:"kind"`
	TimestampMs int64  `json:"timestamp_ms,omitempty"`
}

// ListOffsetsResult is the list_offsets result; Offset is -1 when no record
// matches a timestamp.
type ListOffsetsResult struct {
	Offset int64 `json:"offset"`
}

// DeleteRecords is the delete_records command: delete records of one
// partition below Before. The result is the new low watermark.
type DeleteRecords struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Before    int64  `json:"before"`
}

// ModuleVersion returns the version of a Go module linked into this binary.
// Test binaries carry no module list, so it falls back to the go.mod found
// by walking up from the working directory, and to "(unknown)".
func ModuleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == path {
				if m.Replace != nil {
					return m.Replace.Version
				}
				return m.Version
			}
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return "(unknown)"
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
				if len(f) >= 2 && f[0] == path {
					return f[1]
				}
			}
			return "(unknown)"
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "(unknown)"
		}
		dir = parent
	}
}

// GroupConsume is the group_consume command: one member joins Group,
// subscribes to Topic, reads until Count records or TimeoutMs, commits the
// offsets after the records it returned when Commit is set, and leaves.
type GroupConsume struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Count     int    `json:"count"`
	TimeoutMs int    `json:"timeout_ms"`
	// Protocol is "classic" (the default; JoinGroup/SyncGroup) or
	// "consumer" (KIP-848, ConsumerGroupHeartbeat).
	Protocol string `json:"protocol,omitempty"`
	// TopicRegex, with Protocol "consumer", subscribes to the topics the
	// broker resolves from this regular expression (KIP-848's
	// SubscribedTopicRegex, matched against whole topic names) instead
	// of Topic. The records do not say their topic, and Commit is refused.
	TopicRegex string `json:"topic_regex,omitempty"`
	// Assignor is a classic client-side assignor: "range", "roundrobin",
	// "sticky" or "cooperative-sticky"; empty means the client's default.
	Assignor string `json:"assignor,omitempty"`
	// InstanceID enables static membership (KIP-345).
	InstanceID string `json:"instance_id,omitempty"`
	Commit     bool   `json:"commit,omitempty"`
	// SessionTimeoutMs is session.timeout.ms (0: the client's default);
	// the driver sets the heartbeat interval to a quarter of it.
	SessionTimeoutMs int `json:"session_timeout_ms,omitempty"`
	// Crash keeps the member after the answer: its consumer is neither
	// closed nor does it leave the group, so that the orchestrator can
	// kill the driver process (Killer) and the member vanishes as a
	// crashed process does, detected only by its session timeout. Only
	// for a driver running in its own process.
	Crash bool `json:"crash,omitempty"`
	// AutoCommitIntervalMs, when positive, turns the client's own
	// auto-commit on (enable.auto.commit=true) with this
	// auto.commit.interval.ms, instead of the explicit commit of Commit
	// (which must then be false). Every record the client's poll returned
	// is in the result, even past Count, since those are what an
	// auto-committing client may commit; the member then closes as usual
	// (clients commit on close) or, with Crash, stays open.
	AutoCommitIntervalMs int `json:"auto_commit_interval_ms,omitempty"`
}

// GroupConsumeResult is the group_consume result: the records returned, in
// the order the client delivered them, and the committed offsets (the next
// offset per partition) when the command committed.
type GroupConsumeResult struct {
	Records   []Record          `json:"records"`
	Committed []PartitionOffset `json:"committed,omitempty"`
}

// PartitionOffset is an offset of one partition.
type PartitionOffset struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// GroupDescription is the describe_group result. State is Kafka's name
// of the group state (Stable, Empty, PreparingRebalance,
// CompletingRebalance, Dead), as org.apache.kafka.common.GroupState
// prints it.
type GroupDescription struct {
	Group   string              `json:"group"`
	State   string              `json:"state"`
	Members []GroupMemberDetail `json:"members"`
}

// GroupMemberDetail is one member of a described group.
type GroupMemberDetail struct {
	MemberID   string           `json:"member_id"`
	ClientID   string           `json:"client_id"`
	Assignment []TopicPartition `json:"assignment"`
}

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// FetchCommitted is the fetch_committed command.
type FetchCommitted struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// NextOffsets returns, per partition, the offset after the last of recs:
// what a consumer commits after processing them.
func NextOffsets(recs []Record) []PartitionOffset {
	next := map[int32]int64{}
	var order []int32
	for _, r := range recs {
		if _, ok := next[r.Partition]; !ok {
			order = append(order, r.Partition)
		}
		if r.Offset+1 > next[r.Partition] {
			next[r.Partition] = r.Offset + 1
		}
	}
	sort.Slice(order, func(i, j int) bool { return order[i] < order[j] })
	out := make([]PartitionOffset, 0, len(order))
	for _, p := range order {
		out = append(out, PartitionOffset{Partition: p, Offset: next[p]})
	}
	return out
}

// CodeName returns Kafka's name for an error code, as in
// org.apache.kafka.common.protocol.Errors ("TOPIC_ALREADY_EXISTS" for 36),
// or "UNKNOWN_CODE_<n>" for a code this build does not know.
func CodeName(code int16) string {
	e := kerr.ErrorForCode(code)
	if code != kerr.UnknownServerError.Code && e == kerr.UnknownServerError {
		return fmt.Sprintf("UNKNOWN_CODE_%d", code)
	}
	var ke *kerr.Error
	if errors.As(e, &ke) {
		return ke.Message
	}
	return fmt.Sprintf("UNKNOWN_CODE_%d", code)
}

// Transform is the transform command: a member of Group (classic
// protocol, read_committed, no auto-commit) consumes Input and, in
// transactions of up to Batch records under TransactionalID, produces
// each record's key, value and headers to the same partition of Output
// and sends the next offsets to the transaction with the consumer's group
// metadata. It stops after Count records were processed in committed
// transactions, or at TimeoutMs, and then leaves the group.
type Transform struct {
	Group           string `json:"group"`
	Input           string `json:"input"`
	Output          string `json:"output"`
	TransactionalID string `json:"transactional_id"`
	Count           int    `json:"count"`
	Batch           int    `json:"batch"`
	TimeoutMs       int    `json:"timeout_ms"`
	// AbortLast processes up to Batch more records in one further
	// transaction (records and offsets) and aborts it before leaving.
	AbortLast bool `json:"abort_last,omitempty"`
}

// TransformResult is the transform result: the input records processed in
// committed transactions, in order; those of the aborted last transaction;
// and the offsets the last committed transaction carried per partition.
type TransformResult struct {
	Records      []Record          `json:"records"`
	Aborted      []Record          `json:"aborted,omitempty"`
	Transactions int               `json:"transactions"`
	Committed    []PartitionOffset `json:"committed,omitempty"`
}

// ProducerOpen is the producer_open command. Producer is a name chosen by
// the orchestrator for later producer_send and producer_close commands.
type ProducerOpen struct {
	Producer        string `json:"producer"`
	TransactionalID string `json:"transactional_id"`
}

// Transaction ends of a producer_send.
const (
	EndCommit = "commit"
	EndAbort  = "abort"
	EndOpen   = "open" // Leave the transaction open.
)

// ProducerSend is the producer_send command: begin a transaction unless
// one is open, produce Records to Topic (acks=all) and wait for every
// acknowledgement, then end the transaction as End says. A record or end
// failure is the command's error (e.g. PRODUCER_FENCED).
type ProducerSend struct {
	Producer string   `json:"producer"`
	Topic    string   `json:"topic"`
	Records  []Record `json:"records"`
	End      string   `json:"end"`
}

// ProducerArgs are the arguments of producer_close.
type ProducerArgs struct {
	Producer string `json:"producer"`
}

// Killer is a driver that can be ended at once, as a crash: a driver
// process killed with SIGKILL. Scenarios use it to make a group member or
// a producer vanish without leaving or ending anything.
type Killer interface {
	Kill() error
}

// CheckTopicRegex refuses a GroupConsume whose TopicRegex the command's
// rules do not allow: only with the consumer protocol, and without Commit.
func CheckTopicRegex(req GroupConsume) error {
	switch {
	case req.TopicRegex == "":
		return nil
	case req.Protocol != "consumer":
		return fmt.Errorf("group_consume: topic_regex needs protocol \"consumer\", not %q", req.Protocol)
	case req.Commit:
		return errors.New("group_consume: topic_regex cannot commit: the records do not say their topic")
	}
	return nil
}

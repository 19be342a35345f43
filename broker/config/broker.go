package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// brokerDefs are the broker configs Cascade honours, with Kafka's names,
// types, validators and defaults (KafkaConfig, ServerLogConfigs,
// KRaftConfigs). Where Cascade's default differs from Kafka's the Doc says
// so: a single node needs replication factors of 1 and a local listener.
var brokerDefs = newDefs(append([]*Def{
	// KRaft and listeners.
	&Def{Name: "node.id", Type: TypeInt, Default: "1", HasDefault: true, Validate: atLeast(0),
		Doc: "The node id of this server (Kafka requires it; Cascade defaults to 1)."},
	&Def{Name: "process.roles", Type: TypeList, Default: "broker,controller", HasDefault: true,
		Validate: listOf(false, "broker", "controller"),
		Doc:      "The roles of this node; Cascade runs a combined broker,controller node."},
	&Def{Name: "controller.quorum.voters", Type: TypeList, Default: "", HasDefault: true,
		Doc: "The controller quorum as id@host:port entries."},
	&Def{Name: "controller.listener.names", Type: TypeString, Doc: "Listener names used by the controller."},
	&Def{Name: "listeners", Type: TypeString, Default: "PLAINTEXT://127.0.0.1:9092", HasDefault: true,
		Doc: "Listeners as NAME://host:port (Kafka's default binds all interfaces; Cascade binds 127.0.0.1)."},
	&Def{Name: "advertised.listeners", Type: TypeString,
		Doc: "Listeners published to clients, when they differ from listeners."},
	&Def{Name: "listener.security.protocol.map", Type: TypeString,
		Default: "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", HasDefault: true,
		Doc: "Map from listener name to security protocol."},
	&Def{Name: "inter.broker.listener.name", Type: TypeString,
		Doc: "Listener used between brokers: a cluster node's replica fetchers and transaction requests dial the peer's " +
			"endpoint of this listener with its security (TLS from its ssl.* keys, SASL with " +
			"sasl.mechanism.inter.broker.protocol)."},
	&Def{Name: "cluster.id", Type: TypeString, Validate: clusterID,
		Doc: "Cascade: the cluster id to format a new data directory with, or to require of an existing one."},
	&Def{Name: "cascade.admin.listener", Type: TypeString,
		Doc: "Cascade-specific: host:port of an HTTP listener serving Prometheus /metrics and /debug/pprof/; unset disables it."},

	// Log directories and topic defaults.
	&Def{Name: "log.dirs", Type: TypeList, Doc: "Directories where log data is stored; if unset, log.dir is used."},
	&Def{Name: "log.dir", Type: TypeString, Default: "./data", HasDefault: true,
		Doc: "The directory where log data is stored, when log.dirs is unset (Cascade default ./data)."},
	&Def{Name: "num.partitions", Type: TypeInt, Default: "1", HasDefault: true, Validate: atLeast(1),
		Doc: "The default number of partitions of a new topic."},
	&Def{Name: "default.replication.factor", Type: TypeInt, Default: "1", HasDefault: true, Validate: atLeast(1),
		Doc: "The default replication factor of a new topic."},
	&Def{Name: "auto.create.topics.enable", Type: TypeBoolean, Default: "true", HasDefault: true,
		Doc: "Whether Metadata and Produce create unknown topics."},
	&Def{Name: "delete.topic.enable", Type: TypeBoolean, Default: "true", HasDefault: true,
		Doc: "Whether DeleteTopics may delete topics."},
	&Def{Name: "log.segment.bytes", Type: TypeInt, Default: "1073741824", HasDefault: true,
		Validate: atLeast(1024 * 1024), Dynamic: true, Doc: "The largest size of a segment file."},
	&Def{Name: "log.roll.ms", Type: TypeLong, Dynamic: true,
		Doc: "The time after which a segment is rolled, in ms; if unset log.roll.hours is used."},
	&Def{Name: "log.roll.hours", Type: TypeInt, Default: "168", HasDefault: true, Validate: atLeast(1),
		Doc: "The time after which a segment is rolled, in hours."},
	&Def{Name: "log.roll.jitter.ms", Type: TypeLong, DefaultOnly: true, Dynamic: true,
		Doc: "The largest jitter subtracted from the roll time, in ms."},
	&Def{Name: "log.roll.jitter.hours", Type: TypeInt, Default: "0", HasDefault: true, Validate: atLeast(0),
		DefaultOnly: true, Doc: "The largest jitter subtracted from the roll time, in hours."},
	&Def{Name: "log.retention.ms", Type: TypeLong, Dynamic: true,
		Doc: "How long a log segment is kept, in ms; -1 means forever; if unset log.retention.minutes is used."},
	&Def{Name: "log.retention.minutes", Type: TypeInt,
		Doc: "How long a log segment is kept, in minutes; if unset log.retention.hours is used."},
	&Def{Name: "log.retention.hours", Type: TypeInt, Default: "168", HasDefault: true,
		Doc: "How long a log segment is kept, in hours."},
	&Def{Name: "log.retention.bytes", Type: TypeLong, Default: "-1", HasDefault: true, Dynamic: true,
		Doc: "The largest size of a partition's log before old segments are deleted."},
	&Def{Name: "log.retention.check.interval.ms", Type: TypeLong, Default: "300000", HasDefault: true,
		Validate: atLeast(1), Doc: "How often retention is checked."},
	&Def{Name: "log.flush.interval.messages", Type: TypeLong, Default: maxInt64Text, HasDefault: true,
		Validate: atLeast(1), Dynamic: true, Doc: "The number of messages after which a log is fsynced."},
	&Def{Name: "log.flush.interval.ms", Type: TypeLong, Dynamic: true,
		Doc: "The time after which a log is fsynced; if unset log.flush.scheduler.interval.ms is used."},
	&Def{Name: "log.flush.scheduler.interval.ms", Type: TypeLong, Default: maxInt64Text, HasDefault: true,
		Doc: "How often the flusher checks whether a log needs fsync."},
	&Def{Name: "log.index.interval.bytes", Type: TypeInt, Default: "4096", HasDefault: true,
		Validate: atLeast(0), Dynamic: true, Doc: "How often, in bytes, an offset index entry is added."},
	&Def{Name: "log.index.size.max.bytes", Type: TypeInt, Default: "10485760", HasDefault: true,
		Validate: atLeast(4), Dynamic: true, Doc: "The largest size of an offset index file."},
	&Def{Name: "log.cleanup.policy", Type: TypeList, Default: "delete", HasDefault: true,
		Validate: listOf(true, "compact", "delete"), Dynamic: true,
		Doc: "The default cleanup policy of segments past retention."},
	&Def{Name: "log.cleaner.enable", Type: TypeBoolean, Default: "true", HasDefault: true,
		Doc: "Whether the log cleaner compacts logs with cleanup.policy=compact."},
	&Def{Name: "log.cleaner.backoff.ms", Type: TypeLong, Default: "15000", HasDefault: true, Validate: atLeast(0),
		Doc: "How long the cleaner sleeps when no log needs cleaning."},
	&Def{Name: "log.cleaner.dedupe.buffer.size", Type: TypeLong, Default: "134217728", HasDefault: true,
		Validate: atLeast(1 << 20), Doc: "The memory for the key map of one cleaning pass."},
	&Def{Name: "log.cleaner.io.buffer.load.factor", Type: TypeDouble, Default: "0.9", HasDefault: true,
		Doc: "The fill limit of the cleaner's key map."},
	&Def{Name: "log.cleaner.delete.retention.ms", Type: TypeLong, Default: "86400000", HasDefault: true,
		Validate: atLeast(0), Dynamic: true, Doc: "How long delete tombstones are kept."},
	&Def{Name: "log.cleaner.min.compaction.lag.ms", Type: TypeLong, Default: "0", HasDefault: true,
		Validate: atLeast(0), Dynamic: true, Doc: "The least time a message stays uncompacted."},
	&Def{Name: "log.cleaner.max.compaction.lag.ms", Type: TypeLong, Default: maxInt64Text, HasDefault: true,
		Validate: atLeast(1), Dynamic: true, Doc: "The longest a message stays ineligible for compaction."},
	&Def{Name: "log.cleaner.min.cleanable.ratio", Type: TypeDouble, Default: "0.5", HasDefault: true,
		Validate: betweenFloat(0, 1, "0", "1"), Dynamic: true,
		Doc: "The dirty share of a log above which it is compacted."},
	&Def{Name: "log.segment.delete.delay.ms", Type: TypeLong, Default: "60000", HasDefault: true,
		Validate: atLeast(0), Dynamic: true, Doc: "How long to wait before deleting a file."},
	&Def{Name: "log.message.timestamp.type", Type: TypeString, Default: "CreateTime", HasDefault: true,
		Validate: oneOf("CreateTime", "LogAppendTime"), Dynamic: true,
		Doc: "Whether record timestamps are create time or log append time."},
	&Def{Name: "log.message.timestamp.before.max.ms", Type: TypeLong, Default: maxInt64Text, HasDefault: true,
		Validate: atLeast(0), Dynamic: true, Doc: "How far a timestamp may be behind the broker clock."},
	&Def{Name: "log.message.timestamp.after.max.ms", Type: TypeLong, Default: "3600000", HasDefault: true,
		Validate: atLeast(0), Dynamic: true, Doc: "How far a timestamp may be ahead of the broker clock."},
	&Def{Name: "log.preallocate", Type: TypeBoolean, Default: "false", HasDefault: true, DefaultOnly: true,
		Dynamic: true, Doc: "Whether segment files are preallocated."},
	&Def{Name: "log.local.retention.ms", Type: TypeLong, Default: "-2", HasDefault: true, Validate: atLeast(-2),
		DefaultOnly: true, Dynamic: true, Doc: "Local retention time under tiered storage."},
	&Def{Name: "log.local.retention.bytes", Type: TypeLong, Default: "-2", HasDefault: true, Validate: atLeast(-2),
		DefaultOnly: true, Dynamic: true, Doc: "Local retention size under tiered storage."},
	&Def{Name: "log.remote.copy.lag.ms", Type: TypeLong, Default: "0", HasDefault: true, Validate: atLeast(-1),
		DefaultOnly: true, Dynamic: true, Doc: "The time-based upload eligibility check of tiered storage."},
	&Def{Name: "log.remote.copy.lag.bytes", Type: TypeLong, Default: "-1", HasDefault: true, Validate: atLeast(-1),
		DefaultOnly: true, Dynamic: true, Doc: "The size-based upload eligibility check of tiered storage."},
	&Def{Name: "max.decompressed.message.bytes", Type: TypeInt, Default: "2147483639", HasDefault: true,
		Validate: between(1, 2147483639), DefaultOnly: true, Dynamic: true,
		Doc: "The largest decompressed size of a single record topics accept by default."},
	&Def{Name: "compression.type", Type: TypeString, Default: "producer", HasDefault: true,
		Validate: oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), DefaultOnly: true,
		Dynamic: true, Doc: "The final compression type of topics."},
	&Def{Name: "compression.gzip.level", Type: TypeInt, Default: "-1", HasDefault: true, Validate: gzipLevel,
		Dynamic: true, Doc: "The gzip level when compression.type is gzip."},
	&Def{Name: "compression.lz4.level", Type: TypeInt, Default: "9", HasDefault: true, Validate: between(1, 17),
		Dynamic: true, Doc: "The lz4 level when compression.type is lz4."},
	&Def{Name: "compression.zstd.level", Type: TypeInt, Default: "3", HasDefault: true,
		Validate: between(-131072, 22), Dynamic: true, Doc: "The zstd level when compression.type is zstd."},
	&Def{Name: "unclean.leader.election.enable", Type: TypeBoolean, Default: "false", HasDefault: true,
		Dynamic: true, Doc: "Whether a replica outside the ISR may become leader."},
	&Def{Name: "min.insync.replicas", Type: TypeInt, Default: "1", HasDefault: true, Validate: atLeast(1),
		Dynamic: true, Doc: "The least number of in-sync replicas an acks=all produce needs."},
	&Def{Name: "message.max.bytes", Type: TypeInt, Default: "1048588", HasDefault: true, Validate: atLeast(0),
		Dynamic: true, Doc: "The largest record batch size a topic accepts by default."},

	// Network.
	&Def{Name: "socket.request.max.bytes", Type: TypeInt, Default: "104857600", HasDefault: true,
		Validate: atLeast(1), Doc: "The largest request frame; a larger one closes the connection."},
	&Def{Name: "queued.max.request.bytes", Type: TypeLong, Default: "1073741824", HasDefault: true,
		Doc: "The bytes of requests being read, decoded and handled at once before no more are read; -1 is " +
			"unbounded (Kafka's default; Cascade bounds it by default). Cascade counts each request's worst-case " +
			"decoded size, not only its frame (broker/wire)."},

	// Coordinators.
	&Def{Name: "offsets.topic.num.partitions", Type: TypeInt, Default: "50", HasDefault: true,
		Validate: atLeast(1), Doc: "The number of partitions of __consumer_offsets."},
	&Def{Name: "offsets.topic.replication.factor", Type: TypeShort, Default: "1", HasDefault: true,
		Validate: atLeast(1), Doc: "The replication factor of __consumer_offsets (Kafka default 3; Cascade 1 on a single node, 3 on a multi-node cluster)."},
	&Def{Name: "transaction.state.log.num.partitions", Type: TypeInt, Default: "50", HasDefault: true,
		Validate: atLeast(1), Doc: "The number of partitions of __transaction_state."},
	&Def{Name: "transaction.state.log.replication.factor", Type: TypeShort, Default: "1", HasDefault: true,
		Validate: atLeast(1), Doc: "The replication factor of __transaction_state (Kafka default 3; Cascade 1 on a single node, 3 on a multi-node cluster)."},
	&Def{Name: "transaction.state.log.min.isr", Type: TypeInt, Default: "1", HasDefault: true,
		Validate: atLeast(1), Doc: "min.insync.replicas of __transaction_state (Kafka default 2; Cascade 1 on a single node, 2 on a multi-node cluster)."},
	&Def{Name: "transaction.max.timeout.ms", Type: TypeInt, Default: "900000", HasDefault: true,
		Validate: atLeast(1), Doc: "The largest transaction timeout a producer may ask for."},
	&Def{Name: "transactional.id.expiration.ms", Type: TypeInt, Default: "604800000", HasDefault: true,
		Validate: atLeast(1), Doc: "How long a transactional id without a transaction in progress is kept."},
	&Def{Name: "transaction.abort.timed.out.transaction.cleanup.interval.ms", Type: TypeInt, Default: "10000", HasDefault: true,
		Validate: atLeast(1), Doc: "How often timed-out transactions are aborted."},
	&Def{Name: "group.initial.rebalance.delay.ms", Type: TypeInt, Default: "3000", HasDefault: true,
		Doc: "How long the coordinator waits for more members before the first rebalance of a group."},
	&Def{Name: "group.min.session.timeout.ms", Type: TypeInt, Default: "6000", HasDefault: true,
		Doc: "The least session timeout a classic group member may ask for."},
	&Def{Name: "group.max.session.timeout.ms", Type: TypeInt, Default: "1800000", HasDefault: true,
		Doc: "The largest session timeout a classic group member may ask for."},
	&Def{Name: "group.max.size", Type: TypeInt, Default: "2147483647", HasDefault: true, Validate: atLeast(1),
		Doc: "The largest number of members of a classic group."},
	&Def{Name: "group.consumer.session.timeout.ms", Type: TypeInt, Default: "45000", HasDefault: true,
		Validate: atLeast(1), Doc: "The session timeout of consumer group (KIP-848) members."},
	&Def{Name: "group.consumer.heartbeat.interval.ms", Type: TypeInt, Default: "5000", HasDefault: true,
		Validate: atLeast(1), Doc: "The heartbeat interval given to consumer group (KIP-848) members."},
	&Def{Name: "group.consumer.max.size", Type: TypeInt, Default: "2147483647", HasDefault: true,
		Validate: atLeast(1), Doc: "The largest number of members of a consumer group (KIP-848)."},
	&Def{Name: "group.consumer.assignors", Type: TypeList, Default: "uniform,range", HasDefault: true,
		Validate: listOf(false, "uniform", "range", uniformAssignorClass, rangeAssignorClass),
		Doc:      "The server-side assignors of consumer groups (KIP-848), the first being the default."},
	&Def{Name: "group.consumer.migration.policy", Type: TypeString, Default: "bidirectional", HasDefault: true,
		// As Kafka: ConfigDef.CaseInsensitiveValidString of ConsumerGroupMigrationPolicy.
		Validate: func(v any) string {
			s, _ := v.(string)
			for _, a := range []string{"bidirectional", "upgrade", "downgrade", "disabled"} {
				if strings.EqualFold(s, a) {
					return ""
				}
			}
			return "String must be one of (case insensitive): BIDIRECTIONAL, UPGRADE, DOWNGRADE, DISABLED"
		},
		Doc: "Which online migrations between the classic and the consumer group protocols are allowed (KIP-848)."},
	&Def{Name: "offsets.retention.minutes", Type: TypeInt, Default: "10080", HasDefault: true, Validate: atLeast(1),
		Doc: "How long committed offsets of an empty group are kept."},
	&Def{Name: "offsets.retention.check.interval.ms", Type: TypeLong, Default: "600000", HasDefault: true,
		Validate: atLeast(1), Doc: "How often expired offsets are looked for."},
	&Def{Name: "offset.metadata.max.bytes", Type: TypeInt, Default: "4096", HasDefault: true,
		Doc: "The largest metadata string of a committed offset."},
}, append(append(append(serverDefs, clusterDefs...), authorizerDefs...), securityDefs...)...)...)

// The class names of Kafka's built-in consumer group assignors.
const (
	uniformAssignorClass = "org.apache.kafka.coordinator.group.assignor.UniformAssignor"
	rangeAssignorClass   = "org.apache.kafka.coordinator.group.assignor.RangeAssignor"
)

// clusterID accepts what Kafka's Uuid.fromString accepts for
// kafka-storage format --cluster-id: URL-safe base64 of 16 bytes.
func clusterID(v any) string {
	s, _ := v.(string)
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 16 {
		return "not a Kafka cluster id (22 characters of URL-safe base64 encoding 16 bytes)"
	}
	return ""
}

// BrokerDefs returns the broker config definitions Cascade honours.
func BrokerDefs() []*Def { return brokerDefs.All() }

// ErrUnsupportedKey is wrapped by the error for a broker config key that
// Cascade does not honour.
var ErrUnsupportedKey = errors.New("Cascade does not honour it")

// Listener is one parsed entry of listeners or advertised.listeners.
type Listener struct {
	Name             string // e.g. PLAINTEXT
	Host             string // empty: all interfaces
	Port             int
	SecurityProtocol string // from listener.security.protocol.map
}

// Addr returns host:port for net.Listen.
func (l Listener) Addr() string { return net.JoinHostPort(l.Host, strconv.Itoa(l.Port)) }

// Voter is one entry of controller.quorum.voters.
type Voter struct {
	ID   int32
	Host string
	Port int
}

// Broker is a parsed, validated broker configuration.
type Broker struct {
	NodeID                  int32
	ProcessRoles            []string
	ControllerQuorumVoters  []Voter
	ControllerListenerNames []string
	// Listeners are every listener, controller listeners included.
	Listeners []Listener
	// AdvertisedListeners are what Metadata publishes; they default to
	// the non-controller Listeners.
	AdvertisedListeners     []Listener
	InterBrokerListenerName string
	SecurityProtocolMap     map[string]string
	ClusterID               string // empty: generate when formatting
	// Cluster is the KRaft view of this configuration, for composing a node
	// of a cluster; the fields above are the single node's.
	Cluster Cluster

	LogDirs                  []string
	NumPartitions            int32
	DefaultReplicationFactor int16
	AutoCreateTopics         bool
	// AuthorizerEnabled is authorizer.class.name set to StandardAuthorizer;
	// SuperUsers and AllowEveryoneIfNoACLFound are its settings.
	AuthorizerEnabled         bool
	SuperUsers                []string
	AllowEveryoneIfNoACLFound bool
	DeleteTopicEnable         bool
	MessageMaxBytes           int32
	MinInsyncReplicas         int32
	RetentionCheckInterval    time.Duration
	// CleanerBackoff is log.cleaner.backoff.ms, or negative when
	// log.cleaner.enable=false.
	CleanerBackoff            time.Duration
	CleanerDedupeBufferSize   int64
	CleanerIOBufferLoadFactor float64
	SocketRequestMaxBytes     int32
	// QueuedMaxRequestBytes is queued.max.request.bytes; <= 0 is
	// unbounded.
	QueuedMaxRequestBytes int64
	// SocketSendBufferBytes and SocketReceiveBufferBytes are
	// socket.send.buffer.bytes and socket.receive.buffer.bytes; -1 is the
	// OS default.
	SocketSendBufferBytes    int32
	SocketReceiveBufferBytes int32
	// ConnectionsMaxIdle is connections.max.idle.ms; 0 never closes an
	// idle connection (a negative setting).
	ConnectionsMaxIdle time.Duration
	// MaxConnections, MaxConnectionsPerIP, MaxConnectionsPerIPOverrides
	// and MaxConnectionCreationRate are max.connections,
	// max.connections.per.ip, max.connections.per.ip.overrides (host or
	// address to count) and max.connection.creation.rate; 2147483647 is
	// no limit.
	MaxConnections               int32
	MaxConnectionsPerIP          int32
	MaxConnectionsPerIPOverrides map[string]int
	MaxConnectionCreationRate    int32
	// FetchMaxBytes is fetch.max.bytes.
	FetchMaxBytes int32
	// MaxRequestPartitionSizeLimit is max.request.partition.size.limit,
	// the cap on the partitions of a DescribeTopicPartitions response.
	MaxRequestPartitionSizeLimit int32
	// FetchSessionCacheSlots is max.incremental.fetch.session.cache.slots.
	FetchSessionCacheSlots int32
	// FetchSessionMaxBytes and FetchSessionCacheMaxBytes are
	// cascade.incremental.fetch.session.max.bytes and
	// cascade.incremental.fetch.session.cache.max.bytes.
	FetchSessionMaxBytes      int64
	FetchSessionCacheMaxBytes int64
	// ControllerQuorumBootstrapServers is
	// controller.quorum.bootstrap.servers (at most one host:port).
	ControllerQuorumBootstrapServers []string

	OffsetsTopicNumPartitions        int32
	OffsetsTopicReplicationFactor    int16
	TransactionStateLogNumPartitions int32
	TransactionStateLogRF            int16
	TransactionStateLogMinISR        int32
	TransactionMaxTimeout            time.Duration
	TransactionalIDExpiration        time.Duration
	TransactionAbortInterval         time.Duration
	GroupInitialRebalanceDelay       time.Duration
	GroupMinSessionTimeout           time.Duration
	GroupMaxSessionTimeout           time.Duration
	GroupMaxSize                     int32
	GroupConsumerSessionTimeout      time.Duration
	GroupConsumerHeartbeatInterval   time.Duration
	GroupConsumerMaxSize             int32
	GroupConsumerAssignors           []string
	GroupConsumerMigrationPolicy     string
	OffsetsRetention                 time.Duration
	OffsetsRetentionCheckInterval    time.Duration
	OffsetMetadataMaxBytes           int32

	// set holds every key given explicitly, file first then overrides.
	set map[string]string
	// listenerSet holds the per-listener security keys given
	// (listener.name.<listener>[.<mechanism>].<key>).
	listenerSet map[listenerOverride]string
	// dynamicDefaults are the cluster-wide dynamic broker configs
	// (DYNAMIC_DEFAULT_BROKER_CONFIG), see clusterDefaults.
	dynamicDefaults map[string]string
}

// clusterDefaults returns the cluster-wide dynamic broker configs a Kafka 4
// cluster holds from its first start: with eligible leader replicas
// (KIP-966) on, as in every new Kafka 4 cluster, the controller writes a
// cluster-level min.insync.replicas equal to its static value
// (ConfigurationControlManager.maybeGenerateElrSafetyRecords). Cascade
// changes none of them at run time.
func (b *Broker) clusterDefaults() map[string]string {
	return map[string]string{"min.insync.replicas": strconv.Itoa(int(b.MinInsyncReplicas))}
}

// BrokerListeners returns the listeners clients connect to: every listener
// not named in controller.listener.names.
func (b *Broker) BrokerListeners() []Listener {
	var out []Listener
	for _, l := range b.Listeners {
		if !containsFold(b.ControllerListenerNames, l.Name) {
			out = append(out, l)
		}
	}
	return out
}

// IsSet reports whether name was given explicitly, and its text.
func (b *Broker) IsSet(name string) (string, bool) {
	v, ok := b.set[name]
	return v, ok
}

// Default returns the configuration of `cascade` run with no file and no
// overrides.
func Default() *Broker {
	b, err := New(nil)
	if err != nil {
		panic("config: defaults do not validate: " + err.Error())
	}
	return b
}

// New validates explicitly set broker configs (name to text) and returns the
// configuration. A key Cascade does not honour is an error naming the key.
func New(props map[string]string) (*Broker, error) {
	return runnable(build(sortedProps(props), ""))
}

// sortedProps turns name-to-text configs into properties in name order.
func sortedProps(props map[string]string) []Property {
	list := make([]Property, 0, len(props))
	for k, v := range props {
		list = append(list, Property{Key: k, Value: v})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Key < list[j].Key })
	return list
}

// runnable passes on b, err unless b fails CheckRunnable.
func runnable(b *Broker, err error) (*Broker, error) {
	if err != nil {
		return nil, err
	}
	if err := b.CheckRunnable(); err != nil {
		return nil, err
	}
	return b, nil
}

// Load reads a server.properties file (path may be empty for none) and then
// applies each override "key=value" in order, as kafka-server-start.sh's
// --override does, and returns the validated configuration of a node
// Cascade runs (CheckRunnable). Errors name the file and line or the
// override that is at fault.
func Load(path string, overrides []string) (*Broker, error) {
	props, err := loadProps(path, overrides)
	if err != nil {
		return nil, err
	}
	return runnable(build(props, path))
}

// loadProps reads path (if any) and appends the overrides.
func loadProps(path string, overrides []string) ([]Property, error) {
	var props []Property
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		props, err = ParseProperties(f)
		f.Close()
		var se *SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("%s:%d: %s", path, se.Line, se.Msg)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	for _, o := range overrides {
		k, v, ok := strings.Cut(o, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--override %s: expected key=value", o)
		}
		props = append(props, Property{Key: strings.TrimSpace(k), Value: v, Line: -1})
	}
	return props, nil
}

// build validates props (later ones win) and fills a Broker.
func build(props []Property, path string) (*Broker, error) {
	where := func(p Property) string {
		switch {
		case p.Line < 0:
			return "--override " + p.Key + "=" + p.Value + ": "
		case p.Line > 0:
			return fmt.Sprintf("%s:%d: ", path, p.Line)
		}
		return ""
	}
	b := &Broker{set: map[string]string{}}
	for _, p := range props {
		if o, ok := parseListenerKey(p.Key); ok {
			if err := b.setListener(o, p.Key, p.Value); err != nil {
				return nil, fmt.Errorf("%s%w", where(p), err)
			}
			continue
		}
		def, ok := brokerDefs.Get(p.Key)
		if !ok {
			return nil, fmt.Errorf("%sunsupported configuration key %q: %w", where(p), p.Key, ErrUnsupportedKey)
		}
		v, err := def.Parse(p.Value)
		if err != nil {
			return nil, fmt.Errorf("%s%w", where(p), err)
		}
		if def.DefaultOnly {
			dv, _ := def.Parse(def.Default)
			if fmt.Sprint(v) != fmt.Sprint(dv) {
				return nil, fmt.Errorf("%s%w", where(p), &ValueError{Name: p.Key, Value: p.Value,
					Reason: "Cascade implements only the default value " + defaultText(def)})
			}
		}
		b.set[p.Key] = strings.TrimSpace(p.Value)
	}
	if err := b.fill(); err != nil {
		return nil, err
	}
	return b, nil
}

func defaultText(d *Def) string {
	if !d.HasDefault {
		return "(unset)"
	}
	return d.Default
}

// value returns the parsed value of a broker config: set, else default, else
// nil.
func (b *Broker) value(name string) any {
	def, ok := brokerDefs.Get(name)
	if !ok {
		panic("config: undefined broker config " + name)
	}
	text, set := b.set[name]
	if !set {
		if !def.HasDefault {
			return nil
		}
		text = def.Default
	}
	v, err := def.Parse(text)
	if err != nil {
		panic("config: " + err.Error()) // validated in build
	}
	return v
}

func (b *Broker) str(name string) string {
	if v, ok := b.value(name).(string); ok {
		return v
	}
	return ""
}

// fill sets the typed fields and checks rules across keys.
func (b *Broker) fill() error {
	if err := b.fillKRaft(); err != nil {
		return err
	}
	if err := b.fillSecurity(); err != nil {
		return err
	}
	b.ClusterID = b.str("cluster.id")

	if dirs, ok := b.value("log.dirs").([]string); ok && len(dirs) > 0 {
		b.LogDirs = dirs
	} else {
		b.LogDirs = []string{b.str("log.dir")}
	}
	seen := map[string]bool{}
	for _, d := range b.LogDirs {
		if d == "" || seen[d] {
			return &ValueError{Name: "log.dirs", Value: strings.Join(b.LogDirs, ","),
				Reason: "entries must be non-empty and distinct"}
		}
		seen[d] = true
	}
	b.NumPartitions = b.value("num.partitions").(int32)
	b.DefaultReplicationFactor = int16(b.value("default.replication.factor").(int32))
	b.AutoCreateTopics = b.value("auto.create.topics.enable").(bool)
	b.DeleteTopicEnable = b.value("delete.topic.enable").(bool)
	b.MessageMaxBytes = b.value("message.max.bytes").(int32)
	b.MinInsyncReplicas = b.value("min.insync.replicas").(int32)
	b.dynamicDefaults = b.clusterDefaults()
	b.RetentionCheckInterval = msDuration(b.value("log.retention.check.interval.ms").(int64))
	b.CleanerBackoff = msDuration(b.value("log.cleaner.backoff.ms").(int64))
	if !b.value("log.cleaner.enable").(bool) {
		b.CleanerBackoff = -1
	}
	b.CleanerDedupeBufferSize = b.value("log.cleaner.dedupe.buffer.size").(int64)
	b.CleanerIOBufferLoadFactor = b.value("log.cleaner.io.buffer.load.factor").(float64)
	b.SocketRequestMaxBytes = b.value("socket.request.max.bytes").(int32)
	b.QueuedMaxRequestBytes = b.value("queued.max.request.bytes").(int64)
	if q := b.QueuedMaxRequestBytes; q > 0 && q < int64(b.SocketRequestMaxBytes) {
		// As KafkaConfig's validateValues.
		return &ValueError{Name: "queued.max.request.bytes", Value: strconv.FormatInt(q, 10),
			Reason: "queued.max.request.bytes must be larger or equal to socket.request.max.bytes"}
	}
	b.OffsetsTopicNumPartitions = b.value("offsets.topic.num.partitions").(int32)
	b.OffsetsTopicReplicationFactor = b.value("offsets.topic.replication.factor").(int16)
	b.TransactionStateLogNumPartitions = b.value("transaction.state.log.num.partitions").(int32)
	b.TransactionStateLogRF = b.value("transaction.state.log.replication.factor").(int16)
	b.TransactionStateLogMinISR = b.value("transaction.state.log.min.isr").(int32)
	b.TransactionMaxTimeout = msDuration(int64(b.value("transaction.max.timeout.ms").(int32)))
	b.TransactionalIDExpiration = msDuration(int64(b.value("transactional.id.expiration.ms").(int32)))
	b.TransactionAbortInterval = msDuration(int64(b.value("transaction.abort.timed.out.transaction.cleanup.interval.ms").(int32)))
	b.GroupInitialRebalanceDelay = msDuration(int64(b.value("group.initial.rebalance.delay.ms").(int32)))
	b.GroupMinSessionTimeout = msDuration(int64(b.value("group.min.session.timeout.ms").(int32)))
	b.GroupMaxSessionTimeout = msDuration(int64(b.value("group.max.session.timeout.ms").(int32)))
	b.GroupMaxSize = b.value("group.max.size").(int32)
	b.GroupConsumerSessionTimeout = msDuration(int64(b.value("group.consumer.session.timeout.ms").(int32)))
	b.GroupConsumerHeartbeatInterval = msDuration(int64(b.value("group.consumer.heartbeat.interval.ms").(int32)))
	b.GroupConsumerMaxSize = b.value("group.consumer.max.size").(int32)
	for _, a := range b.value("group.consumer.assignors").([]string) {
		// Kafka accepts an assignor's class name or its short name.
		switch a {
		case uniformAssignorClass:
			a = "uniform"
		case rangeAssignorClass:
			a = "range"
		}
		b.GroupConsumerAssignors = append(b.GroupConsumerAssignors, a)
	}
	b.GroupConsumerMigrationPolicy = strings.ToLower(b.value("group.consumer.migration.policy").(string))
	b.OffsetsRetention = msDuration(int64(b.value("offsets.retention.minutes").(int32)) * minutesToMs)
	b.OffsetsRetentionCheckInterval = msDuration(b.value("offsets.retention.check.interval.ms").(int64))
	b.OffsetMetadataMaxBytes = b.value("offset.metadata.max.bytes").(int32)
	if err := b.fillServer(); err != nil {
		return err
	}
	b.fillAuthorizer()
	if err := b.fillCluster(); err != nil {
		return err
	}
	// The topic defaults must agree with each other, as Kafka's
	// LogConfig.validateBrokerLogConfigValues checks.
	if _, err := ResolveTopic(b, nil); err != nil {
		return err
	}
	return nil
}

// parseListeners parses "NAME://host:port,..." as Kafka's
// SocketServerConfigs.listenerListToEndPoints: names are unique, each has a
// security protocol of PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
func (b *Broker) parseListeners(key, text string) ([]Listener, error) {
	var out []Listener
	for _, entry := range splitList(text) {
		name, rest, ok := strings.Cut(entry, "://")
		if !ok || name == "" {
			return nil, &ValueError{Name: key, Value: text, Reason: "Unable to parse " + entry + " to a broker endpoint"}
		}
		host, portText, err := net.SplitHostPort(rest)
		port, perr := strconv.Atoi(portText)
		if err != nil || perr != nil || port < 0 || port > 65535 {
			return nil, &ValueError{Name: key, Value: text, Reason: "Unable to parse " + entry + " to a broker endpoint"}
		}
		name = strings.ToUpper(name)
		proto, ok := b.SecurityProtocolMap[name]
		if !ok {
			return nil, &ValueError{Name: key, Value: text,
				Reason: "No security protocol defined for listener " + name}
		}
		switch proto {
		case ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL:
		default:
			// As SecurityProtocol.forName.
			return nil, &ValueError{Name: key, Value: text,
				Reason: "listener " + name + ": No enum constant for security protocol " + proto}
		}
		if hasListener(out, name) {
			return nil, &ValueError{Name: key, Value: text, Reason: "Each listener must have a different name"}
		}
		out = append(out, Listener{Name: name, Host: host, Port: port, SecurityProtocol: proto})
	}
	return out, nil
}

// parseVoter parses one "id@host:port" entry of controller.quorum.voters.
func parseVoter(s string) (Voter, error) {
	idText, addr, ok := strings.Cut(s, "@")
	id, err := strconv.ParseInt(idText, 10, 32)
	host, portText, herr := net.SplitHostPort(addr)
	port, perr := strconv.Atoi(portText)
	if !ok || err != nil || herr != nil || perr != nil || id < 0 || port <= 0 || port > 65535 {
		return Voter{}, &ValueError{Name: "controller.quorum.voters", Value: s,
			Reason: "Expected entries in the form {id}@{host}:{port}"}
	}
	return Voter{ID: int32(id), Host: host, Port: port}, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func hasListener(ls []Listener, name string) bool {
	for _, l := range ls {
		if strings.EqualFold(l.Name, name) {
			return true
		}
	}
	return false
}

// DescribeBroker describes every broker config Cascade honours, in name
// order, as Kafka's ConfigHelper.createBrokerConfigEntry for this node: the
// value is the config's own (set, else its default, else null), the
// synonyms are those of brokerSynonymEntries and the source is the first
// synonym's. Every entry is read-only because Cascade changes no broker
// config at run time.
func (b *Broker) DescribeBroker() []Entry {
	defs := append([]*Def(nil), brokerDefs.list...)
	sort.Slice(defs, func(i, j int) bool { return defs[i].Name < defs[j].Name })
	out := make([]Entry, 0, len(defs))
	for _, def := range defs {
		e := Entry{Name: def.Name, Source: SourceDefaultConfig, ReadOnly: true,
			Sensitive: def.Sensitive, Type: def.Type, Doc: def.Doc}
		if v, ok := b.set[def.Name]; ok {
			e.Value = ptr(v)
		} else if def.HasDefault {
			e.Value = ptr(def.Default)
		}
		e.Synonyms = b.brokerSynonymEntries(def.Name)
		if len(e.Synonyms) > 0 {
			e.Source = e.Synonyms[0].Source
		}
		out = append(out, e)
	}
	return out
}

// DescribeClusterDefaults describes the cluster-wide dynamic broker configs
// (the BROKER resource with the empty name), in name order, as Kafka's
// ConfigHelper.createBrokerConfigEntry with perBrokerConfig false: only
// synonyms from DYNAMIC_DEFAULT_BROKER_CONFIG are listed, and an entry is
// read-only unless Kafka can change it dynamically.
func (b *Broker) DescribeClusterDefaults() []Entry {
	names := make([]string, 0, len(b.dynamicDefaults))
	for n := range b.dynamicDefaults {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]Entry, 0, len(names))
	for _, n := range names {
		def, ok := brokerDefs.Get(n)
		if !ok {
			continue
		}
		e := Entry{Name: n, Value: ptr(b.dynamicDefaults[n]), Source: SourceDefaultConfig, ReadOnly: !def.Dynamic,
			Sensitive: def.Sensitive, Type: def.Type, Doc: def.Doc}
		for _, syn := range b.brokerSynonymEntries(n) {
			if syn.Source == SourceDynamicDefaultBrokerConfig {
				e.Synonyms = append(e.Synonyms, syn)
			}
		}
		if len(e.Synonyms) > 0 {
			e.Source = e.Synonyms[0].Source
		}
		out = append(out, e)
	}
	return out
}

// BrokerDef returns the definition of one broker config.
func BrokerDef(name string) (*Def, bool) { return brokerDefs.Get(name) }

package config

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// DefaultSocketBufferBytes is Cascade's default for socket.send.buffer.bytes
// and socket.receive.buffer.bytes: -1, the operating system's default, which
// on Linux keeps TCP buffer autotuning on. Kafka's default is 102400, which
// fixes both buffers and turns autotuning off; on loopback that measured
// about 45% less produce throughput (a 100 KiB receive window) than
// autotuning, and no gain for fetch. Setting the key to 102400 gives Kafka's
// behaviour.
const DefaultSocketBufferBytes = -1

// noThreadPool is the NoEffect reason of Kafka's thread-pool sizes.
const noThreadPool = "each connection is served by its own goroutine and other work by goroutines " +
	"started as needed; Cascade has no fixed thread pool to size"

// noShareGroups is the NoEffect reason of the share coordinator's keys.
const noShareGroups = "share groups (KIP-932) are not served by Cascade, so the share-group state topic is never created"

// serverDefs are the network, thread-pool, fetch-session, KRaft and share
// coordinator configs of Kafka's stock config/server.properties and their
// neighbours (SocketServerConfigs, ServerConfigs, QuorumConfig,
// ShareCoordinatorConfig), with Kafka's types, validators and defaults.
var serverDefs = []*Def{
	// Network (SocketServerConfigs). Kafka passes -1 through to the OS
	// default and hands any other value to Socket.setSendBufferSize,
	// which refuses 0 and below; Cascade refuses those at start.
	{Name: "socket.send.buffer.bytes", Type: TypeInt, Default: strconv.Itoa(DefaultSocketBufferBytes), HasDefault: true,
		Validate: bufferSize, Doc: "SO_SNDBUF of accepted connections; -1 uses the OS default " +
			"(Kafka's default is 102400; Cascade's is -1, keeping TCP autotuning)."},
	{Name: "socket.receive.buffer.bytes", Type: TypeInt, Default: strconv.Itoa(DefaultSocketBufferBytes), HasDefault: true,
		Validate: bufferSize, Doc: "SO_RCVBUF of the listening socket and so of accepted connections; -1 uses the OS " +
			"default (Kafka's default is 102400; Cascade's is -1, keeping TCP autotuning)."},
	{Name: "connections.max.idle.ms", Type: TypeLong, Default: "600000", HasDefault: true, Validate: idleMs,
		Doc: "A connection with no request read and no response written for this long is closed; -1 never closes one."},
	// Connection quotas (Kafka's ConnectionQuotas), dynamic in Kafka.
	{Name: "max.connections", Type: TypeInt, Default: "2147483647", HasDefault: true, Validate: atLeast(0), Dynamic: true,
		Doc: "The most open client connections; when reached, the listener stops accepting until one closes."},
	{Name: "max.connections.per.ip", Type: TypeInt, Default: "2147483647", HasDefault: true, Validate: atLeast(0),
		Dynamic: true, Doc: "The most connections from one address; a new connection beyond it is closed at once."},
	{Name: "max.connections.per.ip.overrides", Type: TypeString, Default: "", HasDefault: true,
		Validate: perIPOverrides, Dynamic: true,
		Doc: "Per-host or per-address limits replacing max.connections.per.ip, as host:count,host:count."},
	{Name: "max.connection.creation.rate", Type: TypeInt, Default: "2147483647", HasDefault: true, Validate: atLeast(0),
		Dynamic: true, Doc: "The most new connections a second; above it the listener waits before taking the next " +
			"(a throttle of at most 1 s, from an 11-second sampled rate, as Kafka's quota window)."},

	// Fetch (ServerConfigs).
	{Name: "fetch.max.bytes", Type: TypeInt, Default: "57671680", HasDefault: true, Validate: atLeast(1024),
		Doc: "The most record bytes one Fetch response carries, whatever the request's max_bytes."},
	{Name: "max.request.partition.size.limit", Type: TypeInt, Default: "2000", HasDefault: true, Validate: atLeast(1),
		Doc: "The most partitions one DescribeTopicPartitions response lists, whatever the request's limit."},
	{Name: "max.incremental.fetch.session.cache.slots", Type: TypeInt, Default: "1000", HasDefault: true,
		Validate: atLeast(0), Doc: "The most incremental fetch sessions (KIP-227) kept at once; 0 disables them."},
	{Name: "cascade.incremental.fetch.session.max.bytes", Type: TypeLong, Default: "8388608", HasDefault: true,
		Validate: atLeast(1024), Doc: "Cascade-specific: the most memory one incremental fetch session may hold, " +
			"about 260 bytes per partition; a full fetch whose session would exceed it is served without a session."},
	{Name: "cascade.incremental.fetch.session.cache.max.bytes", Type: TypeLong, Default: "33554432", HasDefault: true,
		Validate: atLeast(1024), Doc: "Cascade-specific: the most memory all incremental fetch sessions hold together; " +
			"sessions are evicted as Kafka's FetchSessionCache evicts them to stay under it."},

	// Thread pools: validated as Kafka does, without effect.
	{Name: "num.network.threads", Type: TypeInt, Default: "3", HasDefault: true, Validate: atLeast(1), Dynamic: true,
		NoEffect: noThreadPool, Doc: "Kafka's network thread count; accepted without effect."},
	{Name: "num.io.threads", Type: TypeInt, Default: "8", HasDefault: true, Validate: atLeast(1), Dynamic: true,
		NoEffect: noThreadPool, Doc: "Kafka's request handler thread count; accepted without effect."},
	{Name: "background.threads", Type: TypeInt, Default: "10", HasDefault: true, Validate: atLeast(1), Dynamic: true,
		NoEffect: noThreadPool, Doc: "Kafka's background thread count; accepted without effect."},
	{Name: "num.recovery.threads.per.data.dir", Type: TypeInt, Default: "2", HasDefault: true, Validate: atLeast(1),
		Dynamic: true, NoEffect: noThreadPool, Doc: "Kafka's log recovery thread count per log dir; accepted without effect."},

	// KRaft (QuorumConfig, KIP-853).
	{Name: "controller.quorum.bootstrap.servers", Type: TypeList, Default: "", HasDefault: true,
		Doc: "The controller endpoints (host:port) a node bootstraps the dynamic quorum from; Cascade's single node " +
			"accepts at most one, itself."},

	// Share coordinator (ShareCoordinatorConfig): single-node values only.
	{Name: "share.coordinator.state.topic.replication.factor", Type: TypeShort, Default: "1", HasDefault: true,
		Validate: atLeast(1), NoEffect: noShareGroups,
		Doc: "The replication factor of __share_group_state (Kafka default 3; Cascade accepts only 1)."},
	{Name: "share.coordinator.state.topic.min.isr", Type: TypeShort, Default: "1", HasDefault: true,
		Validate: atLeast(1), NoEffect: noShareGroups,
		Doc: "min.insync.replicas of __share_group_state (Kafka default 2; Cascade accepts only 1)."},
}

// parsePerIPOverrides parses max.connections.per.ip.overrides as Kafka's
// KafkaConfig.maxConnectionsPerIpOverrides (Csv.parseCsvMap): entries
// separated by commas, each a host or address, a colon (the last one, so an
// IPv6 address may be given), and a count of at least 0.
func parsePerIPOverrides(s string) (map[string]int, error) {
	out := map[string]int{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		i := strings.LastIndex(entry, ":")
		if i <= 0 {
			return nil, fmt.Errorf("entry %q is not host:count", entry)
		}
		host := strings.Trim(strings.TrimSpace(entry[:i]), "[]")
		n, err := strconv.Atoi(strings.TrimSpace(entry[i+1:]))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("entry %q: count must be an integer of at least 0", entry)
		}
		out[host] = n
	}
	return out, nil
}

func perIPOverrides(v any) string {
	if s, ok := v.(string); ok {
		if _, err := parsePerIPOverrides(s); err != nil {
			return err.Error()
		}
	}
	return ""
}

// bufferSize accepts -1 (the OS default) or a positive size.
func bufferSize(v any) string {
	if n, ok := asInt64(v); ok && n < 1 && n != -1 {
		return "Value must be -1 (the OS default) or at least 1"
	}
	return ""
}

// idleMs accepts a negative value (never close, as Kafka's Selector without
// an IdleExpiryManager) or a positive one. Kafka would expire every
// connection at once with 0; Cascade refuses it.
func idleMs(v any) string {
	if n, ok := asInt64(v); ok && n == 0 {
		return "Value must be positive, or -1 to never close idle connections"
	}
	return ""
}

// fillServer sets the fields of serverDefs; fillKRaft reads the KRaft ones.
func (b *Broker) fillServer() error {
	b.SocketSendBufferBytes = b.value("socket.send.buffer.bytes").(int32)
	b.SocketReceiveBufferBytes = b.value("socket.receive.buffer.bytes").(int32)
	if ms := b.value("connections.max.idle.ms").(int64); ms > 0 {
		b.ConnectionsMaxIdle = msDuration(ms)
	}
	b.MaxConnections = b.value("max.connections").(int32)
	b.MaxConnectionsPerIP = b.value("max.connections.per.ip").(int32)
	b.MaxConnectionsPerIPOverrides, _ = parsePerIPOverrides(b.str("max.connections.per.ip.overrides")) // validated
	b.MaxConnectionCreationRate = b.value("max.connection.creation.rate").(int32)
	if b.MaxConnectionsPerIP == 0 && len(b.MaxConnectionsPerIPOverrides) == 0 {
		// As KafkaConfig.validateValues.
		return errors.New("max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set")
	}
	b.FetchMaxBytes = b.value("fetch.max.bytes").(int32)
	b.MaxRequestPartitionSizeLimit = b.value("max.request.partition.size.limit").(int32)
	b.FetchSessionCacheSlots = b.value("max.incremental.fetch.session.cache.slots").(int32)
	b.FetchSessionMaxBytes = b.value("cascade.incremental.fetch.session.max.bytes").(int64)
	b.FetchSessionCacheMaxBytes = b.value("cascade.incremental.fetch.session.cache.max.bytes").(int64)

	return nil
}

// Notice is a config that is set but changes nothing in Cascade, with why.
type Notice struct {
	Key, Value, Reason string
}

// NoEffect lists the configs given explicitly whose definitions say they
// have no effect in Cascade, in name order, for the broker to log at start.
func (b *Broker) NoEffect() []Notice {
	var out []Notice
	for k, v := range b.set {
		if def, ok := brokerDefs.Get(k); ok && def.NoEffect != "" {
			out = append(out, Notice{Key: k, Value: v, Reason: def.NoEffect})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// ControllerListeners returns the listeners named in
// controller.listener.names. A node of a multi-node cluster binds them for
// the quorum and the broker-to-controller APIs; the single node binds none,
// since it runs its metadata log in-process and serves no controller RPCs.
func (b *Broker) ControllerListeners() []Listener {
	var out []Listener
	for _, l := range b.Listeners {
		if containsFold(b.ControllerListenerNames, l.Name) {
			out = append(out, l)
		}
	}
	return out
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

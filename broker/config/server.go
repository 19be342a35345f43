package config

import (
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

	// Fetch (ServerConfigs).
	{Name: "fetch.max.bytes", Type: TypeInt, Default: "57671680", HasDefault: true, Validate: atLeast(1024),
		Doc: "The most record bytes one Fetch response carries, whatever the request's max_bytes."},
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
	b.FetchMaxBytes = b.value("fetch.max.bytes").(int32)
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
// controller.listener.names. Cascade binds none of them: its single node
// runs the metadata quorum in-process and serves no controller RPCs.
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

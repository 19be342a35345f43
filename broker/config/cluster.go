package config

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// noPeers is the NoEffect reason of the keys only a multi-node cluster reads.
const noPeers = "read by a node of a multi-node cluster; Cascade's single node has no peer to heartbeat to, " +
	"no quorum to elect in and no follower replica, so it has no effect yet"

// rackAwareSelectorClass is Kafka's built-in replica selector (KIP-392), the
// only replica.selector.class Cascade accepts: it cannot load Java classes.
const rackAwareSelectorClass = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

// metadataLogSegmentMinBytes is Kafka's metadata.log.segment.min.bytes
// default (an internal config, KRaftConfigs): KafkaMetadataLog refuses a
// smaller metadata.log.segment.bytes.
const metadataLogSegmentMinBytes = 8 * 1024 * 1024

// clusterDefs are the keys a node of a KRaft cluster reads beyond those of
// brokerDefs and serverDefs, with the names, types and defaults of Kafka's
// KRaftConfigs, QuorumConfig, ReplicationConfigs and ServerConfigs. Kafka
// defines the timing keys without a validator; Cascade refuses values no
// cluster could run with (a zero or negative timeout).
var clusterDefs = []*Def{
	// Roles and registration (KRaftConfigs, ServerConfigs).
	{Name: "broker.rack", Type: TypeString, NoEffect: noPeers,
		Doc: "The rack of this broker, for rack-aware replica placement and fetch from follower (KIP-392)."},
	{Name: "broker.heartbeat.interval.ms", Type: TypeInt, Default: "2000", HasDefault: true, Validate: atLeast(1),
		NoEffect: noPeers, Doc: "How often a broker heartbeats to the active controller; below broker.session.timeout.ms."},
	{Name: "broker.session.timeout.ms", Type: TypeInt, Default: "9000", HasDefault: true, Validate: atLeast(1),
		NoEffect: noPeers, Doc: "How long a broker's lease lasts without a heartbeat before the controller fences it."},
	{Name: "initial.broker.registration.timeout.ms", Type: TypeInt, Default: "60000", HasDefault: true,
		Validate: atLeast(1), NoEffect: noPeers,
		Doc: "How long a starting broker waits to register with the controller quorum before it exits."},
	{Name: "controlled.shutdown.enable", Type: TypeBoolean, Default: "true", HasDefault: true, NoEffect: noPeers,
		Doc: "Whether a broker that stops cleanly first asks the controller to move its leaderships away and fence it."},

	// Raft quorum (QuorumConfig).
	{Name: "controller.quorum.election.timeout.ms", Type: TypeInt, Default: "1000", HasDefault: true,
		Validate: atLeast(1), NoEffect: noPeers,
		Doc: "How long a voter waits without a leader before it starts an election."},
	{Name: "controller.quorum.fetch.timeout.ms", Type: TypeInt, Default: "2000", HasDefault: true,
		Validate: atLeast(1), NoEffect: noPeers,
		Doc: "How long a follower waits without a successful fetch from the leader before it becomes a candidate."},
	{Name: "controller.quorum.election.backoff.max.ms", Type: TypeInt, Default: "1000", HasDefault: true,
		Validate: atLeast(1), NoEffect: noPeers,
		Doc: "The largest backoff of the exponential backoff between failed elections."},
	{Name: "controller.quorum.request.timeout.ms", Type: TypeInt, Default: "2000", HasDefault: true,
		Validate: atLeast(1), NoEffect: noPeers, Doc: "How long a quorum request waits for its response."},
	{Name: "controller.quorum.retry.backoff.ms", Type: TypeInt, Default: "20", HasDefault: true,
		Validate: atLeast(0), NoEffect: noPeers, Doc: "How long to wait before retrying a failed quorum request."},
	{Name: "controller.quorum.append.linger.ms", Type: TypeInt, Default: "25", HasDefault: true,
		Validate: atLeast(0), NoEffect: noPeers,
		Doc: "How long the quorum leader lets writes accumulate before it flushes them to its log."},

	// Inter-broker traffic (ReplicationConfigs).
	{Name: "security.inter.broker.protocol", Type: TypeString, Default: "PLAINTEXT", HasDefault: true,
		Validate: oneOf("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
		Doc: "The security protocol between brokers when inter.broker.listener.name is unset; its listener is the " +
			"one of the same name. Only one of the two may be set."},
	{Name: "replica.lag.time.max.ms", Type: TypeLong, Default: "30000", HasDefault: true, Validate: atLeast(1),
		NoEffect: noPeers, Doc: "A follower that has not caught up with the leader for this long leaves the ISR."},
	{Name: "replica.socket.timeout.ms", Type: TypeInt, Default: "30000", HasDefault: true, Validate: atLeast(1),
		NoEffect: noPeers, Doc: "The socket timeout of follower fetches; at least replica.fetch.wait.max.ms."},
	{Name: "replica.fetch.max.bytes", Type: TypeInt, Default: "1048576", HasDefault: true, Validate: atLeast(0),
		NoEffect: noPeers, Doc: "The bytes a follower fetches per partition (a larger first batch still comes back)."},
	{Name: "replica.fetch.wait.max.ms", Type: TypeInt, Default: "500", HasDefault: true, Validate: atLeast(0),
		NoEffect: noPeers, Doc: "How long a follower fetch waits for replica.fetch.min.bytes."},
	{Name: "replica.fetch.min.bytes", Type: TypeInt, Default: "1", HasDefault: true, Validate: atLeast(1),
		NoEffect: noPeers, Doc: "The least bytes a follower fetch waits for."},
	{Name: "replica.fetch.backoff.ms", Type: TypeInt, Default: "1000", HasDefault: true, Validate: atLeast(0),
		NoEffect: noPeers, Doc: "How long a follower waits after a fetch error."},
	{Name: "replica.fetch.response.max.bytes", Type: TypeInt, Default: "10485760", HasDefault: true,
		Validate: atLeast(0), NoEffect: noPeers, Doc: "The bytes one follower fetch response carries at most."},
	{Name: "num.replica.fetchers", Type: TypeInt, Default: "1", HasDefault: true, Validate: atLeast(1),
		NoEffect: noPeers, Doc: "The fetchers per source broker that replicate its partitions."},
	{Name: "replica.selector.class", Type: TypeString, Validate: oneOf(rackAwareSelectorClass), NoEffect: noPeers,
		Doc: "The replica a consumer with a rack fetches from (KIP-392); unset: the leader. Only Kafka's " +
			"RackAwareReplicaSelector is accepted."},
	{Name: "auto.leader.rebalance.enable", Type: TypeBoolean, Default: "true", HasDefault: true, NoEffect: noPeers,
		Doc: "Whether the controller moves leadership back to preferred replicas."},
	{Name: "leader.imbalance.check.interval.seconds", Type: TypeLong, Default: "300", HasDefault: true,
		Validate: atLeast(1), NoEffect: noPeers, Doc: "How often the controller looks for preferred-leader imbalance."},
	{Name: "unclean.leader.election.interval.ms", Type: TypeLong, Default: "300000", HasDefault: true,
		Validate: atLeast(1), NoEffect: noPeers,
		Doc: "How often the controller elects leaders uncleanly where unclean.leader.election.enable allows it."},

	// The metadata log (KRaftConfigs). The single node keeps its metadata
	// log its own way, so setting one of these is refused at start.
	{Name: "metadata.log.dir", Type: TypeString,
		Doc: "The directory of the __cluster_metadata log; unset: the first of log.dirs."},
	{Name: "metadata.log.segment.bytes", Type: TypeInt, Default: "1073741824", HasDefault: true,
		Validate: metadataSegmentBytes, Doc: "The largest size of a metadata log segment."},
	{Name: "metadata.log.segment.ms", Type: TypeLong, Default: "604800000", HasDefault: true,
		Doc: "The time after which a metadata log segment is rolled."},
	{Name: "metadata.max.retention.bytes", Type: TypeLong, Default: "104857600", HasDefault: true,
		Doc: "The combined size of metadata log and snapshots above which old ones are deleted (a soft limit)."},
	{Name: "metadata.max.retention.ms", Type: TypeLong, Default: "604800000", HasDefault: true,
		Doc: "How long a metadata log segment or snapshot is kept (a soft limit)."},
	{Name: "metadata.log.max.record.bytes.between.snapshots", Type: TypeLong, Default: "20971520", HasDefault: true,
		Validate: atLeast(1), Doc: "The metadata log bytes after the latest snapshot that trigger a new snapshot."},
	{Name: "metadata.log.max.snapshot.interval.ms", Type: TypeLong, Default: "3600000", HasDefault: true,
		Validate: atLeast(0), Doc: "The longest time committed metadata waits for a snapshot; 0 disables time-based snapshots."},
	{Name: "metadata.max.idle.interval.ms", Type: TypeInt, Default: "500", HasDefault: true, Validate: atLeast(0),
		NoEffect: noPeers, Doc: "How often the active controller appends a no-op record; 0 appends none."},
}

// metadataLogKeys are the clusterDefs keys that configure the metadata log.
var metadataLogKeys = []string{"metadata.log.dir", "metadata.log.segment.bytes", "metadata.log.segment.ms",
	"metadata.max.retention.bytes", "metadata.max.retention.ms", "metadata.log.max.record.bytes.between.snapshots",
	"metadata.log.max.snapshot.interval.ms"}

// metadataSegmentBytes refuses what KafkaMetadataLog refuses.
func metadataSegmentBytes(v any) string {
	if n, ok := asInt64(v); ok && n < metadataLogSegmentMinBytes {
		return "Cannot set metadata.log.segment.bytes below " + strconv.Itoa(metadataLogSegmentMinBytes)
	}
	return ""
}

// Roles is process.roles.
type Roles struct {
	Broker, Controller bool
}

// Combined reports whether the node is both broker and controller.
func (r Roles) Combined() bool { return r.Broker && r.Controller }

// String returns the roles as process.roles spells them.
func (r Roles) String() string {
	switch {
	case r.Combined():
		return "broker,controller"
	case r.Broker:
		return "broker"
	case r.Controller:
		return "controller"
	}
	return ""
}

// QuorumTimings are the controller.quorum.* timings of Kafka's QuorumConfig.
type QuorumTimings struct {
	ElectionTimeout    time.Duration // controller.quorum.election.timeout.ms
	FetchTimeout       time.Duration // controller.quorum.fetch.timeout.ms
	ElectionBackoffMax time.Duration // controller.quorum.election.backoff.max.ms
	RequestTimeout     time.Duration // controller.quorum.request.timeout.ms
	RetryBackoff       time.Duration // controller.quorum.retry.backoff.ms
	AppendLinger       time.Duration // controller.quorum.append.linger.ms
}

// Replication is how partitions are replicated, as ReplicationConfigs.
type Replication struct {
	DefaultReplicationFactor      int16 // default.replication.factor
	MinInsyncReplicas             int32 // min.insync.replicas
	OffsetsTopicReplicationFactor int16 // offsets.topic.replication.factor
	TransactionStateLogRF         int16 // transaction.state.log.replication.factor
	TransactionStateLogMinISR     int32 // transaction.state.log.min.isr
	LagTimeMax                    time.Duration
	SocketTimeout                 time.Duration // replica.socket.timeout.ms
	FetchMaxBytes                 int32
	FetchWaitMax                  time.Duration
	FetchMinBytes                 int32
	FetchBackoff                  time.Duration
	FetchResponseMaxBytes         int32
	NumFetchers                   int32
	UncleanLeaderElection         bool          // unclean.leader.election.enable
	UncleanLeaderElectionInterval time.Duration // unclean.leader.election.interval.ms
	AutoLeaderRebalance           bool          // auto.leader.rebalance.enable
	LeaderImbalanceCheckInterval  time.Duration // leader.imbalance.check.interval.seconds
	// SelectorClass is replica.selector.class; empty: consumers fetch
	// from the leader.
	SelectorClass string
}

// MetadataLog configures the __cluster_metadata log (KRaftConfigs).
type MetadataLog struct {
	// Dir is metadata.log.dir, else the first of log.dirs.
	Dir                       string
	SegmentBytes              int32
	SegmentMs                 time.Duration
	MaxRetentionBytes         int64
	MaxRetention              time.Duration
	SnapshotMaxNewRecordBytes int64
	SnapshotMaxInterval       time.Duration
	MaxIdleInterval           time.Duration
}

// Cluster is the configuration a node of a KRaft cluster is composed from,
// read as Kafka 4.x's KafkaConfig reads it: every field is parsed and
// validated, so the node needs no reparsing.
type Cluster struct {
	Roles  Roles
	NodeID int32
	// Voters is controller.quorum.voters in order (a static quorum). Empty
	// with BootstrapServers set is a dynamic quorum (KIP-853); empty with
	// neither is Cascade's standalone node, its own only voter.
	Voters []Voter
	// BootstrapServers is controller.quorum.bootstrap.servers (host:port).
	BootstrapServers []string
	// ControllerListenerNames is controller.listener.names; a broker
	// reaches the controllers on the first.
	ControllerListenerNames []string
	// ControllerSecurityProtocol is the security protocol of the first
	// controller listener name.
	ControllerSecurityProtocol string
	// ControllerListeners are the controller listeners this node binds:
	// none on a broker-only node.
	ControllerListeners []Listener
	// BrokerListeners are the client and inter-broker listeners this node
	// binds: none on a controller-only node.
	BrokerListeners []Listener
	// Advertised is what this node publishes per listener name: broker
	// listeners to clients and in its registration, controller listeners
	// to the quorum (KIP-853). Each is the advertised.listeners entry,
	// else the listener itself, as Kafka's effectiveAdvertised*Listeners.
	// An empty Host is this machine's canonical host name, as Kafka
	// advertises a listener without a host.
	Advertised map[string]Listener
	// InterBrokerListener is inter.broker.listener.name, else the listener
	// named as security.inter.broker.protocol; empty on a controller-only
	// node.
	InterBrokerListener         string
	InterBrokerSecurityProtocol string
	Rack                        string // broker.rack; empty: none
	HeartbeatInterval           time.Duration
	SessionTimeout              time.Duration
	InitialRegistrationTimeout  time.Duration
	ControlledShutdown          bool // controlled.shutdown.enable
	Quorum                      QuorumTimings
	Replication                 Replication
	MetadataLog                 MetadataLog
}

// Standalone reports whether the configuration describes one combined node
// that is its own only controller: the single node, which runs its metadata
// quorum in-process.
func (c *Cluster) Standalone() bool {
	return c.Roles.Combined() && len(c.BootstrapServers) <= 1 &&
		(len(c.Voters) == 0 || len(c.Voters) == 1 && c.Voters[0].ID == c.NodeID)
}

// Addr returns the voter's host:port, to dial on the controller listener.
func (v Voter) Addr() string { return net.JoinHostPort(v.Host, strconv.Itoa(v.Port)) }

// AdvertisedBrokers returns the advertised broker listeners in the order of
// listeners.
func (c *Cluster) AdvertisedBrokers() []Listener {
	var out []Listener
	for _, l := range c.BrokerListeners {
		if a, ok := c.Advertised[l.Name]; ok {
			out = append(out, a)
		}
	}
	return out
}

// ErrNotRunnable is wrapped by the error of (*Broker).CheckRunnable: the
// configuration is a valid Kafka KRaft configuration that Cascade's node does
// not run yet.
var ErrNotRunnable = errors.New("Cascade does not run this configuration yet")

// notRunnable is an error that reads as msg and matches ErrNotRunnable.
type notRunnable struct{ msg string }

func (e *notRunnable) Error() string        { return e.msg }
func (e *notRunnable) Is(target error) bool { return target == ErrNotRunnable }

func notRunnablef(format string, args ...any) error {
	return &notRunnable{msg: fmt.Sprintf(format, args...)}
}

// CheckRunnable refuses what Cascade's node cannot run yet although Kafka
// would: a dynamic quorum (controller.quorum.bootstrap.servers of more
// than one controller, or a node of a multi-node cluster without
// controller.quorum.voters), replication factors above 1 on a single node
// and, on a cluster, for the share coordinator's state topic, and metadata
// log settings other than metadata.log.max.record.bytes.between.snapshots
// on a cluster node. Every role Kafka runs is runnable: a combined
// broker,controller node (alone or a voter of a static quorum), a
// controller-only voter and a broker-only node that follows the voters.
// Load and New call it; LoadCluster and NewCluster do not. The errors
// match ErrNotRunnable.
func (b *Broker) CheckRunnable() error {
	c := &b.Cluster
	if c.Roles.Controller && len(c.Voters) > 1 && !slices.ContainsFunc(c.Voters, func(v Voter) bool { return v.ID == c.NodeID }) {
		return notRunnablef("controller.quorum.voters: node.id %d is not a voter; Cascade runs only controllers that are voters of the quorum", c.NodeID)
	}
	if n := len(c.BootstrapServers); n > 1 {
		return notRunnablef("controller.quorum.bootstrap.servers: Cascade runs a single node; a quorum bootstrapped from %d controllers is not supported yet", n)
	}
	if !c.Roles.Combined() && len(c.Voters) == 0 {
		return notRunnablef("process.roles=%s: Cascade finds the controllers of a %s-only node in controller.quorum.voters; "+
			"a dynamic quorum found through controller.quorum.bootstrap.servers is not supported yet", c.Roles, c.Roles)
	}
	// One node holds one replica: a larger factor could never be met, so
	// it is refused rather than leaving topics or coordinators unavailable.
	// A cluster replicates every topic, its coordinators' internal topics
	// too; only the share coordinator's state topic, which Cascade never
	// creates (it has no share groups), keeps the single node's limit.
	for _, key := range []string{"default.replication.factor", "offsets.topic.replication.factor",
		"transaction.state.log.replication.factor", "share.coordinator.state.topic.replication.factor",
		"share.coordinator.state.topic.min.isr"} {
		n, _ := asInt64(b.value(key))
		share := strings.HasPrefix(key, "share.")
		if n <= 1 || (len(c.Voters) > 1 && !share) {
			continue
		}
		reason := "a single Cascade node can hold only 1 replica; Cascade does not run a multi-node cluster yet"
		if len(c.Voters) > 1 {
			reason = "Cascade has no share groups, so it never creates __share_group_state"
		}
		return &notRunnable{msg: (&ValueError{Name: key, Value: strconv.FormatInt(n, 10), Reason: reason}).Error()}
	}
	for _, key := range metadataLogKeys {
		if key == "metadata.log.max.record.bytes.between.snapshots" && !c.Standalone() {
			continue // the quorum snapshots by it
		}
		if v, ok := b.set[key]; ok {
			return notRunnablef("%s=%s: Cascade's single node keeps its metadata log in its own format under "+
				"log.dirs and does not configure it yet", key, v)
		}
	}
	return nil
}

// fillKRaft parses the roles, listeners and quorum, and checks them across
// keys as KafkaConfig.validateValues does for a KRaft node.
func (b *Broker) fillKRaft() error {
	c := &b.Cluster
	b.NodeID = b.value("node.id").(int32)
	c.NodeID = b.NodeID
	// The def's validator refuses an empty list: Kafka 4 runs only in
	// KRaft mode.
	b.ProcessRoles = b.value("process.roles").([]string)
	for _, r := range b.ProcessRoles {
		c.Roles.Broker = c.Roles.Broker || r == "broker"
		c.Roles.Controller = c.Roles.Controller || r == "controller"
	}
	b.ControllerListenerNames = nil
	for _, n := range splitList(b.str("controller.listener.names")) {
		b.ControllerListenerNames = append(b.ControllerListenerNames, strings.ToUpper(n))
	}
	c.ControllerListenerNames = b.ControllerListenerNames
	if err := b.fillSecurityProtocolMap(); err != nil {
		return err
	}
	var err error
	if b.Listeners, err = b.parseListeners("listeners", b.str("listeners")); err != nil {
		return err
	}
	if len(b.Listeners) == 0 {
		return &ValueError{Name: "listeners", Value: "", Reason: "at least one listener is required"}
	}
	c.ControllerListeners, c.BrokerListeners = b.ControllerListeners(), b.BrokerListeners()
	if err := b.fillQuorum(); err != nil {
		return err
	}
	if err := b.checkRoles(); err != nil {
		return err
	}
	if err := b.fillAdvertised(); err != nil {
		return err
	}
	return b.fillInterBroker()
}

// fillSecurityProtocolMap parses listener.security.protocol.map. As Kafka's
// effectiveListenerSecurityProtocolMap: when the map is not set and no
// listener or controller listener name is SSL or SASL_*, each controller
// listener name maps to PLAINTEXT.
func (b *Broker) fillSecurityProtocolMap() error {
	b.SecurityProtocolMap = map[string]string{}
	for _, kv := range splitList(b.str("listener.security.protocol.map")) {
		name, proto, ok := strings.Cut(kv, ":")
		if !ok || name == "" || proto == "" {
			return &ValueError{Name: "listener.security.protocol.map", Value: b.str("listener.security.protocol.map"),
				Reason: "Map entry should be of form <key><separator><value>"}
		}
		b.SecurityProtocolMap[strings.ToUpper(strings.TrimSpace(name))] = strings.ToUpper(strings.TrimSpace(proto))
	}
	if _, set := b.set["listener.security.protocol.map"]; set {
		return nil
	}
	secure := func(n string) bool { return n == "SSL" || n == "SASL_SSL" || n == "SASL_PLAINTEXT" }
	for _, n := range b.ControllerListenerNames {
		if secure(n) {
			return nil
		}
	}
	for _, entry := range splitList(b.str("listeners")) {
		if n, _, _ := strings.Cut(entry, "://"); secure(strings.ToUpper(n)) {
			return nil
		}
	}
	for _, n := range b.ControllerListenerNames {
		if _, ok := b.SecurityProtocolMap[n]; !ok {
			b.SecurityProtocolMap[n] = "PLAINTEXT"
		}
	}
	return nil
}

// fillQuorum parses controller.quorum.voters and
// controller.quorum.bootstrap.servers as QuorumConfig does.
func (b *Broker) fillQuorum() error {
	c := &b.Cluster
	b.ControllerQuorumVoters = nil
	seen := map[int32]bool{}
	entries := b.value("controller.quorum.voters").([]string)
	for _, v := range entries {
		voter, err := parseVoter(v)
		if err != nil {
			return err
		}
		if voter.Host == "0.0.0.0" {
			// As QuorumConfig.parseVoterConnections.
			return &ValueError{Name: "controller.quorum.voters", Value: v,
				Reason: "Host string (0.0.0.0) is not routeable"}
		}
		if seen[voter.ID] {
			// Kafka's voter map keeps the last entry of an id; a
			// duplicate is always a mistake, so Cascade refuses it.
			return &ValueError{Name: "controller.quorum.voters", Value: strings.Join(entries, ","),
				Reason: fmt.Sprintf("voter id %d appears more than once", voter.ID)}
		}
		seen[voter.ID] = true
		b.ControllerQuorumVoters = append(b.ControllerQuorumVoters, voter)
	}
	c.Voters = b.ControllerQuorumVoters
	b.ControllerQuorumBootstrapServers = nil
	for _, s := range b.value("controller.quorum.bootstrap.servers").([]string) {
		host, portText, err := net.SplitHostPort(s)
		port, perr := strconv.Atoi(portText)
		if err != nil || perr != nil || host == "" || port <= 0 || port > 65535 {
			return &ValueError{Name: "controller.quorum.bootstrap.servers", Value: s,
				Reason: "Expected entries in the form {host}:{port}"}
		}
		b.ControllerQuorumBootstrapServers = append(b.ControllerQuorumBootstrapServers, s)
	}
	c.BootstrapServers = b.ControllerQuorumBootstrapServers
	return nil
}

// voterIDs renders the voter ids as Kafka's message does (a Scala Set).
func voterIDs(vs []Voter) string {
	ids := make([]int, len(vs))
	for i, v := range vs {
		ids[i] = int(v.ID)
	}
	sort.Ints(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(id)
	}
	return "Set(" + strings.Join(parts, ", ") + ")"
}

// checkRoles applies KafkaConfig.validateValues's rules for the node's
// roles. Cascade's standalone node (combined, no other controller) may omit
// the quorum, node.id and a controller listener, as its defaults do.
func (b *Broker) checkRoles() error {
	c := &b.Cluster
	standalone := c.Standalone()
	if !standalone {
		if _, ok := b.set["node.id"]; !ok {
			return errors.New("Missing configuration `node.id` which is required when `process.roles` is defined (i.e. when running in KRaft mode).")
		}
	}
	if !c.Roles.Combined() && len(c.Voters) == 0 && len(c.BootstrapServers) == 0 {
		return errors.New("If using process.roles, either controller.quorum.bootstrap.servers must contain the set of " +
			"bootstrap controllers or controller.quorum.voters must contain a parseable set of controllers.")
	}
	inVoters := false
	for _, v := range c.Voters {
		inVoters = inVoters || v.ID == c.NodeID
	}
	if !c.Roles.Controller {
		// Broker-only.
		if inVoters {
			return fmt.Errorf("If process.roles contains just the 'broker' role, the node id %d must not be included in the set of voters controller.quorum.voters=%s",
				c.NodeID, voterIDs(c.Voters))
		}
		if len(c.ControllerListenerNames) == 0 {
			return errors.New("controller.listener.names must contain at least one value when running KRaft with just the broker role")
		}
		if len(c.ControllerListeners) > 0 {
			return errors.New("controller.listener.names must not contain a value appearing in the 'listeners' configuration when running KRaft with just the broker role")
		}
	} else {
		if len(c.Voters) > 0 && !inVoters {
			return fmt.Errorf("If process.roles contains the 'controller' role, the node id %d must be included in the set of voters controller.quorum.voters=%s",
				c.NodeID, voterIDs(c.Voters))
		}
		for _, n := range c.ControllerListenerNames {
			if !hasListener(b.Listeners, n) {
				return fmt.Errorf("controller.listener.names must only contain values appearing in the 'listeners' configuration when running the KRaft controller role; %s is not in listeners", n)
			}
		}
		if len(c.ControllerListeners) == 0 && !standalone {
			return errors.New("controller.listener.names must contain at least one value appearing in the 'listeners' configuration when running the KRaft controller role")
		}
		if !c.Roles.Broker && len(c.BrokerListeners) > 0 {
			return errors.New("The listeners config must only contain KRaft controller listeners from controller.listener.names when process.roles=controller")
		}
	}
	if len(c.ControllerListenerNames) > 0 {
		n := c.ControllerListenerNames[0]
		proto, ok := b.SecurityProtocolMap[n]
		if !ok {
			return fmt.Errorf("Controller listener with name %s defined in controller.listener.names not found in listener.security.protocol.map "+
				"(an explicit security mapping for each controller listener is required if listener.security.protocol.map is non-empty, "+
				"or if there are security protocols other than PLAINTEXT in use)", n)
		}
		c.ControllerSecurityProtocol = proto
	}
	if c.Roles.Broker && len(c.BrokerListeners) == 0 {
		return errors.New("There must be at least one broker advertised listener. Perhaps all listeners appear in controller.listener.names?")
	}
	return nil
}

// fillAdvertised parses advertised.listeners. Every name must be one of
// listeners; Kafka ignores an advertised controller name a broker-only node
// does not bind, Cascade refuses it. Clients are told only of broker
// listeners (AdvertisedListeners); controller listeners are advertised to
// the quorum (KIP-853).
func (b *Broker) fillAdvertised() error {
	c := &b.Cluster
	c.Advertised = map[string]Listener{}
	for _, l := range b.Listeners {
		c.Advertised[l.Name] = l
	}
	adv := b.str("advertised.listeners")
	if adv == "" {
		if !c.Standalone() {
			// As Kafka, which advertises the listeners themselves. The
			// single node publishes localhost for 0.0.0.0 instead.
			for _, l := range b.Listeners {
				if l.Host == "0.0.0.0" {
					return errors.New("advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address.")
				}
			}
		}
		b.AdvertisedListeners = b.BrokerListeners()
		return nil
	}
	all, err := b.parseListeners("advertised.listeners", adv)
	if err != nil {
		return err
	}
	b.AdvertisedListeners = nil
	for _, l := range all {
		if l.Host == "" || l.Host == "0.0.0.0" {
			return &ValueError{Name: "advertised.listeners", Value: adv,
				Reason: "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0 or an empty host"}
		}
		if !hasListener(b.Listeners, l.Name) {
			// As KafkaConfig.validateValues.
			return &ValueError{Name: "advertised.listeners", Value: adv,
				Reason: "advertised.listeners listener names must be equal to or a subset of the ones defined in listeners; " +
					l.Name + " is not in listeners"}
		}
		c.Advertised[l.Name] = l
		if !containsFold(b.ControllerListenerNames, l.Name) {
			b.AdvertisedListeners = append(b.AdvertisedListeners, l)
		}
	}
	return nil
}

// fillInterBroker resolves the inter-broker listener as KafkaConfig's
// getInterBrokerListenerNameAndSecurityProtocol and checks it as
// validateValues does.
func (b *Broker) fillInterBroker() error {
	c := &b.Cluster
	name := strings.ToUpper(b.str("inter.broker.listener.name"))
	if _, set := b.set["security.inter.broker.protocol"]; set && name != "" {
		return errors.New("Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.")
	}
	if name == "" {
		c.InterBrokerSecurityProtocol = b.str("security.inter.broker.protocol")
	} else {
		proto, ok := b.SecurityProtocolMap[name]
		if !ok {
			return fmt.Errorf("Listener with name %s defined in inter.broker.listener.name not found in listener.security.protocol.map.", name)
		}
		c.InterBrokerSecurityProtocol = proto
	}
	b.InterBrokerListenerName = name
	if !c.Roles.Broker {
		if name != "" && containsFold(b.ControllerListenerNames, name) {
			// As KafkaConfig.validateValues for process.roles=controller.
			return errors.New("controller.listener.names must not contain an explicitly set inter.broker.listener.name configuration value when process.roles=controller")
		}
		return nil
	}
	if name == "" {
		name = c.InterBrokerSecurityProtocol
	}
	if containsFold(b.ControllerListenerNames, name) {
		return fmt.Errorf("inter.broker.listener.name: %s must not be a controller listener (controller.listener.names)", name)
	}
	if !hasListener(b.AdvertisedListeners, name) {
		var valid []string
		for _, l := range b.AdvertisedListeners {
			valid = append(valid, l.Name)
		}
		return fmt.Errorf("inter.broker.listener.name must be a listener name defined in advertised.listeners. "+
			"The valid options based on currently configured listeners are %s", strings.Join(valid, ","))
	}
	c.InterBrokerListener = name
	return nil
}

// fillCluster fills the timings, replication and metadata log of Cluster
// and checks them across keys, after fill has read the broker's own keys.
func (b *Broker) fillCluster() error {
	c := &b.Cluster
	ms := func(key string) time.Duration {
		n, _ := asInt64(b.value(key))
		return msDuration(n)
	}
	c.Rack = b.str("broker.rack")
	c.HeartbeatInterval = ms("broker.heartbeat.interval.ms")
	c.SessionTimeout = ms("broker.session.timeout.ms")
	if c.HeartbeatInterval >= c.SessionTimeout {
		// Kafka only logs an error above half the session timeout and
		// starts; at or above the whole of it a broker loses its lease
		// between two heartbeats, so Cascade refuses it.
		return fmt.Errorf("broker.heartbeat.interval.ms (%d ms) must be below broker.session.timeout.ms (%d ms), "+
			"or a broker loses its lease between heartbeats; Kafka asks for at most half of it",
			c.HeartbeatInterval.Milliseconds(), c.SessionTimeout.Milliseconds())
	}
	c.InitialRegistrationTimeout = ms("initial.broker.registration.timeout.ms")
	c.ControlledShutdown = b.value("controlled.shutdown.enable").(bool)
	c.Quorum = QuorumTimings{
		ElectionTimeout:    ms("controller.quorum.election.timeout.ms"),
		FetchTimeout:       ms("controller.quorum.fetch.timeout.ms"),
		ElectionBackoffMax: ms("controller.quorum.election.backoff.max.ms"),
		RequestTimeout:     ms("controller.quorum.request.timeout.ms"),
		RetryBackoff:       ms("controller.quorum.retry.backoff.ms"),
		AppendLinger:       ms("controller.quorum.append.linger.ms"),
	}
	r := &c.Replication
	r.DefaultReplicationFactor = b.DefaultReplicationFactor
	r.MinInsyncReplicas = b.MinInsyncReplicas
	r.OffsetsTopicReplicationFactor = b.OffsetsTopicReplicationFactor
	r.TransactionStateLogRF = b.TransactionStateLogRF
	r.TransactionStateLogMinISR = b.TransactionStateLogMinISR
	if !c.Standalone() {
		// Cascade's defaults of 1 are for its single node; a node of a
		// larger cluster gets Kafka's defaults for the keys left unset.
		if _, ok := b.set["offsets.topic.replication.factor"]; !ok {
			r.OffsetsTopicReplicationFactor = 3
		}
		if _, ok := b.set["transaction.state.log.replication.factor"]; !ok {
			r.TransactionStateLogRF = 3
		}
		if _, ok := b.set["transaction.state.log.min.isr"]; !ok {
			r.TransactionStateLogMinISR = 2
		}
	}
	r.LagTimeMax = ms("replica.lag.time.max.ms")
	r.SocketTimeout = ms("replica.socket.timeout.ms")
	r.FetchMaxBytes = b.value("replica.fetch.max.bytes").(int32)
	r.FetchWaitMax = ms("replica.fetch.wait.max.ms")
	r.FetchMinBytes = b.value("replica.fetch.min.bytes").(int32)
	r.FetchBackoff = ms("replica.fetch.backoff.ms")
	r.FetchResponseMaxBytes = b.value("replica.fetch.response.max.bytes").(int32)
	r.NumFetchers = b.value("num.replica.fetchers").(int32)
	r.UncleanLeaderElection = b.value("unclean.leader.election.enable").(bool)
	r.UncleanLeaderElectionInterval = ms("unclean.leader.election.interval.ms")
	r.AutoLeaderRebalance = b.value("auto.leader.rebalance.enable").(bool)
	r.LeaderImbalanceCheckInterval = time.Duration(b.value("leader.imbalance.check.interval.seconds").(int64)) * time.Second
	r.SelectorClass = b.str("replica.selector.class")
	// As KafkaConfig.validateValues.
	if r.FetchWaitMax > r.SocketTimeout {
		return errors.New("replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms to prevent unnecessary socket timeouts")
	}
	if r.FetchWaitMax > r.LagTimeMax {
		return errors.New("replica.fetch.wait.max.ms should always be less than or equal to replica.lag.time.max.ms to prevent frequent changes in ISR")
	}

	m := &c.MetadataLog
	m.Dir = b.str("metadata.log.dir")
	if m.Dir == "" {
		m.Dir = b.LogDirs[0]
	}
	m.SegmentBytes = b.value("metadata.log.segment.bytes").(int32)
	m.SegmentMs = ms("metadata.log.segment.ms")
	m.MaxRetentionBytes = b.value("metadata.max.retention.bytes").(int64)
	m.MaxRetention = ms("metadata.max.retention.ms")
	m.SnapshotMaxNewRecordBytes = b.value("metadata.log.max.record.bytes.between.snapshots").(int64)
	m.SnapshotMaxInterval = ms("metadata.log.max.snapshot.interval.ms")
	m.MaxIdleInterval = ms("metadata.max.idle.interval.ms")
	return nil
}

// LoadCluster reads a server.properties file and overrides as Load does and
// returns the configuration of any valid Kafka KRaft node, without
// CheckRunnable: the node that runs a multi-node cluster starts from its
// Cluster field.
func LoadCluster(path string, overrides []string) (*Broker, error) {
	props, err := loadProps(path, overrides)
	if err != nil {
		return nil, err
	}
	return build(props, path)
}

// NewCluster validates explicitly set configs as New does, without
// CheckRunnable.
func NewCluster(props map[string]string) (*Broker, error) {
	return build(sortedProps(props), "")
}

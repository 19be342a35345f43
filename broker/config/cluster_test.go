package config

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestClusterCombinedNodes reads each node of a three-node cluster of
// combined nodes into its Cluster, and checks Load refuses each at start.
func TestClusterCombinedNodes(t *testing.T) {
	voters := []Voter{{1, "kafka-1", 9093}, {2, "kafka-2", 9093}, {3, "kafka-3", 9093}}
	for id := 1; id <= 3; id++ {
		host := "kafka-" + string(rune('0'+id))
		ov := []string{"node.id=" + string(rune('0'+id)),
			"advertised.listeners=PLAINTEXT://" + host + ":9092,CONTROLLER://" + host + ":9093"}
		b, err := LoadCluster("testdata/kraft-combined.properties", ov)
		if err != nil {
			t.Fatalf("node %d: %v", id, err)
		}
		c := b.Cluster
		if c.NodeID != int32(id) || !c.Roles.Combined() || c.Standalone() || !reflect.DeepEqual(c.Voters, voters) {
			t.Fatalf("node %d: %+v", id, c)
		}
		if c.Voters[1].Addr() != "kafka-2:9093" {
			t.Fatalf("voter addr %s", c.Voters[1].Addr())
		}
		if len(c.ControllerListeners) != 1 || c.ControllerListeners[0] != (Listener{"CONTROLLER", "", 9093, "PLAINTEXT"}) ||
			len(c.BrokerListeners) != 1 || c.BrokerListeners[0] != (Listener{"PLAINTEXT", "", 9092, "PLAINTEXT"}) {
			t.Fatalf("node %d listeners: %+v %+v", id, c.ControllerListeners, c.BrokerListeners)
		}
		wantAdv := map[string]Listener{"PLAINTEXT": {"PLAINTEXT", host, 9092, "PLAINTEXT"},
			"CONTROLLER": {"CONTROLLER", host, 9093, "PLAINTEXT"}}
		if !reflect.DeepEqual(c.Advertised, wantAdv) {
			t.Fatalf("node %d advertised %+v", id, c.Advertised)
		}
		if ab := c.AdvertisedBrokers(); len(ab) != 1 || ab[0].Host != host {
			t.Fatalf("node %d advertised brokers %+v", id, ab)
		}
		if c.InterBrokerListener != "PLAINTEXT" || c.InterBrokerSecurityProtocol != "PLAINTEXT" ||
			c.ControllerSecurityProtocol != "PLAINTEXT" || c.Rack != "rack-1" {
			t.Fatalf("node %d: %+v", id, c)
		}
		r := c.Replication
		if r.DefaultReplicationFactor != 3 || r.MinInsyncReplicas != 2 || r.OffsetsTopicReplicationFactor != 3 ||
			r.TransactionStateLogRF != 3 || r.TransactionStateLogMinISR != 2 {
			t.Fatalf("node %d replication %+v", id, r)
		}
		if c.MetadataLog.Dir != "/var/lib/kafka/data" {
			t.Fatalf("metadata log dir %q", c.MetadataLog.Dir)
		}
		_, err = Load("testdata/kraft-combined.properties", ov)
		want := "Invalid value 3 for configuration share.coordinator.state.topic.replication.factor: Cascade has no share groups, so it never creates __share_group_state"
		if err == nil || err.Error() != want || !errors.Is(err, ErrNotRunnable) {
			t.Fatalf("node %d: Load gave %v, want %s", id, err, want)
		}
	}
}

// TestClusterSplitNodes reads the controllers and brokers of a cluster of
// three controllers and three brokers.
func TestClusterSplitNodes(t *testing.T) {
	for id := 1; id <= 3; id++ {
		host := "controller-" + string(rune('0'+id))
		b, err := LoadCluster("testdata/kraft-controller.properties",
			[]string{"node.id=" + string(rune('0'+id)), "advertised.listeners=CONTROLLER://" + host + ":9093"})
		if err != nil {
			t.Fatalf("controller %d: %v", id, err)
		}
		c := b.Cluster
		if c.Roles != (Roles{Controller: true}) || c.Roles.String() != "controller" || len(c.Voters) != 3 ||
			len(c.BrokerListeners) != 0 || len(c.ControllerListeners) != 1 || c.InterBrokerListener != "" {
			t.Fatalf("controller %d: %+v", id, c)
		}
		if c.Advertised["CONTROLLER"] != (Listener{"CONTROLLER", host, 9093, "PLAINTEXT"}) {
			t.Fatalf("controller %d advertised %+v", id, c.Advertised)
		}
		if c.Quorum != (QuorumTimings{1500 * time.Millisecond, 3 * time.Second, time.Second, 2 * time.Second,
			20 * time.Millisecond, 25 * time.Millisecond}) {
			t.Fatalf("controller %d quorum %+v", id, c.Quorum)
		}
	}
	for id := 4; id <= 6; id++ {
		host := "broker-" + string(rune('0'+id))
		b, err := LoadCluster("testdata/kraft-broker.properties",
			[]string{"node.id=" + string(rune('0'+id)), "advertised.listeners=PLAINTEXT://" + host + ":9092"})
		if err != nil {
			t.Fatalf("broker %d: %v", id, err)
		}
		c := b.Cluster
		if c.Roles != (Roles{Broker: true}) || len(c.ControllerListeners) != 0 || len(c.BrokerListeners) != 1 ||
			!reflect.DeepEqual(c.ControllerListenerNames, []string{"CONTROLLER"}) || c.ControllerSecurityProtocol != "PLAINTEXT" {
			t.Fatalf("broker %d: %+v", id, c)
		}
		if c.Advertised["PLAINTEXT"].Host != host || c.InterBrokerListener != "PLAINTEXT" || c.Rack != "us-east-1a" {
			t.Fatalf("broker %d: %+v", id, c)
		}
		if c.HeartbeatInterval != time.Second || c.SessionTimeout != 6*time.Second {
			t.Fatalf("broker %d timings %v %v", id, c.HeartbeatInterval, c.SessionTimeout)
		}
		r := c.Replication
		// Unset internal-topic keys take Kafka's defaults on a cluster node.
		if r.DefaultReplicationFactor != 3 || r.MinInsyncReplicas != 2 || r.OffsetsTopicReplicationFactor != 3 ||
			r.TransactionStateLogRF != 3 || r.TransactionStateLogMinISR != 2 || r.LagTimeMax != 20*time.Second ||
			r.NumFetchers != 4 || r.SelectorClass != rackAwareSelectorClass {
			t.Fatalf("broker %d replication %+v", id, r)
		}
	}
	// Split roles run, and a cluster replicates topics with the broker's
	// default replication factor of 3.
	if b, err := Load("testdata/kraft-controller.properties", nil); err != nil || b.Cluster.Roles.String() != "controller" {
		t.Fatalf("controller Load: %v", err)
	}
	if b, err := Load("testdata/kraft-broker.properties", nil); err != nil || b.Cluster.Roles.String() != "broker" {
		t.Fatalf("broker Load: %v", err)
	}
	if b, err := Load("testdata/kraft-broker.properties", []string{"default.replication.factor=1", "metadata.log.max.record.bytes.between.snapshots=4096"}); err != nil ||
		b.Cluster.Roles.String() != "broker" || b.Cluster.MetadataLog.SnapshotMaxNewRecordBytes != 4096 {
		t.Fatalf("broker Load with RF 1: %v", err)
	}
}

// TestClusterStandalone checks the single node's view: defaults and Kafka's
// stock file are standalone and keep Cascade's single-node values.
func TestClusterStandalone(t *testing.T) {
	for _, b := range []*Broker{Default(), mustLoad(t, "testdata/kafka-server.properties")} {
		c := b.Cluster
		if !c.Standalone() || !c.Roles.Combined() || c.NodeID != 1 || len(c.BrokerListeners) != 1 ||
			c.InterBrokerListener != "PLAINTEXT" {
			t.Fatalf("%+v", c)
		}
		r := c.Replication
		if r.DefaultReplicationFactor != 1 || r.OffsetsTopicReplicationFactor != 1 || r.TransactionStateLogRF != 1 ||
			r.TransactionStateLogMinISR != 1 {
			t.Fatalf("replication %+v", r)
		}
		if c.MetadataLog.Dir != b.LogDirs[0] {
			t.Fatalf("metadata log dir %q", c.MetadataLog.Dir)
		}
	}
	// Kafka's default map gives an unmapped controller listener PLAINTEXT.
	b, err := Load("", []string{"listeners=PLAINTEXT://127.0.0.1:9092,CTL://127.0.0.1:9093", "controller.listener.names=ctl"})
	if err != nil {
		t.Fatal(err)
	}
	if cl := b.Cluster.ControllerListeners; len(cl) != 1 || cl[0].Name != "CTL" || cl[0].SecurityProtocol != "PLAINTEXT" {
		t.Fatalf("controller listeners %+v", cl)
	}
}

func mustLoad(t *testing.T, path string) *Broker {
	t.Helper()
	b, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestClusterRefusals checks each configuration Kafka refuses, with its
// message; LoadCluster refuses them as Load does.
func TestClusterRefusals(t *testing.T) {
	const combined = "testdata/kraft-combined.properties"
	const broker = "testdata/kraft-broker.properties"
	const controller = "testdata/kraft-controller.properties"
	for _, c := range []struct {
		file      string
		overrides []string
		want      string
	}{
		{combined, []string{"node.id=4"}, "If process.roles contains the 'controller' role, the node id 4 must be included in the set of voters controller.quorum.voters=Set(1, 2, 3)"},
		{controller, []string{"node.id=7"}, "If process.roles contains the 'controller' role, the node id 7 must be included in the set of voters controller.quorum.voters=Set(1, 2, 3)"},
		{broker, []string{"node.id=2"}, "If process.roles contains just the 'broker' role, the node id 2 must not be included in the set of voters controller.quorum.voters=Set(1, 2, 3)"},
		{combined, []string{"controller.quorum.voters=1@kafka-1:9093,2@kafka-2"}, "Invalid value 2@kafka-2 for configuration controller.quorum.voters: Expected entries in the form {id}@{host}:{port}"},
		{combined, []string{"controller.quorum.voters=1@kafka-1:9093,x@kafka-2:9093"}, "Invalid value x@kafka-2:9093 for configuration controller.quorum.voters: Expected entries in the form {id}@{host}:{port}"},
		{combined, []string{"controller.quorum.voters=1@kafka-1:9093,2@kafka-2:9093,2@kafka-3:9093"}, "Invalid value 1@kafka-1:9093,2@kafka-2:9093,2@kafka-3:9093 for configuration controller.quorum.voters: voter id 2 appears more than once"},
		{combined, []string{"controller.quorum.voters=1@0.0.0.0:9093,2@kafka-2:9093"}, "Invalid value 1@0.0.0.0:9093 for configuration controller.quorum.voters: Host string (0.0.0.0) is not routeable"},
		{broker, []string{"controller.quorum.voters="}, "If using process.roles, either controller.quorum.bootstrap.servers must contain the set of bootstrap controllers or controller.quorum.voters must contain a parseable set of controllers."},
		{broker, []string{"controller.listener.names="}, "controller.listener.names must contain at least one value when running KRaft with just the broker role"},
		{broker, []string{"listeners=PLAINTEXT://:9092,CONTROLLER://:9093"}, "controller.listener.names must not contain a value appearing in the 'listeners' configuration when running KRaft with just the broker role"},
		{broker, []string{"advertised.listeners=PLAINTEXT://broker-4:9092,CONTROLLER://broker-4:9093"}, "Invalid value PLAINTEXT://broker-4:9092,CONTROLLER://broker-4:9093 for configuration advertised.listeners: advertised.listeners listener names must be equal to or a subset of the ones defined in listeners; CONTROLLER is not in listeners"},
		{broker, []string{"listener.security.protocol.map=PLAINTEXT:PLAINTEXT"}, "Controller listener with name CONTROLLER defined in controller.listener.names not found in listener.security.protocol.map (an explicit security mapping for each controller listener is required if listener.security.protocol.map is non-empty, or if there are security protocols other than PLAINTEXT in use)"},
		// Without the map, CONTROLLER maps to PLAINTEXT only when no SSL or
		// SASL listener name is in use, as Kafka.
		{"", []string{"process.roles=broker", "node.id=4", "controller.quorum.voters=1@c:9093", "controller.listener.names=CONTROLLER,SSL"}, "Controller listener with name CONTROLLER defined in controller.listener.names not found in listener.security.protocol.map (an explicit security mapping for each controller listener is required if listener.security.protocol.map is non-empty, or if there are security protocols other than PLAINTEXT in use)"},
		{controller, []string{"inter.broker.listener.name=CONTROLLER"}, "controller.listener.names must not contain an explicitly set inter.broker.listener.name configuration value when process.roles=controller"},
		{combined, []string{"controller.listener.names="}, "controller.listener.names must contain at least one value appearing in the 'listeners' configuration when running the KRaft controller role"},
		{combined, []string{"controller.listener.names=CONTROLLER,OTHER"}, "controller.listener.names must only contain values appearing in the 'listeners' configuration when running the KRaft controller role; OTHER is not in listeners"},
		{controller, []string{"listeners=CONTROLLER://:9093,PLAINTEXT://:9092"}, "The listeners config must only contain KRaft controller listeners from controller.listener.names when process.roles=controller"},
		{combined, []string{"listeners=CONTROLLER://:9093", "advertised.listeners=CONTROLLER://kafka-1:9093"}, "There must be at least one broker advertised listener. Perhaps all listeners appear in controller.listener.names?"},
		{combined, []string{"listeners=PLAINTEXT://0.0.0.0:9092,CONTROLLER://:9093", "advertised.listeners="}, "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address."},
		{combined, []string{"advertised.listeners=PLAINTEXT://0.0.0.0:9092,CONTROLLER://kafka-1:9093"}, "Invalid value PLAINTEXT://0.0.0.0:9092,CONTROLLER://kafka-1:9093 for configuration advertised.listeners: advertised.listeners cannot use the nonroutable meta-address 0.0.0.0 or an empty host"},
		{combined, []string{"inter.broker.listener.name=REPL"}, "Listener with name REPL defined in inter.broker.listener.name not found in listener.security.protocol.map."},
		{combined, []string{"inter.broker.listener.name=SSL"}, "inter.broker.listener.name must be a listener name defined in advertised.listeners. The valid options based on currently configured listeners are PLAINTEXT"},
		{combined, []string{"inter.broker.listener.name=CONTROLLER"}, "inter.broker.listener.name: CONTROLLER must not be a controller listener (controller.listener.names)"},
		{combined, []string{"security.inter.broker.protocol=PLAINTEXT"}, "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set."},
		{broker, []string{"process.roles="}, "--override process.roles=: Invalid value  for configuration process.roles: Configuration must not be empty"},
		{broker, []string{"process.roles=broker,zookeeper"}, "--override process.roles=broker,zookeeper: Invalid value broker,zookeeper for configuration process.roles: String must be one of: broker, controller"},
		{broker, []string{"node.id="}, "--override node.id=: Invalid value  for configuration node.id: Not a number of type INT"},
		{"", []string{"process.roles=broker", "controller.quorum.bootstrap.servers=c:9093", "controller.listener.names=CONTROLLER"}, "Missing configuration `node.id` which is required when `process.roles` is defined (i.e. when running in KRaft mode)."},
		{combined, []string{"default.replication.factor=0"}, "--override default.replication.factor=0: Invalid value 0 for configuration default.replication.factor: Value must be at least 1"},
		{combined, []string{"offsets.topic.replication.factor=0"}, "--override offsets.topic.replication.factor=0: Invalid value 0 for configuration offsets.topic.replication.factor: Value must be at least 1"},
		{combined, []string{"transaction.state.log.replication.factor=0"}, "--override transaction.state.log.replication.factor=0: Invalid value 0 for configuration transaction.state.log.replication.factor: Value must be at least 1"},
		{combined, []string{"transaction.state.log.min.isr=0"}, "--override transaction.state.log.min.isr=0: Invalid value 0 for configuration transaction.state.log.min.isr: Value must be at least 1"},
		{combined, []string{"broker.heartbeat.interval.ms=9000"}, "broker.heartbeat.interval.ms (9000 ms) must be below broker.session.timeout.ms (9000 ms), or a broker loses its lease between heartbeats; Kafka asks for at most half of it"},
		{combined, []string{"broker.session.timeout.ms=0"}, "--override broker.session.timeout.ms=0: Invalid value 0 for configuration broker.session.timeout.ms: Value must be at least 1"},
		{combined, []string{"controller.quorum.election.timeout.ms=0"}, "--override controller.quorum.election.timeout.ms=0: Invalid value 0 for configuration controller.quorum.election.timeout.ms: Value must be at least 1"},
		{combined, []string{"controller.quorum.retry.backoff.ms=-1"}, "--override controller.quorum.retry.backoff.ms=-1: Invalid value -1 for configuration controller.quorum.retry.backoff.ms: Value must be at least 0"},
		{combined, []string{"replica.fetch.wait.max.ms=40000"}, "replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms to prevent unnecessary socket timeouts"},
		{combined, []string{"replica.fetch.wait.max.ms=25000", "replica.lag.time.max.ms=20000"}, "replica.fetch.wait.max.ms should always be less than or equal to replica.lag.time.max.ms to prevent frequent changes in ISR"},
		{combined, []string{"leader.imbalance.check.interval.seconds=0"}, "--override leader.imbalance.check.interval.seconds=0: Invalid value 0 for configuration leader.imbalance.check.interval.seconds: Value must be at least 1"},
		{combined, []string{"replica.selector.class=com.example.Selector"}, "--override replica.selector.class=com.example.Selector: Invalid value com.example.Selector for configuration replica.selector.class: String must be one of: org.apache.kafka.common.replica.RackAwareReplicaSelector"},
		{combined, []string{"metadata.log.segment.bytes=1048576"}, "--override metadata.log.segment.bytes=1048576: Invalid value 1048576 for configuration metadata.log.segment.bytes: Cannot set metadata.log.segment.bytes below 8388608"},
		{combined, []string{"security.inter.broker.protocol=TLS", "inter.broker.listener.name="}, "--override security.inter.broker.protocol=TLS: Invalid value TLS for configuration security.inter.broker.protocol: String must be one of: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"},
	} {
		_, err := LoadCluster(c.file, c.overrides)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s %v:\n got  %v\n want %s", c.file, c.overrides, err, c.want)
		}
		if errors.Is(err, ErrNotRunnable) {
			t.Errorf("%s %v: a Kafka refusal matches ErrNotRunnable", c.file, c.overrides)
		}
		if _, lerr := Load(c.file, c.overrides); lerr == nil || lerr.Error() != c.want {
			t.Errorf("%s %v: Load gave %v", c.file, c.overrides, lerr)
		}
	}
}

// TestCheckRunnable checks each refusal of a valid Kafka configuration the
// single node cannot run, and that its message says so.
func TestCheckRunnable(t *testing.T) {
	single := []string{"node.id=1", "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093", "controller.listener.names=CONTROLLER",
		"controller.quorum.voters=1@127.0.0.1:9093"}
	for _, c := range []struct {
		overrides []string
		want      string
	}{
		{[]string{"default.replication.factor=3"}, "Invalid value 3 for configuration default.replication.factor: a single Cascade node can hold only 1 replica; Cascade does not run a multi-node cluster yet"},
		{[]string{"offsets.topic.replication.factor=2"}, "Invalid value 2 for configuration offsets.topic.replication.factor: a single Cascade node can hold only 1 replica; Cascade does not run a multi-node cluster yet"},
		{[]string{"controller.quorum.voters=", "controller.quorum.bootstrap.servers=a:1,b:2"}, "controller.quorum.bootstrap.servers: Cascade runs a single node; a quorum bootstrapped from 2 controllers is not supported yet"},
		{[]string{"metadata.log.dir=/m"}, "metadata.log.dir=/m: Cascade's single node keeps its metadata log in its own format under log.dirs and does not configure it yet"},
		{[]string{"metadata.log.segment.bytes=16777216"}, "metadata.log.segment.bytes=16777216: Cascade's single node keeps its metadata log in its own format under log.dirs and does not configure it yet"},
	} {
		ov := append(append([]string(nil), single...), c.overrides...)
		b, err := LoadCluster("", ov)
		if err != nil {
			t.Fatalf("%v: LoadCluster: %v", c.overrides, err)
		}
		err = b.CheckRunnable()
		if err == nil || err.Error() != c.want || !errors.Is(err, ErrNotRunnable) {
			t.Errorf("%v:\n got  %v\n want %s", c.overrides, err, c.want)
		}
		if _, lerr := Load("", ov); lerr == nil || lerr.Error() != c.want {
			t.Errorf("%v: Load gave %v", c.overrides, lerr)
		}
	}
	if b, err := LoadCluster("", single); err != nil || b.CheckRunnable() != nil {
		t.Fatalf("a single voter that is this node: %v", err)
	}
	three := append(append([]string(nil), single...), "controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095")
	if b, err := LoadCluster("", three); err != nil || b.CheckRunnable() != nil {
		t.Fatalf("a combined voter of three: %v, %v", err, b.CheckRunnable())
	}
	// Split roles of a static quorum run, and the snapshot interval is
	// honoured on a node of a cluster (not on the single node).
	voters := "controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095"
	for _, ov := range [][]string{
		{"process.roles=controller", "node.id=1", "listeners=CONTROLLER://127.0.0.1:9093", "controller.listener.names=CONTROLLER", voters},
		{"process.roles=broker", "node.id=4", "listeners=PLAINTEXT://127.0.0.1:9092", "controller.listener.names=CONTROLLER", voters},
		{"process.roles=broker", "node.id=4", "listeners=PLAINTEXT://127.0.0.1:9092", "controller.listener.names=CONTROLLER", voters,
			"metadata.log.max.record.bytes.between.snapshots=1024"},
		append(append([]string(nil), three...), "metadata.log.max.record.bytes.between.snapshots=1024"),
	} {
		if b, err := LoadCluster("", ov); err != nil || b.CheckRunnable() != nil {
			t.Fatalf("%v: %v, %v", ov, err, b.CheckRunnable())
		}
	}
	b, err := LoadCluster("", append(append([]string(nil), single...), "metadata.log.max.record.bytes.between.snapshots=1024"))
	if err != nil || !errors.Is(b.CheckRunnable(), ErrNotRunnable) {
		t.Fatalf("the single node with a snapshot interval: %v, %v", err, b.CheckRunnable())
	}
}

// kafkaDefaults are Apache Kafka 4.x's defaults of the keys clusterDefs adds
// (KRaftConfigs, QuorumConfig, ReplicationConfigs, ServerConfigs), "" for a
// null default.
var kafkaDefaults = map[string]string{
	"broker.rack":                                     "",
	"broker.heartbeat.interval.ms":                    "2000",
	"broker.session.timeout.ms":                       "9000",
	"initial.broker.registration.timeout.ms":          "60000",
	"controlled.shutdown.enable":                      "true",
	"controller.quorum.election.timeout.ms":           "1000",
	"controller.quorum.fetch.timeout.ms":              "2000",
	"controller.quorum.election.backoff.max.ms":       "1000",
	"controller.quorum.request.timeout.ms":            "2000",
	"controller.quorum.retry.backoff.ms":              "20",
	"controller.quorum.append.linger.ms":              "25",
	"security.inter.broker.protocol":                  "PLAINTEXT",
	"replica.lag.time.max.ms":                         "30000",
	"replica.socket.timeout.ms":                       "30000",
	"replica.fetch.max.bytes":                         "1048576",
	"replica.fetch.wait.max.ms":                       "500",
	"replica.fetch.min.bytes":                         "1",
	"replica.fetch.backoff.ms":                        "1000",
	"replica.fetch.response.max.bytes":                "10485760",
	"num.replica.fetchers":                            "1",
	"replica.selector.class":                          "",
	"auto.leader.rebalance.enable":                    "true",
	"leader.imbalance.check.interval.seconds":         "300",
	"unclean.leader.election.interval.ms":             "300000",
	"metadata.log.dir":                                "",
	"metadata.log.segment.bytes":                      "1073741824",
	"metadata.log.segment.ms":                         "604800000",
	"metadata.max.retention.bytes":                    "104857600",
	"metadata.max.retention.ms":                       "604800000",
	"metadata.log.max.record.bytes.between.snapshots": "20971520",
	"metadata.log.max.snapshot.interval.ms":           "3600000",
	"metadata.max.idle.interval.ms":                   "500",
}

// kafkaDefaultsKept are Kafka's defaults of cluster keys broker/config
// already defined, and Cascade's where it differs for its single node.
var kafkaDefaultsKept = map[string][2]string{ // key: {Kafka, Cascade}
	"process.roles":                            {"", "broker,controller"},
	"node.id":                                  {"-1", "1"},
	"controller.quorum.voters":                 {"", ""},
	"controller.quorum.bootstrap.servers":      {"", ""},
	"controller.listener.names":                {"", ""},
	"listeners":                                {"PLAINTEXT://:9092", "PLAINTEXT://127.0.0.1:9092"},
	"advertised.listeners":                     {"", ""},
	"listener.security.protocol.map":           {"PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"},
	"inter.broker.listener.name":               {"", ""},
	"default.replication.factor":               {"1", "1"},
	"min.insync.replicas":                      {"1", "1"},
	"unclean.leader.election.enable":           {"false", "false"},
	"offsets.topic.replication.factor":         {"3", "1"},
	"transaction.state.log.replication.factor": {"3", "1"},
	"transaction.state.log.min.isr":            {"2", "1"},
}

// TestClusterDefaultsAreKafkas compares the default of every cluster key
// with Kafka's.
func TestClusterDefaultsAreKafkas(t *testing.T) {
	if len(kafkaDefaults) != len(clusterDefs) {
		t.Fatalf("%d Kafka defaults for %d cluster keys", len(kafkaDefaults), len(clusterDefs))
	}
	for _, d := range clusterDefs {
		want, ok := kafkaDefaults[d.Name]
		if !ok {
			t.Errorf("%s: no Kafka default recorded", d.Name)
		}
		if got := strings.TrimSpace(d.Default); got != want || d.HasDefault != (want != "") {
			t.Errorf("%s: default %q (set %v), Kafka's %q", d.Name, got, d.HasDefault, want)
		}
	}
	for name, kc := range kafkaDefaultsKept {
		d, ok := BrokerDef(name)
		if !ok {
			t.Errorf("%s: not defined", name)
			continue
		}
		if d.Default != kc[1] {
			t.Errorf("%s: default %q, recorded as %q (Kafka's %q)", name, d.Default, kc[1], kc[0])
		}
	}
	// A node of a larger cluster gets Kafka's internal-topic defaults.
	b, err := LoadCluster("testdata/kraft-broker.properties", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := b.Cluster.Replication
	if r.OffsetsTopicReplicationFactor != 3 || r.TransactionStateLogRF != 3 || r.TransactionStateLogMinISR != 2 {
		t.Fatalf("cluster node internal topics %+v", r)
	}
	q, c := b.Cluster.Quorum, Default().Cluster
	if c.HeartbeatInterval != 2*time.Second || c.SessionTimeout != 9*time.Second || q.ElectionTimeout != time.Second ||
		q.FetchTimeout != 2*time.Second || q.ElectionBackoffMax != time.Second || q.RequestTimeout != 2*time.Second ||
		q.RetryBackoff != 20*time.Millisecond || q.AppendLinger != 25*time.Millisecond ||
		c.Replication.LagTimeMax != 30*time.Second || c.Replication.FetchMaxBytes != 1048576 ||
		c.Replication.FetchWaitMax != 500*time.Millisecond || c.Replication.FetchMinBytes != 1 ||
		c.Replication.FetchBackoff != time.Second || c.Replication.FetchResponseMaxBytes != 10485760 ||
		c.Replication.NumFetchers != 1 || c.Replication.UncleanLeaderElection || !c.Replication.AutoLeaderRebalance ||
		c.Replication.LeaderImbalanceCheckInterval != 300*time.Second ||
		c.Replication.UncleanLeaderElectionInterval != 300*time.Second || c.MetadataLog.SegmentBytes != 1073741824 {
		t.Fatalf("typed defaults %+v", c)
	}
}

// TestClusterKeysDocumented checks docs/configuration.md's Cluster section
// has a row for every cluster key, with its default.
func TestClusterKeysDocumented(t *testing.T) {
	raw, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## Cluster\n")
	if !ok {
		t.Fatal("no Cluster section")
	}
	for _, d := range clusterDefs {
		row := "| `" + d.Name + "` | `" + d.Default + "` |"
		if !d.HasDefault {
			row = "| `" + d.Name + "` | "
		}
		if !strings.Contains(section, row) {
			t.Errorf("%s: no row %q", d.Name, row)
		}
	}
}

// TestBrokerOnlyControllerListenerKeys: a broker-only node does not bind
// its controller listener, yet its listener.name.<controller>.* keys are
// how it reaches the controllers, so they are accepted; a name that is
// neither a listener nor a controller listener is still refused.
func TestBrokerOnlyControllerListenerKeys(t *testing.T) {
	base := []string{"process.roles=broker", "node.id=4", "controller.quorum.voters=1@c:9093",
		"controller.listener.names=CONTROLLER", "listeners=PLAINTEXT://127.0.0.1:9092",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SSL"}
	b, err := LoadCluster("", append(base, "listener.name.controller.ssl.truststore.type=PEM"))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := b.ListenerValue("CONTROLLER", "ssl.truststore.type"); v != "PEM" {
		t.Fatalf("controller listener's ssl.truststore.type %q", v)
	}
	if _, err := LoadCluster("", append(base, "listener.name.contoller.ssl.truststore.type=PEM")); err == nil ||
		!strings.Contains(err.Error(), "listener CONTOLLER is not in listeners") {
		t.Fatalf("a mistyped listener name: %v", err)
	}
}

package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// stockFile is Apache Kafka's stock config/server.properties (keys and
// values only).
const stockFile = "testdata/kafka-server.properties"

// TestLoadKafkaStockFile loads the stock file unchanged and checks every key
// it sets lands where Cascade uses it.
func TestLoadKafkaStockFile(t *testing.T) {
	b, err := Load(stockFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.NodeID != 1 || !reflect.DeepEqual(b.ProcessRoles, []string{"broker", "controller"}) {
		t.Fatalf("node %d roles %v", b.NodeID, b.ProcessRoles)
	}
	if !reflect.DeepEqual(b.ControllerQuorumBootstrapServers, []string{"localhost:9093"}) {
		t.Fatalf("bootstrap servers %v", b.ControllerQuorumBootstrapServers)
	}
	if bl := b.BrokerListeners(); len(bl) != 1 || bl[0].Name != "PLAINTEXT" || bl[0].Addr() != ":9092" {
		t.Fatalf("broker listeners %+v", bl)
	}
	if cl := b.ControllerListeners(); len(cl) != 1 || cl[0].Name != "CONTROLLER" || cl[0].Port != 9093 {
		t.Fatalf("controller listeners %+v", cl)
	}
	// Clients are told of the PLAINTEXT listener only.
	if a := b.AdvertisedListeners; len(a) != 1 || a[0].Name != "PLAINTEXT" || a[0].Host != "localhost" || a[0].Port != 9092 {
		t.Fatalf("advertised %+v", a)
	}
	if b.InterBrokerListenerName != "PLAINTEXT" || b.SecurityProtocolMap["SASL_SSL"] != "SASL_SSL" {
		t.Fatalf("inter-broker %q map %v", b.InterBrokerListenerName, b.SecurityProtocolMap)
	}
	if b.SocketSendBufferBytes != 102400 || b.SocketReceiveBufferBytes != 102400 || b.SocketRequestMaxBytes != 104857600 {
		t.Fatalf("socket %d %d %d", b.SocketSendBufferBytes, b.SocketReceiveBufferBytes, b.SocketRequestMaxBytes)
	}
	if !reflect.DeepEqual(b.LogDirs, []string{"/tmp/kraft-combined-logs"}) || b.NumPartitions != 1 {
		t.Fatalf("dirs %v partitions %d", b.LogDirs, b.NumPartitions)
	}
	if b.OffsetsTopicReplicationFactor != 1 || b.TransactionStateLogRF != 1 || b.TransactionStateLogMinISR != 1 {
		t.Fatalf("internal topics %+v", b)
	}
	if b.RetentionCheckInterval != 5*time.Minute {
		t.Fatalf("retention check %v", b.RetentionCheckInterval)
	}
	lc, err := TopicLogConfig(b, nil)
	if err != nil || lc.RetentionMs != 168*time.Hour || lc.SegmentBytes != 1<<30 {
		t.Fatalf("%v %+v", err, lc)
	}
	// The thread counts and the share coordinator are reported as having
	// no effect, in name order.
	var keys []string
	for _, n := range b.NoEffect() {
		keys = append(keys, n.Key+"="+n.Value)
		if n.Reason == "" {
			t.Errorf("%s has no reason", n.Key)
		}
	}
	want := []string{"num.io.threads=8", "num.network.threads=3", "num.recovery.threads.per.data.dir=1",
		"share.coordinator.state.topic.min.isr=1", "share.coordinator.state.topic.replication.factor=1"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("no-effect keys %v, want %v", keys, want)
	}
}

func TestServerDefaults(t *testing.T) {
	b := Default()
	if b.SocketSendBufferBytes != DefaultSocketBufferBytes || b.SocketReceiveBufferBytes != DefaultSocketBufferBytes {
		t.Fatalf("buffers %d %d", b.SocketSendBufferBytes, b.SocketReceiveBufferBytes)
	}
	if b.ConnectionsMaxIdle != 10*time.Minute || b.FetchMaxBytes != 57671680 || b.FetchSessionCacheSlots != 1000 {
		t.Fatalf("idle %v fetch %d slots %d", b.ConnectionsMaxIdle, b.FetchMaxBytes, b.FetchSessionCacheSlots)
	}
	if len(b.NoEffect()) != 0 || len(b.ControllerListeners()) != 0 {
		t.Fatalf("defaults report %v %v", b.NoEffect(), b.ControllerListeners())
	}
	b, err := Load("", []string{"connections.max.idle.ms=-1", "socket.send.buffer.bytes=65536",
		"max.incremental.fetch.session.cache.slots=0", "fetch.max.bytes=1024", "background.threads=1"})
	if err != nil {
		t.Fatal(err)
	}
	if b.ConnectionsMaxIdle != 0 || b.SocketSendBufferBytes != 65536 || b.FetchSessionCacheSlots != 0 || b.FetchMaxBytes != 1024 {
		t.Fatalf("%+v", b)
	}
	if n := b.NoEffect(); len(n) != 1 || n[0].Key != "background.threads" {
		t.Fatalf("no effect %+v", n)
	}
}

func TestServerConfigErrors(t *testing.T) {
	for _, c := range []struct {
		overrides []string
		want      string
	}{
		{[]string{"num.io.threads=0"}, "--override num.io.threads=0: Invalid value 0 for configuration num.io.threads: Value must be at least 1"},
		{[]string{"num.network.threads=x"}, "--override num.network.threads=x: Invalid value x for configuration num.network.threads: Not a number of type INT"},
		{[]string{"background.threads=0"}, "--override background.threads=0: Invalid value 0 for configuration background.threads: Value must be at least 1"},
		{[]string{"num.recovery.threads.per.data.dir=0"}, "--override num.recovery.threads.per.data.dir=0: Invalid value 0 for configuration num.recovery.threads.per.data.dir: Value must be at least 1"},
		{[]string{"socket.receive.buffer.bytes=0"}, "--override socket.receive.buffer.bytes=0: Invalid value 0 for configuration socket.receive.buffer.bytes: Value must be -1 (the OS default) or at least 1"},
		{[]string{"connections.max.idle.ms=0"}, "--override connections.max.idle.ms=0: Invalid value 0 for configuration connections.max.idle.ms: Value must be positive, or -1 to never close idle connections"},
		{[]string{"fetch.max.bytes=1023"}, "--override fetch.max.bytes=1023: Invalid value 1023 for configuration fetch.max.bytes: Value must be at least 1024"},
		{[]string{"max.incremental.fetch.session.cache.slots=-1"}, "--override max.incremental.fetch.session.cache.slots=-1: Invalid value -1 for configuration max.incremental.fetch.session.cache.slots: Value must be at least 0"},
		{[]string{"node.id=1", "listeners=PLAINTEXT://:9092,CONTROLLER://:9093", "controller.listener.names=CONTROLLER", "controller.quorum.bootstrap.servers=a:1,b:2"}, "controller.quorum.bootstrap.servers: Cascade runs a single node; a quorum bootstrapped from 2 controllers is not supported yet"},
		{[]string{"controller.quorum.bootstrap.servers=nohost"}, "Invalid value nohost for configuration controller.quorum.bootstrap.servers: Expected entries in the form {host}:{port}"},
		{[]string{"offsets.topic.replication.factor=3"}, "Invalid value 3 for configuration offsets.topic.replication.factor: a single Cascade node can hold only 1 replica; Cascade does not run a multi-node cluster yet"},
		{[]string{"transaction.state.log.replication.factor=3"}, "Invalid value 3 for configuration transaction.state.log.replication.factor: a single Cascade node can hold only 1 replica; Cascade does not run a multi-node cluster yet"},
		{[]string{"share.coordinator.state.topic.replication.factor=3"}, "Invalid value 3 for configuration share.coordinator.state.topic.replication.factor: a single Cascade node can hold only 1 replica; Cascade does not run a multi-node cluster yet"},
		{[]string{"share.coordinator.state.topic.min.isr=2"}, "Invalid value 2 for configuration share.coordinator.state.topic.min.isr: a single Cascade node can hold only 1 replica; Cascade does not run a multi-node cluster yet"},
		{[]string{"listeners=PLAINTEXT://:9092,CONTROLLER://:9093", "controller.listener.names=CONTROLLER",
			"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT", "inter.broker.listener.name=CONTROLLER"},
			"inter.broker.listener.name: CONTROLLER must not be a controller listener (controller.listener.names)"},
		{[]string{"advertised.listeners=OTHER://h:1", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT"},
			"Invalid value OTHER://h:1 for configuration advertised.listeners: advertised.listeners listener names must be equal to or a subset of the ones defined in listeners; OTHER is not in listeners"},
	} {
		_, err := Load("", c.overrides)
		if err == nil || err.Error() != c.want {
			t.Errorf("%v:\n got  %v\n want %s", c.overrides, err, c.want)
		}
	}
}

// TestStockFileKeysDescribed checks that DescribeConfigs of the broker lists
// every key of the stock file, with the file's value as a static config.
func TestStockFileKeysDescribed(t *testing.T) {
	b, err := Load(stockFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	props, err := readProps(stockFile)
	if err != nil {
		t.Fatal(err)
	}
	es := b.DescribeBroker()
	for _, p := range props {
		e := find(es, p.Key)
		if e.Value == nil || *e.Value != strings.TrimSpace(p.Value) || e.Source != SourceStaticBrokerConfig {
			t.Errorf("%s: %+v", p.Key, e)
		}
	}
}

func readProps(path string) ([]Property, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseProperties(f)
}

// TestConnectionQuotaKeys checks max.connections and its neighbours:
// Kafka's defaults, the overrides syntax, and Kafka's refusals.
func TestConnectionQuotaKeys(t *testing.T) {
	b, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.MaxConnections != 2147483647 || b.MaxConnectionsPerIP != 2147483647 ||
		b.MaxConnectionCreationRate != 2147483647 || len(b.MaxConnectionsPerIPOverrides) != 0 {
		t.Fatalf("defaults %d %d %d %v", b.MaxConnections, b.MaxConnectionsPerIP, b.MaxConnectionCreationRate,
			b.MaxConnectionsPerIPOverrides)
	}
	b, err = New(map[string]string{
		"max.connections": "100", "max.connections.per.ip": "0", "max.connection.creation.rate": "20",
		"max.connections.per.ip.overrides": "127.0.0.1:5, broker-host:0 ,[::1]:7",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"127.0.0.1": 5, "broker-host": 0, "::1": 7}
	if b.MaxConnections != 100 || b.MaxConnectionsPerIP != 0 || b.MaxConnectionCreationRate != 20 ||
		!reflect.DeepEqual(b.MaxConnectionsPerIPOverrides, want) {
		t.Fatalf("got %d %d %d %v", b.MaxConnections, b.MaxConnectionsPerIP, b.MaxConnectionCreationRate,
			b.MaxConnectionsPerIPOverrides)
	}
	for _, bad := range []map[string]string{
		{"max.connections": "-1"},
		{"max.connections.per.ip": "-1"},
		{"max.connection.creation.rate": "-5"},
		{"max.connections.per.ip.overrides": "127.0.0.1"},
		{"max.connections.per.ip.overrides": "127.0.0.1:x"},
		{"max.connections.per.ip.overrides": "127.0.0.1:-1"},
		{"max.connections.per.ip": "0"}, // only with overrides, as Kafka
	} {
		if _, err := New(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

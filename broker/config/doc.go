// Package config owns Cascade's configuration: the table of broker and
// topic config definitions (name, type, default, validator, documentation,
// dynamic flag, broker synonyms) in the style of Kafka's ConfigDef,
// LogConfig and ServerTopicConfigSynonyms; the parser for server.properties
// (Java properties syntax) and --override; and the resolution of a topic's
// effective configuration from its overrides and the broker's defaults.
//
// Broker configs: Load reads a properties file and applies overrides in
// order. Every key must be one Cascade honours (BrokerDefs); any other key
// is refused with an error naming it and the line, as is a malformed or
// out-of-range value, worded as Kafka's ConfigException:
//
//	b, err := config.Load("server.properties", []string{"num.partitions=3"})
//	// server.properties:7: unsupported configuration key "ssl.keystore.location": Cascade does not honour it
//	// --override num.partitions=x: Invalid value x for configuration num.partitions: Not a number of type INT
//
// Topic configs: every config Kafka 4.x describes for a topic is defined
// (TopicDefs). ValidateTopic checks overrides as LogConfig.validate does
// ("Unknown topic config name: x", "Invalid value ... for configuration
// ..."). ResolveTopic and TopicLogConfig give the effective values: the
// override, else the first broker synonym set (log.retention.hours scaled
// to retention.ms), else the synonym's default, else the topic default.
// DescribeTopic and (*Broker).DescribeBroker give DescribeConfigs entries
// with sources and synonyms exactly as Kafka's ConfigHelper builds them,
// including its quirk that synonyms listed before a config's own broker
// name are dropped (with only log.retention.hours set, retention.ms has no
// synonyms and source DEFAULT_CONFIG, though its value comes from the
// hours). EffectiveTopic gives the CreateTopics (v5+) view, whose source
// is STATIC_BROKER_CONFIG as soon as any synonym is set.
//
// Honouring: a few configs are described but not implemented by Cascade
// (compression.type other than producer, preallocate, segment.jitter.ms,
// tiered-storage and throttling configs). They are marked DefaultOnly and
// accept only their default value, so a setting is refused rather than
// silently ignored. Broker configs are static: Cascade changes none at run
// time, so DescribeBroker reports every entry read-only.
//
// Apache Kafka's stock config/server.properties (a combined KRaft node)
// loads unchanged (testdata/kafka-server.properties). Kafka's thread-pool
// sizes (num.network.threads, num.io.threads, background.threads,
// num.recovery.threads.per.data.dir) are validated as Kafka's ConfigDef does
// and marked NoEffect, as are the share coordinator's keys, which accept only
// single-node values: (*Broker).NoEffect lists those set, for the broker to
// log. Controller listeners are parsed and checked but are not bound
// (ControllerListeners).
//
// Cluster: every node of a Kafka 4.x KRaft cluster (broker, controller or
// both) is read as KafkaConfig.validateValues reads it, with Kafka's
// messages for what it refuses, into the typed Broker.Cluster (roles,
// voters, controller and broker listeners, advertised listeners per name,
// inter-broker listener, heartbeat, quorum and replica fetch timings,
// replication and metadata log settings). LoadCluster and NewCluster
// return it for any valid configuration. Load and New also call
// (*Broker).CheckRunnable, which refuses, with errors matching
// ErrNotRunnable, what Cascade's combined nodes cannot run yet: another
// role, a node that is not a voter, several bootstrap controllers,
// replication factors above 1 on a single node or, on a cluster, for the
// share coordinator's state topic (Cascade has no share groups), metadata
// log settings. A multi-node cluster replicates __consumer_offsets and
// __transaction_state by offsets.topic.replication.factor and
// transaction.state.log.replication.factor, Kafka's 3 (and
// transaction.state.log.min.isr 2) when unset.
//
// Defaults differ from Kafka's where a single local node needs it:
// node.id=1, process.roles=broker,controller, listeners
// PLAINTEXT://127.0.0.1:9092, log.dir=./data, and replication factors of 1
// for the internal topics. socket.send.buffer.bytes and
// socket.receive.buffer.bytes default to -1 (DefaultSocketBufferBytes, the
// OS default with TCP autotuning) where Kafka fixes 102400. The package does
// no I/O beyond reading the properties file in Load.
package config

package config

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cascade-kafka/cascade/broker/log"
)

const maxInt64Text = "9223372036854775807"

// Scales of ConfigSynonym converters.
const (
	minutesToMs = 60 * 1000
	hoursToMs   = 60 * 60 * 1000
)

// topicDefs are the topic configs Kafka 4.x describes for a topic, with the
// defaults, validators and broker synonyms of LogConfig and
// ServerTopicConfigSynonyms (Kafka 4.0 defaults of KIP-1030:
// segment.bytes at least 1 MiB, message.timestamp.after.max.ms one hour),
// as Kafka 4.4's LogConfig lists them. The tiered-storage, share-group
// dead-letter-queue and max.decompressed.message.bytes configs are
// DefaultOnly: Cascade has neither tiered storage nor share groups, and its
// log caps the decompressed size of a whole batch (log.Options
// MaxDecompressedBytes) rather than of each record.
var topicDefs = newDefs(
	&Def{Name: "cleanup.policy", Type: TypeList, Default: "delete", HasDefault: true,
		Validate: listOf(true, "compact", "delete"),
		Doc:      "The retention policy of old log segments: \"delete\" removes segments past the retention time or size, \"compact\" keeps the latest value of each key; both may be listed.",
		Synonyms: []Synonym{{"log.cleanup.policy", 1}}},
	&Def{Name: "compression.gzip.level", Type: TypeInt, Default: "-1", HasDefault: true,
		Validate: gzipLevel,
		Doc:      "The compression level used when compression.type is gzip.",
		Synonyms: []Synonym{{"compression.gzip.level", 1}}},
	&Def{Name: "compression.lz4.level", Type: TypeInt, Default: "9", HasDefault: true,
		Validate: between(1, 17),
		Doc:      "The compression level used when compression.type is lz4.",
		Synonyms: []Synonym{{"compression.lz4.level", 1}}},
	&Def{Name: "compression.type", Type: TypeString, Default: "producer", HasDefault: true,
		Validate: oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), DefaultOnly: true,
		Doc:      "The final compression type of the topic; \"producer\" keeps the codec the producer chose.",
		Synonyms: []Synonym{{"compression.type", 1}}},
	&Def{Name: "compression.zstd.level", Type: TypeInt, Default: "3", HasDefault: true,
		Validate: between(-131072, 22),
		Doc:      "The compression level used when compression.type is zstd.",
		Synonyms: []Synonym{{"compression.zstd.level", 1}}},
	&Def{Name: "delete.retention.ms", Type: TypeLong, Default: "86400000", HasDefault: true,
		Validate: atLeast(0),
		Doc:      "How long delete tombstones are kept in a compacted topic.",
		Synonyms: []Synonym{{"log.cleaner.delete.retention.ms", 1}}},
	&Def{Name: "errors.deadletterqueue.group.enable", Type: TypeBoolean, Default: "false", HasDefault: true,
		DefaultOnly: true,
		Doc:         "Whether share groups may use the topic as a dead-letter queue (Cascade has no share groups)."},
	&Def{Name: "file.delete.delay.ms", Type: TypeLong, Default: "60000", HasDefault: true,
		Validate: atLeast(0),
		Doc:      "How long to wait before deleting a file from the filesystem.",
		Synonyms: []Synonym{{"log.segment.delete.delay.ms", 1}}},
	&Def{Name: "flush.messages", Type: TypeLong, Default: maxInt64Text, HasDefault: true,
		Validate: atLeast(1),
		Doc:      "The number of messages after which the log is fsynced.",
		Synonyms: []Synonym{{"log.flush.interval.messages", 1}}},
	&Def{Name: "flush.ms", Type: TypeLong, Default: maxInt64Text, HasDefault: true,
		Validate: atLeast(0),
		Doc:      "The time after which the log is fsynced.",
		Synonyms: []Synonym{{"log.flush.interval.ms", 1}, {"log.flush.scheduler.interval.ms", 1}}},
	&Def{Name: "follower.replication.throttled.replicas", Type: TypeList, Default: "", HasDefault: true,
		DefaultOnly: true,
		Doc:         "Replicas whose log replication is throttled on the follower side."},
	&Def{Name: "index.interval.bytes", Type: TypeInt, Default: "4096", HasDefault: true,
		Validate: atLeast(0),
		Doc:      "How often, in bytes, an entry is added to the offset index.",
		Synonyms: []Synonym{{"log.index.interval.bytes", 1}}},
	&Def{Name: "leader.replication.throttled.replicas", Type: TypeList, Default: "", HasDefault: true,
		DefaultOnly: true,
		Doc:         "Replicas whose log replication is throttled on the leader side."},
	&Def{Name: "local.retention.bytes", Type: TypeLong, Default: "-2", HasDefault: true,
		Validate: atLeast(-2), DefaultOnly: true,
		Doc:      "The local log size kept when tiered storage is on; -2 means retention.bytes.",
		Synonyms: []Synonym{{"log.local.retention.bytes", 1}}},
	&Def{Name: "local.retention.ms", Type: TypeLong, Default: "-2", HasDefault: true,
		Validate: atLeast(-2), DefaultOnly: true,
		Doc:      "The local log age kept when tiered storage is on; -2 means retention.ms.",
		Synonyms: []Synonym{{"log.local.retention.ms", 1}}},
	&Def{Name: "max.compaction.lag.ms", Type: TypeLong, Default: maxInt64Text, HasDefault: true,
		Validate: atLeast(1),
		Doc:      "The longest a message stays ineligible for compaction.",
		Synonyms: []Synonym{{"log.cleaner.max.compaction.lag.ms", 1}}},
	&Def{Name: "max.decompressed.message.bytes", Type: TypeInt, Default: "2147483639", HasDefault: true,
		Validate: between(1, 2147483639), DefaultOnly: true,
		Doc:      "The largest decompressed size of a single record the topic accepts.",
		Synonyms: []Synonym{{"max.decompressed.message.bytes", 1}}},
	&Def{Name: "max.message.bytes", Type: TypeInt, Default: "1048588", HasDefault: true,
		Validate: atLeast(0),
		Doc:      "The largest record batch size the topic accepts.",
		Synonyms: []Synonym{{"message.max.bytes", 1}}},
	&Def{Name: "message.timestamp.after.max.ms", Type: TypeLong, Default: "3600000", HasDefault: true,
		Validate: atLeast(0),
		Doc:      "How far a CreateTime timestamp may be ahead of the broker's clock.",
		Synonyms: []Synonym{{"log.message.timestamp.after.max.ms", 1}}},
	&Def{Name: "message.timestamp.before.max.ms", Type: TypeLong, Default: maxInt64Text, HasDefault: true,
		Validate: atLeast(0),
		Doc:      "How far a CreateTime timestamp may be behind the broker's clock.",
		Synonyms: []Synonym{{"log.message.timestamp.before.max.ms", 1}}},
	&Def{Name: "message.timestamp.type", Type: TypeString, Default: "CreateTime", HasDefault: true,
		Validate: oneOf("CreateTime", "LogAppendTime"),
		Doc:      "Whether record timestamps are the producer's create time or the broker's append time.",
		Synonyms: []Synonym{{"log.message.timestamp.type", 1}}},
	&Def{Name: "min.cleanable.dirty.ratio", Type: TypeDouble, Default: "0.5", HasDefault: true,
		Validate: betweenFloat(0, 1, "0", "1"),
		Doc:      "The dirty share of the log above which the cleaner compacts it.",
		Synonyms: []Synonym{{"log.cleaner.min.cleanable.ratio", 1}}},
	&Def{Name: "min.compaction.lag.ms", Type: TypeLong, Default: "0", HasDefault: true,
		Validate: atLeast(0),
		Doc:      "The least time a message stays uncompacted.",
		Synonyms: []Synonym{{"log.cleaner.min.compaction.lag.ms", 1}}},
	&Def{Name: "min.insync.replicas", Type: TypeInt, Default: "1", HasDefault: true,
		Validate: atLeast(1),
		Doc:      "The least number of in-sync replicas an acks=all produce needs.",
		Synonyms: []Synonym{{"min.insync.replicas", 1}}},
	&Def{Name: "preallocate", Type: TypeBoolean, Default: "false", HasDefault: true,
		DefaultOnly: true,
		Doc:         "Whether segment files are preallocated on disk.",
		Synonyms:    []Synonym{{"log.preallocate", 1}}},
	&Def{Name: "remote.copy.lag.bytes", Type: TypeLong, Default: "-1", HasDefault: true,
		Validate: atLeast(-1), DefaultOnly: true,
		Doc:      "The size-based upload eligibility check of tiered storage.",
		Synonyms: []Synonym{{"log.remote.copy.lag.bytes", 1}}},
	&Def{Name: "remote.copy.lag.ms", Type: TypeLong, Default: "0", HasDefault: true,
		Validate: atLeast(-1), DefaultOnly: true,
		Doc:      "The time-based upload eligibility check of tiered storage.",
		Synonyms: []Synonym{{"log.remote.copy.lag.ms", 1}}},
	&Def{Name: "remote.log.copy.disable", Type: TypeBoolean, Default: "false", HasDefault: true,
		DefaultOnly: true,
		Doc:         "Whether copying to tiered storage is disabled."},
	&Def{Name: "remote.log.delete.on.disable", Type: TypeBoolean, Default: "false", HasDefault: true,
		DefaultOnly: true,
		Doc:         "Whether remote data is deleted when tiered storage is turned off."},
	&Def{Name: "remote.storage.enable", Type: TypeBoolean, Default: "false", HasDefault: true,
		DefaultOnly: true,
		Doc:         "Whether the topic uses tiered storage."},
	&Def{Name: "retention.bytes", Type: TypeLong, Default: "-1", HasDefault: true,
		Doc:      "The largest size a partition's log grows to before old segments are deleted; -1 means no limit.",
		Synonyms: []Synonym{{"log.retention.bytes", 1}}},
	&Def{Name: "retention.ms", Type: TypeLong, Default: "604800000", HasDefault: true,
		Validate: atLeast(-1),
		Doc:      "How long a segment is kept before it is deleted; -1 means no limit.",
		Synonyms: []Synonym{{"log.retention.ms", 1}, {"log.retention.minutes", minutesToMs}, {"log.retention.hours", hoursToMs}}},
	&Def{Name: "segment.bytes", Type: TypeInt, Default: "1073741824", HasDefault: true,
		Validate: atLeast(1024 * 1024),
		Doc:      "The size at which a new segment file is rolled.",
		Synonyms: []Synonym{{"log.segment.bytes", 1}}},
	&Def{Name: "segment.index.bytes", Type: TypeInt, Default: "10485760", HasDefault: true,
		Validate: atLeast(4),
		Doc:      "The size of the offset and time index files of a segment.",
		Synonyms: []Synonym{{"log.index.size.max.bytes", 1}}},
	&Def{Name: "segment.jitter.ms", Type: TypeLong, Default: "0", HasDefault: true,
		Validate: atLeast(0), DefaultOnly: true,
		Doc:      "The largest random jitter subtracted from segment.ms.",
		Synonyms: []Synonym{{"log.roll.jitter.ms", 1}, {"log.roll.jitter.hours", hoursToMs}}},
	&Def{Name: "segment.ms", Type: TypeLong, Default: "604800000", HasDefault: true,
		Validate: atLeast(1),
		Doc:      "The time after which a segment is rolled even if it is not full.",
		Synonyms: []Synonym{{"log.roll.ms", 1}, {"log.roll.hours", hoursToMs}}},
	&Def{Name: "unclean.leader.election.enable", Type: TypeBoolean, Default: "false", HasDefault: true,
		Doc:      "Whether a replica outside the ISR may become leader (meaningless on a single node).",
		Synonyms: []Synonym{{"unclean.leader.election.enable", 1}}},
)

// gzipLevel is GzipCompression's level validator: 1-9, or -1 for the default.
func gzipLevel(v any) string {
	n, _ := asInt64(v)
	if n == -1 || (n >= 1 && n <= 9) {
		return ""
	}
	return "Value must be between 1 and 9, or -1"
}

// TopicDefs returns the topic config definitions in name order.
func TopicDefs() []*Def { return topicDefs.All() }

// TopicDef returns the definition of one topic config.
func TopicDef(name string) (*Def, bool) { return topicDefs.Get(name) }

// ValidateTopic checks topic config overrides as Kafka's LogConfig.validate
// does against the broker's defaults: every name known ("Unknown topic config
// name: x"), every value parsed and in range, and min.compaction.lag.ms not
// above max.compaction.lag.ms. Cascade adds one rule: a config it describes
// but does not implement accepts only its default value.
func ValidateTopic(b *Broker, overrides map[string]string) error {
	_, err := ResolveTopic(b, overrides)
	return err
}

// Topic is a topic's effective configuration: the log's part and the parts
// the partition and produce path use.
type Topic struct {
	Log                         log.Config
	MinInsyncReplicas           int
	MessageTimestampBeforeMaxMs int64
	MessageTimestampAfterMaxMs  int64
	UncleanLeaderElection       bool
}

// TopicLogConfig returns the log configuration of a topic with the given
// overrides on top of the broker's defaults.
func TopicLogConfig(b *Broker, overrides map[string]string) (log.Config, error) {
	t, err := ResolveTopic(b, overrides)
	return t.Log, err
}

// ResolveTopic validates overrides and returns the effective topic config:
// each value is the topic override, else the first broker synonym with a
// cluster-wide dynamic default, else the first set broker synonym (scaled
// to the topic's unit), else the first broker synonym's default,
// else the topic default, as KafkaConfig.extractLogConfigMap and
// LogConfig.fromProps combine them.
func ResolveTopic(b *Broker, overrides map[string]string) (Topic, error) {
	names := make([]string, 0, len(overrides))
	for name := range overrides {
		names = append(names, name)
	}
	sort.Strings(names) // a deterministic first error
	for _, name := range names {
		def, ok := topicDefs.Get(name)
		if !ok {
			return Topic{}, fmt.Errorf("Unknown topic config name: %s: %w", name, ErrUnknown)
		}
		v, err := def.Parse(overrides[name])
		if err != nil {
			return Topic{}, err
		}
		if def.DefaultOnly {
			dv, _ := def.Parse(def.Default)
			if fmt.Sprint(v) != fmt.Sprint(dv) {
				return Topic{}, &ValueError{Name: name, Value: overrides[name],
					Reason: "Cascade implements only the default value " + def.Default}
			}
		}
	}
	get := func(name string) any {
		def, _ := topicDefs.Get(name)
		v, _ := def.Parse(topicValue(b, def, overrides).value)
		return v
	}
	ms := func(name string) time.Duration { return msDuration(get(name).(int64)) }
	minLag, maxLag := get("min.compaction.lag.ms").(int64), get("max.compaction.lag.ms").(int64)
	if minLag > maxLag {
		return Topic{}, fmt.Errorf("conflict topic config setting min.compaction.lag.ms (%d) > max.compaction.lag.ms (%d): %w",
			minLag, maxLag, ErrInvalid)
	}
	var policy log.Policy
	for _, p := range get("cleanup.policy").([]string) {
		switch strings.ToLower(p) {
		case "delete":
			policy |= log.PolicyDelete
		case "compact":
			policy |= log.PolicyCompact
		}
	}
	ts := log.CreateTime
	if get("message.timestamp.type").(string) == "LogAppendTime" {
		ts = log.LogAppendTime
	}
	retentionMs := ms("retention.ms")
	if retentionMs < 0 {
		retentionMs = -time.Millisecond
	}
	t := Topic{
		Log: log.Config{
			SegmentBytes:           int64(get("segment.bytes").(int32)),
			SegmentMs:              ms("segment.ms"),
			SegmentIndexBytes:      int(get("segment.index.bytes").(int32)),
			IndexIntervalBytes:     int(get("index.interval.bytes").(int32)),
			RetentionBytes:         get("retention.bytes").(int64),
			RetentionMs:            retentionMs,
			FlushMessages:          get("flush.messages").(int64),
			FlushMs:                ms("flush.ms"),
			CleanupPolicy:          policy,
			DeleteRetentionMs:      ms("delete.retention.ms"),
			MinCompactionLagMs:     ms("min.compaction.lag.ms"),
			MaxCompactionLagMs:     ms("max.compaction.lag.ms"),
			MinCleanableDirtyRatio: get("min.cleanable.dirty.ratio").(float64),
			TimestampType:          ts,
			MaxMessageBytes:        int(get("max.message.bytes").(int32)),
			TimestampBeforeMax:     timestampBound(get("message.timestamp.before.max.ms").(int64)),
			TimestampAfterMax:      timestampBound(get("message.timestamp.after.max.ms").(int64)),
		},
		MinInsyncReplicas:           int(get("min.insync.replicas").(int32)),
		MessageTimestampBeforeMaxMs: get("message.timestamp.before.max.ms").(int64),
		MessageTimestampAfterMaxMs:  get("message.timestamp.after.max.ms").(int64),
		UncleanLeaderElection:       get("unclean.leader.election.enable").(bool),
	}
	if t.Log.RetentionBytes < 0 {
		t.Log.RetentionBytes = -1
	}
	return t, nil
}

// timestampBound converts message.timestamp.{before,after}.max.ms to the
// log's bound. The log reads a zero Duration as "Kafka's default", so
// Kafka's 0 (no skew allowed at all) becomes one nanosecond, which the log
// compares in whole milliseconds, that is as 0.
func timestampBound(ms int64) time.Duration {
	if ms == 0 {
		return time.Nanosecond
	}
	return msDuration(ms)
}

// msDuration converts milliseconds to a Duration, saturating at
// math.MaxInt64 (Kafka's Long.MAX_VALUE "never").
func msDuration(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	if ms < math.MinInt64/int64(time.Millisecond) {
		return math.MinInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// resolved is a value with where it came from.
type resolved struct {
	value  string
	source Source
}

// topicValue resolves one topic config (see ResolveTopic).
func topicValue(b *Broker, def *Def, overrides map[string]string) resolved {
	if v, ok := overrides[def.Name]; ok {
		return resolved{strings.TrimSpace(v), SourceDynamicTopicConfig}
	}
	for _, syn := range def.Synonyms {
		if v, ok := b.dynamicDefaults[syn.Name]; ok {
			return resolved{scale(v, syn.Scale), SourceDynamicDefaultBrokerConfig}
		}
	}
	for _, syn := range def.Synonyms {
		if v, ok := b.set[syn.Name]; ok {
			return resolved{scale(v, syn.Scale), SourceStaticBrokerConfig}
		}
	}
	for _, syn := range def.Synonyms {
		if bd, ok := brokerDefs.Get(syn.Name); ok && bd.HasDefault {
			return resolved{scale(bd.Default, syn.Scale), SourceDefaultConfig}
		}
	}
	return resolved{def.Default, SourceDefaultConfig}
}

// scale multiplies a broker synonym's value into the topic config's unit,
// as ConfigSynonym's converters do; negatives stay negative (-1: unlimited).
func scale(v string, factor int64) string {
	v = strings.TrimSpace(v)
	if factor == 1 {
		return v
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return v // validated at broker start; cannot happen for a parsed Broker
	}
	if n < 0 {
		return "-1"
	}
	if n > math.MaxInt64/factor {
		return maxInt64Text
	}
	return strconv.FormatInt(n*factor, 10)
}

// Entry is one described config, as DescribeConfigs reports it.
type Entry struct {
	Name      string
	Value     *string // nil: null (no default, not set)
	Source    Source
	ReadOnly  bool
	Sensitive bool
	Type      Type
	Doc       string
	Synonyms  []SynonymEntry
}

// SynonymEntry is one synonym of a described config.
type SynonymEntry struct {
	Name   string
	Value  *string
	Source Source
}

// DescribeTopic describes every topic config of a topic with the given
// overrides, in name order, as Kafka's ConfigHelper.createTopicConfigEntry:
// the synonyms are the topic override (DYNAMIC_TOPIC_CONFIG) followed by
// the broker synonyms of configSynonyms (see brokerSynonymEntries); the
// entry's source is the first synonym's, DEFAULT_CONFIG when there is none.
// The value is always the effective one, rendered by Format.
func DescribeTopic(b *Broker, overrides map[string]string) []Entry {
	out := make([]Entry, 0, len(topicDefs.list))
	for _, def := range topicDefs.list {
		// The value is shown parsed and re-rendered, as LogConfig holds it.
		value := topicValue(b, def, overrides).value
		if v, err := def.Parse(value); err == nil {
			value = Format(v)
		}
		var syns []SynonymEntry
		if _, ok := overrides[def.Name]; ok {
			syns = append(syns, SynonymEntry{def.Name, ptr(value), SourceDynamicTopicConfig})
		}
		if len(def.Synonyms) > 0 {
			syns = append(syns, b.brokerSynonymEntries(def.Synonyms[0].Name)...)
		}
		source := SourceDefaultConfig
		if len(syns) > 0 {
			source = syns[0].Source
		}
		out = append(out, Entry{
			Name: def.Name, Value: ptr(value), Source: source, Type: def.Type,
			Sensitive: def.Sensitive, Doc: def.Doc, Synonyms: syns,
		})
	}
	return out
}

// EffectiveTopic lists every topic config of a topic with the given
// overrides, in name order, as Kafka's KafkaConfigSchema
// resolveEffectiveTopicConfigs does for the CreateTopics response: the
// source is DYNAMIC_TOPIC_CONFIG for an override,
// DYNAMIC_DEFAULT_BROKER_CONFIG for a cluster-wide dynamic default,
// STATIC_BROKER_CONFIG when a broker synonym is set, else DEFAULT_CONFIG;
// there are no synonyms.
func EffectiveTopic(b *Broker, overrides map[string]string) []Entry {
	out := make([]Entry, 0, len(topicDefs.list))
	for _, def := range topicDefs.list {
		r := topicValue(b, def, overrides)
		out = append(out, Entry{Name: def.Name, Value: ptr(r.value), Source: r.source, Type: def.Type,
			Sensitive: def.Sensitive, Doc: def.Doc})
	}
	return out
}

// brokerSynonymGroups are the broker configs that stand for one another,
// highest priority first (Kafka's DynamicBrokerConfig.brokerConfigSynonyms).
var brokerSynonymGroups = [][]string{
	{"log.roll.ms", "log.roll.hours"},
	{"log.roll.jitter.ms", "log.roll.jitter.hours"},
	{"log.flush.interval.ms", "log.flush.scheduler.interval.ms"},
	{"log.retention.ms", "log.retention.minutes", "log.retention.hours"},
}

// brokerSynonymGroup returns the synonyms of a broker config, itself
// included.
func brokerSynonymGroup(name string) []string {
	for _, g := range brokerSynonymGroups {
		for _, n := range g {
			if n == name {
				return g
			}
		}
	}
	return []string{name}
}

// brokerSynonymEntries lists the synonyms of broker config name as Kafka's
// ConfigHelper.configSynonyms does: first every synonym with a cluster-wide
// dynamic default (DYNAMIC_DEFAULT_BROKER_CONFIG, see clusterDefaults), then
// every synonym set statically (STATIC_BROKER_CONFIG), then every synonym
// with a default (DEFAULT_CONFIG), each in priority order; then everything
// before the first entry for name itself is dropped. So with only
// log.retention.hours set, log.retention.ms has no synonym entries at all,
// as in Kafka.
func (b *Broker) brokerSynonymEntries(name string) []SynonymEntry {
	group := brokerSynonymGroup(name)
	var all []SynonymEntry
	for _, n := range group {
		if v, ok := b.dynamicDefaults[n]; ok {
			all = append(all, SynonymEntry{n, ptr(v), SourceDynamicDefaultBrokerConfig})
		}
	}
	for _, n := range group {
		if v, ok := b.set[n]; ok {
			all = append(all, SynonymEntry{n, ptr(v), SourceStaticBrokerConfig})
		}
	}
	for _, n := range group {
		if d, ok := brokerDefs.Get(n); ok && d.HasDefault {
			all = append(all, SynonymEntry{n, ptr(d.Default), SourceDefaultConfig})
		}
	}
	for i, e := range all {
		if e.Name == name {
			return all[i:]
		}
	}
	return nil
}

func ptr(s string) *string { return &s }

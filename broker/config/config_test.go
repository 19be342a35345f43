package config

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/broker/log"
)

func TestParseProperties(t *testing.T) {
	in := "# comment\n" +
		"! also a comment \\\n" +
		"a=1\n" +
		"  b : 2  \n" +
		"c 3\n" +
		"d\t=\t4\n" +
		"e=five \\\n" +
		"    continued\r\n" +
		"f=tab\\there\\nnl\\u0041\\=\\:\\\\\n" +
		"g\\ key=space in key\n" +
		"empty=\n" +
		"novalue\n" +
		"h=\\uD83D\\uDE00\n" +
		"a=override\r" +
		"last=eof \\"
	got, err := ParseProperties(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Property{
		{"a", "1", 3}, {"b", "2  ", 4}, {"c", "3", 5}, {"d", "4", 6},
		{"e", "five continued", 7}, {"f", "tab\there\nnlA=:\\", 9},
		{"g key", "space in key", 10}, {"empty", "", 11}, {"novalue", "", 12},
		{"h", "😀", 13}, {"a", "override", 14}, {"last", "eof ", 15},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func TestParsePropertiesMalformedUnicode(t *testing.T) {
	for _, in := range []string{`a=\u12`, `a=\uZZZZ`, `a=\u`} {
		if _, err := ParseProperties(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), `malformed \uxxxx encoding`) {
			t.Errorf("%q: err = %v", in, err)
		}
	}
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadDefaults(t *testing.T) {
	b, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.NodeID != 1 || b.NumPartitions != 1 || !b.AutoCreateTopics || !b.DeleteTopicEnable ||
		b.MessageMaxBytes != 1048588 || b.SocketRequestMaxBytes != 104857600 ||
		!reflect.DeepEqual(b.LogDirs, []string{"./data"}) || b.OffsetsTopicNumPartitions != 50 ||
		b.TransactionMaxTimeout != 15*time.Minute || b.GroupInitialRebalanceDelay != 3*time.Second {
		t.Fatalf("defaults: %+v", b)
	}
	want := []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092, SecurityProtocol: "PLAINTEXT"}}
	if !reflect.DeepEqual(b.Listeners, want) || !reflect.DeepEqual(b.AdvertisedListeners, want) {
		t.Fatalf("listeners %+v advertised %+v", b.Listeners, b.AdvertisedListeners)
	}
}

func TestLoadFileAndOverrides(t *testing.T) {
	p := writeFile(t, `
node.id=1
process.roles=broker,controller
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
advertised.listeners=PLAINTEXT://localhost:9092
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
controller.quorum.voters=1@localhost:9093
inter.broker.listener.name=PLAINTEXT
log.dirs=/tmp/a,/tmp/b
num.partitions=3
auto.create.topics.enable=false
log.retention.hours=1
offsets.topic.replication.factor=1
`)
	b, err := Load(p, []string{"num.partitions=5", "delete.topic.enable=false", "message.max.bytes= 2000 "})
	if err != nil {
		t.Fatal(err)
	}
	if b.NumPartitions != 5 || b.AutoCreateTopics || b.DeleteTopicEnable || b.MessageMaxBytes != 2000 {
		t.Fatalf("%+v", b)
	}
	if !reflect.DeepEqual(b.LogDirs, []string{"/tmp/a", "/tmp/b"}) {
		t.Fatalf("log dirs %v", b.LogDirs)
	}
	if bl := b.BrokerListeners(); len(bl) != 1 || bl[0].Name != "PLAINTEXT" || bl[0].Addr() != ":9092" {
		t.Fatalf("broker listeners %+v", bl)
	}
	if len(b.ControllerQuorumVoters) != 1 || b.ControllerQuorumVoters[0] != (Voter{1, "localhost", 9093}) {
		t.Fatalf("voters %+v", b.ControllerQuorumVoters)
	}
	cfg, err := TopicLogConfig(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RetentionMs != time.Hour {
		t.Fatalf("retention %v", cfg.RetentionMs)
	}
}

func TestLoadErrors(t *testing.T) {
	bad := writeFile(t, "# header\nlog.dir=/data/\\u00zz\n")
	if _, err := Load(bad, nil); err == nil || err.Error() != bad+`:2: malformed \uxxxx encoding` {
		t.Fatalf("got %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.properties"), nil); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("got %v", err)
	}
	p := writeFile(t, "num.partitions=2\nsasl.kerberos.service.name=kafka\n")
	_, err := Load(p, nil)
	if want := p + `:2: unsupported configuration key "sasl.kerberos.service.name": Cascade does not honour it`; err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	if !errors.Is(err, ErrUnsupportedKey) {
		t.Fatal("not ErrUnsupportedKey")
	}
	cases := []struct {
		overrides []string
		want      string
	}{
		{[]string{"num.partitions=x"}, "--override num.partitions=x: Invalid value x for configuration num.partitions: Not a number of type INT"},
		{[]string{"num.partitions=0"}, "--override num.partitions=0: Invalid value 0 for configuration num.partitions: Value must be at least 1"},
		{[]string{"auto.create.topics.enable=yes"}, "--override auto.create.topics.enable=yes: Invalid value yes for configuration auto.create.topics.enable: Expected value to be either true or false"},
		{[]string{"log.segment.bytes=1000"}, "--override log.segment.bytes=1000: Invalid value 1000 for configuration log.segment.bytes: Value must be at least 1048576"},
		{[]string{"log.cleanup.policy=shred"}, "--override log.cleanup.policy=shred: Invalid value shred for configuration log.cleanup.policy: String must be one of: compact, delete"},
		{[]string{"bogus"}, "--override bogus: expected key=value"},
		{[]string{"log.cleaner.threads=2"}, `--override log.cleaner.threads=2: unsupported configuration key "log.cleaner.threads": Cascade does not honour it`},
		{[]string{"compression.type=gzip"}, "--override compression.type=gzip: Invalid value gzip for configuration compression.type: Cascade implements only the default value producer"},
		{[]string{"default.replication.factor=3"}, "Invalid value 3 for configuration default.replication.factor: a single Cascade node can hold only 1 replica; Cascade does not run a multi-node cluster yet"},
		{[]string{"listeners=PLAINTEXT:9092"}, "Invalid value PLAINTEXT:9092 for configuration listeners: Unable to parse PLAINTEXT:9092 to a broker endpoint"},
		{[]string{"cluster.id=abc"}, "--override cluster.id=abc: Invalid value abc for configuration cluster.id: not a Kafka cluster id (22 characters of URL-safe base64 encoding 16 bytes)"},
		{[]string{"process.roles=broker", "node.id=2", "controller.quorum.bootstrap.servers=c:9093", "controller.listener.names=CONTROLLER"}, "process.roles=broker: Cascade finds the controllers of a broker-only node in controller.quorum.voters; a dynamic quorum found through controller.quorum.bootstrap.servers is not supported yet"},
		{[]string{"log.cleaner.min.compaction.lag.ms=10", "log.cleaner.max.compaction.lag.ms=5"}, "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5): invalid config"},
	}
	for _, c := range cases {
		_, err := Load("", c.overrides)
		if err == nil || err.Error() != c.want {
			t.Errorf("%v:\n got  %v\n want %s", c.overrides, err, c.want)
		}
	}
}

func TestSynonymResolution(t *testing.T) {
	cases := []struct {
		props map[string]string
		want  time.Duration
		src   Source
	}{
		{nil, 7 * 24 * time.Hour, SourceDefaultConfig},
		// As Kafka's ConfigHelper.configSynonyms, synonyms before the
		// first log.retention.ms entry are dropped, so the source stays
		// DEFAULT_CONFIG although the value comes from the hours.
		{map[string]string{"log.retention.hours": "2"}, 2 * time.Hour, SourceDefaultConfig},
		{map[string]string{"log.retention.hours": "2", "log.retention.minutes": "3"}, 3 * time.Minute, SourceDefaultConfig},
		{map[string]string{"log.retention.hours": "2", "log.retention.minutes": "3", "log.retention.ms": "4"}, 4 * time.Millisecond, SourceStaticBrokerConfig},
		{map[string]string{"log.retention.ms": "-1"}, -time.Millisecond, SourceStaticBrokerConfig},
		{map[string]string{"log.retention.hours": "-1"}, -time.Millisecond, SourceDefaultConfig},
	}
	for _, c := range cases {
		b, err := New(c.props)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := TopicLogConfig(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.RetentionMs != c.want {
			t.Errorf("%v: retention %v want %v", c.props, cfg.RetentionMs, c.want)
		}
		e := find(DescribeTopic(b, nil), "retention.ms")
		if e.Source != c.src {
			t.Errorf("%v: source %v want %v", c.props, e.Source, c.src)
		}
	}
	b, _ := New(map[string]string{"log.roll.hours": "1", "log.flush.interval.ms": "5"})
	cfg, _ := TopicLogConfig(b, map[string]string{"retention.ms": "1000"})
	if cfg.SegmentMs != time.Hour || cfg.FlushMs != 5*time.Millisecond || cfg.RetentionMs != time.Second {
		t.Fatalf("%+v", cfg)
	}
}

func find(es []Entry, name string) Entry {
	for _, e := range es {
		if e.Name == name {
			return e
		}
	}
	return Entry{}
}

func TestTopicLogConfigDefaults(t *testing.T) {
	cfg, err := TopicLogConfig(Default(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := log.Config{
		SegmentBytes: 1 << 30, SegmentMs: 7 * 24 * time.Hour, SegmentIndexBytes: 10 << 20,
		IndexIntervalBytes: 4096, RetentionBytes: -1, RetentionMs: 7 * 24 * time.Hour,
		FlushMessages: math.MaxInt64, FlushMs: math.MaxInt64, CleanupPolicy: log.PolicyDelete,
		DeleteRetentionMs: 24 * time.Hour, MinCompactionLagMs: 0, MaxCompactionLagMs: math.MaxInt64,
		MinCleanableDirtyRatio: 0.5, TimestampType: log.CreateTime, MaxMessageBytes: 1048588,
		TimestampBeforeMax: math.MaxInt64, TimestampAfterMax: time.Hour,
	}
	if cfg != want {
		t.Fatalf("got  %+v\nwant %+v", cfg, want)
	}
	// Every field of log.Config is mapped: Kafka's topic defaults are the
	// log's defaults.
	if cfg != log.DefaultConfig() {
		t.Fatalf("topic defaults %+v differ from log.DefaultConfig %+v", cfg, log.DefaultConfig())
	}
	cfg, err = TopicLogConfig(Default(), map[string]string{
		"cleanup.policy": "compact,delete", "message.timestamp.type": "LogAppendTime",
		"max.message.bytes": "100", "segment.bytes": "1048576", "flush.messages": "1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CleanupPolicy != log.PolicyCompact|log.PolicyDelete || cfg.TimestampType != log.LogAppendTime ||
		cfg.MaxMessageBytes != 100 || cfg.SegmentBytes != 1<<20 || cfg.FlushMessages != 1 {
		t.Fatalf("%+v", cfg)
	}
}

func TestValidateTopic(t *testing.T) {
	b := Default()
	cases := []struct {
		cfg  map[string]string
		want string
		err  error
	}{
		{map[string]string{"retention.ms": "abc"}, "Invalid value abc for configuration retention.ms: Not a number of type LONG", ErrInvalid},
		{map[string]string{"retention.ms": "-2"}, "Invalid value -2 for configuration retention.ms: Value must be at least -1", ErrInvalid},
		{map[string]string{"foo.bar": "1"}, "Unknown topic config name: foo.bar: unknown config", ErrUnknown},
		{map[string]string{"segment.bytes": "1024"}, "Invalid value 1024 for configuration segment.bytes: Value must be at least 1048576", ErrInvalid},
		{map[string]string{"segment.bytes": "99999999999"}, "Invalid value 99999999999 for configuration segment.bytes: Not a number of type INT", ErrInvalid},
		{map[string]string{"min.cleanable.dirty.ratio": "1.5"}, "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1", ErrInvalid},
		{map[string]string{"message.timestamp.type": "Now"}, "Invalid value Now for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime", ErrInvalid},
		{map[string]string{"cleanup.policy": "delete,delete"}, "Invalid value delete,delete for configuration cleanup.policy: Values must not be duplicated", ErrInvalid},
		{map[string]string{"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5): invalid config", ErrInvalid},
		{map[string]string{"compression.type": "zstd"}, "Invalid value zstd for configuration compression.type: Cascade implements only the default value producer", ErrInvalid},
		{map[string]string{"compression.gzip.level": "10"}, "Invalid value 10 for configuration compression.gzip.level: Value must be between 1 and 9, or -1", ErrInvalid},
		{map[string]string{"unclean.leader.election.enable": "maybe"}, "Invalid value maybe for configuration unclean.leader.election.enable: Expected value to be either true or false", ErrInvalid},
	}
	for _, c := range cases {
		err := ValidateTopic(b, c.cfg)
		if err == nil || err.Error() != c.want || !errors.Is(err, c.err) {
			t.Errorf("%v:\n got  %v\n want %s", c.cfg, err, c.want)
		}
	}
	ok := map[string]string{"compression.type": "producer", "preallocate": "false", "retention.ms": "-1",
		"cleanup.policy": "", "unclean.leader.election.enable": "TRUE", "min.insync.replicas": "1"}
	if err := ValidateTopic(b, ok); err != nil {
		t.Fatal(err)
	}
}

func TestDescribeTopic(t *testing.T) {
	b, err := New(map[string]string{"log.retention.ms": "7200000", "log.retention.hours": "2", "message.max.bytes": "5000"})
	if err != nil {
		t.Fatal(err)
	}
	es := DescribeTopic(b, map[string]string{"retention.ms": "100"})
	if len(es) != len(TopicDefs()) {
		t.Fatalf("%d entries", len(es))
	}
	for i := 1; i < len(es); i++ {
		if es[i-1].Name >= es[i].Name {
			t.Fatalf("not sorted at %s", es[i].Name)
		}
	}
	r := find(es, "retention.ms")
	wantSyn := []SynonymEntry{
		{"retention.ms", ptr("100"), SourceDynamicTopicConfig},
		{"log.retention.ms", ptr("7200000"), SourceStaticBrokerConfig},
		{"log.retention.hours", ptr("2"), SourceStaticBrokerConfig},
		{"log.retention.hours", ptr("168"), SourceDefaultConfig},
	}
	if *r.Value != "100" || r.Source != SourceDynamicTopicConfig || !reflect.DeepEqual(r.Synonyms, wantSyn) || r.Type != TypeLong {
		t.Fatalf("%+v", r)
	}
	m := find(es, "max.message.bytes")
	if *m.Value != "5000" || m.Source != SourceStaticBrokerConfig {
		t.Fatalf("%+v", m)
	}
	s := find(es, "segment.ms")
	if *s.Value != "604800000" || s.Source != SourceDefaultConfig || len(s.Synonyms) != 0 {
		t.Fatalf("%+v", s)
	}
	rs := find(es, "remote.storage.enable")
	if *rs.Value != "false" || rs.Source != SourceDefaultConfig || len(rs.Synonyms) != 0 {
		t.Fatalf("%+v", rs)
	}
}

// TestClusterDefaultMinInsyncReplicas holds the cluster-wide dynamic
// min.insync.replicas a Kafka 4 cluster writes at its first start (KIP-966):
// it takes the static value and is listed before it.
func TestClusterDefaultMinInsyncReplicas(t *testing.T) {
	b, err := New(map[string]string{"min.insync.replicas": "2"})
	if err != nil {
		t.Fatal(err)
	}
	wantSyn := []SynonymEntry{
		{"min.insync.replicas", ptr("2"), SourceDynamicDefaultBrokerConfig},
		{"min.insync.replicas", ptr("2"), SourceStaticBrokerConfig},
		{"min.insync.replicas", ptr("1"), SourceDefaultConfig},
	}
	if m := find(DescribeTopic(b, nil), "min.insync.replicas"); *m.Value != "2" || m.Source != SourceDynamicDefaultBrokerConfig ||
		!reflect.DeepEqual(m.Synonyms, wantSyn) {
		t.Fatalf("topic: %+v", m)
	}
	if m := find(DescribeTopic(b, map[string]string{"min.insync.replicas": "3"}), "min.insync.replicas"); *m.Value != "3" ||
		m.Source != SourceDynamicTopicConfig || len(m.Synonyms) != 4 {
		t.Fatalf("topic override: %+v", m)
	}
	if m := find(EffectiveTopic(b, nil), "min.insync.replicas"); *m.Value != "2" || m.Source != SourceDynamicDefaultBrokerConfig {
		t.Fatalf("effective: %+v", m)
	}
	if m := find(b.DescribeBroker(), "min.insync.replicas"); *m.Value != "2" || m.Source != SourceDynamicDefaultBrokerConfig {
		t.Fatalf("broker: %+v", m)
	}
	cd := b.DescribeClusterDefaults()
	if len(cd) != 1 || cd[0].Name != "min.insync.replicas" || *cd[0].Value != "2" || cd[0].ReadOnly ||
		!reflect.DeepEqual(cd[0].Synonyms, wantSyn[:1]) {
		t.Fatalf("cluster: %+v", cd)
	}
	if tc, err := ResolveTopic(b, nil); err != nil || tc.MinInsyncReplicas != 2 {
		t.Fatalf("resolved %d, %v", tc.MinInsyncReplicas, err)
	}
}

// TestUnimplementedTopicConfigs holds the Kafka 4.4 topic configs Cascade
// describes but does not implement: only their defaults are accepted.
func TestUnimplementedTopicConfigs(t *testing.T) {
	b := Default()
	for name, def := range map[string]string{
		"errors.deadletterqueue.group.enable": "false",
		"max.decompressed.message.bytes":      "2147483639",
		"remote.copy.lag.bytes":               "-1",
		"remote.copy.lag.ms":                  "0",
	} {
		e := find(DescribeTopic(b, nil), name)
		if e.Value == nil || *e.Value != def || e.Source != SourceDefaultConfig {
			t.Errorf("%s: %+v", name, e)
		}
		if err := ValidateTopic(b, map[string]string{name: def}); err != nil {
			t.Errorf("%s=%s: %v", name, def, err)
		}
		if err := ValidateTopic(b, map[string]string{name: "1"}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s=1 accepted: %v", name, err)
		}
	}
	if _, err := New(map[string]string{"log.remote.copy.lag.ms": "5"}); err == nil {
		t.Error("log.remote.copy.lag.ms=5 accepted")
	}
	if e := find(DescribeTopic(b, nil), "remote.copy.lag.ms"); len(e.Synonyms) != 1 || e.Synonyms[0].Name != "log.remote.copy.lag.ms" {
		t.Errorf("synonyms %+v", e.Synonyms)
	}
}

func TestDescribeBroker(t *testing.T) {
	b, err := New(map[string]string{"num.partitions": "4"})
	if err != nil {
		t.Fatal(err)
	}
	es := b.DescribeBroker()
	n := find(es, "num.partitions")
	if *n.Value != "4" || n.Source != SourceStaticBrokerConfig || !n.ReadOnly || n.Type != TypeInt {
		t.Fatalf("%+v", n)
	}
	// log.retention.ms has no default and no synonym before it: no
	// synonyms, DEFAULT_CONFIG; log.retention.hours lists its default.
	if rm := find(es, "log.retention.ms"); rm.Value != nil || rm.Source != SourceDefaultConfig || len(rm.Synonyms) != 0 {
		t.Fatalf("%+v", rm)
	}
	if rh := find(es, "log.retention.hours"); *rh.Value != "168" || len(rh.Synonyms) != 1 || rh.Synonyms[0].Source != SourceDefaultConfig {
		t.Fatalf("%+v", rh)
	}
	a := find(es, "advertised.listeners")
	if a.Value != nil || a.Source != SourceDefaultConfig {
		t.Fatalf("%+v", a)
	}
	d := find(es, "delete.topic.enable")
	if *d.Value != "true" || d.Source != SourceDefaultConfig {
		t.Fatalf("%+v", d)
	}
}

// FuzzParseProperties checks that no input panics and that every parsed
// pair survives a write-and-reparse with escapes.
func FuzzParseProperties(f *testing.F) {
	f.Add("a=1\nb : 2\n# c\nd \\\n  e\nf=\\u0041\\t")
	f.Add("\\u12")
	f.Add("key\\")
	f.Add("=\r\n:\r\\")
	f.Fuzz(func(t *testing.T, in string) {
		props, err := ParseProperties(strings.NewReader(in))
		if err != nil {
			return
		}
		var b strings.Builder
		for _, p := range props {
			b.WriteString(escapeProp(p.Key, true) + "=" + escapeProp(p.Value, false) + "\n")
		}
		again, err := ParseProperties(strings.NewReader(b.String()))
		if err != nil || len(again) != len(props) {
			t.Fatalf("reparse of %q: %v (%d vs %d)", b.String(), err, len(again), len(props))
		}
		for i := range props {
			if again[i].Key != props[i].Key || again[i].Value != props[i].Value {
				t.Fatalf("pair %d: %q=%q became %q=%q", i, props[i].Key, props[i].Value, again[i].Key, again[i].Value)
			}
		}
	})
}

// escapeProp escapes s as Properties.store does.
func escapeProp(s string, key bool) string {
	var b strings.Builder
	for i, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\f':
			b.WriteString(`\f`)
		case '=', ':', '#', '!':
			b.WriteString(`\` + string(r))
		case ' ':
			if key || i == 0 {
				b.WriteString(`\ `)
			} else {
				b.WriteRune(r)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestCoordinatorConfigs(t *testing.T) {
	b := Default()
	if !reflect.DeepEqual(b.GroupConsumerAssignors, []string{"uniform", "range"}) || b.OffsetsRetention != 7*24*time.Hour ||
		b.GroupMinSessionTimeout != 6*time.Second || b.GroupMaxSessionTimeout != 30*time.Minute ||
		b.OffsetsRetentionCheckInterval != 10*time.Minute || b.OffsetMetadataMaxBytes != 4096 || b.GroupMaxSize != math.MaxInt32 {
		t.Fatalf("%+v", b)
	}
	b, err := New(map[string]string{"group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor,uniform"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(b.GroupConsumerAssignors, []string{"range", "uniform"}) {
		t.Fatal(b.GroupConsumerAssignors)
	}
	if _, err := New(map[string]string{"group.consumer.assignors": "sticky"}); err == nil {
		t.Fatal("unknown assignor accepted")
	}
}

func TestEffectiveTopic(t *testing.T) {
	b, err := New(map[string]string{"log.retention.hours": "2"})
	if err != nil {
		t.Fatal(err)
	}
	es := EffectiveTopic(b, map[string]string{"segment.ms": "1000"})
	if r := find(es, "retention.ms"); *r.Value != "7200000" || r.Source != SourceStaticBrokerConfig || r.Synonyms != nil {
		t.Fatalf("%+v", r)
	}
	if s := find(es, "segment.ms"); *s.Value != "1000" || s.Source != SourceDynamicTopicConfig {
		t.Fatalf("%+v", s)
	}
	if c := find(es, "cleanup.policy"); *c.Value != "delete" || c.Source != SourceDefaultConfig {
		t.Fatalf("%+v", c)
	}
}

func TestFormat(t *testing.T) {
	cases := []struct {
		v    any
		want string
	}{
		{true, "true"}, {int32(-5), "-5"}, {int64(math.MaxInt64), "9223372036854775807"},
		{[]string{"delete", "compact"}, "delete,compact"}, {[]string{}, ""},
		{0.5, "0.5"}, {1.0, "1.0"}, {0.0, "0.0"}, {1e-4, "1.0E-4"}, {12345678.0, "1.2345678E7"}, {0.001, "0.001"},
	}
	for _, c := range cases {
		if got := Format(c.v); got != c.want {
			t.Errorf("Format(%v) = %q, want %q", c.v, got, c.want)
		}
	}
	es := DescribeTopic(Default(), map[string]string{"cleanup.policy": " compact , delete ", "unclean.leader.election.enable": "TRUE", "min.cleanable.dirty.ratio": "1"})
	for name, want := range map[string]string{"cleanup.policy": "compact,delete", "unclean.leader.election.enable": "true", "min.cleanable.dirty.ratio": "1.0"} {
		if e := find(es, name); *e.Value != want || *e.Synonyms[0].Value != want {
			t.Errorf("%s: %q", name, *e.Value)
		}
	}
}

func TestQueuedMaxRequestBytes(t *testing.T) {
	b, err := New(nil)
	if err != nil || b.QueuedMaxRequestBytes != 1<<30 {
		t.Fatalf("default = %d, %v", b.QueuedMaxRequestBytes, err)
	}
	if b, err := New(map[string]string{"queued.max.request.bytes": "-1"}); err != nil || b.QueuedMaxRequestBytes != -1 {
		t.Fatalf("-1: %v %v", b, err)
	}
	// As KafkaConfig: a bounded queue must hold the largest request.
	_, err = New(map[string]string{"queued.max.request.bytes": "1000", "socket.request.max.bytes": "1001"})
	if err == nil || !strings.Contains(err.Error(), "queued.max.request.bytes") {
		t.Fatalf("too small: %v", err)
	}
	if _, err := New(map[string]string{"queued.max.request.bytes": "1001", "socket.request.max.bytes": "1001"}); err != nil {
		t.Fatal(err)
	}
}

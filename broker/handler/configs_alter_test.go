package handler

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/logging"
)

// alterAnswer renders one resource answer of AlterConfigs or
// IncrementalAlterConfigs as "type name code message".
func alterAnswer(typ kmsg.ConfigResourceType, name string, code int16, msg *string) string {
	m := "null"
	if msg != nil {
		m = *msg
	}
	return fmt.Sprintf("%s %q %d %s", typ, name, code, m)
}

// TestAlterConfigsResourceLoop checks the per-resource answers both alter
// APIs share, several resources to a request: order kept, every occurrence
// of a duplicate resource refused, broker resources refused, BROKER_LOGGER
// refused by the legacy API and applied by the incremental one,
// validate-only changing nothing, and duplicate config keys.
func TestAlterConfigsResourceLoop(t *testing.T) {
	env, logs := newAdminEnv(t, nil)
	env.Loggers, _ = testLoggers()
	call(t, env, createReq(topicReq("a", 1, 1, "segment.ms", "60000")), 7)
	call(t, env, createReq(topicReq("b", 1, 1)), 7)
	call(t, env, createReq(topicReq("c", 1, 1)), 7)

	legacy := func(validateOnly bool, res ...kmsg.AlterConfigsRequestResource) []string {
		r := kmsg.NewPtrAlterConfigsRequest()
		r.ValidateOnly, r.Resources = validateOnly, res
		var out []string
		for _, rr := range call(t, env, r, 2).(*kmsg.AlterConfigsResponse).Resources {
			out = append(out, alterAnswer(rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage))
		}
		return out
	}
	lres := func(typ kmsg.ConfigResourceType, name string, kv ...string) kmsg.AlterConfigsRequestResource {
		res := kmsg.NewAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = typ, name
		for i := 0; i+1 < len(kv); i += 2 {
			c := kmsg.NewAlterConfigsRequestResourceConfig()
			c.Name, c.Value = kv[i], ptrTo(kv[i+1])
			res.Configs = append(res.Configs, c)
		}
		return res
	}
	incremental := func(validateOnly bool, res ...kmsg.IncrementalAlterConfigsRequestResource) []string {
		r := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r.ValidateOnly, r.Resources = validateOnly, res
		var out []string
		for _, rr := range call(t, env, r, 1).(*kmsg.IncrementalAlterConfigsResponse).Resources {
			out = append(out, alterAnswer(rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage))
		}
		return out
	}
	ires := func(typ kmsg.ConfigResourceType, name string, kv ...string) kmsg.IncrementalAlterConfigsRequestResource {
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = typ, name
		for i := 0; i+1 < len(kv); i += 2 {
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Op, c.Value = kv[i], kmsg.IncrementalAlterConfigOpSet, ptrTo(kv[i+1])
			res.Configs = append(res.Configs, c)
		}
		return res
	}
	topic, broker, logger := kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger
	invalid := kerr.InvalidRequest.Code
	dup := ptrTo("Each resource must appear at most once.")
	for _, c := range []struct {
		name string
		got  []string
		want []string
	}{
		{"legacy validate-only", legacy(true, lres(topic, "a", "retention.ms", "2000")),
			[]string{alterAnswer(topic, "a", 0, nil)}},
		{"incremental validate-only", incremental(true, ires(topic, "a", "retention.ms", "2000")),
			[]string{alterAnswer(topic, "a", 0, nil)}},
		{"legacy mixed", legacy(false,
			lres(topic, "b", "retention.ms", "1"),
			lres(broker, "1", "num.partitions", "3"),
			lres(topic, "a", "retention.ms", "1"),
			lres(logger, "1", "root", "DEBUG"),
			lres(broker, ""),
			lres(topic, "a", "retention.ms", "2"),
			lres(topic, "c", "retention.ms", "1", "retention.ms", "2"),
			lres(topic, "zz", "retention.ms", "1")),
			[]string{
				alterAnswer(topic, "b", 0, nil),
				alterAnswer(broker, "1", invalid, ptrTo("Cannot update these configs dynamically: [num.partitions]")),
				alterAnswer(topic, "a", invalid, dup),
				alterAnswer(logger, "1", invalid, ptrTo("Unknown resource type 8")),
				alterAnswer(broker, "", kerr.InvalidConfig.Code, ptrTo("Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")),
				alterAnswer(topic, "a", invalid, dup),
				alterAnswer(topic, "c", invalid, ptrTo("Error due to duplicate config keys")),
				alterAnswer(topic, "zz", kerr.UnknownTopicOrPartition.Code, ptrTo("The topic 'zz' does not exist.")),
			}},
		{"legacy broker, nothing to change", legacy(false, lres(broker, "1"), lres(broker, "", "min.insync.replicas", "1")),
			[]string{alterAnswer(broker, "1", 0, nil), alterAnswer(broker, "", invalid,
				ptrTo("Cascade does not update broker configs at run time; set them in server.properties: [min.insync.replicas]"))}},
		{"incremental mixed", incremental(false,
			ires(topic, "c", "retention.ms", "1", "retention.ms", "2"),
			ires(topic, "b", "retention.ms", "1", "retention.ms", "2"),
			ires(topic, "b"),
			ires(broker, "1", "num.partitions", "3"),
			ires(logger, "1", "cascade.handler", "DEBUG"),
			ires(topic, "a", "cleanup.policy", "compact"),
			ires(topic, "b")),
			[]string{
				alterAnswer(topic, "c", invalid, ptrTo("Error due to duplicate config keys")),
				alterAnswer(topic, "b", invalid, dup),
				alterAnswer(topic, "b", invalid, dup),
				alterAnswer(broker, "1", invalid, ptrTo("Cannot update these configs dynamically: [num.partitions]")),
				alterAnswer(logger, "1", 0, nil),
				alterAnswer(topic, "a", 0, nil),
				alterAnswer(topic, "b", invalid, dup),
			}},
	} {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s:\n got %q\nwant %q", c.name, c.got, c.want)
		}
	}
	if got := env.Loggers.Describe()["cascade.handler"]; got != "DEBUG" {
		t.Errorf("cascade.handler's level %s after SET DEBUG", got)
	}
	// Only the applied changes reached the live logs: b's retention from
	// the legacy request, a's compaction from the incremental one (the
	// legacy request's a was a duplicate, and validate-only changed
	// nothing).
	if cfg := logs.get("b", 0).config(); cfg.RetentionMs != time.Millisecond {
		t.Errorf("b's log config %+v", cfg)
	}
	if cfg := logs.get("a", 0).config(); cfg.RetentionMs == 2*time.Second || cfg.SegmentMs != time.Minute || cfg.CleanupPolicy != log.PolicyCompact {
		t.Errorf("a's log config %+v", cfg)
	}
	if cfg := logs.get("c", 0).config(); cfg.RetentionMs == time.Millisecond || cfg.RetentionMs == 2*time.Millisecond {
		t.Errorf("c's log config %+v", cfg)
	}
}

// testLoggers returns named loggers as a broker has them, writing to the
// returned buffer, root at INFO.
func testLoggers() (*logging.Levels, *bytes.Buffer) {
	var buf bytes.Buffer
	lv := logging.New(slog.NewTextHandler(&buf, nil), slog.LevelInfo)
	for _, n := range []string{"cascade.handler", "cascade.wire", "cascade.metadata"} {
		lv.Logger(n)
	}
	return lv, &buf
}

// incrementalOp is one config of an IncrementalAlterConfigs resource;
// value "<null>" sends a null.
func incrementalOp(name string, op kmsg.IncrementalAlterConfigOp, value string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op = name, op
	if value != "<null>" {
		c.Value = ptrTo(value)
	}
	return c
}

// TestIncrementalAlterBrokerLoggers checks KIP-412 log level changes
// against the answers Apache Kafka 4.4 gives (RuntimeLoggerManager,
// ConfigAdminManager.preprocess), and that they take effect.
func TestIncrementalAlterBrokerLoggers(t *testing.T) {
	env, _ := newAdminEnv(t, nil)
	var buf *bytes.Buffer
	env.Loggers, buf = testLoggers()
	env.Logger = env.Loggers.Logger("cascade.handler")
	set, del := kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete
	alter := func(validateOnly bool, name string, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) string {
		t.Helper()
		r := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r.ValidateOnly = validateOnly
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName, res.Configs = kmsg.ConfigResourceTypeBrokerLogger, name, ops
		r.Resources = append(r.Resources, res)
		rr := call(t, env, r, 1).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
		return alterAnswer(rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage)
	}
	levels := func() string {
		d := env.Loggers.Describe()
		return fmt.Sprintf("root=%s handler=%s wire=%s", d["root"], d["cascade.handler"], d["cascade.wire"])
	}
	ok := func(name string) string { return alterAnswer(kmsg.ConfigResourceTypeBrokerLogger, name, 0, nil) }
	bad := func(name string, code int16, msg string) string {
		return alterAnswer(kmsg.ConfigResourceTypeBrokerLogger, name, code, &msg)
	}
	invalidReq, invalidCfg := kerr.InvalidRequest.Code, kerr.InvalidConfig.Code
	for _, c := range []struct {
		name       string
		got        func() string
		want       string
		wantLevels string
	}{
		{"validate-only changes nothing", func() string { return alter(true, "1", incrementalOp("root", set, "DEBUG")) }, ok("1"),
			"root=INFO handler=INFO wire=INFO"},
		{"set a logger", func() string { return alter(false, "1", incrementalOp("cascade.wire", set, "TRACE")) }, ok("1"),
			"root=INFO handler=INFO wire=TRACE"},
		{"set root sets every logger", func() string { return alter(false, "1", incrementalOp("root", set, "WARN")) }, ok("1"),
			"root=WARN handler=WARN wire=WARN"},
		{"several ops in order", func() string {
			return alter(false, "1", incrementalOp("cascade.handler", set, "ERROR"), incrementalOp("root", set, "INFO"))
		}, ok("1"),
			"root=INFO handler=INFO wire=INFO"},
		{"delete falls back to root", func() string {
			return alter(false, "1", incrementalOp("cascade.wire", set, "DEBUG"), incrementalOp("cascade.handler", set, "FATAL"))
		}, ok("1"),
			"root=INFO handler=FATAL wire=DEBUG"},
		{"delete with a null value", func() string { return alter(false, "1", incrementalOp("cascade.handler", del, "<null>")) }, ok("1"),
			"root=INFO handler=INFO wire=DEBUG"},
		{"no configs", func() string { return alter(false, "1") }, ok("1"), "root=INFO handler=INFO wire=DEBUG"},
		{"unknown logger", func() string {
			return alter(false, "1", incrementalOp("cascade.wire", set, "INFO"), incrementalOp("no.such", set, "INFO"))
		},
			bad("1", invalidCfg, "Logger no.such does not exist!"), "root=INFO handler=INFO wire=DEBUG"},
		{"unknown logger delete", func() string { return alter(false, "1", incrementalOp("no.such", del, "")) },
			bad("1", invalidCfg, "Logger no.such does not exist!"), ""},
		{"bad level", func() string { return alter(false, "1", incrementalOp("root", set, "debug")) },
			bad("1", invalidCfg, "Cannot set the log level of root to debug as it is not a supported log level. Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"), ""},
		{"OFF is not a level", func() string { return alter(false, "1", incrementalOp("root", set, "OFF")) },
			bad("1", invalidCfg, "Cannot set the log level of root to OFF as it is not a supported log level. Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"), ""},
		{"delete root", func() string { return alter(false, "1", incrementalOp("root", del, "")) },
			bad("1", invalidReq, "Removing the log level of the root logger is not allowed"), ""},
		{"append", func() string {
			return alter(true, "1", incrementalOp("root", kmsg.IncrementalAlterConfigOpAppend, "INFO"))
		},
			bad("1", invalidReq, "APPEND operation is not allowed for the BROKER_LOGGER resource"), ""},
		{"subtract", func() string {
			return alter(true, "1", incrementalOp("root", kmsg.IncrementalAlterConfigOpSubtract, "INFO"))
		},
			bad("1", invalidReq, "SUBTRACT operation is not allowed for the BROKER_LOGGER resource"), ""},
		{"unknown op", func() string { return alter(true, "1", incrementalOp("root", 9, "INFO")) },
			bad("1", invalidReq, "Unknown operation type 9 is not allowed for the BROKER_LOGGER resource"), ""},
		{"null value", func() string {
			return alter(true, "1", incrementalOp("root", set, "<null>"), incrementalOp("cascade.wire", set, "<null>"))
		},
			bad("1", invalidReq, "Null value not supported for : root, cascade.wire"), ""},
		{"duplicate keys", func() string {
			return alter(true, "1", incrementalOp("root", set, "INFO"), incrementalOp("root", set, "INFO"))
		},
			bad("1", invalidReq, "Error due to duplicate config keys"), ""},
		{"empty name", func() string { return alter(true, "", incrementalOp("root", set, "INFO")) },
			bad("", invalidReq, "Node id must be an integer, but it is: "), ""},
		{"other node", func() string { return alter(true, "7", incrementalOp("root", set, "INFO")) },
			bad("7", invalidReq, "Unexpected node id. Expected 1, but received 7"), ""},
		{"not a number", func() string { return alter(true, "x", incrementalOp("root", set, "INFO")) },
			bad("x", invalidReq, "Node id must be an integer, but it is: x"), "root=INFO handler=INFO wire=DEBUG"},
	} {
		if got := c.got(); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
		if c.wantLevels != "" && levels() != c.wantLevels {
			t.Errorf("%s: levels %s, want %s", c.name, levels(), c.wantLevels)
		}
	}

	// The change takes effect on the live logger.
	buf.Reset()
	env.logger().Debug("probe before")
	if got := alter(false, "1", incrementalOp("cascade.handler", set, "DEBUG")); got != ok("1") {
		t.Fatal(got)
	}
	env.logger().Debug("probe after")
	if got := buf.String(); strings.Contains(got, "probe before") || !strings.Contains(got, "level=DEBUG msg=\"probe after\" logger=cascade.handler") {
		t.Errorf("log after SET DEBUG:\n%s", got)
	}
	// Kafka logs each change at WARN.
	if !strings.Contains(buf.String(), "level=WARN msg=\"updated a log level\" logger=cascade.handler name=cascade.handler level=DEBUG") {
		t.Errorf("no WARN line for the change:\n%s", buf)
	}
}

// TestIncrementalAlterBrokerConfigs checks the BROKER answers that Apache
// Kafka 4.4 gives before Cascade's own refusal of run-time changes.
func TestIncrementalAlterBrokerConfigs(t *testing.T) {
	env, _ := newAdminEnv(t, nil)
	set, del := kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete
	alter := func(name string, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) string {
		t.Helper()
		r := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName, res.Configs = kmsg.ConfigResourceTypeBroker, name, ops
		r.Resources = append(r.Resources, res)
		rr := call(t, env, r, 1).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
		return alterAnswer(rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage)
	}
	b := kmsg.ConfigResourceTypeBroker
	for _, c := range []struct{ name, got, want string }{
		{"nothing", alter("1"), alterAnswer(b, "1", 0, nil)},
		{"nothing, cluster", alter(""), alterAnswer(b, "", 0, nil)},
		{"other node", alter("7", incrementalOp("num.partitions", set, "3")),
			alterAnswer(b, "7", kerr.InvalidRequest.Code, ptrTo("Unexpected broker id, expected 1, but received 7"))},
		{"not a number", alter("x"), alterAnswer(b, "x", kerr.InvalidRequest.Code, ptrTo("Node id must be an integer, but it is: x"))},
		{"static", alter("1", incrementalOp("log.retention.ms", set, "2"), incrementalOp("num.partitions", set, "3"), incrementalOp("node.id", set, "3")),
			alterAnswer(b, "1", kerr.InvalidRequest.Code, ptrTo("Cannot update these configs dynamically: [num.partitions, node.id]"))},
		{"unknown op", alter("1", incrementalOp("num.partitions", 7, "3")),
			alterAnswer(b, "1", kerr.InvalidRequest.Code, ptrTo("Unknown operations type 7"))},
		{"remove cluster min.insync.replicas", alter("", incrementalOp("min.insync.replicas", del, "")),
			alterAnswer(b, "", kerr.InvalidConfig.Code, ptrTo("Cluster-level min.insync.replicas cannot be removed while ELR is enabled."))},
		{"null", alter("", incrementalOp("min.insync.replicas", set, "<null>")),
			alterAnswer(b, "", kerr.InvalidRequest.Code, ptrTo("Null value not supported for : min.insync.replicas"))},
		{"dynamic", alter("1", incrementalOp("log.retention.ms", set, "2")),
			alterAnswer(b, "1", kerr.InvalidRequest.Code, ptrTo("Cascade does not update broker configs at run time; set them in server.properties: [log.retention.ms]"))},
		{"unknown", alter("1", incrementalOp("log.retention.ms", set, "2"), incrementalOp("no.such", set, "2")),
			alterAnswer(b, "1", kerr.InvalidRequest.Code, ptrTo("Cascade does not honour these configs: [no.such]"))},
		{"remove unknown", alter("1", incrementalOp("leader.replication.throttled.rate", del, ""), incrementalOp("no.such", del, "")),
			alterAnswer(b, "1", 0, nil)},
	} {
		if c.got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, c.got, c.want)
		}
	}
}

// TestAlterConfigsUnknownResourceTypes checks the answers for resource
// types neither API takes, and for BROKER_LOGGER when the broker has no
// named loggers.
func TestAlterConfigsUnknownResourceTypes(t *testing.T) {
	env, _ := newAdminEnv(t, nil)
	r := kmsg.NewPtrIncrementalAlterConfigsRequest()
	for _, typ := range []kmsg.ConfigResourceType{0, 99, kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeGroupConfig} {
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = typ, "1"
		r.Resources = append(r.Resources, res)
	}
	var got []string
	for _, rr := range call(t, env, r, 1).(*kmsg.IncrementalAlterConfigsResponse).Resources {
		got = append(got, fmt.Sprintf("%d %s", rr.ErrorCode, *rr.ErrorMessage))
	}
	want := []string{"42 Unknown resource type 0", "42 Unknown resource type 99", "42 Unknown resource type 8", "42 Unsupported resource type: GROUP"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// TestDescribeBrokerLoggers checks DescribeConfigs of BROKER_LOGGER as
// Kafka's ConfigHelper answers it: every logger with its level in effect,
// source DYNAMIC_BROKER_LOGGER_CONFIG, and Kafka's resource name errors.
func TestDescribeBrokerLoggers(t *testing.T) {
	env, _ := newAdminEnv(t, nil)
	env.Loggers, _ = testLoggers()
	if err := env.Loggers.Set("cascade.wire", "TRACE"); err != nil {
		t.Fatal(err)
	}
	r := kmsg.NewPtrDescribeConfigsRequest()
	r.IncludeSynonyms = true
	for _, n := range []string{"1", "", "7", "x", "1"} {
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, n
		r.Resources = append(r.Resources, res)
	}
	r.Resources[4].ConfigNames = []string{"root", "no.such", "cascade.wire"}
	resp := call(t, env, r, 4).(*kmsg.DescribeConfigsResponse)
	var got []string
	for _, rr := range resp.Resources {
		line := fmt.Sprintf("%q %d %s:", rr.ResourceName, rr.ErrorCode, *rr.ErrorMessage)
		for _, c := range rr.Configs {
			line += fmt.Sprintf(" %s=%s(%s ro=%v def=%v sens=%v syn=%d type=%s)", c.Name, *c.Value, c.Source, c.ReadOnly, c.IsDefault, c.IsSensitive, len(c.ConfigSynonyms), c.ConfigType)
		}
		got = append(got, line)
	}
	entry := func(n, l string) string {
		return fmt.Sprintf(" %s=%s(DYNAMIC_BROKER_LOGGER_CONFIG ro=false def=false sens=false syn=0 type=UNKNOWN)", n, l)
	}
	want := []string{
		`"1" 0 :` + entry("root", "INFO") + entry("cascade.handler", "INFO") + entry("cascade.metadata", "INFO") + entry("cascade.wire", "TRACE"),
		`"" 42 Broker id must not be empty:`,
		`"7" 42 Unexpected broker id, expected 1 but received 7:`,
		`"x" 42 Broker id must be an integer, but it is: x:`,
		`"1" 0 :` + entry("root", "INFO") + entry("cascade.wire", "TRACE"),
	}
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Errorf("resource %d:\n got %v\nwant %s", i, got, want[i])
		}
	}
	// Without named loggers the resource type is refused.
	env.Loggers = nil
	r.Resources = r.Resources[:1]
	if rr := call(t, env, r, 4).(*kmsg.DescribeConfigsResponse).Resources[0]; rr.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("no loggers: %d %v", rr.ErrorCode, rr.ErrorMessage)
	}
}

package broker_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker"
	"github.com/cascade-kafka/cascade/broker/config"
)

// The conformance cases of AlterConfigs (33) and IncrementalAlterConfigs
// (44), and of DescribeConfigs (32) of BROKER_LOGGER resources: the same
// raw requests to Cascade and to Apache Kafka, answers compared field by
// field.

// alterOp is one config of an IncrementalAlterConfigs resource; a value of
// "<null>" is sent as null.
type alterOp struct {
	name  string
	op    kmsg.IncrementalAlterConfigOp
	value string
}

func incResource(typ kmsg.ConfigResourceType, name string, ops ...alterOp) kmsg.IncrementalAlterConfigsRequestResource {
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = typ, name
	for _, o := range ops {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op = o.name, o.op
		if o.value != "<null>" {
			c.Value = kmsg.StringPtr(o.value)
		}
		res.Configs = append(res.Configs, c)
	}
	return res
}

func incAlterReq(v int16, validateOnly bool, res ...kmsg.IncrementalAlterConfigsRequestResource) *kmsg.IncrementalAlterConfigsRequest {
	r := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r.SetVersion(v)
	r.ValidateOnly, r.Resources = validateOnly, res
	return r
}

// legacyResource builds an AlterConfigs resource from name, value pairs.
func legacyResource(typ kmsg.ConfigResourceType, name string, kv ...string) kmsg.AlterConfigsRequestResource {
	res := kmsg.NewAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = typ, name
	for i := 0; i+1 < len(kv); i += 2 {
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kv[i], kmsg.StringPtr(kv[i+1])
		res.Configs = append(res.Configs, c)
	}
	return res
}

func legacyAlterReq(v int16, validateOnly bool, res ...kmsg.AlterConfigsRequestResource) *kmsg.AlterConfigsRequest {
	r := kmsg.NewPtrAlterConfigsRequest()
	r.SetVersion(v)
	r.ValidateOnly, r.Resources = validateOnly, res
	return r
}

// describeOneConfig asks for the named configs of one resource.
func describeOneConfig(v int16, typ kmsg.ConfigResourceType, name string, configs ...string) *kmsg.DescribeConfigsRequest {
	r := kmsg.NewPtrDescribeConfigsRequest()
	r.SetVersion(v)
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.ConfigNames = typ, name, configs
	r.Resources = append(r.Resources, res)
	return r
}

const (
	opSet      = kmsg.IncrementalAlterConfigOpSet
	opDelete   = kmsg.IncrementalAlterConfigOpDelete
	opAppend   = kmsg.IncrementalAlterConfigOpAppend
	opSubtract = kmsg.IncrementalAlterConfigOpSubtract
)

func TestConformanceIncrementalAlterConfigs(t *testing.T) {
	p := newPair(t)
	topic := conformanceTopic(t, "iac")
	p.createBoth(t, topic, 1, "cleanup.policy", "delete")
	T, B := kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker
	for _, v := range []int16{0, 1} {
		p.check(t, "validate-only", incAlterReq(v, true, incResource(T, topic, alterOp{"retention.ms", opSet, "1000"})))
		p.check(t, "set", incAlterReq(v, false, incResource(T, topic,
			alterOp{"retention.ms", opSet, "3600000"}, alterOp{"cleanup.policy", opAppend, "compact"})))
		p.checkSettled(t, "after set", describeOneConfig(4, T, topic, "retention.ms", "cleanup.policy", "segment.ms"))
		p.check(t, "delete and subtract", incAlterReq(v, false, incResource(T, topic,
			alterOp{"retention.ms", opDelete, "<null>"}, alterOp{"cleanup.policy", opSubtract, "compact"})))
		p.checkSettled(t, "after delete", describeOneConfig(4, T, topic, "retention.ms", "cleanup.policy"))
		p.check(t, "unknown topic", incAlterReq(v, false, incResource(T, topic+"-absent", alterOp{"retention.ms", opSet, "1"})))
		// Every occurrence of a duplicate is refused; the other
		// resources are answered as usual, in request order.
		p.check(t, "duplicate resource", incAlterReq(v, false,
			incResource(T, topic, alterOp{"retention.ms", opSet, "1000"}),
			incResource(T, topic+"-absent", alterOp{"retention.ms", opSet, "1"}),
			incResource(T, topic, alterOp{"retention.ms", opSet, "2000"})))
		p.check(t, "duplicate config key", incAlterReq(v, true, incResource(T, topic,
			alterOp{"retention.ms", opSet, "1"}, alterOp{"retention.ms", opSet, "2"})))
		p.check(t, "unknown config key", incAlterReq(v, true, incResource(T, topic, alterOp{"no.such.config", opSet, "1"})))
		p.check(t, "bad value", incAlterReq(v, true, incResource(T, topic, alterOp{"retention.ms", opSet, "abc"})))
		p.check(t, "null value", incAlterReq(v, true, incResource(T, topic, alterOp{"retention.ms", opSet, "<null>"})))
		p.check(t, "append to a non-list", incAlterReq(v, true, incResource(T, topic, alterOp{"retention.ms", opAppend, "1"})))
		// Broker resources: Cascade changes no broker config at run
		// time, so only Kafka's own refusals and empty changes compare.
		p.check(t, "broker, static config", incAlterReq(v, true, incResource(B, "1", alterOp{"num.partitions", opSet, "3"})))
		p.check(t, "broker, nothing", incAlterReq(v, true, incResource(B, "1")))
		p.check(t, "cluster, nothing", incAlterReq(v, true, incResource(B, "")))
		p.check(t, "cluster, static config", incAlterReq(v, true, incResource(B, "", alterOp{"num.partitions", opSet, "3"})))
		p.check(t, "cluster, remove min.insync.replicas", incAlterReq(v, true, incResource(B, "", alterOp{"min.insync.replicas", opDelete, "<null>"})))
		p.check(t, "broker, other node", incAlterReq(v, true, incResource(B, "7", alterOp{"num.partitions", opSet, "3"})))
		p.check(t, "broker, not a number", incAlterReq(v, true, incResource(B, "x")))
		p.check(t, "unknown resource type", incAlterReq(v, true, incResource(kmsg.ConfigResourceType(99), "1")))
	}
}

func TestConformanceAlterConfigs(t *testing.T) {
	p := newPair(t)
	topic := conformanceTopic(t, "ac")
	p.createBoth(t, topic, 1, "segment.ms", "3600000")
	T, B := kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker
	for _, v := range []int16{0, 1, 2} {
		p.check(t, "validate-only", legacyAlterReq(v, true, legacyResource(T, topic, "retention.ms", "1000")))
		p.check(t, "set", legacyAlterReq(v, false, legacyResource(T, topic, "retention.ms", "3600000", "cleanup.policy", "compact")))
		// The legacy API replaces the override set: segment.ms is gone.
		p.checkSettled(t, "after set", describeOneConfig(4, T, topic, "retention.ms", "cleanup.policy", "segment.ms"))
		p.check(t, "unknown topic", legacyAlterReq(v, false, legacyResource(T, topic+"-absent", "retention.ms", "1")))
		p.check(t, "duplicate config key", legacyAlterReq(v, true, legacyResource(T, topic, "retention.ms", "1", "retention.ms", "2")))
		p.check(t, "unknown config key", legacyAlterReq(v, true, legacyResource(T, topic, "no.such.config", "1")))
		p.check(t, "bad value", legacyAlterReq(v, true, legacyResource(T, topic, "retention.ms", "abc")))
		p.check(t, "broker, static config", legacyAlterReq(v, true, legacyResource(B, "1", "num.partitions", "3")))
		p.check(t, "broker, other node", legacyAlterReq(v, true, legacyResource(B, "7", "num.partitions", "3")))
		p.check(t, "broker, not a number", legacyAlterReq(v, true, legacyResource(B, "x")))
		// Removing every cluster-wide default takes min.insync.replicas
		// away, which Kafka 4 refuses while ELR is on (KIP-966).
		p.check(t, "cluster, nothing named", legacyAlterReq(v, false, legacyResource(B, "")))
		p.check(t, "broker logger", legacyAlterReq(v, true, legacyResource(kmsg.ConfigResourceTypeBrokerLogger, "1", "root", "INFO")))
		p.check(t, "unknown resource type", legacyAlterReq(v, true, legacyResource(kmsg.ConfigResourceType(99), "1")))
	}
	// A resource named twice: Apache Kafka 4.4 never answers (its
	// AlterConfigsResponse cannot hold two results for one resource), so
	// only Cascade is asked; it sends the answer Kafka computes.
	dup := legacyAlterReq(2, false, legacyResource(T, topic, "retention.ms", "1"), legacyResource(T, topic, "retention.ms", "2"))
	rs := p.cascade.do(dup).(*kmsg.AlterConfigsResponse).Resources
	if len(rs) != 2 {
		t.Fatalf("duplicate resource: %d answers", len(rs))
	}
	for _, r := range rs {
		if r.ErrorCode != kerr.InvalidRequest.Code || r.ErrorMessage == nil || *r.ErrorMessage != "Each resource must appear at most once." {
			t.Errorf("duplicate resource: %d %v", r.ErrorCode, r.ErrorMessage)
		}
	}
}

func TestConformanceBrokerLoggerConfigs(t *testing.T) {
	p := newPair(t)
	L := kmsg.ConfigResourceTypeBrokerLogger
	for _, v := range []int16{1, 3, 4} {
		// Both brokers have a root logger at INFO; the other loggers'
		// names are each broker's own.
		p.check(t, "describe root", describeOneConfig(v, L, "1", "root", "no.such.logger"))
		p.check(t, "describe, empty name", describeOneConfig(v, L, ""))
		p.check(t, "describe, other node", describeOneConfig(v, L, "7"))
		p.check(t, "describe, not a number", describeOneConfig(v, L, "x"))
	}
	for _, v := range []int16{0, 1} {
		p.check(t, "set root, validate-only", incAlterReq(v, true, incResource(L, "1", alterOp{"root", opSet, "DEBUG"})))
		p.check(t, "set root", incAlterReq(v, false, incResource(L, "1", alterOp{"root", opSet, "INFO"})))
		p.check(t, "describe root after set", describeOneConfig(4, L, "1", "root"))
		p.check(t, "delete root", incAlterReq(v, false, incResource(L, "1", alterOp{"root", opDelete, "<null>"})))
		p.check(t, "bad level", incAlterReq(v, true, incResource(L, "1", alterOp{"root", opSet, "debug"})))
		p.check(t, "OFF", incAlterReq(v, true, incResource(L, "1", alterOp{"root", opSet, "OFF"})))
		p.check(t, "append", incAlterReq(v, true, incResource(L, "1", alterOp{"root", opAppend, "INFO"})))
		p.check(t, "subtract", incAlterReq(v, true, incResource(L, "1", alterOp{"root", opSubtract, "INFO"})))
		p.check(t, "unknown op", incAlterReq(v, true, incResource(L, "1", alterOp{"root", kmsg.IncrementalAlterConfigOp(9), "INFO"})))
		p.check(t, "null level", incAlterReq(v, true, incResource(L, "1", alterOp{"root", opSet, "<null>"})))
		p.check(t, "unknown logger", incAlterReq(v, true, incResource(L, "1", alterOp{"no.such.logger", opSet, "INFO"})))
		p.check(t, "unknown logger, delete", incAlterReq(v, true, incResource(L, "1", alterOp{"no.such.logger", opDelete, "<null>"})))
		p.check(t, "empty name", incAlterReq(v, true, incResource(L, "", alterOp{"root", opSet, "INFO"})))
		p.check(t, "other node", incAlterReq(v, true, incResource(L, "7", alterOp{"root", opSet, "INFO"})))
		p.check(t, "not a number", incAlterReq(v, true, incResource(L, "x", alterOp{"root", opSet, "INFO"})))
		p.check(t, "nothing", incAlterReq(v, false, incResource(L, "1")))
		p.check(t, "duplicate logger resource", incAlterReq(v, true,
			incResource(L, "1", alterOp{"root", opSet, "INFO"}), incResource(L, "1", alterOp{"root", opSet, "WARN"})))
	}
}

// TestBrokerLoggerLevelTakesEffect changes a live log level through a
// franz-go client (raw kmsg requests: kadm has no broker-logger helpers),
// as an operator would with kafka-configs.sh --entity-type broker-loggers,
// and checks that the broker then writes the debug lines it did not write
// before, and stops again after DELETE.
func TestBrokerLoggerLevelTakesEffect(t *testing.T) {
	cfg, err := config.New(map[string]string{"log.dirs": t.TempDir(), "listeners": "PLAINTEXT://127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	b, err := broker.Start(ctx, broker.Config{Broker: cfg, Logger: slog.New(slog.NewTextHandler(&out, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	levels := func() map[string]string {
		t.Helper()
		resp, err := describeOneConfig(4, kmsg.ConfigResourceTypeBrokerLogger, "1").RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
			t.Fatalf("describe: %v", err)
		}
		m := map[string]string{}
		for _, c := range resp.Resources[0].Configs {
			if c.Source != kmsg.ConfigSourceDynamicBrokerLoggerConfig || c.Value == nil {
				t.Errorf("logger %s: source %s value %v", c.Name, c.Source, c.Value)
				continue
			}
			m[c.Name] = *c.Value
		}
		return m
	}
	// A frame of an unknown API key closes the connection, which the wire
	// server logs at DEBUG.
	badConnection := func() {
		t.Helper()
		c, err := net.Dial("tcp", b.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte{0, 0, 0, 8, 0x7f, 0x7f, 0, 0, 0, 0, 0, 1})
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		c.Read(make([]byte, 1))
	}
	debugLine := "level=DEBUG msg=\"connection closed\""
	waitFor := func(want bool) {
		t.Helper()
		for i := 0; i < 50 && strings.Contains(out.String(), debugLine) != want; i++ {
			time.Sleep(20 * time.Millisecond)
		}
		if strings.Contains(out.String(), debugLine) != want {
			t.Fatalf("debug line present=%v, want %v; log:\n%s", !want, want, out.String())
		}
	}

	if l := levels(); l["root"] != "INFO" || l["cascade.wire"] != "INFO" {
		t.Fatalf("levels at start: %v", l)
	}
	badConnection()
	time.Sleep(100 * time.Millisecond)
	waitFor(false)

	set := func(logger, level string, op kmsg.IncrementalAlterConfigOp, validateOnly bool) {
		t.Helper()
		r := incAlterReq(1, validateOnly, incResource(kmsg.ConfigResourceTypeBrokerLogger, "1", alterOp{logger, op, level}))
		resp, err := r.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
			t.Fatalf("alter %s %s: %v %v", logger, level, err, resp.Resources[0].ErrorMessage)
		}
	}
	// Validate-only changes nothing.
	set("cascade.wire", "DEBUG", opSet, true)
	if l := levels(); l["cascade.wire"] != "INFO" {
		t.Fatalf("validate-only changed the level: %v", l)
	}
	set("cascade.wire", "DEBUG", opSet, false)
	if l := levels(); l["cascade.wire"] != "DEBUG" || l["root"] != "INFO" {
		t.Fatalf("levels after SET: %v", l)
	}
	badConnection()
	waitFor(true)
	if !strings.Contains(out.String(), "logger=cascade.wire") {
		t.Errorf("debug line without its logger's name:\n%s", out.String())
	}
	// DELETE restores the inherited INFO: no more debug lines.
	set("cascade.wire", "<null>", opDelete, false)
	if l := levels(); l["cascade.wire"] != "INFO" {
		t.Fatalf("levels after DELETE: %v", l)
	}
	before := strings.Count(out.String(), debugLine)
	badConnection()
	time.Sleep(200 * time.Millisecond)
	if after := strings.Count(out.String(), debugLine); after != before {
		t.Fatalf("debug lines after DELETE: %d, before %d", after, before)
	}
}

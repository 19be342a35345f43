package handler

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func describeReq(typ kmsg.ConfigResourceType, name string, names ...string) *kmsg.DescribeConfigsRequest {
	r := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.ConfigNames = typ, name, names
	r.Resources = append(r.Resources, res)
	r.IncludeSynonyms = true
	r.IncludeDocumentation = true
	return r
}

func findConfig(rr kmsg.DescribeConfigsResponseResource, name string) *kmsg.DescribeConfigsResponseResourceConfig {
	for i := range rr.Configs {
		if rr.Configs[i].Name == name {
			return &rr.Configs[i]
		}
	}
	return nil
}

func TestDescribeConfigsHandler(t *testing.T) {
	env, _ := newAdminEnv(t, map[string]string{"log.retention.hours": "5", "log.segment.bytes": "2097152"})
	call(t, env, createReq(topicReq("a", 1, 1, "segment.ms", "60000")), 7)

	resp := call(t, env, describeReq(kmsg.ConfigResourceTypeTopic, "a"), 4).(*kmsg.DescribeConfigsResponse)
	rr := resp.Resources[0]
	if rr.ErrorCode != 0 || len(rr.Configs) < 30 {
		t.Fatalf("%d configs, error %d", len(rr.Configs), rr.ErrorCode)
	}
	seg := findConfig(rr, "segment.ms")
	if *seg.Value != "60000" || seg.Source != kmsg.ConfigSourceDynamicTopicConfig || seg.ReadOnly ||
		seg.ConfigType != kmsg.ConfigTypeLong || seg.Documentation == nil || len(seg.ConfigSynonyms) != 1 {
		t.Fatalf("segment.ms: %+v", seg)
	}
	// The value comes from log.retention.hours, but as in Kafka's
	// ConfigHelper the synonyms start at log.retention.ms: none.
	ret := findConfig(rr, "retention.ms")
	if *ret.Value != "18000000" || ret.Source != kmsg.ConfigSourceDefaultConfig || len(ret.ConfigSynonyms) != 0 {
		t.Fatalf("retention.ms: %+v", ret)
	}
	sb := findConfig(rr, "segment.bytes")
	if *sb.Value != "2097152" || sb.Source != kmsg.ConfigSourceStaticBrokerConfig || len(sb.ConfigSynonyms) != 2 ||
		sb.ConfigSynonyms[0].Name != "log.segment.bytes" || sb.ConfigSynonyms[1].Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("segment.bytes: %+v", sb)
	}
	cp := findConfig(rr, "cleanup.policy")
	if *cp.Value != "delete" || cp.Source != kmsg.ConfigSourceDefaultConfig || cp.ConfigType != kmsg.ConfigTypeList {
		t.Fatalf("cleanup.policy: %+v", cp)
	}

	// v1: no documentation or types; a name filter.
	r := describeReq(kmsg.ConfigResourceTypeTopic, "a", "segment.ms")
	r.IncludeSynonyms = false
	resp = call(t, env, r, 1).(*kmsg.DescribeConfigsResponse)
	if rr := resp.Resources[0]; len(rr.Configs) != 1 || rr.Configs[0].ConfigSynonyms != nil {
		t.Fatalf("%+v", rr.Configs)
	}

	resp = call(t, env, describeReq(kmsg.ConfigResourceTypeBroker, "1"), 4).(*kmsg.DescribeConfigsResponse)
	np := findConfig(resp.Resources[0], "num.partitions")
	lr := findConfig(resp.Resources[0], "log.retention.hours")
	if np == nil || *np.Value != "1" || !np.ReadOnly || np.Source != kmsg.ConfigSourceDefaultConfig ||
		lr == nil || *lr.Value != "5" || lr.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Fatalf("%+v %+v", np, lr)
	}

	errs := []struct {
		typ  kmsg.ConfigResourceType
		name string
		code int16
		msg  string
	}{
		{kmsg.ConfigResourceTypeTopic, "nope", kerr.UnknownTopicOrPartition.Code, ""},
		{kmsg.ConfigResourceTypeTopic, "bad/name", kerr.InvalidTopicException.Code, `Topic name is invalid: 'bad/name' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'`},
		{kmsg.ConfigResourceTypeBroker, "2", kerr.InvalidRequest.Code, "Unexpected broker id, expected 1 or empty string, but received 2"},
		{kmsg.ConfigResourceTypeBroker, "x", kerr.InvalidRequest.Code, "Broker id must be an integer, but it is: x"},
		{kmsg.ConfigResourceTypeBrokerLogger, "1", kerr.InvalidRequest.Code, "Unsupported resource type: BROKER_LOGGER"},
	}
	for _, e := range errs {
		rr := call(t, env, describeReq(e.typ, e.name), 4).(*kmsg.DescribeConfigsResponse).Resources[0]
		// Kafka sends an empty message, not null, for an unknown topic.
		if rr.ErrorCode != e.code || rr.ErrorMessage == nil || *rr.ErrorMessage != e.msg {
			t.Errorf("%s %s: %d %v", e.typ, e.name, rr.ErrorCode, rr.ErrorMessage)
		}
	}
	// The empty broker name is the cluster-wide dynamic defaults: the
	// min.insync.replicas a Kafka 4 cluster writes at its first start
	// (KIP-966), which the topic and broker descriptions list first.
	rr = call(t, env, describeReq(kmsg.ConfigResourceTypeBroker, ""), 4).(*kmsg.DescribeConfigsResponse).Resources[0]
	if rr.ErrorCode != 0 || len(rr.Configs) != 1 || rr.Configs[0].Name != "min.insync.replicas" ||
		*rr.Configs[0].Value != "1" || rr.Configs[0].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig ||
		rr.Configs[0].ReadOnly || len(rr.Configs[0].ConfigSynonyms) != 1 {
		t.Fatalf("%+v", rr)
	}
	resp = call(t, env, describeReq(kmsg.ConfigResourceTypeTopic, "a", "min.insync.replicas"), 4).(*kmsg.DescribeConfigsResponse)
	mi := findConfig(resp.Resources[0], "min.insync.replicas")
	if mi == nil || mi.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || len(mi.ConfigSynonyms) != 2 ||
		mi.ConfigSynonyms[0].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig ||
		mi.ConfigSynonyms[1].Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("%+v", mi)
	}
}

func TestAlterConfigsHandlers(t *testing.T) {
	env, logs := newAdminEnv(t, nil)
	call(t, env, createReq(topicReq("a", 1, 1, "segment.ms", "60000")), 7)

	inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "a"
	set := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	set.Name, set.Op, set.Value = "retention.ms", kmsg.IncrementalAlterConfigOpSet, ptrTo("2000")
	res.Configs = append(res.Configs, set)
	inc.Resources = append(inc.Resources, res)
	resp := call(t, env, inc, 1).(*kmsg.IncrementalAlterConfigsResponse)
	if rr := resp.Resources[0]; rr.ErrorCode != 0 {
		t.Fatalf("%+v", rr)
	}
	// The change reached the live log, and the untouched override stayed.
	if cfg := logs.get("a", 0).config(); cfg.RetentionMs != 2*time.Second || cfg.SegmentMs != time.Minute {
		t.Fatalf("log config %+v", cfg)
	}

	// A bad value is INVALID_CONFIG and changes nothing.
	inc.Resources[0].Configs[0].Value = ptrTo("soon")
	rr := call(t, env, inc, 0).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
	if rr.ErrorCode != kerr.InvalidConfig.Code || *rr.ErrorMessage != "Invalid value soon for configuration retention.ms: Not a number of type LONG" {
		t.Fatalf("%+v", rr)
	}

	// Legacy AlterConfigs replaces the set: segment.ms goes away.
	alt := kmsg.NewPtrAlterConfigsRequest()
	ares := kmsg.NewAlterConfigsRequestResource()
	ares.ResourceType, ares.ResourceName = kmsg.ConfigResourceTypeTopic, "a"
	c := kmsg.NewAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "retention.ms", ptrTo("3000")
	ares.Configs = append(ares.Configs, c)
	alt.Resources = append(alt.Resources, ares)
	if rr := call(t, env, alt, 2).(*kmsg.AlterConfigsResponse).Resources[0]; rr.ErrorCode != 0 {
		t.Fatalf("%+v", rr)
	}
	if cfg := logs.get("a", 0).config(); cfg.RetentionMs != 3*time.Second || cfg.SegmentMs != 7*24*time.Hour {
		t.Fatalf("log config %+v", cfg)
	}

	// Broker configs are read-only.
	bres := kmsg.NewAlterConfigsRequestResource()
	bres.ResourceType, bres.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	bc := kmsg.NewAlterConfigsRequestResourceConfig()
	bc.Name, bc.Value = "num.partitions", ptrTo("3")
	bres.Configs = append(bres.Configs, bc)
	alt.Resources = []kmsg.AlterConfigsRequestResource{bres}
	rr2 := call(t, env, alt, 0).(*kmsg.AlterConfigsResponse).Resources[0]
	if rr2.ErrorCode != kerr.InvalidRequest.Code ||
		*rr2.ErrorMessage != "Cannot update these configs dynamically: [num.partitions]" {
		t.Fatalf("%d %s", rr2.ErrorCode, *rr2.ErrorMessage)
	}
	// A resource named twice: every occurrence refused.
	alt.Resources = []kmsg.AlterConfigsRequestResource{ares, ares}
	rrs := call(t, env, alt, 1).(*kmsg.AlterConfigsResponse).Resources
	if len(rrs) != 2 || rrs[1].ErrorCode != kerr.InvalidRequest.Code || *rrs[1].ErrorMessage != "Each resource must appear at most once." {
		t.Fatalf("%+v", rrs)
	}
	// Unknown topic.
	inc.Resources[0].ResourceName = "zz"
	inc.Resources[0].Configs[0].Value = ptrTo("1")
	if rr := call(t, env, inc, 1).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; rr.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("%+v", rr)
	}
}

package handler

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/log"
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
// APIs share, several resources to a request: order kept, a duplicate
// answered once, broker resources refused, unsupported types refused,
// validate-only changing nothing, and IncrementalAlterConfigs' duplicate
// config keys.
func TestAlterConfigsResourceLoop(t *testing.T) {
	env, logs := newAdminEnv(t, nil)
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
			lres(topic, "zz", "retention.ms", "1")),
			[]string{
				alterAnswer(topic, "b", 0, nil),
				alterAnswer(broker, "1", invalid, ptrTo("Cannot update these configs dynamically: Set(num.partitions)")),
				alterAnswer(topic, "a", invalid, ptrTo("Duplicate resource.")),
				alterAnswer(logger, "1", invalid, ptrTo("Unsupported resource type: BROKER_LOGGER")),
				alterAnswer(broker, "", 0, nil),
				alterAnswer(topic, "zz", kerr.UnknownTopicOrPartition.Code, ptrTo("The topic 'zz' does not exist.")),
			}},
		{"incremental mixed", incremental(false,
			ires(topic, "c", "retention.ms", "1", "retention.ms", "2"),
			ires(topic, "b", "retention.ms", "1", "retention.ms", "2"),
			ires(topic, "b"),
			ires(broker, "1", "num.partitions", "3"),
			ires(logger, "1", "root", "DEBUG"),
			ires(topic, "a", "cleanup.policy", "compact")),
			[]string{
				alterAnswer(topic, "c", invalid, ptrTo("Error due to duplicate config keys")),
				alterAnswer(topic, "b", invalid, ptrTo("Duplicate resource.")),
				alterAnswer(broker, "1", invalid, ptrTo("Cannot update these configs dynamically: Set(num.partitions)")),
				alterAnswer(logger, "1", invalid, ptrTo("Unsupported resource type: BROKER_LOGGER")),
				alterAnswer(topic, "a", 0, nil),
			}},
	} {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s:\n got %q\nwant %q", c.name, c.got, c.want)
		}
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

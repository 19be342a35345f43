package handler

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/metadata"
)

// IncrementalAlterConfigs: v0-1
//
//   - v1: flexible
//
// KIP-339: SET, DELETE, APPEND and SUBTRACT per config; APPEND and SUBTRACT
// only on LIST configs. Topic changes are validated as a whole, written
// durably, and reach the live logs through the partition manager's
// subscription to the metadata store. KIP-412: a BROKER_LOGGER resource
// sets or removes the levels of the broker's named loggers (see
// alterLoggers). The per-resource answers (duplicates, duplicate config
// keys, null values, broker resources, resource types) are those of
// alterConfigResources, as Kafka's ConfigAdminManager.
func init() { register(44, 0, 1, incrementalAlterConfigsAuthorized) }

func handleIncrementalAlterConfigs(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.IncrementalAlterConfigsRequest)
	resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	resp.SetVersion(req.Version)
	alts := make([]configAlteration, 0, len(r.Resources))
	for _, res := range r.Resources {
		a := configAlteration{resourceType: res.ResourceType, resourceName: res.ResourceName,
			ops: make([]configOp, 0, len(res.Configs)), incremental: true, validateOnly: r.ValidateOnly}
		for _, c := range res.Configs {
			a.ops = append(a.ops, configOp{name: c.Name, op: c.Op, value: c.Value})
		}
		a.alterTopic = func() error {
			ops := make([]metadata.ConfigOp, 0, len(res.Configs))
			for _, c := range res.Configs {
				ops = append(ops, metadata.ConfigOp{Name: c.Name, Op: int8(c.Op), Value: c.Value})
			}
			return env.Meta.IncrementalAlterTopicConfigs(res.ResourceName, ops, r.ValidateOnly)
		}
		alts = append(alts, a)
	}
	for _, a := range alterConfigResources(env, req.Key, alts) {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = a.resourceType, a.resourceName, a.errorCode, a.errorMessage
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

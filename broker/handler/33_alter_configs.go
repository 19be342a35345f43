package handler

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterConfigs: v0-2
//
//   - v1: no change (throttling on quota violation)
//   - v2: flexible
//
// The legacy API replaces a topic's whole override set: configs not named
// are removed. The change is validated as a whole, written durably, and
// reaches the live logs through the partition manager's subscription to the
// metadata store. The per-resource answers (duplicates, null values, broker
// resources, resource types) are those of alterConfigResources; as in
// Kafka, BROKER_LOGGER resources are refused here (KIP-412 added them to
// IncrementalAlterConfigs only).
func init() { register(33, 0, 2, alterConfigsAuthorized) }

func handleAlterConfigs(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.AlterConfigsRequest)
	resp := r.ResponseKind().(*kmsg.AlterConfigsResponse)
	resp.SetVersion(req.Version)
	alts := make([]configAlteration, 0, len(r.Resources))
	for _, res := range r.Resources {
		ops := make([]configOp, 0, len(res.Configs))
		for _, c := range res.Configs {
			ops = append(ops, configOp{name: c.Name, op: kmsg.IncrementalAlterConfigOpSet, value: c.Value})
		}
		alts = append(alts, configAlteration{resourceType: res.ResourceType, resourceName: res.ResourceName, ops: ops,
			validateOnly: r.ValidateOnly,
			alterTopic: func() error {
				// The configs named become the whole override set.
				configs := make(map[string]*string, len(res.Configs))
				for _, c := range res.Configs {
					configs[c.Name] = c.Value
				}
				return env.Meta.AlterTopicConfigs(res.ResourceName, configs, r.ValidateOnly)
			}})
	}
	for _, a := range alterConfigResources(env, req.Key, alts) {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = a.resourceType, a.resourceName, a.errorCode, a.errorMessage
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

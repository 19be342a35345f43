package handler

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
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
// metadata store. Broker resources are refused (see alterBrokerConfigs). A
// resource named twice answers one INVALID_REQUEST ("Duplicate resource.") and
// is not changed, as ControllerApis.
func init() { register(33, 0, 2, handleAlterConfigs) }

func handleAlterConfigs(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.AlterConfigsRequest)
	resp := r.ResponseKind().(*kmsg.AlterConfigsResponse)
	resp.SetVersion(req.Version)
	seen := map[kmsg.ConfigResourceType]map[string]int{}
	for _, res := range r.Resources {
		if seen[res.ResourceType] == nil {
			seen[res.ResourceType] = map[string]int{}
		}
		seen[res.ResourceType][res.ResourceName]++
	}
	for _, res := range r.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		switch {
		case seen[res.ResourceType][res.ResourceName] < 0:
			continue // answered once already
		case seen[res.ResourceType][res.ResourceName] > 1:
			seen[res.ResourceType][res.ResourceName] = -1
			rr.ErrorCode = kerr.InvalidRequest.Code
			msg := "Duplicate resource."
			rr.ErrorMessage = &msg
		case res.ResourceType == kmsg.ConfigResourceTypeTopic:
			configs := make(map[string]*string, len(res.Configs))
			for _, c := range res.Configs {
				configs[c.Name] = c.Value
			}
			if err := env.Meta.AlterTopicConfigs(res.ResourceName, configs, r.ValidateOnly); err != nil {
				rr.ErrorCode, rr.ErrorMessage = ErrorCode(err), errMessage(err)
			}
		case res.ResourceType == kmsg.ConfigResourceTypeBroker:
			names := make([]string, 0, len(res.Configs))
			for _, c := range res.Configs {
				names = append(names, c.Name)
			}
			rr.ErrorCode, rr.ErrorMessage = alterBrokerConfigs(env, res.ResourceName, names)
		default:
			rr.ErrorCode = kerr.InvalidRequest.Code
			msg := fmt.Sprintf("Unsupported resource type: %s", res.ResourceType)
			rr.ErrorMessage = &msg
		}
		if rr.ErrorCode != 0 {
			env.Metrics.Error(req.Key, rr.ErrorCode)
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

package handler

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
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
// subscription to the metadata store. Broker resources are refused (see
// alterBrokerConfigs). A resource named twice answers one INVALID_REQUEST
// ("Duplicate resource.") and is not changed, as ControllerApis; a config
// named twice within one resource answers INVALID_REQUEST, as Kafka's
// ConfigAdminManager.
func init() { register(44, 0, 1, handleIncrementalAlterConfigs) }

func handleIncrementalAlterConfigs(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.IncrementalAlterConfigsRequest)
	resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	resp.SetVersion(req.Version)
	seen := map[kmsg.ConfigResourceType]map[string]int{}
	for _, res := range r.Resources {
		if seen[res.ResourceType] == nil {
			seen[res.ResourceType] = map[string]int{}
		}
		seen[res.ResourceType][res.ResourceName]++
	}
	for _, res := range r.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		dupConfig := ""
		names := map[string]bool{}
		for _, c := range res.Configs {
			if names[c.Name] && dupConfig == "" {
				dupConfig = c.Name
			}
			names[c.Name] = true
		}
		switch {
		case seen[res.ResourceType][res.ResourceName] < 0:
			continue // answered once already
		case seen[res.ResourceType][res.ResourceName] > 1:
			seen[res.ResourceType][res.ResourceName] = -1
			rr.ErrorCode = kerr.InvalidRequest.Code
			msg := "Duplicate resource."
			rr.ErrorMessage = &msg
		case dupConfig != "":
			rr.ErrorCode = kerr.InvalidRequest.Code
			msg := "Error due to duplicate config keys"
			rr.ErrorMessage = &msg
		case res.ResourceType == kmsg.ConfigResourceTypeTopic:
			ops := make([]metadata.ConfigOp, 0, len(res.Configs))
			for _, c := range res.Configs {
				ops = append(ops, metadata.ConfigOp{Name: c.Name, Op: int8(c.Op), Value: c.Value})
			}
			if err := env.Meta.IncrementalAlterTopicConfigs(res.ResourceName, ops, r.ValidateOnly); err != nil {
				rr.ErrorCode, rr.ErrorMessage = ErrorCode(err), errMessage(err)
			}
		case res.ResourceType == kmsg.ConfigResourceTypeBroker:
			list := make([]string, 0, len(res.Configs))
			for _, c := range res.Configs {
				list = append(list, c.Name)
			}
			rr.ErrorCode, rr.ErrorMessage = alterBrokerConfigs(env, res.ResourceName, list)
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

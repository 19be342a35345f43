package handler

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// configAlteration is one resource of an AlterConfigs (33) or
// IncrementalAlterConfigs (44) request, seen through what the two APIs
// share; each handler fills in only what differs.
type configAlteration struct {
	resourceType kmsg.ConfigResourceType
	resourceName string
	// configNames lists the configs the resource names, in request order;
	// a BROKER resource is answered from them.
	configNames []string
	// invalid, when not empty, refuses the resource with INVALID_REQUEST
	// and this message once it is known not to be a duplicate (as
	// IncrementalAlterConfigs refuses duplicate config keys).
	invalid string
	// alterTopic validates the change of a TOPIC resource as a whole and,
	// unless the request is validate-only, writes it durably.
	alterTopic func() error
}

// configAlterationResult is the answer for one resource.
type configAlterationResult struct {
	resourceType kmsg.ConfigResourceType
	resourceName string
	errorCode    int16
	errorMessage *string
}

// alterConfigResources answers each resource of an AlterConfigs or
// IncrementalAlterConfigs request, in request order. A resource named
// twice answers one INVALID_REQUEST ("Duplicate resource.") and is not
// changed, as ControllerApis; broker resources are refused (see
// alterBrokerConfigs); other resource types than TOPIC and BROKER are
// INVALID_REQUEST. Every error code is counted in the metrics under key.
func alterConfigResources(env *Env, key int16, alts []configAlteration) []configAlterationResult {
	seen := map[kmsg.ConfigResourceType]map[string]int{}
	for _, a := range alts {
		if seen[a.resourceType] == nil {
			seen[a.resourceType] = map[string]int{}
		}
		seen[a.resourceType][a.resourceName]++
	}
	out := make([]configAlterationResult, 0, len(alts))
	for _, a := range alts {
		r := configAlterationResult{resourceType: a.resourceType, resourceName: a.resourceName}
		switch {
		case seen[a.resourceType][a.resourceName] < 0:
			continue // answered once already
		case seen[a.resourceType][a.resourceName] > 1:
			seen[a.resourceType][a.resourceName] = -1
			r.errorCode, r.errorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("Duplicate resource.")
		case a.invalid != "":
			r.errorCode, r.errorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(a.invalid)
		case a.resourceType == kmsg.ConfigResourceTypeTopic:
			if err := a.alterTopic(); err != nil {
				r.errorCode, r.errorMessage = ErrorCode(err), errMessage(err)
			}
		case a.resourceType == kmsg.ConfigResourceTypeBroker:
			r.errorCode, r.errorMessage = alterBrokerConfigs(env, a.resourceName, a.configNames)
		default:
			r.errorCode = kerr.InvalidRequest.Code
			r.errorMessage = kmsg.StringPtr(fmt.Sprintf("Unsupported resource type: %s", a.resourceType))
		}
		if r.errorCode != 0 {
			env.Metrics.Error(key, r.errorCode)
		}
		out = append(out, r)
	}
	return out
}

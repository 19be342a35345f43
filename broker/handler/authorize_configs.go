package handler

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
)

// configAuthorization returns whether req may perform op (DESCRIBE_CONFIGS
// or ALTER_CONFIGS) on a config resource, and the code of a denial, as
// KafkaApis and ControllerApis check them: broker, broker logger and
// client metrics resources on the cluster, topics and groups by name.
// Other types pass, to be refused by the handler as before.
func (env *Env) configAuthorization(req *Request, op acl.Operation, typ kmsg.ConfigResourceType, name string) (bool, int16) {
	switch typ {
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeClientMetrics:
		return env.authorizeCluster(req, op), kerr.ClusterAuthorizationFailed.Code
	case kmsg.ConfigResourceTypeTopic:
		return env.authorizeTopic(req, op, name), kerr.TopicAuthorizationFailed.Code
	case kmsg.ConfigResourceTypeGroupConfig:
		return env.authorize(req, op, acl.Group, name), kerr.GroupAuthorizationFailed.Code
	}
	return true, 0
}

// authorizedConfigs runs handle (a configs handler) on the resources req
// may act on, and answers the others after them with the denial's code
// and Kafka's message of it, as
// KafkaApis.handleDescribeConfigsRequest and the alter handlers do.
func authorizedConfigs[R any](ctx context.Context, env *Env, req *Request, op acl.Operation, resources []R,
	resource func(*R) (kmsg.ConfigResourceType, string), rewrite func([]R) kmsg.Request,
	handle Func, appendDenied func(kmsg.Response, kmsg.ConfigResourceType, string, int16, *string)) (kmsg.Response, error) {
	if env.Authorizer == nil {
		return handle(ctx, env, req)
	}
	type deniedResource struct {
		typ  kmsg.ConfigResourceType
		name string
		code int16
	}
	var allowed []R
	var denied []deniedResource
	for i := range resources {
		typ, name := resource(&resources[i])
		if ok, code := env.configAuthorization(req, op, typ, name); !ok {
			denied = append(denied, deniedResource{typ, name, code})
			continue
		}
		allowed = append(allowed, resources[i])
	}
	if len(denied) == 0 {
		return handle(ctx, env, req)
	}
	fwd := *req
	fwd.Msg = rewrite(allowed)
	resp, err := handle(ctx, env, &fwd)
	if err != nil || resp == nil {
		return resp, err
	}
	for _, d := range denied {
		appendDenied(resp, d.typ, d.name, d.code, authMessage(d.code))
		env.Metrics.Error(req.Key, d.code)
	}
	return resp, nil
}

// describeConfigsAuthorized is DescribeConfigs behind its checks.
func describeConfigsAuthorized(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.DescribeConfigsRequest)
	return authorizedConfigs(ctx, env, req, acl.DescribeConfigs, r.Resources,
		func(x *kmsg.DescribeConfigsRequestResource) (kmsg.ConfigResourceType, string) {
			return x.ResourceType, x.ResourceName
		},
		func(rs []kmsg.DescribeConfigsRequestResource) kmsg.Request { cp := *r; cp.Resources = rs; return &cp },
		handleDescribeConfigs,
		func(resp kmsg.Response, typ kmsg.ConfigResourceType, name string, code int16, msg *string) {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = typ, name, code, msg
			p := resp.(*kmsg.DescribeConfigsResponse)
			p.Resources = append(p.Resources, rr)
		})
}

// alterConfigsAuthorized is AlterConfigs behind its checks.
func alterConfigsAuthorized(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.AlterConfigsRequest)
	return authorizedConfigs(ctx, env, req, acl.AlterConfigs, r.Resources,
		func(x *kmsg.AlterConfigsRequestResource) (kmsg.ConfigResourceType, string) {
			return x.ResourceType, x.ResourceName
		},
		func(rs []kmsg.AlterConfigsRequestResource) kmsg.Request { cp := *r; cp.Resources = rs; return &cp },
		handleAlterConfigs,
		func(resp kmsg.Response, typ kmsg.ConfigResourceType, name string, code int16, msg *string) {
			rr := kmsg.NewAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = typ, name, code, msg
			p := resp.(*kmsg.AlterConfigsResponse)
			p.Resources = append(p.Resources, rr)
		})
}

// incrementalAlterConfigsAuthorized is IncrementalAlterConfigs behind its checks.
func incrementalAlterConfigsAuthorized(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.IncrementalAlterConfigsRequest)
	return authorizedConfigs(ctx, env, req, acl.AlterConfigs, r.Resources,
		func(x *kmsg.IncrementalAlterConfigsRequestResource) (kmsg.ConfigResourceType, string) {
			return x.ResourceType, x.ResourceName
		},
		func(rs []kmsg.IncrementalAlterConfigsRequestResource) kmsg.Request {
			cp := *r
			cp.Resources = rs
			return &cp
		},
		handleIncrementalAlterConfigs,
		func(resp kmsg.Response, typ kmsg.ConfigResourceType, name string, code int16, msg *string) {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = typ, name, code, msg
			p := resp.(*kmsg.IncrementalAlterConfigsResponse)
			p.Resources = append(p.Resources, rr)
		})
}

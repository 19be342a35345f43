package handler

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/logging"
	"github.com/cascade-kafka/cascade/broker/metadata"
)

// DescribeConfigs: v1-4
//
// Kafka 4's floor is v1 (KIP-896).
//   - v1: IncludeSynonyms and each entry's Source (KIP-226)
//   - v2: no change to fields
//   - v3: IncludeDocumentation and ConfigType (KIP-569)
//   - v4: flexible
//
// Topics: every topic config with its source (DYNAMIC_TOPIC_CONFIG,
// DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG or DEFAULT_CONFIG) and
// synonyms, as Kafka's
// ConfigHelper.createTopicConfigEntry. Brokers: named by this node's id, the
// configs Cascade honours with their sources, all read-only; the empty name
// lists the cluster-wide dynamic defaults (DYNAMIC_DEFAULT_BROKER_CONFIG),
// which are those a new Kafka 4 cluster holds: min.insync.replicas, written
// at its first start for eligible leader replicas (KIP-966). Broker loggers
// (KIP-412): named by this node's id, every named logger with the level in
// effect, as Kafka's Log4jController.loggers (alterLoggers changes them).
// An empty or null name list means every config.
func init() { register(32, 1, 4, describeConfigsAuthorized) }

func handleDescribeConfigs(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.DescribeConfigsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
	resp.SetVersion(req.Version)
	img := env.Meta.Image()
	for _, res := range r.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		// Kafka's results carry the field's default, an empty message,
		// unless an error sets one (ConfigHelperUtils.createResponseConfig).
		rr.ErrorMessage = kmsg.StringPtr("")
		var entries []config.Entry
		var err error
		switch res.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			if err = metadata.ValidateTopicName(res.ResourceName); err != nil {
				break
			}
			t, ok := img.Topic(res.ResourceName)
			if !ok {
				// Kafka's ConfigHelper sets no message here, so the
				// result keeps the empty default.
				rr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				env.Metrics.Error(req.Key, rr.ErrorCode)
				resp.Resources = append(resp.Resources, rr)
				continue
			}
			entries = config.DescribeTopic(env.Config, t.Configs)
		case kmsg.ConfigResourceTypeBroker:
			var perBroker bool
			if perBroker, err = checkBrokerResource(env, res.ResourceName); err == nil {
				if perBroker {
					entries = env.Config.DescribeBroker()
				} else {
					entries = env.Config.DescribeClusterDefaults()
				}
			}
		case kmsg.ConfigResourceTypeBrokerLogger:
			if env.Loggers == nil {
				err = &metadata.Error{Kind: metadata.ErrInvalidRequest, Message: fmt.Sprintf("Unsupported resource type: %s", res.ResourceType)}
				break
			}
			if err = checkBrokerLoggerResource(env, res.ResourceName); err == nil {
				entries = describeLoggers(env)
			}
		default:
			err = &metadata.Error{Kind: metadata.ErrInvalidRequest, Message: fmt.Sprintf("Unsupported resource type: %s", res.ResourceType)}
		}
		if err != nil {
			rr.ErrorCode = ErrorCode(err)
			rr.ErrorMessage = errMessage(err)
			env.Metrics.Error(req.Key, rr.ErrorCode)
			resp.Resources = append(resp.Resources, rr)
			continue
		}
		want := map[string]bool{}
		for _, n := range res.ConfigNames {
			want[n] = true
		}
		for _, e := range entries {
			if len(want) > 0 && !want[e.Name] {
				continue
			}
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			c.Name = e.Name
			c.Value = e.Value
			c.ReadOnly = e.ReadOnly
			c.IsDefault = e.Source == config.SourceDefaultConfig
			c.Source = kmsg.ConfigSource(e.Source)
			c.IsSensitive = e.Sensitive
			if e.Sensitive {
				c.Value = nil
			}
			if r.IncludeSynonyms {
				for _, s := range e.Synonyms {
					syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
					syn.Name, syn.Value, syn.Source = s.Name, s.Value, kmsg.ConfigSource(s.Source)
					if e.Sensitive {
						syn.Value = nil
					}
					c.ConfigSynonyms = append(c.ConfigSynonyms, syn)
				}
			}
			c.ConfigType = kmsg.ConfigType(e.Type)
			if r.IncludeDocumentation {
				doc := e.Doc
				c.Documentation = &doc
			}
			rr.Configs = append(rr.Configs, c)
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

// checkBrokerResource validates a BROKER resource name as Kafka's
// ConfigHelper: this node's id (perBroker true) or the empty name for
// cluster-wide defaults (false); anything else is INVALID_REQUEST.
func checkBrokerResource(env *Env, name string) (perBroker bool, err error) {
	if name == "" {
		return false, nil
	}
	id, perr := strconv.ParseInt(name, 10, 32)
	if perr != nil {
		return false, &metadata.Error{Kind: metadata.ErrInvalidRequest,
			Message: fmt.Sprintf("Broker id must be an integer, but it is: %s", name)}
	}
	if int32(id) != env.Config.NodeID {
		return false, &metadata.Error{Kind: metadata.ErrInvalidRequest,
			Message: fmt.Sprintf("Unexpected broker id, expected %d or empty string, but received %s", env.Config.NodeID, name)}
	}
	return true, nil
}

// checkBrokerLoggerResource validates a BROKER_LOGGER resource name as
// Kafka's ConfigHelper: this node's id, worded otherwise than for BROKER.
func checkBrokerLoggerResource(env *Env, name string) error {
	if name == "" {
		return &metadata.Error{Kind: metadata.ErrInvalidRequest, Message: "Broker id must not be empty"}
	}
	id, perr := strconv.ParseInt(name, 10, 32)
	if perr != nil {
		return &metadata.Error{Kind: metadata.ErrInvalidRequest,
			Message: fmt.Sprintf("Broker id must be an integer, but it is: %s", name)}
	}
	if int32(id) != env.Config.NodeID {
		return &metadata.Error{Kind: metadata.ErrInvalidRequest,
			Message: fmt.Sprintf("Unexpected broker id, expected %d but received %s", env.Config.NodeID, name)}
	}
	return nil
}

// describeLoggers describes every named logger, root first and the others
// in name order, as ConfigHelper does for BROKER_LOGGER: the level in
// effect as value, source DYNAMIC_BROKER_LOGGER_CONFIG, writable, no
// synonyms, no type.
func describeLoggers(env *Env) []config.Entry {
	levels := env.Loggers.Describe()
	names := make([]string, 0, len(levels))
	for n := range levels {
		if n != logging.RootLogger {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	names = append([]string{logging.RootLogger}, names...)
	out := make([]config.Entry, 0, len(names))
	for _, n := range names {
		level := levels[n]
		out = append(out, config.Entry{Name: n, Value: &level, Source: config.Source(kmsg.ConfigSourceDynamicBrokerLoggerConfig)})
	}
	return out
}

// resolveTopic returns a topic's effective configuration.
func resolveTopic(env *Env, overrides map[string]string) (config.Topic, error) {
	return config.ResolveTopic(env.Config, overrides)
}

package handler

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/metadata"
)

// CreateTopics: v2-7
//
// Kafka 4's floor is v2 (KIP-896).
//   - v3, v4: no change to fields; v4 lets NumPartitions and
//     ReplicationFactor be -1 for the broker defaults (KIP-464)
//   - v5: flexible; the response carries NumPartitions, ReplicationFactor
//     and the topic's configs (KIP-525)
//   - v6: no change (quota violations, KIP-599; Cascade has no quotas)
//   - v7: TopicID in the response (KIP-516)
//
// Each topic is validated and created on its own, as Kafka's
// ReplicationControlManager.createTopics: one bad topic does not fail the
// others. Creation is durable (one fsynced metadata batch per topic) before
// the response is sent.
func init() {
	register(19, 2, 7, handleCreateTopics)
	for _, e := range []struct {
		err  error
		code int16
	}{
		{metadata.ErrTopicExists, kerr.TopicAlreadyExists.Code},
		{metadata.ErrInvalidTopic, kerr.InvalidTopicException.Code},
		{metadata.ErrInvalidPartitions, kerr.InvalidPartitions.Code},
		{metadata.ErrInvalidReplicationFactor, kerr.InvalidReplicationFactor.Code},
		{metadata.ErrInvalidReplicaAssignment, kerr.InvalidReplicaAssignment.Code},
		{metadata.ErrInvalidRequest, kerr.InvalidRequest.Code},
		{metadata.ErrInvalidConfig, kerr.InvalidConfig.Code},
		{metadata.ErrUnknownTopic, kerr.UnknownTopicOrPartition.Code},
		{metadata.ErrUnknownTopicID, kerr.UnknownTopicID.Code},
		{metadata.ErrPolicyViolation, kerr.PolicyViolation.Code},
		{metadata.ErrTopicAuthorization, kerr.TopicAuthorizationFailed.Code},
		{metadata.ErrStorage, kerr.KafkaStorageError.Code},
	} {
		registerErrorCode(e.err, e.code)
	}
}

// errMessage returns the Kafka error message of err: nil for nil and for a
// metadata error Kafka sends without a message.
func errMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	var me *metadata.Error
	if errors.As(err, &me) {
		if me.Message == "" {
			return nil
		}
		s = me.Message
	}
	return &s
}

func handleCreateTopics(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.CreateTopicsRequest)
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	resp.SetVersion(req.Version)

	// Duplicate names fail as one INVALID_REQUEST each, listed after the
	// others, as ControllerApis.createTopics; the other topics proceed.
	count := map[string]int{}
	for _, t := range r.Topics {
		count[t.Topic]++
	}
	var dups []string
	for name, n := range count {
		if n > 1 {
			dups = append(dups, name)
		}
	}
	sort.Strings(dups)
	dupMsg := "Duplicate topic name."

	// As ControllerApis.createTopics: CREATE on the cluster or the topic;
	// denied topics are answered last, and a created topic's configs only
	// to a client that may DESCRIBE_CONFIGS it.
	clusterCreate := env.authorizeCluster(req, acl.Create)
	var denied []string
	var specs []metadata.CreateTopic
	var names []string
	for _, t := range r.Topics {
		if count[t.Topic] > 1 {
			continue
		}
		if !clusterCreate && !env.authorizeTopic(req, acl.Create, t.Topic) {
			denied = append(denied, t.Topic)
			continue
		}
		spec := metadata.CreateTopic{Name: t.Topic, NumPartitions: t.NumPartitions, ReplicationFactor: t.ReplicationFactor}
		for _, a := range t.ReplicaAssignment {
			spec.Assignments = append(spec.Assignments, metadata.Assignment{Partition: a.Partition, Replicas: a.Replicas})
		}
		if len(t.Configs) > 0 {
			spec.Configs = make(map[string]*string, len(t.Configs))
			for _, c := range t.Configs {
				spec.Configs[c.Name] = c.Value
			}
		}
		specs = append(specs, spec)
		names = append(names, t.Topic)
	}
	results := env.Meta.CreateTopics(specs, r.ValidateOnly)

	for i, res := range results {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = names[i]
		rt.NumPartitions, rt.ReplicationFactor = -1, -1
		if res.Err != nil {
			rt.ErrorCode = ErrorCode(res.Err)
			rt.ErrorMessage = errMessage(res.Err)
			env.Metrics.Error(req.Key, rt.ErrorCode)
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		if !r.ValidateOnly {
			if err := rollBackUnopened(env, res.Topic); err != nil {
				rt.ErrorCode = kerr.KafkaStorageError.Code
				msg := err.Error()
				rt.ErrorMessage = &msg
				env.Metrics.Error(req.Key, rt.ErrorCode)
				resp.Topics = append(resp.Topics, rt)
				continue
			}
		}
		rt.TopicID = res.Topic.ID
		if req.Version >= 5 {
			rt.NumPartitions = int32(len(res.Topic.Partitions))
			rt.ReplicationFactor = res.Topic.ReplicationFactor()
			if !env.authorizeTopic(req, acl.DescribeConfigs, rt.Topic) {
				rt.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
				resp.Topics = append(resp.Topics, rt)
				continue
			}
			for _, e := range config.EffectiveTopic(env.Config, res.Topic.Configs) {
				c := kmsg.NewCreateTopicsResponseTopicConfig()
				c.Name = e.Name
				c.Value = e.Value
				c.ReadOnly = e.ReadOnly
				c.Source = int8(e.Source)
				c.IsSensitive = e.Sensitive
				if e.Sensitive {
					c.Value = nil
				}
				rt.Configs = append(rt.Configs, c)
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for _, name := range dups {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = name
		rt.ErrorCode = kerr.InvalidRequest.Code
		rt.ErrorMessage = &dupMsg
		rt.NumPartitions, rt.ReplicationFactor = -1, -1
		env.Metrics.Error(req.Key, rt.ErrorCode)
		resp.Topics = append(resp.Topics, rt)
	}
	for _, name := range denied {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = name
		rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		rt.ErrorMessage = kmsg.StringPtr("Authorization failed.")
		rt.NumPartitions, rt.ReplicationFactor = -1, -1
		env.Metrics.Error(req.Key, rt.ErrorCode)
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// unopenedPartition returns the first partition of t led by this node whose
// log could not be opened when the metadata naming it was committed, with
// the error, or nil. A node without partitions (process.roles=controller)
// has none.
func unopenedPartition(env *Env, t *metadata.Topic) error {
	if env.Partitions == nil {
		return nil
	}
	for _, p := range t.Partitions {
		if p.Leader != env.NodeID {
			continue
		}
		if err := env.Partitions.OpenError(log.TopicPartition{Topic: t.Name, Partition: p.Partition}); err != nil {
			return fmt.Errorf("partition %s-%d could not be created on broker %d: %w", t.Name, p.Partition, env.NodeID, err)
		}
	}
	return nil
}

// rollBackUnopened deletes a just-created topic when this node could not
// open the log of a partition it leads, and returns why.
//
// In Kafka 4 the controller answers CreateTopics once the records are
// committed; a broker that then fails to create the log marks its log dir
// offline (LogDirFailureChannel), answers KAFKA_STORAGE_ERROR for the
// partition and reports the dir to the controller, which leaves a replica
// with no other copy without a leader. Cascade's controller and only
// replica are one process and learn of the failure before answering, so
// the client is told KAFKA_STORAGE_ERROR (retriable) for the topic rather
// than success for a topic no one can serve, and the topic is deleted
// again: the metadata never names a topic whose partitions have no log,
// the partitions that did open are removed with it, and a retry once the
// cause is gone (descriptors freed, disk repaired) creates the topic
// afresh instead of failing with TOPIC_ALREADY_EXISTS.
func rollBackUnopened(env *Env, t *metadata.Topic) error {
	err := unopenedPartition(env, t)
	if err == nil {
		return nil
	}
	if res := env.Meta.DeleteTopics([]metadata.DeleteTopic{{ID: t.ID}}); res[0].Err != nil {
		return fmt.Errorf("%w; removing the topic again failed: %v", err, res[0].Err)
	}
	return fmt.Errorf("%w; the topic was not created", err)
}

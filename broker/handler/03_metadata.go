package handler

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/metadata"
)

// Metadata: v0-13
//
// Kafka 4 keeps v0 (KIP-896 floor).
//   - v1: null topics means all; ControllerID; IsInternal; Rack
//   - v2: ClusterID
//   - v4: AllowAutoTopicCreation
//   - v5: OfflineReplicas
//   - v7: LeaderEpoch (KIP-320)
//   - v8: authorized operations (KIP-430); v11 drops the cluster-level one
//   - v9: flexible
//   - v10: TopicID in responses (KIP-516); v12: topics requested by id
//   - v13: top-level ErrorCode (KIP-1102; always 0 here)
func init() { register(3, 0, 13, handleMetadata) }

// isInternalTopic is Kafka's Topic.isInternal.
func isInternalTopic(name string) bool {
	return name == "__consumer_offsets" || name == "__transaction_state"
}

func handleMetadata(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.MetadataRequest)
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	resp.SetVersion(r.Version)
	img := env.Meta.Image()

	for _, a := range env.brokers() {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = a.ID, a.Host, a.Port
		if a.Rack != "" {
			rack := a.Rack
			b.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, b)
	}
	cid := img.ClusterID
	resp.ClusterID = &cid
	resp.ControllerID = env.controllerID()
	if r.Version >= 8 && r.Version <= 10 && r.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = env.authorizedOperations(req, acl.Cluster, acl.ClusterName)
	}

	// v0 sends an empty list for "all topics"; v1+ sends null.
	all := r.Topics == nil || (r.Version == 0 && len(r.Topics) == 0)
	if all {
		// As KafkaApis.handleTopicMetadataRequest: topics the client may
		// not describe are left out silently.
		for _, t := range img.Topics() {
			if env.authorizeTopic(req, acl.Describe, t.Name) {
				resp.Topics = append(resp.Topics, topicMetadata(env, req, r, t))
			}
		}
		return resp, nil
	}
	autoCreate := env.Config.AutoCreateTopics && (r.Version < 4 || r.AllowAutoTopicCreation)
	// Kafka answers the topics denied CREATE, then those denied DESCRIBE,
	// after the others (completeTopicMetadata).
	var deniedCreate, deniedDescribe []kmsg.MetadataResponseTopic
	denied := func(list *[]kmsg.MetadataResponseTopic, mt kmsg.MetadataResponseTopic) {
		mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		env.Metrics.Error(req.Key, mt.ErrorCode)
		*list = append(*list, mt)
	}
	for _, rt := range r.Topics {
		var zero [16]byte
		if rt.TopicID != zero && r.Version >= 10 {
			t, ok := img.TopicByID(metadata.UUID(rt.TopicID))
			if !ok {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				mt.ErrorCode = kerr.UnknownTopicID.Code
				env.Metrics.Error(req.Key, mt.ErrorCode)
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			if !env.authorizeTopic(req, acl.Describe, t.Name) {
				// Topic ids are not secret: the id is answered.
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				denied(&deniedDescribe, mt)
				continue
			}
			resp.Topics = append(resp.Topics, topicMetadata(env, req, r, t))
			continue
		}
		if rt.Topic == nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.ErrorCode = kerr.InvalidRequest.Code
			env.Metrics.Error(req.Key, mt.ErrorCode)
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		name := *rt.Topic
		if !env.authorizeTopic(req, acl.Describe, name) {
			// Whether it exists is not disclosed.
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = &name
			denied(&deniedDescribe, mt)
			continue
		}
		if t, ok := img.Topic(name); ok {
			resp.Topics = append(resp.Topics, topicMetadata(env, req, r, t))
			continue
		}
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = &name
		mt.IsInternal = isInternalTopic(name)
		if autoCreate && !env.authorizeCluster(req, acl.Create) && !env.authorizeTopic(req, acl.Create, name) {
			denied(&deniedCreate, mt)
			continue
		}
		switch {
		case metadata.ValidateTopicName(name) != nil:
			// As Kafka's KafkaApis.getTopicMetadata: a name that could
			// never exist is INVALID_TOPIC_EXCEPTION, not unknown.
			mt.ErrorCode = kerr.InvalidTopicException.Code
		case !autoCreate || mt.IsInternal:
			// Internal topics are created by their coordinators with
			// their own configs, never with num.partitions.
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		default:
			// As Kafka's AutoTopicCreationManager: the topic is
			// created and this response says LEADER_NOT_AVAILABLE;
			// the client's next Metadata request sees it.
			if _, err := env.Meta.EnsureTopic(name); err != nil {
				mt.ErrorCode = ErrorCode(err)
				env.logger().Debug("auto-create failed", "topic", name, "err", err)
			} else {
				mt.ErrorCode = kerr.LeaderNotAvailable.Code
			}
		}
		if r.IncludeTopicAuthorizedOperations {
			// As KafkaApis: every answered topic carries them.
			mt.AuthorizedOperations = env.authorizedOperations(req, acl.Topic, name)
		}
		env.Metrics.Error(req.Key, mt.ErrorCode)
		resp.Topics = append(resp.Topics, mt)
	}
	if len(deniedCreate)+len(deniedDescribe) > 0 {
		resp.Topics = slices.Concat(resp.Topics, deniedCreate, deniedDescribe)
	}
	return resp, nil
}

func topicMetadata(env *Env, req *Request, r *kmsg.MetadataRequest, t *metadata.Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = isInternalTopic(name)
	if r.IncludeTopicAuthorizedOperations {
		mt.AuthorizedOperations = env.authorizedOperations(req, acl.Topic, name)
	}
	for _, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.Partition
		mp.Leader = p.Leader
		mp.LeaderEpoch = p.LeaderEpoch
		mp.Replicas = append([]int32(nil), p.Replicas...)
		mp.ISR = append([]int32(nil), p.ISR...)
		mp.OfflineReplicas = offlineReplicas(env, p.Replicas)
		if p.Leader == -1 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// offlineReplicas returns the replicas whose broker is unregistered or
// fenced, as KRaftMetadataCache.getOfflineReplicas (Cascade has one log
// directory per broker and one client listener name across the cluster).
// A single node lists none: it is the only replica of all it has.
func offlineReplicas(env *Env, replicas []int32) []int32 {
	out := []int32{}
	if env.Cluster == nil {
		return out
	}
	img := env.Meta.Image()
	for _, r := range replicas {
		if b, ok := img.Broker(r); !ok || b.Fenced {
			out = append(out, r)
		}
	}
	return out
}

package handler

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/group"
	"github.com/cascade-kafka/cascade/broker/metadata"
)

// authorizedGroupRequest applies KafkaApis' checks of the group APIs before
// the coordinator sees the request: the operation each needs on its group
// (READ to join, sync, heartbeat, leave and commit, DESCRIBE to describe
// and fetch offsets, DELETE to delete groups and offsets), and on the
// topics it names. A request for several groups goes to the coordinator
// with the allowed ones, and the denied ones are answered with
// GROUP_AUTHORIZATION_FAILED ahead of the allowed ones' answers (after
// them for DeleteGroups), as Kafka 4.4 orders them.
func authorizedGroupRequest(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	denied := func() (kmsg.Response, error) {
		return group.ErrorResponse(req.Msg, kerr.GroupAuthorizationFailed.Code), nil
	}
	group1 := func(op acl.Operation, id string) bool { return env.authorize(req, op, acl.Group, id) }
	switch m := req.Msg.(type) {
	case *kmsg.JoinGroupRequest:
		if !group1(acl.Read, m.Group) {
			// Kafka answers an unknown member id (JoinGroupRequest.getErrorResponse).
			cp := *m
			cp.MemberID = ""
			return group.ErrorResponse(&cp, kerr.GroupAuthorizationFailed.Code), nil
		}
	case *kmsg.SyncGroupRequest:
		if !group1(acl.Read, m.Group) {
			return denied()
		}
	case *kmsg.HeartbeatRequest:
		if !group1(acl.Read, m.Group) {
			return denied()
		}
	case *kmsg.LeaveGroupRequest:
		if !group1(acl.Read, m.Group) {
			return denied()
		}
	case *kmsg.OffsetCommitRequest:
		if !group1(acl.Read, m.Group) {
			return denied()
		}
	case *kmsg.TxnOffsetCommitRequest:
		if !group1(acl.Read, m.Group) {
			return denied()
		}
	case *kmsg.ConsumerGroupHeartbeatRequest:
		if !group1(acl.Read, m.Group) {
			return denied()
		}
		// Subscribed topics the member may not describe fail the
		// heartbeat (KafkaApis.handleConsumerGroupHeartbeat).
		for _, t := range m.SubscribedTopicNames {
			if !env.authorizeTopic(req, acl.Describe, t) {
				resp := m.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
				resp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				return resp, nil
			}
		}
	case *kmsg.OffsetDeleteRequest:
		return authorizedOffsetDelete(ctx, env, req, m)
	case *kmsg.OffsetFetchRequest:
		return authorizedOffsetFetch(ctx, env, req, m)
	case *kmsg.ListGroupsRequest:
		return authorizedListGroups(ctx, env, req)
	case *kmsg.DescribeGroupsRequest:
		return authorizedDescribeGroups(ctx, env, req, m)
	case *kmsg.DeleteGroupsRequest:
		return authorizedDeleteGroups(ctx, env, req, m)
	case *kmsg.ConsumerGroupDescribeRequest:
		return authorizedConsumerGroupDescribe(ctx, env, req, m)
	}
	return coordinatorRequest(ctx, env, req)
}

// splitGroups partitions ids into those req may perform op on and the rest.
func splitGroups(env *Env, req *Request, op acl.Operation, ids []string) (allowed, denied []string) {
	for _, id := range ids {
		if env.authorize(req, op, acl.Group, id) {
			allowed = append(allowed, id)
		} else {
			denied = append(denied, id)
		}
	}
	return allowed, denied
}

// forward sends a rewritten request to the coordinator.
func forward(ctx context.Context, env *Env, req *Request, msg kmsg.Request) (kmsg.Response, error) {
	fwd := *req
	fwd.Msg = msg
	return coordinatorRequest(ctx, env, &fwd)
}

// describedGroups is what authorizedDescribe needs of DescribeGroups and
// ConsumerGroupDescribe, which answer alike: the answered groups, one
// group's id, code and authorized operations, and the answers of groups
// denied.
type describedGroups[G any] struct {
	groups func(kmsg.Response) *[]G
	fields func(*G) (id string, code int16, ops *int32)
	denied func([]string) []G
}

// authorizedDescribe sends the groups req may DESCRIBE to the coordinator
// (rewrite), fills the authorized operations of those answered when asked,
// and puts the denied groups' GROUP_AUTHORIZATION_FAILED ahead.
func authorizedDescribe[G any](ctx context.Context, env *Env, req *Request, ids []string, includeOps bool,
	rewrite func([]string) kmsg.Request, dg describedGroups[G]) (kmsg.Response, error) {
	allowed, denied := splitGroups(env, req, acl.Describe, ids)
	resp := req.Msg.ResponseKind()
	if len(allowed) > 0 {
		r, err := forward(ctx, env, req, rewrite(allowed))
		if err != nil {
			return nil, err
		}
		resp = r
	}
	groups := dg.groups(resp)
	for i := range *groups {
		if id, code, ops := dg.fields(&(*groups)[i]); includeOps && code == 0 {
			*ops = env.authorizedOperations(req, acl.Group, id)
		}
	}
	if len(denied) > 0 {
		*groups = append(dg.denied(denied), *groups...)
	}
	return resp, nil
}

func authorizedDescribeGroups(ctx context.Context, env *Env, req *Request, m *kmsg.DescribeGroupsRequest) (kmsg.Response, error) {
	return authorizedDescribe(ctx, env, req, m.Groups, m.IncludeAuthorizedOperations,
		func(ids []string) kmsg.Request { cp := *m; cp.Groups = ids; return &cp },
		describedGroups[kmsg.DescribeGroupsResponseGroup]{
			groups: func(r kmsg.Response) *[]kmsg.DescribeGroupsResponseGroup {
				return &r.(*kmsg.DescribeGroupsResponse).Groups
			},
			fields: func(g *kmsg.DescribeGroupsResponseGroup) (string, int16, *int32) {
				return g.Group, g.ErrorCode, &g.AuthorizedOperations
			},
			denied: func(ids []string) []kmsg.DescribeGroupsResponseGroup {
				return group.ErrorResponse(&kmsg.DescribeGroupsRequest{Version: m.Version, Groups: ids},
					kerr.GroupAuthorizationFailed.Code).(*kmsg.DescribeGroupsResponse).Groups
			},
		})
}

func authorizedConsumerGroupDescribe(ctx context.Context, env *Env, req *Request, m *kmsg.ConsumerGroupDescribeRequest) (kmsg.Response, error) {
	return authorizedDescribe(ctx, env, req, m.Groups, m.IncludeAuthorizedOperations,
		func(ids []string) kmsg.Request { cp := *m; cp.Groups = ids; return &cp },
		describedGroups[kmsg.ConsumerGroupDescribeResponseGroup]{
			groups: func(r kmsg.Response) *[]kmsg.ConsumerGroupDescribeResponseGroup {
				return &r.(*kmsg.ConsumerGroupDescribeResponse).Groups
			},
			fields: func(g *kmsg.ConsumerGroupDescribeResponseGroup) (string, int16, *int32) {
				return g.Group, g.ErrorCode, &g.AuthorizedOperations
			},
			denied: func(ids []string) []kmsg.ConsumerGroupDescribeResponseGroup {
				return group.ErrorResponse(&kmsg.ConsumerGroupDescribeRequest{Version: m.Version, Groups: ids},
					kerr.GroupAuthorizationFailed.Code).(*kmsg.ConsumerGroupDescribeResponse).Groups
			},
		})
}

func authorizedDeleteGroups(ctx context.Context, env *Env, req *Request, m *kmsg.DeleteGroupsRequest) (kmsg.Response, error) {
	allowed, denied := splitGroups(env, req, acl.Delete, m.Groups)
	resp := m.ResponseKind().(*kmsg.DeleteGroupsResponse)
	if len(allowed) > 0 {
		cp := *m
		cp.Groups = allowed
		r, err := forward(ctx, env, req, &cp)
		if err != nil {
			return nil, err
		}
		resp = r.(*kmsg.DeleteGroupsResponse)
	}
	// Unlike the describes, Kafka answers the denied groups last.
	for _, g := range denied {
		resp.Groups = append(resp.Groups, kmsg.DeleteGroupsResponseGroup{Group: g, ErrorCode: kerr.GroupAuthorizationFailed.Code})
	}
	return resp, nil
}

// authorizedListGroups answers every group to a client that may DESCRIBE
// the cluster, else only the groups it may DESCRIBE, dropping the others
// silently (KafkaApis.handleListGroupsRequest).
func authorizedListGroups(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r, err := coordinatorRequest(ctx, env, req)
	if err != nil || env.authorizeCluster(req, acl.Describe) {
		return r, err
	}
	resp := r.(*kmsg.ListGroupsResponse)
	resp.Groups = slices.DeleteFunc(resp.Groups, func(g kmsg.ListGroupsResponseGroup) bool {
		return !env.authorize(req, acl.Describe, acl.Group, g.Group)
	})
	return resp, nil
}

// authorizedOffsetDelete needs DELETE on the group and READ on each topic
// (KafkaApis.handleOffsetDeleteRequest); denied topics are answered first,
// TOPIC_AUTHORIZATION_FAILED, and never reach the coordinator.
func authorizedOffsetDelete(ctx context.Context, env *Env, req *Request, m *kmsg.OffsetDeleteRequest) (kmsg.Response, error) {
	if !env.authorize(req, acl.Delete, acl.Group, m.Group) {
		return group.ErrorResponse(m, kerr.GroupAuthorizationFailed.Code), nil
	}
	var deniedTopics []kmsg.OffsetDeleteResponseTopic
	cp := *m
	cp.Topics = nil
	for _, t := range m.Topics {
		if env.authorizeTopic(req, acl.Read, t.Topic) {
			cp.Topics = append(cp.Topics, t)
			continue
		}
		rt := kmsg.OffsetDeleteResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetDeleteResponseTopicPartition{Partition: p.Partition, ErrorCode: kerr.TopicAuthorizationFailed.Code})
		}
		deniedTopics = append(deniedTopics, rt)
	}
	r, err := forward(ctx, env, req, &cp)
	if err != nil {
		return nil, err
	}
	resp := r.(*kmsg.OffsetDeleteResponse)
	if resp.ErrorCode == 0 && len(deniedTopics) > 0 {
		resp.Topics = append(deniedTopics, resp.Topics...)
	}
	return resp, nil
}

// authorizedOffsetFetch needs DESCRIBE on each group; of the topics, those
// the client may not DESCRIBE are dropped from an all-topics answer and
// answered TOPIC_AUTHORIZATION_FAILED when named
// (KafkaApis.handleOffsetFetchRequest). Fetching is read-only, so the
// coordinator may read the denied topics: their answers are replaced.
func authorizedOffsetFetch(ctx context.Context, env *Env, req *Request, m *kmsg.OffsetFetchRequest) (kmsg.Response, error) {
	img := env.Meta.Image()
	if m.Version < 8 {
		if !env.authorize(req, acl.Describe, acl.Group, m.Group) {
			return group.ErrorResponse(m, kerr.GroupAuthorizationFailed.Code), nil
		}
		r, err := coordinatorRequest(ctx, env, req)
		if err != nil {
			return nil, err
		}
		resp := r.(*kmsg.OffsetFetchResponse)
		if resp.ErrorCode == 0 {
			resp.Topics = authorizeFetchedTopics(env, req, resp.Topics, m.Topics == nil,
				func(t *kmsg.OffsetFetchResponseTopic) string { return t.Topic },
				func(t *kmsg.OffsetFetchResponseTopic) {
					for i := range t.Partitions {
						t.Partitions[i] = kmsg.OffsetFetchResponseTopicPartition{Partition: t.Partitions[i].Partition,
							Offset: -1, LeaderEpoch: -1, Metadata: kmsg.StringPtr(""), ErrorCode: kerr.TopicAuthorizationFailed.Code}
					}
				})
		}
		return resp, nil
	}
	ids := make([]string, len(m.Groups))
	for i, g := range m.Groups {
		ids[i] = g.Group
	}
	_, deniedIDs := splitGroups(env, req, acl.Describe, ids)
	cp := *m
	cp.Groups = slices.DeleteFunc(slices.Clone(m.Groups), func(g kmsg.OffsetFetchRequestGroup) bool { return slices.Contains(deniedIDs, g.Group) })
	resp := m.ResponseKind().(*kmsg.OffsetFetchResponse)
	if len(cp.Groups) > 0 {
		r, err := forward(ctx, env, req, &cp)
		if err != nil {
			return nil, err
		}
		resp = r.(*kmsg.OffsetFetchResponse)
	}
	for i := range resp.Groups {
		g := &resp.Groups[i]
		all := false
		if j := slices.IndexFunc(m.Groups, func(rg kmsg.OffsetFetchRequestGroup) bool { return rg.Group == g.Group }); j >= 0 {
			all = m.Groups[j].Topics == nil
		}
		if g.ErrorCode != 0 {
			continue
		}
		g.Topics = authorizeFetchedTopics(env, req, g.Topics, all,
			func(t *kmsg.OffsetFetchResponseGroupTopic) string {
				if m.Version >= 10 {
					if mt, ok := img.TopicByID(metadata.UUID(t.TopicID)); ok {
						return mt.Name
					}
					return "" // unknown ids are answered as such
				}
				return t.Topic
			},
			func(t *kmsg.OffsetFetchResponseGroupTopic) {
				for i := range t.Partitions {
					t.Partitions[i] = kmsg.OffsetFetchResponseGroupTopicPartition{Partition: t.Partitions[i].Partition,
						Offset: -1, LeaderEpoch: -1, Metadata: kmsg.StringPtr(""), ErrorCode: kerr.TopicAuthorizationFailed.Code}
				}
			})
	}
	var deniedGroups []kmsg.OffsetFetchResponseGroup
	for _, id := range deniedIDs {
		deniedGroups = append(deniedGroups, kmsg.OffsetFetchResponseGroup{Group: id, ErrorCode: kerr.GroupAuthorizationFailed.Code})
	}
	resp.Groups = append(deniedGroups, resp.Groups...) // denied first, as Kafka
	return resp, nil
}

// authorizeFetchedTopics drops (all) or marks denied (named, moved after
// the allowed ones) the fetched topics the client may not DESCRIBE.
func authorizeFetchedTopics[T any](env *Env, req *Request, topics []T, all bool, name func(*T) string, deny func(*T)) []T {
	var kept, denied []T
	for i := range topics {
		t := &topics[i]
		n := name(t)
		if n == "" || env.authorizeTopic(req, acl.Describe, n) {
			kept = append(kept, *t)
			continue
		}
		if !all {
			deny(t)
			denied = append(denied, *t)
		}
	}
	return append(kept, denied...)
}

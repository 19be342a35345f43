package handler

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/metadata"
)

// DeleteTopics: v1-6
//
// Kafka 4's floor is v1 (KIP-896).
//   - v2, v3: no change to fields; from v3 a disabled deletion answers
//     TOPIC_DELETION_DISABLED instead of INVALID_REQUEST
//   - v4: flexible
//   - v5: ErrorMessage (KIP-599); an error without a message of its own
//     carries the code's default message, as Kafka's ApiError(Errors)
//   - v6: topics by name or by id (KIP-516); the response names the topic
//     deleted by id
//
// As ControllerApis.deleteTopics: with delete.topic.enable=false every entry
// answers the same error; a name or id given twice answers one
// INVALID_REQUEST ("Duplicate topic name."/"Duplicate topic id.") and is not
// deleted; an entry with both or neither of name and id is INVALID_REQUEST.
// Each deletion is durable before the response; the partition manager
// removes the logs when it sees the new image.
func init() { register(20, 1, 6, handleDeleteTopics) }

type deleteEntry struct {
	name *string
	id   [16]byte
	code int16
	msg  *string
}

func handleDeleteTopics(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.DeleteTopicsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
	resp.SetVersion(req.Version)

	// The request's topics in one list: names (v1-5) or name/id pairs (v6).
	var given []deleteEntry
	for i := range r.TopicNames {
		given = append(given, deleteEntry{name: &r.TopicNames[i]})
	}
	for _, t := range r.Topics {
		given = append(given, deleteEntry{name: t.Topic, id: t.TopicID})
	}

	var out []deleteEntry
	if !env.Config.DeleteTopicEnable {
		code := kerr.TopicDeletionDisabled.Code
		if req.Version < 3 {
			code = kerr.InvalidRequest.Code
		}
		for _, e := range given {
			e.code = code
			out = append(out, e)
		}
		return deleteTopicsResponse(env, req, resp, out), nil
	}

	msg := func(s string) *string { return &s }
	var zero [16]byte
	names, ids := map[string]int{}, map[[16]byte]int{}
	for _, e := range given {
		switch {
		case e.name != nil && e.id == zero:
			names[*e.name]++
		case e.name == nil && e.id != zero:
			ids[e.id]++
		}
	}
	var reqs []metadata.DeleteTopic
	// As ControllerApis.deleteTopics: DELETE on the cluster or the topic,
	// and for a topic named by id DESCRIBE first; a denial is
	// TOPIC_AUTHORIZATION_FAILED with Kafka's message, after the others.
	clusterDelete := env.authorizeCluster(req, acl.Delete)
	var denied []deleteEntry // answered after the others, as Kafka
	deny := func(e deleteEntry) {
		e.code = kerr.TopicAuthorizationFailed.Code
		if req.Version >= 5 {
			e.msg = authMessage(e.code)
		}
		denied = append(denied, e)
	}
	img := env.Meta.Image()
	for _, e := range given {
		if env.Authorizer != nil && !clusterDelete && (e.name == nil) != (e.id == zero) {
			name := ""
			if e.name != nil {
				name = *e.name
			} else if t, ok := img.TopicByID(metadata.UUID(e.id)); ok {
				name = t.Name
			}
			if name != "" && (e.name != nil && names[name] == 1 || e.name == nil && ids[e.id] == 1) {
				if e.name == nil && !env.authorizeTopic(req, acl.Describe, name) || !env.authorizeTopic(req, acl.Delete, name) {
					deny(e)
					continue
				}
			}
		}
		switch {
		case e.name == nil && e.id == zero:
			e.code, e.msg = kerr.InvalidRequest.Code, msg("Neither topic name nor id were specified.")
			out = append(out, e)
		case e.name != nil && e.id != zero:
			e.code, e.msg = kerr.InvalidRequest.Code, msg("You may not specify both topic name and topic id.")
			out = append(out, e)
		case e.name != nil && names[*e.name] > 1:
			out = append(out, deleteEntry{name: e.name, code: kerr.InvalidRequest.Code, msg: msg("Duplicate topic name.")})
			names[*e.name] = -1 // later occurrences are skipped below
		case e.name == nil && ids[e.id] > 1:
			out = append(out, deleteEntry{id: e.id, code: kerr.InvalidRequest.Code, msg: msg("Duplicate topic id.")})
			ids[e.id] = -1
		case e.name != nil && names[*e.name] < 0, e.name == nil && ids[e.id] < 0:
		case e.name != nil:
			reqs = append(reqs, metadata.DeleteTopic{Name: *e.name})
		default:
			reqs = append(reqs, metadata.DeleteTopic{ID: metadata.UUID(e.id)})
		}
	}
	results := env.Meta.DeleteTopics(reqs)
	if env.Groups != nil {
		env.Groups.TopicsDeleted(ctx)
	}
	for _, res := range results {
		e := deleteEntry{id: res.ID}
		if res.Name != "" {
			name := res.Name
			e.name = &name
		}
		if res.Err != nil {
			e.code, e.msg = ErrorCode(res.Err), errMessage(res.Err)
			if e.msg == nil && req.Version >= 5 {
				// The controller answers an unknown name or id with
				// ApiError(UNKNOWN_TOPIC_OR_PARTITION) or
				// ApiError(UNKNOWN_TOPIC_ID): the default message.
				e.msg = defaultMessage(e.code)
			}
		}
		out = append(out, e)
	}
	return deleteTopicsResponse(env, req, resp, append(out, denied...)), nil
}

func deleteTopicsResponse(env *Env, req *Request, resp *kmsg.DeleteTopicsResponse, out []deleteEntry) *kmsg.DeleteTopicsResponse {
	for _, e := range out {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID, rt.ErrorCode, rt.ErrorMessage = e.name, e.id, e.code, e.msg
		if e.code != 0 {
			env.Metrics.Error(req.Key, e.code)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

package group

import (
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (c *Coordinator) describeGroups(r Request, req *kmsg.DescribeGroupsRequest) {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		out := kmsg.DescribeGroupsResponseGroup{Group: id, AuthorizedOperations: -2147483648}
		g := c.classic[id]
		switch {
		case g == nil && c.consumer[id] != nil && req.Version >= 6:
			out.ErrorCode, out.State = kerr.GroupIDNotFound.Code, "Dead"
			out.ErrorMessage = strp(fmt.Sprintf("Group %s is not a classic group.", id))
		case g == nil && req.Version >= 6:
			out.ErrorCode, out.State = kerr.GroupIDNotFound.Code, "Dead"
			out.ErrorMessage = strp(fmt.Sprintf("Group %s not found.", id))
		case g == nil:
			out.State = "Dead"
		default:
			out.State = g.state.String()
			out.ProtocolType = deref(g.protocolType)
			if g.state == stateStable {
				out.Protocol = deref(g.protocol)
			}
			for _, mid := range g.order {
				m := g.members[mid]
				dm := kmsg.DescribeGroupsResponseGroupMember{
					MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
					ProtocolMetadata: []byte{}, MemberAssignment: nonNil(m.assignment),
				}
				// As Kafka's ClassicGroupMember.describe and
				// describeNoMetadata: the protocol metadata only once
				// the group is Stable, the last assignment always (a
				// rebalance from Stable keeps it until the next sync).
				if g.state == stateStable {
					dm.ProtocolMetadata = nonNil(m.metadata(deref(g.protocol)))
				}
				out.Members = append(out.Members, dm)
			}
		}
		resp.Groups = append(resp.Groups, out)
	}
	c.reply(r.ID, resp)
}

func (c *Coordinator) listGroups(r Request, req *kmsg.ListGroupsRequest) {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	states := map[string]bool{}
	for _, s := range req.StatesFilter {
		states[strings.ToLower(s)] = true
	}
	types := map[string]bool{}
	for _, t := range req.TypesFilter {
		types[strings.ToLower(t)] = true
	}
	keep := func(state, typ string) bool {
		return (len(states) == 0 || states[strings.ToLower(state)]) && (len(types) == 0 || types[typ])
	}
	ids := map[string]bool{}
	for id := range c.classic {
		ids[id] = true
	}
	for id := range c.consumer {
		ids[id] = true
	}
	for _, id := range sortedKeys(ids) {
		if g := c.classic[id]; g != nil {
			if keep(g.state.String(), "classic") {
				resp.Groups = append(resp.Groups, kmsg.ListGroupsResponseGroup{Group: id, ProtocolType: deref(g.protocolType), GroupState: g.state.String(), GroupType: "classic"})
			}
			continue
		}
		g := c.consumer[id]
		if keep(g.stateName(), "consumer") {
			resp.Groups = append(resp.Groups, kmsg.ListGroupsResponseGroup{Group: id, ProtocolType: "consumer", GroupState: g.stateName(), GroupType: "consumer"})
		}
	}
	c.reply(r.ID, resp)
}

func (c *Coordinator) deleteGroups(r Request, req *kmsg.DeleteGroupsRequest) {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range req.Groups {
		out := kmsg.DeleteGroupsResponseGroup{Group: id}
		g, cg := c.classic[id], c.consumer[id]
		switch {
		case g == nil && cg == nil:
			out.ErrorCode = kerr.GroupIDNotFound.Code
		case g != nil && g.state == stateDead:
			out.ErrorCode = kerr.GroupIDNotFound.Code
		case g != nil && (g.state != stateEmpty || len(g.pending) > 0):
			out.ErrorCode = kerr.NonEmptyGroup.Code
		case cg != nil && len(cg.members) > 0:
			out.ErrorCode = kerr.NonEmptyGroup.Code
		default:
			for _, k := range sortedOffsets(c.offsets[id]) {
				c.record(id, EncodeOffsetCommitKey(OffsetCommitKey{id, k.topic, k.part}), nil)
			}
			delete(c.offsets, id)
			if g != nil {
				delete(c.classic, id)
				c.record(id, encodeGroupKey(RecordGroupMetadata, id), nil)
			} else {
				c.deleteConsumerGroup(cg)
			}
		}
		resp.Groups = append(resp.Groups, out)
	}
	c.reply(r.ID, resp)
}

func (c *Coordinator) describeAssignment(a assignment) kmsg.Assignment {
	var out kmsg.Assignment
	for _, t := range a.topicPartitions() {
		out.TopicPartitions = append(out.TopicPartitions, kmsg.AssignmentTopicPartition{
			TopicID: t.TopicID, Topic: c.topicIDs[t.TopicID], Partitions: t.Partitions,
		})
	}
	return out
}

func (c *Coordinator) consumerGroupDescribe(r Request, req *kmsg.ConsumerGroupDescribeRequest) {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range req.Groups {
		out := kmsg.ConsumerGroupDescribeResponseGroup{Group: id, AuthorizedOperations: -2147483648}
		g := c.consumer[id]
		switch {
		case g == nil && c.classic[id] != nil:
			out.ErrorCode = kerr.GroupIDNotFound.Code
			out.ErrorMessage = strp(fmt.Sprintf("Group %s is not a consumer group.", id))
		case g == nil:
			out.ErrorCode = kerr.GroupIDNotFound.Code
			out.ErrorMessage = strp(fmt.Sprintf("Group %s not found.", id))
		default:
			out.State = g.stateName()
			out.Epoch = g.epoch
			out.AssignmentEpoch = g.assignmentEpoch
			out.AssignorName = c.cfg.ConsumerAssignors[0]
			for _, mid := range sortedKeys(g.members) {
				m := g.members[mid]
				if m.assignor != nil {
					out.AssignorName = *m.assignor
					break
				}
			}
			for _, mid := range sortedKeys(g.members) {
				m := g.members[mid]
				memberType := int8(1) // consumer protocol (KIP-1099)
				if m.classic != nil {
					memberType = 0 // classic protocol
				}
				out.Members = append(out.Members, kmsg.ConsumerGroupDescribeResponseGroupMember{
					MemberID: m.id, InstanceID: m.instanceID, RackID: m.rackID, MemberEpoch: m.epoch,
					ClientID: m.clientID, ClientHost: m.clientHost, SubscribedTopics: nonNilStrings(m.topics),
					SubscribedTopicRegex: m.regex,
					Assignment:           c.describeAssignment(m.assigned),
					TargetAssignment:     c.describeAssignment(g.target[m.id]),
					MemberType:           memberType,
				})
			}
		}
		resp.Groups = append(resp.Groups, out)
	}
	c.reply(r.ID, resp)
}

// ErrorResponse builds the answer to req with every group or partition
// failing with code: what the broker sends when this node is not the
// coordinator (NOT_COORDINATOR), is still loading (COORDINATOR_LOAD_IN_PROGRESS),
// or failed to append (mapped as Kafka's CoordinatorRuntime does).
func ErrorResponse(req kmsg.Request, code int16) kmsg.Response {
	switch m := req.(type) {
	case *kmsg.JoinGroupRequest:
		return joinError(m, m.MemberID, code)
	case *kmsg.SyncGroupRequest:
		r := m.ResponseKind().(*kmsg.SyncGroupResponse)
		r.ErrorCode = code
		return r
	case *kmsg.HeartbeatRequest:
		r := m.ResponseKind().(*kmsg.HeartbeatResponse)
		r.ErrorCode = code
		return r
	case *kmsg.LeaveGroupRequest:
		r := m.ResponseKind().(*kmsg.LeaveGroupResponse)
		r.ErrorCode = code
		return r
	case *kmsg.OffsetCommitRequest:
		r := m.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, t := range m.Topics {
			rt := kmsg.OffsetCommitResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
			}
			r.Topics = append(r.Topics, rt)
		}
		return r
	case *kmsg.TxnOffsetCommitRequest:
		r := m.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, t := range m.Topics {
			rt := kmsg.TxnOffsetCommitResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.TxnOffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
			}
			r.Topics = append(r.Topics, rt)
		}
		return r
	case *kmsg.OffsetFetchRequest:
		r := m.ResponseKind().(*kmsg.OffsetFetchResponse)
		if m.Version >= 8 {
			for _, g := range m.Groups {
				r.Groups = append(r.Groups, kmsg.OffsetFetchResponseGroup{Group: g.Group, ErrorCode: code})
			}
			return r
		}
		r.ErrorCode = code
		for _, t := range m.Topics {
			rt := kmsg.OffsetFetchResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetFetchResponseTopicPartition{Partition: p, Offset: -1, LeaderEpoch: -1, ErrorCode: code})
			}
			r.Topics = append(r.Topics, rt)
		}
		return r
	case *kmsg.OffsetDeleteRequest:
		r := m.ResponseKind().(*kmsg.OffsetDeleteResponse)
		r.ErrorCode = code
		return r
	case *kmsg.DescribeGroupsRequest:
		r := m.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, g := range m.Groups {
			r.Groups = append(r.Groups, kmsg.DescribeGroupsResponseGroup{Group: g, ErrorCode: code, AuthorizedOperations: -2147483648})
		}
		return r
	case *kmsg.ListGroupsRequest:
		r := m.ResponseKind().(*kmsg.ListGroupsResponse)
		r.ErrorCode = code
		return r
	case *kmsg.DeleteGroupsRequest:
		r := m.ResponseKind().(*kmsg.DeleteGroupsResponse)
		for _, g := range m.Groups {
			r.Groups = append(r.Groups, kmsg.DeleteGroupsResponseGroup{Group: g, ErrorCode: code})
		}
		return r
	case *kmsg.ConsumerGroupHeartbeatRequest:
		r := m.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		r.ErrorCode = code
		return r
	case *kmsg.ConsumerGroupDescribeRequest:
		r := m.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
		for _, g := range m.Groups {
			r.Groups = append(r.Groups, kmsg.ConsumerGroupDescribeResponseGroup{Group: g, ErrorCode: code, AuthorizedOperations: -2147483648})
		}
		return r
	}
	return nil
}

// GroupIDs returns the group ids a request addresses, so the caller can route
// it to the coordinator of their partitions (one id for most APIs; a batch
// for DescribeGroups, DeleteGroups, OffsetFetch v8+, ConsumerGroupDescribe;
// none for ListGroups, which every coordinator answers).
func GroupIDs(req kmsg.Request) []string {
	switch m := req.(type) {
	case *kmsg.JoinGroupRequest:
		return []string{m.Group}
	case *kmsg.SyncGroupRequest:
		return []string{m.Group}
	case *kmsg.HeartbeatRequest:
		return []string{m.Group}
	case *kmsg.LeaveGroupRequest:
		return []string{m.Group}
	case *kmsg.OffsetCommitRequest:
		return []string{m.Group}
	case *kmsg.TxnOffsetCommitRequest:
		return []string{m.Group}
	case *kmsg.OffsetDeleteRequest:
		return []string{m.Group}
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return []string{m.Group}
	case *kmsg.OffsetFetchRequest:
		if m.Version < 8 {
			return []string{m.Group}
		}
		out := make([]string, 0, len(m.Groups))
		for _, g := range m.Groups {
			out = append(out, g.Group)
		}
		return out
	case *kmsg.DescribeGroupsRequest:
		return m.Groups
	case *kmsg.DeleteGroupsRequest:
		return m.Groups
	case *kmsg.ConsumerGroupDescribeRequest:
		return m.Groups
	}
	return nil
}

func sortedOffsets(m map[tp]offsetEntry) []tp {
	out := make([]tp, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].topic != out[j].topic {
			return out[i].topic < out[j].topic
		}
		return out[i].part < out[j].part
	})
	return out
}

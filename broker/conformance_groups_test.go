package broker_test

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Conformance of the group coordinator's answers: DescribeGroups of
// unknown, classic, consumer (KIP-848) and migrated groups, the downgrade of
// a consumer group whose last consumer protocol member is replaced by a
// classic static member, and the error of a SyncGroup whose assignment
// cannot be written to __consumer_offsets.

// normalizeMemberIDs replaces the member ids of a response, which each
// broker draws at random, by their order of first appearance ("member-0",
// "member-1"...), in every MemberID and LeaderID field.
func normalizeMemberIDs(r kmsg.Response) {
	seen := map[string]string{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				f := v.Field(i)
				name := v.Type().Field(i).Name
				if (name == "MemberID" || name == "LeaderID") && f.Kind() == reflect.String && f.String() != "" {
					id, ok := seen[f.String()]
					if !ok {
						id = fmt.Sprintf("member-%d", len(seen))
						seen[f.String()] = id
					}
					f.SetString(id)
					continue
				}
				walk(f)
			}
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		}
	}
	walk(reflect.ValueOf(r))
}

// checkNormalized sends req to both brokers and compares the answers once
// member ids are normalised.
func (p *pair) checkNormalized(t *testing.T, name string, req kmsg.Request) (kmsg.Response, kmsg.Response) {
	t.Helper()
	k, c := p.both(req)
	nk, nc := cloneResponse(t, k), cloneResponse(t, c)
	normalizeMemberIDs(nk)
	normalizeMemberIDs(nc)
	for _, d := range diffResponses(nk, nc) {
		t.Errorf("%s (%s v%d): %s", name, kmsg.NameForKey(req.Key()), req.GetVersion(), d)
	}
	return k, c
}

// cloneResponse copies r through its encoding, so normalising leaves the
// original ids usable.
func cloneResponse(t *testing.T, r kmsg.Response) kmsg.Response {
	t.Helper()
	out := r.RequestKind().ResponseKind()
	out.SetVersion(r.GetVersion())
	if err := out.ReadFrom(r.AppendTo(nil)); err != nil {
		t.Fatalf("re-reading %T: %v", r, err)
	}
	return out
}

func describeGroupsReq(v int16, groups ...string) *kmsg.DescribeGroupsRequest {
	r := kmsg.NewPtrDescribeGroupsRequest()
	r.SetVersion(v)
	r.Groups = groups
	return r
}

func consumerSubscription(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = 1
	m.Topics = topics
	return m.AppendTo(nil)
}

func consumerAssignment(topic string, parts ...int32) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	a.Version = 1
	a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: topic, Partitions: parts}}
	return a.AppendTo(nil)
}

func joinGroupReq(group, member string, instance *string, topic string) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.SetVersion(9)
	r.Group, r.MemberID, r.InstanceID = group, member, instance
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 30000, 30000
	r.ProtocolType = "consumer"
	r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: consumerSubscription(topic)}}
	return r
}

func syncGroupReq(group, member string, gen int32, assignments map[string][]byte) *kmsg.SyncGroupRequest {
	r := kmsg.NewPtrSyncGroupRequest()
	r.SetVersion(5)
	r.Group, r.MemberID, r.Generation = group, member, gen
	r.ProtocolType, r.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	for m, a := range assignments {
		r.GroupAssignment = append(r.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m, MemberAssignment: a})
	}
	return r
}

// clientMemberID returns a member id as a KIP-848 client makes one (a
// random UUID, base64), which ConsumerGroupHeartbeat v1 requires.
func clientMemberID(t *testing.T) string {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(u[:])
}

func consumerHeartbeatReq(group, member string, instance *string, topic string) *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.SetVersion(1)
	r.Group, r.MemberID, r.InstanceID = group, member, instance
	r.MemberEpoch = 0
	r.RebalanceTimeoutMillis = 30000
	r.SubscribedTopicNames = []string{topic}
	r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return r
}

// joinClassic makes rc's member the only member and leader of a Stable
// classic group owning every partition of topic, and returns its member id
// and generation.
func joinClassic(t *testing.T, rc *rawConn, group, topic string, parts int32) (string, int32) {
	t.Helper()
	r := rc.do(joinGroupReq(group, "", nil, topic)).(*kmsg.JoinGroupResponse)
	if r.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("first join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	r = rc.do(joinGroupReq(group, r.MemberID, nil, topic)).(*kmsg.JoinGroupResponse)
	if r.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	var all []int32
	for i := int32(0); i < parts; i++ {
		all = append(all, i)
	}
	s := rc.do(syncGroupReq(group, r.MemberID, r.Generation, map[string][]byte{r.MemberID: consumerAssignment(topic, all...)})).(*kmsg.SyncGroupResponse)
	if s.ErrorCode != 0 {
		t.Fatalf("sync: %v", kerr.ErrorForCode(s.ErrorCode))
	}
	return r.MemberID, r.Generation
}

// consumerJoin sends a joining ConsumerGroupHeartbeat to both brokers and
// fails unless both accept it.
func (p *pair) consumerJoin(t *testing.T, group string, instance *string, topic string) {
	t.Helper()
	req := consumerHeartbeatReq(group, clientMemberID(t), instance, topic)
	k, c := p.both(req)
	for who, r := range map[string]kmsg.Response{"kafka": k, "cascade": c} {
		if code := r.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode; code != 0 {
			t.Fatalf("%s: ConsumerGroupHeartbeat: %v", who, kerr.ErrorForCode(code))
		}
	}
}

// TestConformanceDescribeGroups compares DescribeGroups v5 and v6 (KIP-1043:
// GROUP_ID_NOT_FOUND with a message) for an empty and an unknown group id, a
// Stable classic group, a consumer group of one consumer protocol member,
// and a group migrated online from classic to consumer (one member of each
// protocol). As Kafka 4.x's GroupMetadataManager.describeGroups, only
// classic groups are described: a consumer group, with or without classic
// members, is "not a classic group".
func TestConformanceDescribeGroups(t *testing.T) {
	p := newPair(t)
	topic := conformanceTopic(t, "describe")
	p.createBoth(t, topic, 2)
	p.findGroupCoordinator(t, topic)
	classic, consumer, mixed := topic+"-classic", topic+"-consumer", topic+"-mixed"

	for _, rc := range []*rawConn{p.kafka, p.cascade} {
		joinClassic(t, rc, classic, topic, 2)
		joinClassic(t, rc, mixed, topic, 2)
	}
	p.consumerJoin(t, consumer, nil, topic)
	p.consumerJoin(t, mixed, nil, topic)

	for _, v := range []int16{5, 6} {
		p.check(t, "empty group id", describeGroupsReq(v, ""))
		p.check(t, "unknown group", describeGroupsReq(v, topic+"-unknown"))
		p.checkNormalized(t, "classic group", describeGroupsReq(v, classic))
		p.check(t, "consumer group", describeGroupsReq(v, consumer))
		p.check(t, "migrated group", describeGroupsReq(v, mixed))
		p.checkNormalized(t, "several groups", describeGroupsReq(v, consumer, classic, ""))
	}
	_, c := p.both(describeGroupsReq(6, mixed))
	g := c.(*kmsg.DescribeGroupsResponse).Groups[0]
	if g.ErrorCode != kerr.GroupIDNotFound.Code || g.ErrorMessage == nil || !strings.Contains(*g.ErrorMessage, "not a classic group") {
		t.Errorf("migrated group: code %v message %v, want GROUP_ID_NOT_FOUND not a classic group", kerr.ErrorForCode(g.ErrorCode), g.ErrorMessage)
	}
}

// TestConformanceStaticDowngrade compares the downgrade of a consumer group
// whose only member, a static consumer protocol member, is replaced by a
// classic member with the same group.instance.id (Kafka's
// classicGroupJoinToConsumerGroup then convertToClassicGroup): the JoinGroup
// answer, the classic group DescribeGroups shows, Stable at the group epoch
// with the replaced member's assignment, and the SyncGroup that returns it.
func TestConformanceStaticDowngrade(t *testing.T) {
	p := newPair(t)
	topic := conformanceTopic(t, "downgrade")
	p.createBoth(t, topic, 2)
	p.findGroupCoordinator(t, topic)
	group := topic + "-group"
	instance := kmsg.StringPtr("instance-1")
	p.consumerJoin(t, group, instance, topic)

	k, c := p.checkNormalized(t, "static replacement", joinGroupReq(group, "", instance, topic))
	p.checkNormalized(t, "downgraded group", describeGroupsReq(5, group))
	kj, cj := k.(*kmsg.JoinGroupResponse), c.(*kmsg.JoinGroupResponse)
	ks := p.kafka.do(syncGroupReq(group, kj.MemberID, kj.Generation, nil))
	cs := p.cascade.do(syncGroupReq(group, cj.MemberID, cj.Generation, nil))
	for _, d := range diffResponses(ks, cs) {
		t.Errorf("sync after downgrade: %s", d)
	}
	if r := cs.(*kmsg.SyncGroupResponse); r.ErrorCode != 0 || len(r.MemberAssignment) == 0 {
		t.Errorf("cascade: sync after downgrade: %v, %d bytes of assignment", kerr.ErrorForCode(r.ErrorCode), len(r.MemberAssignment))
	}
	lr := kmsg.NewPtrListGroupsRequest()
	lr.SetVersion(5)
	lr.TypesFilter = []string{"classic"}
	for who, rc := range map[string]*rawConn{"kafka": p.kafka, "cascade": p.cascade} {
		found := false
		for _, g := range rc.do(lr).(*kmsg.ListGroupsResponse).Groups {
			found = found || g.Group == group
		}
		if !found {
			t.Errorf("%s: %s is not listed as a classic group", who, group)
		}
	}
}

// TestConformanceSyncGroupTooLarge compares a leader's SyncGroup whose
// assignment makes a GroupMetadata record larger than max.message.bytes of
// __consumer_offsets: Kafka answers UNKNOWN_SERVER_ERROR
// (appendGroupMetadataErrorToResponseError of MESSAGE_TOO_LARGE), not a
// retriable error.
func TestConformanceSyncGroupTooLarge(t *testing.T) {
	p := newPair(t)
	topic := conformanceTopic(t, "bigsync")
	p.createBoth(t, topic, 1)
	p.findGroupCoordinator(t, topic)
	group := topic + "-group"
	big := make([]byte, 1100<<10)
	var answers []kmsg.Response
	for _, rc := range []*rawConn{p.kafka, p.cascade} {
		r := rc.do(joinGroupReq(group, "", nil, topic)).(*kmsg.JoinGroupResponse)
		r = rc.do(joinGroupReq(group, r.MemberID, nil, topic)).(*kmsg.JoinGroupResponse)
		if r.ErrorCode != 0 {
			t.Fatalf("join: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		answers = append(answers, rc.do(syncGroupReq(group, r.MemberID, r.Generation, map[string][]byte{r.MemberID: big})))
	}
	for _, d := range diffResponses(answers[0], answers[1]) {
		t.Errorf("oversized sync: %s", d)
	}
	if code := answers[1].(*kmsg.SyncGroupResponse).ErrorCode; code != kerr.UnknownServerError.Code {
		t.Errorf("cascade: oversized sync answered %v, want UNKNOWN_SERVER_ERROR", kerr.ErrorForCode(code))
	}
}

// TestConformanceStaticDowngradeStale is the replacement of the last
// consumer protocol member by a classic static member whose subscription
// differs: the group epoch is bumped, so the assignment is stale; the member
// is not reconciled (generation 0) and the downgraded classic group
// rebalances.
func TestConformanceStaticDowngradeStale(t *testing.T) {
	p := newPair(t)
	topic := conformanceTopic(t, "downgradestale")
	other := topic + "-other"
	p.createBoth(t, topic, 2)
	p.createBoth(t, other, 1)
	p.findGroupCoordinator(t, topic)
	group := topic + "-group"
	instance := kmsg.StringPtr("instance-1")
	p.consumerJoin(t, group, instance, topic)

	join := joinGroupReq(group, "", instance, topic)
	join.Protocols[0].Metadata = consumerSubscription(topic, other)
	p.checkNormalized(t, "static replacement, new subscription", join)
	p.checkNormalized(t, "rebalancing group", describeGroupsReq(5, group))
}

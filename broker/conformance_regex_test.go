package broker_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

// Conformance of KIP-848 regular expression subscriptions: the group
// coordinator resolves a member's SubscribedTopicRegex against every topic
// of the metadata image, internal ones included, asynchronously (the
// heartbeat that brings a new regex is answered before it is resolved), at
// most once per 10 s per group, and assigns a topic created later only at
// the first refresh after that interval; a principal's resolution leaves
// out the topics it may not describe (TestConformanceACLs).

// regexMember is one consumer-protocol member heartbeating on one broker
// with a topic regex. It sends back what it was assigned as owned and
// keeps the assignment by topic name, and the history of (epoch,
// assignment) changes it saw.
type regexMember struct {
	t            *testing.T
	rc           *rawConn
	who          string
	group, id    string
	regex        string
	epoch        int32
	owned        []kmsg.ConsumerGroupHeartbeatRequestTopic
	names        map[[16]byte]string
	assigned     string
	history      []string
	changedAt    time.Time
	firstRequest time.Time
}

func newRegexMember(t *testing.T, rc *rawConn, who, group, id, regex string) *regexMember {
	return &regexMember{t: t, rc: rc, who: who, group: group, id: id, regex: regex, names: map[[16]byte]string{}}
}

func (m *regexMember) heartbeat() {
	m.t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.SetVersion(1)
	req.Group, req.MemberID, req.MemberEpoch = m.group, m.id, m.epoch
	req.RebalanceTimeoutMillis = -1
	req.Topics = m.owned
	if m.epoch == 0 {
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicRegex = kmsg.StringPtr(m.regex)
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		m.firstRequest = time.Now()
	}
	resp := m.rc.do(req).(*kmsg.ConsumerGroupHeartbeatResponse)
	// A coordinator still loading the group's partition asks the member
	// to come back, as a client does.
	for i := 0; m.epoch == 0 && kerr.IsRetriable(kerr.ErrorForCode(resp.ErrorCode)) && i < 100; i++ {
		time.Sleep(100 * time.Millisecond)
		m.firstRequest = time.Now()
		resp = m.rc.do(req).(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	if resp.ErrorCode != 0 {
		m.t.Fatalf("%s: heartbeat at epoch %d: %v", m.who, m.epoch, kerr.ErrorForCode(resp.ErrorCode))
	}
	m.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		m.owned = nil
		for _, at := range resp.Assignment.Topics {
			m.owned = append(m.owned, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: at.TopicID, Partitions: at.Partitions})
		}
		m.assigned = m.describe(resp.Assignment.Topics)
	}
	entry := fmt.Sprintf("epoch %d: %s", m.epoch, m.assigned)
	if len(m.history) == 0 || m.history[len(m.history)-1] != entry {
		m.history = append(m.history, entry)
		m.changedAt = time.Now()
	}
}

// describe names an assignment "topic:p,p;topic:p" in topic order, with
// the broker's own topic ids resolved through Metadata.
func (m *regexMember) describe(ts []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic) string {
	m.t.Helper()
	var parts []string
	for _, at := range ts {
		name, ok := m.names[at.TopicID]
		if !ok {
			// No topics named: every topic the connection may describe.
			for _, mt := range m.rc.do(metadataReq(12, false)).(*kmsg.MetadataResponse).Topics {
				m.names[mt.TopicID] = *mt.Topic
			}
			if name, ok = m.names[at.TopicID]; !ok {
				name = fmt.Sprintf("%x", at.TopicID)
			}
		}
		ps := slices.Clone(at.Partitions)
		slices.Sort(ps)
		var s []string
		for _, p := range ps {
			s = append(s, fmt.Sprint(p))
		}
		parts = append(parts, name+":"+strings.Join(s, ","))
	}
	slices.Sort(parts)
	return strings.Join(parts, ";")
}

// pollRegex heartbeats every member every 250 ms until done holds for
// each, or fails after limit.
func pollRegex(t *testing.T, what string, limit time.Duration, done func(*regexMember) bool, ms ...*regexMember) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		all := true
		for _, m := range ms {
			m.heartbeat()
			all = all && done(m)
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			for _, m := range ms {
				t.Logf("%s: %s", m.who, strings.Join(m.history, " | "))
			}
			t.Fatalf("%s: not reached within %v", what, limit)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// sameHistory reports a difference between the two members' histories.
func sameHistory(t *testing.T, what string, k, c *regexMember) {
	t.Helper()
	if !slices.Equal(k.history, c.history) {
		t.Errorf("%s:\n kafka:   %s\n cascade: %s", what, strings.Join(k.history, " | "), strings.Join(c.history, " | "))
	}
}

func TestConformanceRegexSubscription(t *testing.T) {
	addr := oracleAddr(t)
	b := brokertest.Start(t, map[string]string{
		"auto.create.topics.enable":        "false",
		"group.initial.rebalance.delay.ms": "0",
		// The oracle's __consumer_offsets has one partition; so has
		// Cascade's here, so the internal topic is assigned alike.
		"offsets.topic.num.partitions": "1",
	})
	p := &pair{kafka: dialAddr(t, addr), cascade: dial(t, b), b: b}
	pre := conformanceTopic(t, "rx")
	p.createBoth(t, pre+"-a", 2)
	group := pre + "-g"
	p.findGroupCoordinator(t, group)

	// An internal topic matches as any other.
	regex := "__consumer_offsets|" + regexp.QuoteMeta(pre) + "-.*"
	id := clientMemberID(t)
	k := newRegexMember(t, p.kafka, "kafka", group, id, regex)
	c := newRegexMember(t, p.cascade, "cascade", group, id, regex)
	k.heartbeat()
	c.heartbeat()
	if k.assigned != "" {
		t.Errorf("kafka assigned %q in the answer to the heartbeat that brought the regex", k.assigned)
	}
	want := "__consumer_offsets:0;" + pre + "-a:0,1"
	pollRegex(t, "the regex resolved", 30*time.Second, func(m *regexMember) bool { return m.assigned == want }, k, c)
	sameHistory(t, "resolving a new regex", k, c)

	// A topic created now is picked up at the first refresh 10 s after
	// the last one, not before.
	p.createBoth(t, pre+"-b", 1)
	wantB := want + ";" + pre + "-b:0"
	pollRegex(t, "the new topic assigned", 45*time.Second, func(m *regexMember) bool { return m.assigned == wantB }, k, c)
	for _, m := range []*regexMember{k, c} {
		if early := m.firstRequest.Add(10 * time.Second); m.changedAt.Before(early) {
			t.Errorf("%s assigned the new topic %v after the regex arrived, before the 10 s refresh interval",
				m.who, m.changedAt.Sub(m.firstRequest).Round(time.Millisecond))
		}
	}
	sameHistory(t, "a topic created after the resolution", k, c)

	// A deleted topic leaves the assignment.
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.SetVersion(6)
	del.TimeoutMillis = 10000
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr(pre + "-a")
	del.Topics = append(del.Topics, dt)
	for who, r := range map[string]kmsg.Response{"kafka": p.kafka.do(del), "cascade": p.cascade.do(del)} {
		if code := r.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode; code != 0 {
			t.Fatalf("%s: delete: %v", who, kerr.ErrorForCode(code))
		}
	}
	wantGone := "__consumer_offsets:0;" + pre + "-b:0"
	pollRegex(t, "the deleted topic unassigned", 45*time.Second, func(m *regexMember) bool { return m.assigned == wantGone }, k, c)
	// What follows the removal, for a few heartbeats more.
	settle := time.Now().Add(3 * time.Second)
	pollRegex(t, "settled", 10*time.Second, func(*regexMember) bool { return time.Now().After(settle) }, k, c)
	sameHistory(t, "a matched topic deleted", k, c)
}

// TestConformanceRegexSyntax compares the answers to regexes RE2/J refuses
// or accepts where Java's own Pattern would differ: lookaround, possessive
// and nested repetition, \C, Java-only classes, bad ranges and repeat
// counts are INVALID_REGULAR_EXPRESSION with RE2/J's description; POSIX
// classes, \Q quotes, flags, named groups and \z are valid.
func TestConformanceRegexSyntax(t *testing.T) {
	addr := oracleAddr(t)
	b := brokertest.Start(t, map[string]string{"offsets.topic.num.partitions": "1"})
	p := &pair{kafka: dialAddr(t, addr), cascade: dial(t, b), b: b}
	group := conformanceTopic(t, "rxsyntax")
	for i, rx := range []string{"(?=x)", "(?<!a)b", "a++", "a**", `\C`, `[a-\d]`, "a{2,1}", "(", ")(", `\p{Alpha}`,
		"[[:alpha:]]+", `\Qa.b`, "(?i)ABC", "(?P<n>a)", "(?<n>a)", `a\z`} {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.SetVersion(1)
		// Each regex joins a group of its own, so that a valid one
		// leaves no member behind for the next.
		req.Group, req.MemberID = fmt.Sprintf("%s-%d", group, i), clientMemberID(t)
		p.findGroupCoordinator(t, req.Group)
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicRegex = kmsg.StringPtr(rx)
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		kr, cr := joinRetrying(p.kafka, req), joinRetrying(p.cascade, req)
		if kr.ErrorCode != cr.ErrorCode || strOr(kr.ErrorMessage) != strOr(cr.ErrorMessage) {
			t.Errorf("%q: kafka %v %q, cascade %v %q", rx, kerr.ErrorForCode(kr.ErrorCode), strOr(kr.ErrorMessage),
				kerr.ErrorForCode(cr.ErrorCode), strOr(cr.ErrorMessage))
		}
	}
}

// checkRegexAuthorized: a regex member connected from 127.0.0.2 is
// assigned only the matching topics that address may describe (acl-read
// by its READ, acl-open without ACLs), not acl-secret.
func checkRegexAuthorized(t *testing.T, c2 *aclPair) {
	t.Helper()
	id := clientMemberID(t)
	const regex = "acl-(read|secret|open)"
	k := newRegexMember(t, c2.kafka, "kafka", "acl-rx", id, regex)
	c := newRegexMember(t, c2.cascade, "cascade", "acl-rx", id, regex)
	const want = "acl-open:0;acl-read:0"
	pollRegex(t, "the authorized regex resolved", 30*time.Second, func(m *regexMember) bool { return m.assigned == want }, k, c)
	sameHistory(t, "a regex resolved for a principal", k, c)
}

func strOr(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

// joinRetrying sends a joining heartbeat until the coordinator is ready
// for it, as a client does.
func joinRetrying(rc *rawConn, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	rc.t.Helper()
	for i := 0; ; i++ {
		r := rc.do(req).(*kmsg.ConsumerGroupHeartbeatResponse)
		if !kerr.IsRetriable(kerr.ErrorForCode(r.ErrorCode)) || i == 100 {
			return r
		}
		time.Sleep(100 * time.Millisecond)
	}
}

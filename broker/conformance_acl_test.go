package broker_test

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/broker/wire"
	"github.com/cascade-kafka/cascade/matrix/apachekafka"
)

// aclProps are the authorizer settings both brokers of the ACL conformance
// test run with. allow.everyone.if.no.acl.found lets the brokers' own
// connections (from 127.0.0.1) through until the test's first ACL names
// the cluster; that ACL allows 127.0.0.1 everything on it, so the brokers
// and the test's admin connection keep working while clients from other
// loopback addresses meet the ACLs.
var aclProps = map[string]string{
	"authorizer.class.name":          "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
	"allow.everyone.if.no.acl.found": "true",
	"auto.create.topics.enable":      "true",
}

// aclPair is one connection to each broker from one loopback address.
type aclPair struct{ pair }

func dialFrom(t *testing.T, addr, local string) *rawConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Skipf("cannot connect from %s: %v", local, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c}
}

// startACLOracle starts an Apache Kafka broker with the authorizer on, for
// this test alone.
func startACLOracle(t *testing.T) string {
	t.Helper()
	return startOracleWith(t, aclProps)
}

// startOracleWith starts an Apache Kafka broker with props, for this test
// alone.
func startOracleWith(t *testing.T, props map[string]string) string {
	t.Helper()
	oracleAddr(t) // skips as the other conformance tests do
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	dist, err := apachekafka.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := dist.StartBroker(ctx, apachekafka.BrokerOptions{Overrides: props})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Stop() })
	return b.Addr()
}

func aclCreation(typ kmsg.ACLResourceType, name string, pat kmsg.ACLResourcePatternType, principal, host string,
	op kmsg.ACLOperation, perm kmsg.ACLPermissionType) kmsg.CreateACLsRequestCreation {
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = typ, name, pat
	c.Principal, c.Host, c.Operation, c.PermissionType = principal, host, op, perm
	return c
}

// sortDescribed orders the parts of answers Kafka builds from hash sets
// and maps: DescribeAcls resources, Metadata, Produce and DeleteTopics
// topics.
func sortDescribed(r kmsg.Response) {
	switch m := r.(type) {
	case *kmsg.MetadataResponse:
		slices.SortFunc(m.Topics, func(a, b kmsg.MetadataResponseTopic) int { return strings.Compare(*a.Topic, *b.Topic) })
	case *kmsg.ProduceResponse:
		slices.SortFunc(m.Topics, func(a, b kmsg.ProduceResponseTopic) int { return strings.Compare(a.Topic, b.Topic) })
	case *kmsg.DeleteTopicsResponse:
		slices.SortFunc(m.Topics, func(a, b kmsg.DeleteTopicsResponseTopic) int { return strings.Compare(*a.Topic, *b.Topic) })
	}
	d, ok := r.(*kmsg.DescribeACLsResponse)
	if !ok {
		return
	}
	key := func(x kmsg.DescribeACLsResponseResource) string {
		return x.ResourceType.String() + "/" + x.ResourcePatternType.String() + "/" + x.ResourceName
	}
	slices.SortFunc(d.Resources, func(a, b kmsg.DescribeACLsResponseResource) int { return strings.Compare(key(a), key(b)) })
	for i := range d.Resources {
		slices.SortFunc(d.Resources[i].ACLs, func(a, b kmsg.DescribeACLsResponseResourceACL) int {
			return strings.Compare(a.Principal+a.Host+a.Operation.String()+a.PermissionType.String(),
				b.Principal+b.Host+b.Operation.String()+b.PermissionType.String())
		})
	}
}

// checkACL compares one request's answers after sorting DescribeAcls
// results. A request the ACLs just changed for is asked of Kafka again for
// up to five seconds: its brokers apply ACL records from the metadata log
// after CreateAcls answers.
func (p *aclPair) checkACL(t *testing.T, name string, req kmsg.Request, ignore ...string) kmsg.Response {
	t.Helper()
	c := p.cascade.do(req)
	sortDescribed(c)
	deadline := time.Now().Add(5 * time.Second)
	for {
		k := p.kafka.do(req)
		sortDescribed(k)
		var diffs []string
		for _, d := range diffResponses(k, c) {
			if !slices.ContainsFunc(ignore, func(s string) bool { return strings.Contains(d, s) }) {
				diffs = append(diffs, d)
			}
		}
		if len(diffs) == 0 {
			return c
		}
		if time.Now().After(deadline) {
			for _, d := range diffs {
				t.Errorf("%s (%s v%d): %s", name, kmsg.NameForKey(req.Key()), req.GetVersion(), d)
			}
			return c
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestConformanceACLs sends the same ACL administration and the same
// client requests, as User:ANONYMOUS from three loopback addresses, to
// Apache Kafka and to Cascade, both with StandardAuthorizer on, and
// compares the answers: CreateAcls validation, DescribeAcls and DeleteAcls
// filters, literal, prefixed and wildcard patterns, host-based allow and
// deny, deny overriding allow, implied DESCRIBE, and each API's denial
// code and silent filtering.
func TestConformanceACLs(t *testing.T) {
	kafkaAddr := startACLOracle(t)
	b := brokertest.Start(t, aclProps, map[string]string{"group.initial.rebalance.delay.ms": "0"})
	from := func(host string) *aclPair {
		return &aclPair{pair{kafka: dialFrom(t, kafkaAddr, host), cascade: dialFrom(t, b.Addr(), host), b: b}}
	}
	admin, c2, c3 := from("127.0.0.1"), from("127.0.0.2"), from("127.0.0.3")

	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.SetVersion(7)
	for _, name := range []string{"acl-read", "acl-both", "acl-pre-x", "acl-open", "acl-secret"} {
		tp := kmsg.NewCreateTopicsRequestTopic()
		tp.Topic, tp.NumPartitions, tp.ReplicationFactor = name, 1, 1
		ct.Topics = append(ct.Topics, tp)
	}
	admin.check(t, "create topics", ct)

	const anon = "User:ANONYMOUS"
	cr := kmsg.NewPtrCreateACLsRequest()
	cr.SetVersion(3)
	cr.Creations = []kmsg.CreateACLsRequestCreation{
		// The admin address keeps every cluster permission.
		aclCreation(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLResourcePatternTypeLiteral, anon, "127.0.0.1", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeTopic, "acl-read", kmsg.ACLResourcePatternTypeLiteral, anon, "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeTopic, "acl-both", kmsg.ACLResourcePatternTypeLiteral, "User:*", "*", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeTopic, "acl-both", kmsg.ACLResourcePatternTypeLiteral, anon, "127.0.0.2", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeDeny),
		aclCreation(kmsg.ACLResourceTypeTopic, "acl-pre-", kmsg.ACLResourcePatternTypePrefixed, anon, "*", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeTopic, "acl-secret", kmsg.ACLResourcePatternTypeLiteral, anon, "127.0.0.1", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow),
		// Described but not creatable: auto-creation is denied.
		aclCreation(kmsg.ACLResourceTypeTopic, "acl-nocreate", kmsg.ACLResourcePatternTypeLiteral, anon, "*", kmsg.ACLOperationDescribe, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeGroup, "acl-g", kmsg.ACLResourcePatternTypeLiteral, anon, "127.0.0.3", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeTransactionalId, "acl-tx", kmsg.ACLResourcePatternTypePrefixed, anon, "127.0.0.3", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow),
		// Invalid creations fail one by one.
		aclCreation(kmsg.ACLResourceTypeTopic, "", kmsg.ACLResourcePatternTypeLiteral, anon, "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeCluster, "other", kmsg.ACLResourcePatternTypeLiteral, anon, "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeTopic, "x", kmsg.ACLResourcePatternTypeLiteral, "ANONYMOUS", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		// An ACL created twice is one ACL.
		aclCreation(kmsg.ACLResourceTypeTopic, "acl-read", kmsg.ACLResourcePatternTypeLiteral, anon, "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
	}
	admin.checkACL(t, "create acls", cr)

	all := kmsg.NewPtrDescribeACLsRequest()
	all.SetVersion(3)
	all.ResourceType, all.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	all.Operation, all.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	admin.checkACL(t, "describe all", all)
	match := *all
	match.ResourceType, match.ResourceName, match.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr("acl-pre-x"), kmsg.ACLResourcePatternTypeMatch
	admin.checkACL(t, "describe match", &match)
	host := *all
	host.Host = kmsg.StringPtr("127.0.0.2")
	admin.checkACL(t, "describe by host", &host)
	// DescribeAcls needs DESCRIBE on the cluster; Kafka's message names
	// its own request object.
	c2.checkACL(t, "describe denied", all, ".ErrorMessage")

	// Metadata: named topics the client may not describe fail, existence
	// not disclosed; all topics leaves them out.
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(12)
	for _, n := range []string{"acl-read", "acl-secret", "acl-open", "acl-nothing-here", "acl-pre-x"} {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(n)
		md.Topics = append(md.Topics, mt)
	}
	md.AllowAutoTopicCreation = false
	md.IncludeTopicAuthorizedOperations = true
	c2.checkACL(t, "metadata named", md)
	mdAll := kmsg.NewPtrMetadataRequest()
	mdAll.SetVersion(12)
	for _, mt := range c2.checkACL(t, "metadata all", mdAll, ".Topics").(*kmsg.MetadataResponse).Topics {
		if *mt.Topic == "acl-secret" {
			t.Errorf("metadata of all topics lists acl-secret, which 127.0.0.2 may not describe")
		}
	}
	mdAuto := *md
	mdAuto.AllowAutoTopicCreation = true
	nocreate := kmsg.NewMetadataRequestTopic()
	nocreate.Topic = kmsg.StringPtr("acl-nocreate")
	mdAuto.Topics = []kmsg.MetadataRequestTopic{nocreate}
	c2.checkACL(t, "metadata auto-create denied", &mdAuto)

	// Produce: WRITE per topic; deny from 127.0.0.2 overrides the allow.
	produce := func(topics ...string) *kmsg.ProduceRequest {
		r := kmsg.NewPtrProduceRequest()
		r.SetVersion(11)
		r.Acks, r.TimeoutMillis = -1, 5000
		for _, n := range topics {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = n
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = batch(t, -1, -1, -1, "v")
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
		}
		return r
	}
	c2.checkACL(t, "produce from .2", produce("acl-read", "acl-both", "acl-pre-x", "acl-open", "acl-secret"), "BaseOffset", "LogStartOffset")
	c3.checkACL(t, "produce from .3", produce("acl-both", "acl-secret"), "BaseOffset", "LogStartOffset")

	// ListOffsets needs DESCRIBE, implied by READ.
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.SetVersion(9)
	lo.ReplicaID = -1
	for _, n := range []string{"acl-read", "acl-secret"} {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = n
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -2
		rt.Partitions = append(rt.Partitions, rp)
		lo.Topics = append(lo.Topics, rt)
	}
	c2.checkACL(t, "list offsets", lo)

	// Groups and transactional ids.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(4)
	fc.CoordinatorKeys = []string{"acl-g", "acl-other"}
	c2.checkACL(t, "find group coordinator .2", fc, ".Host", ".Port", ".NodeID")
	c3.checkACL(t, "find group coordinator .3", fc, ".Host", ".Port", ".NodeID")
	ftx := *fc
	ftx.CoordinatorType = 1
	ftx.CoordinatorKeys = []string{"acl-tx-1", "nope"}
	c3.checkACL(t, "find txn coordinator .3", &ftx, ".Host", ".Port", ".NodeID")
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.SetVersion(5)
	ip.TransactionalID = kmsg.StringPtr("nope")
	ip.TransactionTimeoutMillis = 60000
	c3.checkACL(t, "init producer id denied", ip)
	ipIdem := kmsg.NewPtrInitProducerIDRequest()
	ipIdem.SetVersion(5)
	c2.checkACL(t, "idempotent producer id via topic write", ipIdem, "ProducerID")
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.SetVersion(4)
	hb.Group, hb.MemberID, hb.Generation = "acl-g", "m", 1
	c2.checkACL(t, "heartbeat denied", hb)
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.SetVersion(5)
	dg.Groups = []string{"acl-g", "acl-none"}
	c2.checkACL(t, "describe groups", dg)

	checkAPIs(t, admin, c2)
	checkRegexAuthorized(t, c2)
	checkScramDenied(t, c2, kafkaAddr, b.Addr())

	// DeleteAcls: per-filter results, an ACL matched twice listed twice.
	del := kmsg.NewPtrDeleteACLsRequest()
	del.SetVersion(3)
	f1 := kmsg.NewDeleteACLsRequestFilter()
	f1.ResourceType, f1.ResourcePatternType, f1.Operation, f1.PermissionType = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypePrefixed, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	f2 := kmsg.NewDeleteACLsRequestFilter()
	f2.ResourceType, f2.ResourceName, f2.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr("acl-pre-x"), kmsg.ACLResourcePatternTypeMatch
	f2.Operation, f2.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = []kmsg.DeleteACLsRequestFilter{f1, f2}
	admin.checkACL(t, "delete acls", del)
	admin.checkACL(t, "describe after delete", all)
	c2.checkACL(t, "produce after delete", produce("acl-pre-x"), "BaseOffset", "LogStartOffset")
}

// TestConformanceACLRequestsClose checks that an ACL request with an
// UNKNOWN field closes the connection on both brokers, as Kafka's request
// parsing refuses it.
func TestConformanceACLRequestsClose(t *testing.T) {
	kafkaAddr := startACLOracle(t)
	b := brokertest.Start(t, aclProps)
	for _, tc := range []struct {
		name string
		req  kmsg.Request
	}{
		{"describe unknown resource type", func() kmsg.Request {
			r := kmsg.NewPtrDescribeACLsRequest()
			r.SetVersion(3)
			r.ResourceType, r.ResourcePatternType, r.Operation, r.PermissionType = 0, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			return r
		}()},
	} {
		for _, target := range []struct{ name, addr string }{{"kafka", kafkaAddr}, {"cascade", b.Addr()}} {
			rc := dialFrom(t, target.addr, "127.0.0.1")
			rc.send(tc.req)
			if !rc.closed() {
				t.Errorf("%s: %s kept the connection", tc.name, target.name)
			}
		}
	}
	_ = kerr.SecurityDisabled
}

// checkAPIs compares the denials of the other APIs for 127.0.0.2, which
// the cluster resource's ACL leaves out, for which acl-read is READ only,
// acl-secret closed, acl-open (no ACL) open, group acl-g and transactional
// ids under acl-tx closed.
func checkAPIs(t *testing.T, admin, c2 *aclPair) {
	t.Helper()
	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(12)
	fetch.ReplicaID, fetch.MaxWaitMillis, fetch.MaxBytes = -1, 0, 1<<20
	fetch.SessionEpoch = -1
	for _, n := range []string{"acl-read", "acl-secret", "acl-open"} {
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = n
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes, fp.LogStartOffset = 1<<20, -1
		ft.Partitions = append(ft.Partitions, fp)
		fetch.Topics = append(fetch.Topics, ft)
	}
	c2.checkACL(t, "fetch", fetch, "RecordBatches")

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.SetVersion(9)
	commit.Group, commit.Generation = "acl-g", -1
	for _, n := range []string{"acl-secret", "acl-open"} {
		ct := kmsg.NewOffsetCommitRequestTopic()
		ct.Topic = n
		cp := kmsg.NewOffsetCommitRequestTopicPartition()
		cp.Offset = 0
		ct.Partitions = append(ct.Partitions, cp)
		commit.Topics = append(commit.Topics, ct)
	}
	c2.checkACL(t, "offset commit denied group", commit)
	free := *commit
	free.Group = "acl-free"
	c2.checkACL(t, "offset commit denied topic", &free)

	of := kmsg.NewPtrOffsetFetchRequest()
	of.SetVersion(8)
	for _, g := range []string{"acl-g", "acl-free"} {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		for _, n := range []string{"acl-secret", "acl-open"} {
			rt := kmsg.NewOffsetFetchRequestGroupTopic()
			rt.Topic, rt.Partitions = n, []int32{0}
			rg.Topics = append(rg.Topics, rt)
		}
		of.Groups = append(of.Groups, rg)
	}
	allOf := kmsg.NewOffsetFetchRequestGroup()
	allOf.Group = "acl-free"
	c2.checkACL(t, "offset fetch named", of)
	ofAll := kmsg.NewPtrOffsetFetchRequest()
	ofAll.SetVersion(8)
	ofAll.Groups = []kmsg.OffsetFetchRequestGroup{allOf}
	c2.checkACL(t, "offset fetch all topics", ofAll)

	lg := kmsg.NewPtrListGroupsRequest()
	lg.SetVersion(5)
	c2.checkACL(t, "list groups filtered", lg)

	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "acl-free"
	for _, n := range []string{"acl-secret", "acl-open"} {
		ot := kmsg.NewOffsetDeleteRequestTopic()
		ot.Topic = n
		ot.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}
		od.Topics = append(od.Topics, ot)
	}
	c2.checkACL(t, "offset delete", od)
	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.SetVersion(2)
	// acl-free2: after OffsetDelete removed acl-free's last offset,
	// Kafka's coordinator has deleted the empty group; Cascade keeps it.
	dg.Groups = []string{"acl-g", "acl-free2"}
	c2.checkACL(t, "delete groups", dg)

	jg := kmsg.NewPtrJoinGroupRequest()
	jg.SetVersion(9)
	jg.Group, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis, jg.ProtocolType = "acl-g", 10000, 10000, "consumer"
	jg.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 0}}}
	c2.checkACL(t, "join group denied", jg)
	cg := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	cg.Group, cg.MemberEpoch, cg.RebalanceTimeoutMillis = "acl-g", 0, 10000
	cg.MemberID = "m-acl-1234567890abcdef"
	cg.SubscribedTopicNames = []string{"acl-open"}
	c2.checkACL(t, "consumer group heartbeat denied group", cg, "MemberID", "HeartbeatIntervalMillis")
	cgt := *cg
	cgt.Group = "acl-cg"
	cgt.SubscribedTopicNames = []string{"acl-secret"}
	c2.checkACL(t, "consumer group heartbeat denied topic", &cgt, "MemberID", "HeartbeatIntervalMillis")

	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.SetVersion(7)
	for _, n := range []string{"acl-pre-new", "acl-c2-made"} {
		tp := kmsg.NewCreateTopicsRequestTopic()
		tp.Topic, tp.NumPartitions, tp.ReplicationFactor = n, 1, 1
		ct.Topics = append(ct.Topics, tp)
	}
	c2.check(t, "create topics", ct)
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.SetVersion(6)
	for _, n := range []string{"acl-read", "acl-c2-made"} {
		dtt := kmsg.NewDeleteTopicsRequestTopic()
		dtt.Topic = kmsg.StringPtr(n)
		dt.Topics = append(dt.Topics, dtt)
	}
	c2.checkACL(t, "delete topics", dt)
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.SetVersion(3)
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "acl-read", Count: 2}}
	c2.checkACL(t, "create partitions", cp)
	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.SetVersion(2)
	dr.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "acl-read", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 0}}}}
	c2.checkACL(t, "delete records", dr)

	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.SetVersion(4)
	for _, r := range []struct {
		typ  kmsg.ConfigResourceType
		name string
	}{{kmsg.ConfigResourceTypeTopic, "acl-read"}, {kmsg.ConfigResourceTypeBroker, "1"}} {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = r.typ, r.name
		dc.Resources = append(dc.Resources, rr)
	}
	c2.checkACL(t, "describe configs", dc)
	iac := kmsg.NewPtrIncrementalAlterConfigsRequest()
	iac.SetVersion(1)
	iar := kmsg.NewIncrementalAlterConfigsRequestResource()
	iar.ResourceType, iar.ResourceName = kmsg.ConfigResourceTypeTopic, "acl-read"
	iar.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Op: 0, Value: kmsg.StringPtr("100000")}}
	iac.Resources = append(iac.Resources, iar)
	c2.checkACL(t, "incremental alter configs", iac)

	dl := kmsg.NewPtrDescribeLogDirsRequest()
	dl.SetVersion(4)
	c2.checkACL(t, "describe log dirs", dl)
	dp := kmsg.NewPtrDescribeProducersRequest()
	dp.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "acl-secret", Partitions: []int32{0}}, {Topic: "acl-open", Partitions: []int32{0}}}
	c2.checkACL(t, "describe producers", dp, "LastTimestamp", "ProducerID")
	dtx := kmsg.NewPtrDescribeTransactionsRequest()
	dtx.TransactionalIDs = []string{"acl-tx-1", "acl-free-tx"}
	c2.checkACL(t, "describe transactions", dtx)
	dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
	dtp.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "acl-secret"}, {Topic: "acl-open"}}
	dtp.ResponsePartitionLimit = 100
	c2.checkACL(t, "describe topic partitions", dtp)
	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oe.SetVersion(4)
	oe.ReplicaID = -1
	for _, n := range []string{"acl-secret", "acl-open"} {
		ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
		ot.Topic = n
		ot.Partitions = []kmsg.OffsetForLeaderEpochRequestTopicPartition{{Partition: 0, CurrentLeaderEpoch: -1, LeaderEpoch: 0}}
		oe.Topics = append(oe.Topics, ot)
	}
	c2.checkACL(t, "offset for leader epoch", oe)
	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.SetVersion(3)
	ap.TransactionalID, ap.ProducerID, ap.ProducerEpoch = "acl-tx-1", 1, 0
	ap.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "acl-open", Partitions: []int32{0}}}
	c2.checkACL(t, "add partitions to txn", ap)
	wm := kmsg.NewPtrWriteTxnMarkersRequest()
	wm.SetVersion(1)
	wm.Markers = []kmsg.WriteTxnMarkersRequestMarker{{ProducerID: 1, ProducerEpoch: 0, Committed: true,
		Topics: []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "acl-open", Partitions: []int32{0}}}}}
	c2.checkACL(t, "write txn markers", wm)
	_ = admin
}

// TestConformanceACLSuperUser compares both brokers with User:ANONYMOUS in
// super.users and allow.everyone.if.no.acl.found off: a DENY of everything
// on a topic for User:ANONYMOUS changes nothing for a super user, from any
// address.
func TestConformanceACLSuperUser(t *testing.T) {
	props := map[string]string{
		"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":           "User:ANONYMOUS",
	}
	kafkaAddr := startOracleWith(t, props)
	b := brokertest.Start(t, props)
	from := func(host string) *aclPair {
		return &aclPair{pair{kafka: dialFrom(t, kafkaAddr, host), cascade: dialFrom(t, b.Addr(), host), b: b}}
	}
	admin, c2 := from("127.0.0.1"), from("127.0.0.2")
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.SetVersion(7)
	tp := kmsg.NewCreateTopicsRequestTopic()
	tp.Topic, tp.NumPartitions, tp.ReplicationFactor = "su-denied", 1, 1
	ct.Topics = append(ct.Topics, tp)
	admin.check(t, "create topic", ct)
	cr := kmsg.NewPtrCreateACLsRequest()
	cr.SetVersion(3)
	cr.Creations = []kmsg.CreateACLsRequestCreation{
		aclCreation(kmsg.ACLResourceTypeTopic, "su-denied", kmsg.ACLResourcePatternTypeLiteral, "User:ANONYMOUS", "*", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeDeny),
		aclCreation(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLResourcePatternTypeLiteral, "User:*", "*", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeDeny),
	}
	admin.checkACL(t, "create deny acls", cr)
	all := kmsg.NewPtrDescribeACLsRequest()
	all.SetVersion(3)
	all.ResourceType, all.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	all.Operation, all.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	c2.checkACL(t, "describe acls as a super user", all)
	r := kmsg.NewPtrProduceRequest()
	r.SetVersion(11)
	r.Acks, r.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "su-denied"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch(t, -1, -1, -1, "v")
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	c2.checkACL(t, "produce as a super user", r, "LogAppendTime")
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(12)
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("su-denied")
	md.Topics = append(md.Topics, mt)
	md.IncludeTopicAuthorizedOperations = true
	c2.checkACL(t, "metadata as a super user", md)
}

// checkScramDenied compares the SCRAM credential APIs for 127.0.0.2, which
// has no permission on the cluster: DescribeUserScramCredentials needs
// DESCRIBE there, AlterUserScramCredentials ALTER (Kafka's controller
// words its message with the request's internals). A describe of all
// users (a null list) is a known difference: Kafka 4.4's
// DescribeUserScramCredentialsRequest.getErrorResponse walks the null list,
// the NullPointerException leaves the request unanswered and the
// connection muted, and the client times out; Cascade answers
// CLUSTER_AUTHORIZATION_FAILED. Both halves are asserted, so a Kafka that
// answers shows up here.
func checkScramDenied(t *testing.T, c2 *aclPair, kafkaAddr, cascadeAddr string) {
	t.Helper()
	named := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	named.Users = []kmsg.DescribeUserSCRAMCredentialsRequestUser{{Name: "scram-a"}, {Name: "scram-a"}, {Name: "scram-b"}}
	got := c2.checkACL(t, "describe scram credentials denied", named).(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if got.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(got.Results) != 3 {
		t.Errorf("describe scram credentials denied: code %d, %d results, want CLUSTER_AUTHORIZATION_FAILED and 3", got.ErrorCode, len(got.Results))
	}
	alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations = "scram-b", 2, 4096
	up.Salt, up.SaltedPassword = []byte("salt"), make([]byte, 64)
	alter.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{up}
	alter.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "scram-a", Mechanism: 1}}
	ar := c2.checkACL(t, "alter scram credentials denied", alter, ".ErrorMessage").(*kmsg.AlterUserSCRAMCredentialsResponse)
	if len(ar.Results) != 2 || ar.Results[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("alter scram credentials denied: %+v, want CLUSTER_AUTHORIZATION_FAILED for scram-a and scram-b", ar.Results)
	}

	all := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	all.Users = nil
	const bound = 5 * time.Second
	k := dialFrom(t, kafkaAddr, "127.0.0.2")
	k.send(all)
	if answered(t, k, bound) {
		t.Errorf("describe all scram credentials denied: Apache Kafka answered; the known defect (no answer) is gone, and the case should compare answers")
	}
	c := dialFrom(t, cascadeAddr, "127.0.0.2")
	cr := c.do(all).(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if cr.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(cr.Results) != 0 {
		t.Errorf("describe all scram credentials denied: Cascade answered code %d with %d results, want CLUSTER_AUTHORIZATION_FAILED and none",
			cr.ErrorCode, len(cr.Results))
	}
}

// answered reports whether a response frame arrives on rc within d.
func answered(t *testing.T, rc *rawConn, d time.Duration) bool {
	t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(d))
	_, err := wire.ReadFrame(rc.c, 1<<30)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	if err != nil {
		t.Fatalf("reading an answer: %v", err)
	}
	return true
}

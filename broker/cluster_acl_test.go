package broker_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

// TestClusterACLs checks that ACLs are metadata: CreateAcls sent to one
// node is forwarded to the active controller, committed through the
// quorum, and every node then describes and enforces the ACL, its own
// replication and controller traffic still authorized (the cluster
// resource names no ACL, and allow.everyone.if.no.acl.found=true lets the
// nodes' User:ANONYMOUS through, as it does in Kafka).
func TestClusterACLs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	c := brokertest.StartCluster(t, 3, brokertest.WithOverrides(map[string]string{
		"authorizer.class.name":          "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"allow.everyone.if.no.acl.found": "true",
		"default.replication.factor":     "3",
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ct := kmsg.NewPtrCreateTopicsRequest()
	tp := kmsg.NewCreateTopicsRequestTopic()
	tp.Topic, tp.NumPartitions, tp.ReplicationFactor = "cl-acl", 1, 3
	open := tp
	open.Topic = "cl-open"
	ct.Topics = append(ct.Topics, tp, open)
	if r, err := c.Request(ctx, 2, ct); err != nil || r.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode != 0 ||
		r.(*kmsg.CreateTopicsResponse).Topics[1].ErrorCode != 0 {
		t.Fatalf("create topic: %v %+v", err, r)
	}
	cr := kmsg.NewPtrCreateACLsRequest()
	cre := kmsg.NewCreateACLsRequestCreation()
	cre.ResourceType, cre.ResourceName, cre.ResourcePatternType = kmsg.ACLResourceTypeTopic, "cl-acl", kmsg.ACLResourcePatternTypeLiteral
	cre.Principal, cre.Host, cre.Operation, cre.PermissionType = "User:ANONYMOUS", "*", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeDeny
	allow := cre
	allow.Operation, allow.PermissionType = kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow
	cr.Creations = append(cr.Creations, cre, allow)
	r, err := c.Request(ctx, 3, cr)
	if err != nil || r.(*kmsg.CreateACLsResponse).Results[0].ErrorCode != 0 {
		t.Fatalf("create acl through node 3: %v %+v", err, r)
	}
	for _, id := range c.BrokerIDs() {
		name := "node " + strconv.Itoa(id)
		for {
			d := kmsg.NewPtrDescribeACLsRequest()
			d.ResourceType, d.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
			d.Operation, d.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			r, err := c.Request(ctx, id, d)
			if err == nil && len(r.(*kmsg.DescribeACLsResponse).Resources) == 1 && len(r.(*kmsg.DescribeACLsResponse).Resources[0].ACLs) == 2 {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s never described the ACL: %v %+v", name, err, r)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// The leader, wherever it is, refuses the write (the DENY overrides
	// the ALLOW of everything); the ISR stays whole, so the followers'
	// fetches were authorized.
	if err := produceOne(ctx, t, c.Bootstrap(), "cl-acl"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce under a DENY of WRITE: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// An acks=all produce to a topic no ACL names needs both followers'
	// fetches (CLUSTER_ACTION) to move the high watermark.
	if err := produceOne(ctx, t, c.Bootstrap(), "cl-open"); err != nil {
		t.Fatalf("acks=all produce to a replicated topic without ACLs: %v", err)
	}
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("cl-acl")
	md.Topics = append(md.Topics, mt)
	mr, err := c.Request(ctx, 1, md)
	if err != nil {
		t.Fatal(err)
	}
	if ts := mr.(*kmsg.MetadataResponse).Topics; len(ts) != 1 || len(ts[0].Partitions) != 1 || len(ts[0].Partitions[0].ISR) != 3 {
		t.Fatalf("metadata %+v, want one partition with all three replicas in its ISR", ts)
	}
}

package broker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/matrix/apachekafka"
)

// aclCommandClass is kafka-acls.sh's main class in Kafka 4.
const aclCommandClass = "org.apache.kafka.tools.AclCommand"

// produceOne produces one record to topic through addr (host:port, or
// several joined by commas) and returns the error.
func produceOne(ctx context.Context, t *testing.T, addr, topic string) error {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(addr, ",")...), kgo.RecordRetries(1), kgo.RequestRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
}

// TestKafkaACLCommand manages Cascade's ACLs with Apache Kafka's own
// kafka-acls tool (AclCommand, through the Admin client's CreateAcls,
// DescribeAcls and DeleteAcls) and checks that a franz-go producer meets
// them: a DENY of WRITE overrides the prefix's ALLOW of everything and
// fails its produce with TOPIC_AUTHORIZATION_FAILED until the tool removes
// the DENY.
func TestKafkaACLCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Apache Kafka's kafka-acls tool")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dist, err := apachekafka.Ensure(ctx)
	if err != nil {
		t.Skipf("apache kafka unavailable: %v", err)
	}
	b := brokertest.Start(t, aclProps)
	acls := func(args ...string) string {
		t.Helper()
		out, err := dist.Run(ctx, aclCommandClass, append([]string{"--bootstrap-server", b.Addr()}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	adm := b.Admin(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "tool-t"); err != nil {
		t.Fatal(err)
	}
	acls("--add", "--allow-principal", "User:ANONYMOUS", "--allow-host", "127.0.0.1", "--operation", "All", "--cluster")
	acls("--add", "--deny-principal", "User:ANONYMOUS", "--operation", "Write", "--topic", "tool-t")
	acls("--add", "--allow-principal", "User:*", "--operation", "All", "--topic", "tool-", "--resource-pattern-type", "prefixed")
	list := acls("--list")
	for _, want := range []string{
		"ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)",
		"(principal=User:ANONYMOUS, host=127.0.0.1, operation=ALL, permissionType=ALLOW)",
		"ResourcePattern(resourceType=TOPIC, name=tool-t, patternType=LITERAL)",
		"(principal=User:ANONYMOUS, host=*, operation=WRITE, permissionType=DENY)",
		"ResourcePattern(resourceType=TOPIC, name=tool-, patternType=PREFIXED)",
		"(principal=User:*, host=*, operation=ALL, permissionType=ALLOW)",
	} {
		if !strings.Contains(list, want) {
			t.Errorf("kafka-acls --list lacks %q:\n%s", want, list)
		}
	}
	if err := produceOne(ctx, t, b.Addr(), "tool-t"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce under a DENY of WRITE: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	acls("--remove", "--force", "--deny-principal", "User:ANONYMOUS", "--operation", "Write", "--topic", "tool-t")
	if out := acls("--list", "--topic", "tool-t"); strings.Contains(out, "DENY") {
		t.Errorf("the DENY is still listed after --remove:\n%s", out)
	}
	if err := produceOne(ctx, t, b.Addr(), "tool-t"); err != nil {
		t.Fatalf("produce after the DENY was removed: %v", err)
	}
}

// TestSuperUserBypassesACLs checks super.users: User:ANONYMOUS as a super
// user produces to a topic whose ACLs deny it, and ACLs survive a restart.
func TestSuperUserBypassesACLs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	props := map[string]string{
		"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":           "User:admin;User:ANONYMOUS",
	}
	b := brokertest.Start(t, props)
	adm := b.Admin(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "su-t"); err != nil {
		t.Fatal(err)
	}
	res, err := adm.CreateACLs(ctx, kadm.NewACLs().Deny("User:ANONYMOUS").DenyHosts("*").Topics("su-t").
		ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpAll))
	if err != nil || res[0].Err != nil {
		t.Fatalf("create acl: %v %v", err, res)
	}
	if err := produceOne(ctx, t, b.Addr(), "su-t"); err != nil {
		t.Fatalf("a super user's produce: %v", err)
	}
	b.Restart(t)
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, b.Client(t))
	if err != nil || resp.ErrorCode != 0 || len(resp.Resources) != 1 || resp.Resources[0].ResourceName != "su-t" {
		t.Fatalf("ACLs after a restart: %v %+v", err, resp)
	}
}

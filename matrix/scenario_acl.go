package matrix

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// The ACL scenarios run on the variant instance, whose authorizer
// (VariantOverrides: StandardAuthorizer with
// allow.everyone.if.no.acl.found=true) leaves every resource no ACL names
// open, so the variant's other cells are unaffected. Each cell names only
// its own topics in ACLs, created with franz-go's admin client; the client
// under test connects as Kafka's User:ANONYMOUS (PLAINTEXT).

// aclScenarios are the authorization cells.
func aclScenarios() []Scenario {
	return []Scenario{aclDeniedScenario, aclGroupScenario}
}

// anonymous is the principal of every PLAINTEXT connection.
const anonymous = "User:ANONYMOUS"

// aclVariant opens d's client on the variant instance, returns it with the
// variant's address, and creates topics there (one partition each).
func aclVariant(ctx context.Context, e *Env, d driver.Driver, topics ...string) (driver.Driver, string, error) {
	bs, err := e.Variant(ctx)
	if err != nil {
		return nil, "", err
	}
	v, err := e.OpenOn(ctx, d.Client(), bs)
	if err != nil {
		return nil, "", err
	}
	for _, tp := range topics {
		if err := createTopicRF(ctx, v, tp, 1, e.ReplicationFactor(), nil); err != nil {
			v.Close()
			return nil, "", err
		}
	}
	return v, bs, nil
}

// createACLs creates the ACLs b describes on the broker at bootstrap.
func createACLs(ctx context.Context, bootstrap string, b *kadm.ACLBuilder) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return err
	}
	defer cl.Close()
	res, err := kadm.NewClient(cl).CreateACLs(ctx, b)
	if err != nil {
		return fmt.Errorf("create acls: %w", err)
	}
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("create acl %s %s on %s: %w", r.Permission, r.Operation, r.Name, r.Err)
		}
	}
	return nil
}

// aclDeniedScenario is scenario 11's denied and allowed topics: a DENY of
// WRITE and READ for User:ANONYMOUS on a literal topic makes the client's
// produce and consume fail with TOPIC_AUTHORIZATION_FAILED (DESCRIBE is not
// denied, so the client finds the topic), while a topic under an ALLOW of
// every operation on a prefix takes and returns a record. The denial
// overrides the allow the prefix also gives the denied topic.
var aclDeniedScenario = Scenario{
	ID:         "12.acl-denied-topic",
	SingleNode: true,
	Title:      "a topic denied to User:ANONYMOUS fails produce and consume with TOPIC_AUTHORIZATION_FAILED; a prefix-allowed topic works",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		ctx = WithoutHistory(ctx)
		prefix := e.Topic("acl-" + d.Client())
		allowed, denied := prefix+"-ok", prefix+"-no"
		v, bs, err := aclVariant(ctx, e, d, allowed, denied)
		if err != nil {
			return "", err
		}
		defer v.Close()
		b := kadm.NewACLs().Allow(anonymous).AllowHosts("*").Topics(prefix).ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpAll)
		if err := createACLs(ctx, bs, b); err != nil {
			return "", err
		}
		b = kadm.NewACLs().Deny(anonymous).DenyHosts("*").Topics(denied).ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpWrite, kadm.OpRead)
		if err := createACLs(ctx, bs, b); err != nil {
			return "", err
		}
		rec := driver.Record{Partition: 0, Value: []byte(allowed + "-0")}
		// The brokers apply ACL records from the metadata log: Kafka's
		// may answer from the ACLs before for a moment.
		var produceErr string
		for attempt := 0; ; attempt++ {
			res, err := v.Produce(ctx, driver.Produce{Topic: denied, Records: []driver.Record{rec}, Acks: -1})
			produceErr = driver.Code(err)
			if err == nil && len(res.Deliveries) == 1 && res.Deliveries[0].Error != nil {
				produceErr = res.Deliveries[0].Error.Code
			}
			if produceErr == "TOPIC_AUTHORIZATION_FAILED" {
				break
			}
			if attempt == 3 {
				return "", fmt.Errorf("produce to the denied topic %s: error %q (%v), want TOPIC_AUTHORIZATION_FAILED", denied, produceErr, err)
			}
			if !sleepCtx(ctx, 500*time.Millisecond) {
				return "", ctx.Err()
			}
		}
		cres, err := v.Consume(ctx, driver.Consume{Topic: denied, Partition: 0, From: -2, Count: 1, TimeoutMs: 10000})
		consumeErr := driver.Code(err)
		if err == nil && cres.Error != nil {
			consumeErr = cres.Error.Code
		}
		if consumeErr != "TOPIC_AUTHORIZATION_FAILED" {
			return "", fmt.Errorf("consume from the denied topic %s: error %q (%v), want TOPIC_AUTHORIZATION_FAILED", denied, consumeErr, err)
		}
		dls, err := produceOK(ctx, v, driver.Produce{Topic: allowed, Records: []driver.Record{rec}, Acks: -1})
		if err != nil {
			return "", fmt.Errorf("produce to the allowed topic: %w", err)
		}
		got, err := consumeN(ctx, v, allowed, 0, dls[0].Offset, 1)
		if err != nil {
			return "", fmt.Errorf("consume the allowed topic: %w", err)
		}
		if string(got[0].Value) != string(rec.Value) {
			return "", fmt.Errorf("the allowed topic holds %q, want %q", got[0].Value, rec.Value)
		}
		return "denied topic: produce and consume TOPIC_AUTHORIZATION_FAILED; prefix-allowed topic: record read back", nil
	},
}

// groupAuthFaults are the clients whose group consumer does not end when
// the broker refuses the group, with the evidence.
var groupAuthFaults = map[string]string{
	"sarama": "the sarama driver's group consume ends at its 10 s timeout with no records and no error: " +
		"sarama's consumer group does not return the GROUP_AUTHORIZATION_FAILED of FindCoordinator or JoinGroup " +
		"from Consume, on Apache Kafka 4.4 and on Cascade alike; the other five clients report the error",
}

// aclGroupScenario is scenario 11's denied group: with a DENY of READ for
// User:ANONYMOUS on one group (the topic open), the client's group consume
// fails with GROUP_AUTHORIZATION_FAILED (JoinGroup or FindCoordinator), as
// KafkaApis refuses a member the group's READ.
var aclGroupScenario = Scenario{
	ID:         "12.acl-denied-group",
	SingleNode: true,
	Title:      "a group denied to User:ANONYMOUS fails the client's group consume with GROUP_AUTHORIZATION_FAILED",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		ctx = WithoutHistory(ctx)
		topic := e.Topic("aclg-" + d.Client())
		group := topic + "-g"
		v, bs, err := aclVariant(ctx, e, d, topic)
		if err != nil {
			return "", err
		}
		defer v.Close()
		b := kadm.NewACLs().Deny(anonymous).DenyHosts("*").Groups(group).ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead)
		if err := createACLs(ctx, bs, b); err != nil {
			return "", err
		}
		if err := groupConsumeDenied(ctx, v, group, topic, 3); err != nil {
			return "", err
		}
		return "group consume: GROUP_AUTHORIZATION_FAILED", nil
	},
}

// groupConsumeDenied runs v's group consume of topic in group, which the
// broker must refuse with GROUP_AUTHORIZATION_FAILED, trying up to attempts
// times while an ACL just created may not be in force yet. A client whose
// group consumer does not report the refusal (groupAuthFaults) is a client
// fault.
func groupConsumeDenied(ctx context.Context, v driver.Driver, group, topic string, attempts int) error {
	for attempt := 1; ; attempt++ {
		gctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, err := v.GroupConsume(gctx, driver.GroupConsume{Group: group, Topic: topic, Count: 1, TimeoutMs: 10000})
		cancel()
		code := driver.Code(err)
		if code == "GROUP_AUTHORIZATION_FAILED" {
			return nil
		}
		if why, ok := groupAuthFaults[v.Client()]; ok && ctx.Err() == nil {
			return fmt.Errorf("%w: the group consume ended with %v, not GROUP_AUTHORIZATION_FAILED (%s)", ErrClientFault, err, why)
		}
		if attempt == attempts {
			return fmt.Errorf("group consume of the denied group %s: error %q (%v), want GROUP_AUTHORIZATION_FAILED", group, code, err)
		}
		if !sleepCtx(ctx, 500*time.Millisecond) {
			return ctx.Err()
		}
	}
}

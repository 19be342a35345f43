package matrix

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// The authorization cells run on the security instance, whose
// StandardAuthorizer (SecurityOverrides) has
// allow.everyone.if.no.acl.found=false, Kafka's default and what a secured
// deployment keeps: a principal may do only what an ACL allows. Their
// principals are SCRAM-SHA-512 users on the SASL_PLAINTEXT listener, each
// with the ACLs of one role; the cells create the ACLs of their own topics,
// groups and transactional ids through the PLAINTEXT listener, whose
// User:ANONYMOUS is the super user that administers the instance.
const (
	// WriterUser may WRITE the cell's topic but not READ it.
	WriterUser, WriterPassword = "wren", "wren-secret"
	// GroupDeniedUser may READ the cell's topic; its group is denied.
	GroupDeniedUser, GroupDeniedPassword = "gus", "gus-secret"
	// IdempotentUser has WRITE on the idempotent cell's topic only.
	IdempotentUser, IdempotentPassword = "ida", "ida-secret"
	// NoWriteUser has DESCRIBE on the idempotent cell's topic and WRITE
	// on no topic, so that InitProducerId (KIP-679: IDEMPOTENT_WRITE on
	// the cluster or WRITE on some topic) refuses it.
	NoWriteUser, NoWritePassword = "noel", "noel-secret"
	// TxnUser has WRITE on the transactional cell's topic and WRITE on
	// one transactional id, not on the other the cell tries.
	TxnUser, TxnPassword = "tess", "tess-secret"
)

// AuthzUsers are the SCRAM-SHA-512 users of the authorization cells, by
// name, with their passwords.
var AuthzUsers = map[string]string{
	WriterUser: WriterPassword, GroupDeniedUser: GroupDeniedPassword, IdempotentUser: IdempotentPassword,
	NoWriteUser: NoWritePassword, TxnUser: TxnPassword,
}

// SecurityPrincipals are the principals of the S.ok cells, which the test
// grants every operation on the topics prefixed SecurityTopicPrefix: with
// allow.everyone.if.no.acl.found=false they could do nothing else.
var SecurityPrincipals = []string{"User:" + PlainUser, "User:" + Scram256User, "User:" + Scram512User,
	"User:" + ToolScramUser, "User:matrix-client"}

// SecurityTopicPrefix begins the name of every S.ok cell's topic.
const SecurityTopicPrefix = "m-sec-"

// DriverGroupPrefix begins the group ids librdkafka's assign-only
// consumers of the drivers name (group.id is required there, and the
// consumer asks for its coordinator though it never joins): every SASL and
// SSL principal may DESCRIBE and READ them.
const DriverGroupPrefix = "matrix-"

// authzScenarios are the principal-based authorization cells.
func authzScenarios() []Scenario {
	return []Scenario{authzWriteNotReadScenario, authzGroupScenario, authzIdempotentScenario, authzTransactionalScenario}
}

// openAs opens d's client on the SASL_PLAINTEXT listener as a
// SCRAM-SHA-512 user.
func openAs(ctx context.Context, e *Env, d driver.Driver, user string) (driver.Driver, error) {
	s, err := secureSetup(e)
	if err != nil {
		return nil, err
	}
	sec := s.Security("SASL_PLAINTEXT", "SCRAM-SHA-512", user, AuthzUsers[user], false)
	sd, err := e.OpenOn(driver.WithSecurity(ctx, sec), d.Client(), s.SASLPlaintext)
	if err != nil {
		return nil, fmt.Errorf("open as %s: %w", user, err)
	}
	return sd, nil
}

// allowTopic grants principal ops on one literal topic.
func allowTopic(ctx context.Context, e *Env, principal, topic string, ops ...kadm.ACLOperation) error {
	return createACLs(ctx, e.Bootstrap, kadm.NewACLs().Allow(principal).AllowHosts("*").Topics(topic).
		ResourcePatternType(kadm.ACLPatternLiteral).Operations(ops...))
}

// produceCode produces one record per value and returns the Kafka error
// code the client reported for the first failed delivery or for the whole
// produce, "" when every record was acknowledged.
func produceCode(ctx context.Context, d driver.Driver, req driver.Produce) (string, error) {
	res, err := d.Produce(ctx, req)
	if err != nil {
		if c := driver.Code(err); c != "" {
			return c, err
		}
		return "", err
	}
	for _, dl := range res.Deliveries {
		if dl.Error != nil {
			return dl.Error.Code, dl.Error
		}
	}
	if len(res.Deliveries) != len(req.Records) {
		return "", fmt.Errorf("%d deliveries for %d records", len(res.Deliveries), len(req.Records))
	}
	return "", nil
}

// aclSettle bounds how long a cell waits for an ACL it just created to
// reach the broker's authorizer (Kafka applies ACL records from its
// metadata log asynchronously).
const aclSettle = 4

// produceAllowed produces req and retries while the client reports an
// authorization failure, for at most aclSettle attempts, until the ACLs the
// cell created are in force.
func produceAllowed(ctx context.Context, d driver.Driver, req driver.Produce) error {
	for attempt := 1; ; attempt++ {
		code, err := produceCode(ctx, d, req)
		if err == nil {
			return nil
		}
		if !authzCode(code) || attempt == aclSettle {
			return fmt.Errorf("produce to %s: %w", req.Topic, err)
		}
		if !sleepCtx(ctx, 500*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// produceRefused produces req and returns the client's error code, which
// must be one of want.
func produceRefused(ctx context.Context, d driver.Driver, req driver.Produce, want ...string) (string, error) {
	code, err := produceCode(ctx, d, req)
	for _, w := range want {
		if code == w {
			return code, nil
		}
	}
	if err == nil {
		return "", fmt.Errorf("produce to %s succeeded, want %v", req.Topic, want)
	}
	return "", fmt.Errorf("produce to %s: error %q (%v), want %v", req.Topic, code, err, want)
}

func authzCode(code string) bool {
	switch code {
	case "TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED",
		"TRANSACTIONAL_ID_AUTHORIZATION_FAILED":
		return true
	}
	return false
}

func oneRecord(topic string, n int) []driver.Record {
	recs := make([]driver.Record, n)
	for i := range recs {
		recs[i] = driver.Record{Partition: 0, Value: []byte(fmt.Sprintf("%s-%d", topic, i))}
	}
	return recs
}

// authzWriteNotReadScenario: a principal with WRITE (which implies
// DESCRIBE) but not READ on a topic produces to it, and its consume fails
// with TOPIC_AUTHORIZATION_FAILED, as KafkaApis.handleFetchRequest refuses
// a consumer the topic's READ.
var authzWriteNotReadScenario = Scenario{
	ID:    "S.authz/write-not-read",
	Title: "a principal with WRITE and not READ on a topic produces to it; its consume fails with TOPIC_AUTHORIZATION_FAILED",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		ctx = WithoutHistory(ctx)
		topic := e.Topic("authz-w-" + d.Client())
		if err := createTopicRF(ctx, d, topic, 1, e.ReplicationFactor(), nil); err != nil {
			return "", err
		}
		if err := allowTopic(ctx, e, "User:"+WriterUser, topic, kadm.OpWrite); err != nil {
			return "", err
		}
		w, err := openAs(ctx, e, d, WriterUser)
		if err != nil {
			return "", err
		}
		defer w.Close()
		recs := oneRecord(topic, 2)
		if err := produceAllowed(ctx, w, driver.Produce{Topic: topic, Records: recs, Acks: -1}); err != nil {
			return "", err
		}
		got, err := consumeN(ctx, d, topic, 0, 0, len(recs))
		if err != nil {
			return "", fmt.Errorf("the super user reads back: %w", err)
		}
		if string(got[1].Value) != string(recs[1].Value) {
			return "", fmt.Errorf("the topic holds %q, want %q", got[1].Value, recs[1].Value)
		}
		res, err := w.Consume(ctx, driver.Consume{Topic: topic, Partition: 0, From: 0, Count: 1, TimeoutMs: 10000})
		code := driver.Code(err)
		if err == nil && res.Error != nil {
			code = res.Error.Code
		}
		if code != "TOPIC_AUTHORIZATION_FAILED" {
			return "", fmt.Errorf("consume as %s: error %q (%v, %d records), want TOPIC_AUTHORIZATION_FAILED",
				WriterUser, code, err, len(res.Records))
		}
		return "produce: 2 records acknowledged; consume: TOPIC_AUTHORIZATION_FAILED", nil
	},
}

// authzGroupScenario: a principal with READ on a topic whose group is
// denied (a DENY of READ on the literal group beside an ALLOW of READ on
// its prefix) fails its group consume with GROUP_AUTHORIZATION_FAILED
// (FindCoordinator or JoinGroup).
var authzGroupScenario = Scenario{
	ID:    "S.authz/group-denied",
	Title: "a principal denied its group fails the group consume with GROUP_AUTHORIZATION_FAILED",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		ctx = WithoutHistory(ctx)
		topic := e.Topic("authz-g-" + d.Client())
		group := topic + "-g"
		if err := createTopicRF(ctx, d, topic, 1, e.ReplicationFactor(), nil); err != nil {
			return "", err
		}
		principal := "User:" + GroupDeniedUser
		if err := allowTopic(ctx, e, principal, topic, kadm.OpRead); err != nil {
			return "", err
		}
		if err := createACLs(ctx, e.Bootstrap, kadm.NewACLs().Allow(principal).AllowHosts("*").Groups(topic).
			ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead)); err != nil {
			return "", err
		}
		if err := createACLs(ctx, e.Bootstrap, kadm.NewACLs().Deny(principal).DenyHosts("*").Groups(group).
			ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead)); err != nil {
			return "", err
		}
		if _, err := produceOK(ctx, d, driver.Produce{Topic: topic, Records: oneRecord(topic, 1), Acks: -1}); err != nil {
			return "", err
		}
		g, err := openAs(ctx, e, d, GroupDeniedUser)
		if err != nil {
			return "", err
		}
		defer g.Close()
		if err := groupConsumeDenied(ctx, g, group, topic, aclSettle); err != nil {
			return "", fmt.Errorf("as %s: %w", GroupDeniedUser, err)
		}
		return "group consume: GROUP_AUTHORIZATION_FAILED", nil
	},
}

// authzIdempotentScenario: an idempotent producer needs only WRITE on its
// topic (KIP-679: InitProducerId without a transactional id is allowed by
// IDEMPOTENT_WRITE on the cluster or WRITE on any topic), and a principal
// with WRITE on no topic (DESCRIBE only) is refused: InitProducerId
// answers CLUSTER_AUTHORIZATION_FAILED, which every client reports.
var authzIdempotentScenario = Scenario{
	ID:    "S.authz/idempotent",
	Title: "an idempotent producer works with only WRITE on its topic and is refused without it",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		ctx = WithoutHistory(ctx)
		topic := e.Topic("authz-i-" + d.Client())
		if err := createTopicRF(ctx, d, topic, 1, e.ReplicationFactor(), nil); err != nil {
			return "", err
		}
		if err := allowTopic(ctx, e, "User:"+IdempotentUser, topic, kadm.OpWrite); err != nil {
			return "", err
		}
		if err := allowTopic(ctx, e, "User:"+NoWriteUser, topic, kadm.OpDescribe); err != nil {
			return "", err
		}
		req := driver.Produce{Topic: topic, Records: oneRecord(topic, 3), Acks: -1, Idempotent: true}
		ok, err := openAs(ctx, e, d, IdempotentUser)
		if err != nil {
			return "", err
		}
		defer ok.Close()
		if err := produceAllowed(ctx, ok, req); err != nil {
			return "", fmt.Errorf("as %s (WRITE on the topic): %w", IdempotentUser, err)
		}
		got, err := consumeN(ctx, d, topic, 0, 0, 3)
		if err != nil {
			return "", fmt.Errorf("the super user reads back: %w", err)
		}
		if string(got[2].Value) != string(req.Records[2].Value) {
			return "", fmt.Errorf("the topic holds %q, want %q", got[2].Value, req.Records[2].Value)
		}
		no, err := openAs(ctx, e, d, NoWriteUser)
		if err != nil {
			return "", err
		}
		defer no.Close()
		code, err := produceRefused(ctx, no, req, "CLUSTER_AUTHORIZATION_FAILED")
		if err != nil {
			return "", fmt.Errorf("as %s (no WRITE): %w", NoWriteUser, err)
		}
		return "WRITE on the topic: 3 records acknowledged; no WRITE: " + code, nil
	},
}

// authzTransactionalScenario: a transactional producer needs WRITE on its
// topic and WRITE (which implies DESCRIBE) on its transactional id; with
// an id it has no ACL for, FindCoordinator or InitProducerId answers
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
var authzTransactionalScenario = Scenario{
	ID:      "S.authz/transactional",
	Title:   "a transactional producer works with WRITE on its topic and transactional id and fails with TRANSACTIONAL_ID_AUTHORIZATION_FAILED without the id's",
	Timeout: 60 * time.Second,
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		ctx = WithoutHistory(ctx)
		topic := e.Topic("authz-t-" + d.Client())
		allowedID, deniedID := topic+"-tx", topic+"-tx-denied"
		if err := createTopicRF(ctx, d, topic, 1, e.ReplicationFactor(), nil); err != nil {
			return "", err
		}
		principal := "User:" + TxnUser
		if err := allowTopic(ctx, e, principal, topic, kadm.OpWrite); err != nil {
			return "", err
		}
		if err := createACLs(ctx, e.Bootstrap, kadm.NewACLs().Allow(principal).AllowHosts("*").TransactionalIDs(allowedID).
			ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpWrite)); err != nil {
			return "", err
		}
		tx, err := openAs(ctx, e, d, TxnUser)
		if err != nil {
			return "", err
		}
		defer tx.Close()
		req := driver.Produce{Topic: topic, Records: oneRecord(topic, 2), Acks: -1, Idempotent: true, TransactionalID: allowedID}
		if err := produceAllowed(ctx, tx, req); err != nil {
			return "", fmt.Errorf("with WRITE on %s: %w", allowedID, err)
		}
		res, err := d.Consume(ctx, driver.Consume{Topic: topic, Partition: 0, From: 0, Count: 2, TimeoutMs: 10000, Isolation: "read_committed"})
		if err != nil {
			return "", fmt.Errorf("the super user reads committed: %w", err)
		}
		if len(res.Records) != 2 || string(res.Records[1].Value) != string(req.Records[1].Value) {
			return "", fmt.Errorf("read_committed returned %d records, want the transaction's 2", len(res.Records))
		}
		req.TransactionalID = deniedID
		code, err := produceRefused(ctx, tx, req, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
		if err != nil {
			return "", fmt.Errorf("without an ACL on %s: %w", deniedID, err)
		}
		return "WRITE on the id: transaction of 2 records committed; no ACL on the id: " + code, nil
	},
}

package matrix_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/matrix"
	"github.com/cascade-kafka/cascade/matrix/apachekafka"
)

// securityClients are the clients whose drivers take driver.Security.
var securityClients = []string{"franz-go", "sarama", "confluent-kafka-go", "python-confluent-kafka", "python-kafka-python", "java"}

// TestSecurityMatrix runs the security cells (matrix.SecurityScenarios) on
// each selected target started with the same secured listeners
// (matrix.SecurityOverrides): SASL_PLAINTEXT with PLAIN, SCRAM-SHA-256 and
// SCRAM-SHA-512, SSL with client certificates, SSL without them, SASL_SSL
// with SCRAM-SHA-512, and the same connections refused with a wrong
// password, no certificate, a certificate of a CA the broker does not
// trust, or a broker certificate the client does not trust. SCRAM users are created with kadm and with Kafka's own
// kafka-configs tool. A cell failing on Apache Kafka, or failing elsewhere
// while it passes on Apache Kafka, fails the test.
func TestSecurityMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("the security matrix starts brokers; skipped with -short")
	}
	if os.Getenv("MATRIX_SECURITY") == "" {
		// Its own brokers and six clients take minutes more than the
		// package's share of go test's 10-minute timeout leaves.
		t.Skip("the security matrix runs on request: MATRIX_SECURITY=1 (CI runs it as a step of its own)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var clients []string
	for _, c := range matrix.SelectedClients(securityClients) {
		for _, s := range securityClients {
			if c == s {
				clients = append(clients, c)
			}
		}
	}
	if len(clients) == 0 {
		t.Skip("none of the selected clients' drivers take security settings (" + strings.Join(securityClients, ", ") + ")")
	}
	dir := reportDir(t)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	oracle := map[string]matrix.Cell{}
	for _, target := range matrix.SelectedTargets() {
		if target == matrix.TargetExternal {
			continue
		}
		ov, setup, err := matrix.SecurityOverrides(t, target, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		inst, err := matrix.StartTargetWith(ctx, t, target, ov)
		if err != nil {
			t.Errorf("target %s with secured listeners: %v", target, err)
			continue
		}
		fmt.Fprintf(os.Stderr, "matrix: %s with secured listeners at %s, %s, %s, %s started in %v\n", target,
			setup.SASLPlaintext, setup.SSL, setup.SASLSSL, setup.ServerTLS, time.Since(start).Round(time.Millisecond))
		if err := addScramUsers(ctx, inst.Bootstrap()); err != nil {
			t.Fatalf("%s: SCRAM users: %v", target, err)
		}
		if err := kafkaConfigsScramUser(ctx, inst.Bootstrap()); err != nil {
			t.Fatalf("%s: kafka-configs --add-config SCRAM-SHA-512: %v", target, err)
		}
		if err := grantSecurityPrincipals(ctx, inst.Bootstrap()); err != nil {
			t.Fatalf("%s: ACLs of the secured cells' principals: %v", target, err)
		}
		h, err := matrix.NewHistory(filepath.Join(dir, target+".security.history.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		env := matrix.NewEnv(target, inst.Bootstrap())
		env.Parallel = 2
		matrix.SetSecureSetup(env, setup)
		cells, _ := matrix.Run(ctx, env, clients, matrix.SelectScenarios(matrix.SecurityScenarios()), h, os.Stderr)
		if err := h.Close(); err != nil {
			t.Error(err)
		}
		if err := inst.Stop(); err != nil {
			t.Errorf("stop %s: %v", target, err)
		}
		for _, c := range cells {
			t.Logf("%s: %s %s: %s %s", target, c.Scenario, c.Client, c.Status, c.Detail)
			if target == matrix.TargetApacheKafka {
				oracle[c.Key()] = c
				if c.Status == matrix.StatusFail {
					t.Errorf("%s: %s %s fails on Apache Kafka (the cell or the driver is wrong): %s", target, c.Scenario, c.Client, c.Detail)
				}
				continue
			}
			if c.Status != matrix.StatusFail {
				continue
			}
			if o, ok := oracle[c.Key()]; ok && o.Status != matrix.StatusPass {
				t.Logf("%s: %s %s fails here and on Apache Kafka (%s): %s", target, c.Scenario, c.Client, o.Status, c.Detail)
				continue
			}
			t.Errorf("%s: %s %s fails: %s", target, c.Scenario, c.Client, c.Detail)
		}
	}
}

// addScramUsers creates the SCRAM-SHA-256 and SCRAM-SHA-512 users, those
// of the authorization cells included, with AlterUserScramCredentials
// through kadm.
func addScramUsers(ctx context.Context, bootstrap string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return err
	}
	defer cl.Close()
	users := []kadm.UpsertSCRAM{
		{User: matrix.Scram256User, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: matrix.Scram256Password},
		{User: matrix.Scram512User, Mechanism: kadm.ScramSha512, Iterations: 8192, Password: matrix.Scram512Password},
	}
	for user, password := range matrix.AuthzUsers {
		users = append(users, kadm.UpsertSCRAM{User: user, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: password})
	}
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctx, nil, users)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("%s: %w", r.User, r.Err)
		}
	}
	return nil
}

// kafkaConfigsScramUser creates ToolScramUser as an operator does, with
// Kafka's kafka-configs tool (org.apache.kafka.tools.ConfigCommand) from the
// matrix's Kafka jars, then checks with DescribeUserScramCredentials that
// the broker stored it.
func kafkaConfigsScramUser(ctx context.Context, bootstrap string) error {
	dist, err := apachekafka.Ensure(ctx)
	if err != nil {
		return err
	}
	if _, err := dist.Run(ctx, "org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", bootstrap, "--alter",
		"--add-config", "SCRAM-SHA-512=[iterations=4096,password="+matrix.ToolScramPassword+"]",
		"--entity-type", "users", "--entity-name", matrix.ToolScramUser); err != nil {
		return err
	}
	// kafka-configs --describe of a user also asks for its client
	// quotas (DescribeClientQuotas), which Cascade does not serve; the
	// credential is checked with DescribeUserScramCredentials instead.
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return err
	}
	defer cl.Close()
	described, err := kadm.NewClient(cl).DescribeUserSCRAMs(ctx, matrix.ToolScramUser)
	if err != nil {
		return err
	}
	d := described[matrix.ToolScramUser]
	if d.Err != nil || len(d.CredInfos) != 1 || d.CredInfos[0].Mechanism != kadm.ScramSha512 || d.CredInfos[0].Iterations != 4096 {
		return fmt.Errorf("DescribeUserScramCredentials after kafka-configs: %+v", d)
	}
	return nil
}

// grantSecurityPrincipals creates the ACLs the instance's
// allow.everyone.if.no.acl.found=false makes the S.ok cells need: their
// principals may do anything with the topics prefixed
// matrix.SecurityTopicPrefix, and every secured principal may use the
// drivers' own groups (matrix.DriverGroupPrefix).
func grantSecurityPrincipals(ctx context.Context, bootstrap string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return err
	}
	defer cl.Close()
	everyone := append([]string(nil), matrix.SecurityPrincipals...)
	for user := range matrix.AuthzUsers {
		everyone = append(everyone, "User:"+user)
	}
	builders := []*kadm.ACLBuilder{
		kadm.NewACLs().Allow(matrix.SecurityPrincipals...).AllowHosts("*").Topics(matrix.SecurityTopicPrefix).
			ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpAll),
		kadm.NewACLs().Allow(everyone...).AllowHosts("*").Groups(matrix.DriverGroupPrefix).
			ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead, kadm.OpDescribe),
	}
	for _, b := range builders {
		res, err := kadm.NewClient(cl).CreateACLs(ctx, b)
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Err != nil {
				return fmt.Errorf("%s %s %s on %s: %w", r.Principal, r.Permission, r.Operation, r.Name, r.Err)
			}
		}
	}
	return nil
}

package matrix

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/internal/certtest"
	"github.com/cascade-kafka/cascade/matrix/apachekafka"
	"github.com/cascade-kafka/cascade/matrix/cluster"
	"github.com/cascade-kafka/cascade/matrix/driver"
)

// Users of the security cells. PLAIN users live in the SASL listeners'
// JAAS configs; SCRAM users are created by the test through
// AlterUserScramCredentials (kadm) and through Kafka's own kafka-configs
// tool (ToolScramUser), on the PLAINTEXT listener.
const (
	PlainUser, PlainPassword         = "alice", "alice-secret"
	Scram256User, Scram256Password   = "bob", "bob-secret"
	Scram512User, Scram512Password   = "carol", "carol-secret"
	ToolScramUser, ToolScramPassword = "dora", "dora-secret"
)

// SecureSetup is a target started with secured listeners beside its
// PLAINTEXT one, for the security cells: where each listener is and the
// client-side TLS material.
type SecureSetup struct {
	SASLPlaintext, SSL, SASLSSL string
	// ServerTLS is an SSL listener that asks for no client certificate
	// (listener name SERVER_TLS, ssl.client.auth=none).
	ServerTLS string
	// CA is the CA that signed the broker's and the client's certificates.
	CA *certtest.CA
	// ClientCert is the client certificate for the SSL listener, which
	// requires one (CN=matrix-client).
	ClientCert *certtest.Cert
	// Stranger is a CA the broker does not trust, and StrangerCert a
	// client certificate it signed.
	Stranger     *certtest.CA
	StrangerCert *certtest.Cert
	dir          string
}

// securitySetupKey is the Env.Memo key under which the test stores the
// target's SecureSetup before running SecurityScenarios.
const securitySetupKey = "security-setup"

// SetSecureSetup gives the security cells of e their target's listeners.
func SetSecureSetup(e *Env, s *SecureSetup) {
	e.Memo(securitySetupKey, func() (any, error) { return s, nil })
}

func secureSetup(e *Env) (*SecureSetup, error) {
	v, err := e.Memo(securitySetupKey, func() (any, error) {
		return nil, fmt.Errorf("%w: %s: no secured listeners in this run (SetSecureSetup)", ErrTargetUnavailable, e.Target)
	})
	if err != nil {
		return nil, err
	}
	return v.(*SecureSetup), nil
}

// SecurityOverrides returns the server.properties overrides that add
// SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), SSL (client
// certificates required, principal mapped from the CN) and SASL_SSL
// (SCRAM-SHA-512) listeners to a target, on free ports, with key and trust
// stores written under dir: a PKCS12 key store for SSL, a JKS one (with its
// own key password) for SASL_SSL, a PEM trust store. Apache Kafka and
// Cascade get the same keys; only Kafka's listeners name its KRaft
// controller listener.
func SecurityOverrides(t testing.TB, target, dir string) (map[string]string, *SecureSetup, error) {
	ports, err := cluster.FreePorts(4)
	if err != nil {
		return nil, nil, err
	}
	addr := func(i int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i])) }
	s := &SecureSetup{SASLPlaintext: addr(0), SSL: addr(1), SASLSSL: addr(2), ServerTLS: addr(3), dir: dir}
	s.CA = certtest.NewCA(t, "CN=Matrix CA")
	srv := s.CA.Issue(t, "CN=localhost,O=Matrix", "localhost", "127.0.0.1")
	s.ClientCert = s.CA.Issue(t, "CN=matrix-client,O=Matrix")
	s.Stranger = certtest.NewCA(t, "CN=Stranger CA")
	s.StrangerCert = s.Stranger.Issue(t, "CN=matrix-client,O=Stranger")
	secured := "SASL_PLAINTEXT://" + s.SASLPlaintext + ",SSL://" + s.SSL + ",SASL_SSL://" + s.SASLSSL + ",SERVER_TLS://" + s.ServerTLS
	scramJAAS := "org.apache.kafka.common.security.scram.ScramLoginModule required;"
	ov := map[string]string{
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,SERVER_TLS:SSL",
		"inter.broker.listener.name":     "PLAINTEXT",
		"sasl.enabled.mechanisms":        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required ` +
			`username="admin" password="admin-secret" user_admin="admin-secret" user_` + PlainUser + `="` + PlainPassword + `";`,
		"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": scramJAAS,
		"listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": scramJAAS,
		"listener.name.sasl_ssl.sasl.enabled.mechanisms":              "SCRAM-SHA-512",
		"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":       scramJAAS,
		"connection.failed.authentication.delay.ms":                   "100",
		// StandardAuthorizer as a secured deployment runs it: what no
		// ACL allows is denied. The harness administers the instance
		// (topics, ACLs, SCRAM users) through the PLAINTEXT listener,
		// whose User:ANONYMOUS is therefore the super user; Kafka's own
		// PLAINTEXT controller listener needs it too.
		"authorizer.class.name":          "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"allow.everyone.if.no.acl.found": "false",
		"super.users":                    anonymous,

		"listener.name.ssl.ssl.keystore.type":            "PKCS12",
		"listener.name.ssl.ssl.keystore.location":        srv.PKCS12(t, dir, "ssl-keystore.p12", "ssl-ks-pw"),
		"listener.name.ssl.ssl.keystore.password":        "ssl-ks-pw",
		"listener.name.ssl.ssl.truststore.type":          "PEM",
		"listener.name.ssl.ssl.truststore.location":      s.CA.TrustPEM(t, dir, "truststore.pem"),
		"listener.name.ssl.ssl.client.auth":              "required",
		"listener.name.ssl.ssl.principal.mapping.rules":  "RULE:^CN=(.*?),.*$/$1/L,DEFAULT",
		"listener.name.server_tls.ssl.keystore.type":     "PEM",
		"listener.name.server_tls.ssl.keystore.location": srv.PEMFile(t, dir, "server-tls-keystore.pem"),
		"listener.name.server_tls.ssl.client.auth":       "none",
		"listener.name.sasl_ssl.ssl.keystore.type":       "JKS",
		"listener.name.sasl_ssl.ssl.keystore.location":   srv.JKS(t, dir, "sasl-ssl-keystore.jks", "jks-pw", "key-pw"),
		"listener.name.sasl_ssl.ssl.keystore.password":   "jks-pw",
		"listener.name.sasl_ssl.ssl.key.password":        "key-pw",
	}
	switch target {
	case TargetApacheKafka:
		ov["listeners"] = "PLAINTEXT://" + apachekafka.PlaintextAddr + ",CONTROLLER://" + apachekafka.ControllerAddr + "," + secured
		ov["advertised.listeners"] = "PLAINTEXT://" + apachekafka.PlaintextAddr + "," + secured
	case TargetCascade:
		ov["listeners"] = "PLAINTEXT://127.0.0.1:0," + secured
	default:
		return nil, nil, fmt.Errorf("%w: %s: the security cells start their own instance", ErrTargetUnavailable, target)
	}
	return ov, s, nil
}

// Security returns the client security of a listener and user.
func (s *SecureSetup) Security(protocol, mechanism, user, password string, cert bool) driver.Security {
	sec := driver.Security{Protocol: protocol, Mechanism: mechanism, Username: user, Password: password}
	if protocol == "SSL" || protocol == "SASL_SSL" {
		sec.CAPEM = s.CA.ChainPEM()
		if cert {
			sec.CertPEM, sec.KeyPEM = s.ClientCert.ChainPEM(), s.ClientCert.KeyPEM()
		}
	}
	return sec
}

// tlsTrust is how a case's client takes part in TLS beyond Security's
// defaults: trusting only a CA that did not sign the broker's
// certificate, or presenting a certificate of a CA the broker does not
// trust.
type tlsTrust int

const (
	trustBroker tlsTrust = iota
	distrustBroker
	strangerCert
)

func (s *SecureSetup) securityFor(c securityCase) driver.Security {
	sec := s.Security(c.protocol, c.mechanism, c.user, c.password, c.cert)
	switch c.trust {
	case distrustBroker:
		sec.CAPEM = s.Stranger.ChainPEM()
	case strangerCert:
		sec.CertPEM, sec.KeyPEM = s.StrangerCert.ChainPEM(), s.StrangerCert.KeyPEM()
	}
	return sec
}

// securityCase is one secured connection the cells try.
type securityCase struct {
	id, protocol, mechanism, user, password string
	cert                                    bool
	listener                                func(*SecureSetup) string
	trust                                   tlsTrust
}

var securityCases = []securityCase{
	{"sasl-plaintext/plain", "SASL_PLAINTEXT", "PLAIN", PlainUser, PlainPassword, false, func(s *SecureSetup) string { return s.SASLPlaintext }, trustBroker},
	{"sasl-plaintext/scram-sha-256", "SASL_PLAINTEXT", "SCRAM-SHA-256", Scram256User, Scram256Password, false, func(s *SecureSetup) string { return s.SASLPlaintext }, trustBroker},
	{"sasl-plaintext/scram-sha-512", "SASL_PLAINTEXT", "SCRAM-SHA-512", Scram512User, Scram512Password, false, func(s *SecureSetup) string { return s.SASLPlaintext }, trustBroker},
	{"sasl-plaintext/scram-kafka-configs", "SASL_PLAINTEXT", "SCRAM-SHA-512", ToolScramUser, ToolScramPassword, false, func(s *SecureSetup) string { return s.SASLPlaintext }, trustBroker},
	{"ssl/client-certificate", "SSL", "", "", "", true, func(s *SecureSetup) string { return s.SSL }, trustBroker},
	{"ssl/server-only", "SSL", "", "", "", false, func(s *SecureSetup) string { return s.ServerTLS }, trustBroker},
	{"sasl-ssl/scram-sha-512", "SASL_SSL", "SCRAM-SHA-512", Scram512User, Scram512Password, false, func(s *SecureSetup) string { return s.SASLSSL }, trustBroker},
}

// SecurityScenarios are the security cells: for each secured listener and
// mechanism a client connects, produces three records and consumes them
// back; with a wrong password (each SASL mechanism) or without a client
// certificate (SSL) it must fail to authenticate. The S.authz cells then
// check principals' ACLs (scenario_authz.go).
func SecurityScenarios() []Scenario {
	var out []Scenario
	for _, c := range securityCases {
		out = append(out, Scenario{ID: "S.ok/" + c.id, Title: "connect, produce and consume over " + c.id,
			Timeout: 60 * time.Second, Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
				return secureRoundTrip(ctx, e, d, c)
			}})
	}
	refuse := func(id, what string, bad securityCase) {
		out = append(out, Scenario{ID: "S.refused/" + id, Title: bad.id + " refuses " + what,
			Timeout: 60 * time.Second, Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
				return secureRefused(ctx, e, d, bad)
			}})
	}
	for _, c := range securityCases {
		bad := c
		switch {
		case c.protocol == "SSL" && c.cert:
			bad.cert = false
			refuse(c.id, "no client certificate", bad)
			stranger := c
			stranger.trust = strangerCert
			refuse("ssl/untrusted-client-certificate", "a client certificate of a CA the broker does not trust", stranger)
		case c.protocol == "SSL":
			bad.trust = distrustBroker
			refuse(c.id, "to a client that does not trust the broker's CA", bad)
		default:
			bad.password = "wrong-" + c.password
			refuse(c.id, "a wrong password", bad)
		}
	}
	return append(out, authzScenarios()...)
}

func openSecured(ctx context.Context, e *Env, d driver.Driver, c securityCase) (driver.Driver, *SecureSetup, error) {
	s, err := secureSetup(e)
	if err != nil {
		return nil, nil, err
	}
	sd, err := e.OpenOn(driver.WithSecurity(ctx, s.securityFor(c)), d.Client(), c.listener(s))
	return sd, s, err
}

func secureRoundTrip(ctx context.Context, e *Env, d driver.Driver, c securityCase) (string, error) {
	topic := e.Topic(strings.TrimPrefix(SecurityTopicPrefix, "m-") + d.Client())
	if err := createTopicRF(ctx, d, topic, 1, e.ReplicationFactor(), nil); err != nil {
		return "", err
	}
	sd, _, err := openSecured(ctx, e, d, c)
	if err != nil {
		return "", fmt.Errorf("open on %s: %w", c.id, err)
	}
	defer sd.Close()
	// Kafka's broker learns of a new topic from its controller
	// asynchronously: wait until the secured client sees it, so that a
	// producer's short metadata wait on a loaded machine is not the
	// cell's verdict.
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := sd.DescribeTopic(ctx, topic)
		if err == nil {
			break
		}
		if time.Now().After(deadline) || !sleepCtx(ctx, 200*time.Millisecond) {
			return "", fmt.Errorf("describe %s over %s: %w", topic, c.id, err)
		}
	}
	recs := make([]driver.Record, 3)
	for i := range recs {
		recs[i] = driver.Record{Partition: 0, Value: []byte(fmt.Sprintf("%s-%d", topic, i))}
	}
	if _, err := produceOK(ctx, sd, driver.Produce{Topic: topic, Records: recs, Acks: -1}); err != nil {
		return "", fmt.Errorf("over %s: %w", c.id, err)
	}
	res, err := sd.Consume(ctx, driver.Consume{Topic: topic, Partition: 0, From: 0, Count: 3, TimeoutMs: 15000})
	if err != nil {
		return "", fmt.Errorf("consume over %s: %w", c.id, err)
	}
	if len(res.Records) != 3 {
		return "", fmt.Errorf("consumed %d of 3 records over %s", len(res.Records), c.id)
	}
	for i, r := range res.Records {
		if string(r.Value) != string(recs[i].Value) || r.Offset != int64(i) {
			return "", fmt.Errorf("record %d over %s: %q at %d", i, c.id, r.Value, r.Offset)
		}
	}
	return "3 records produced and consumed over " + c.id, nil
}

// secureRefused connects with bad credentials: opening the driver or its
// first request (DescribeTopic, a Metadata request, which a client does
// not retry past an authentication error as a producer may) must fail
// with an authentication error.
func secureRefused(ctx context.Context, e *Env, d driver.Driver, c securityCase) (string, error) {
	topic := e.Topic("secbad-" + d.Client())
	if err := createTopicRF(ctx, d, topic, 1, e.ReplicationFactor(), nil); err != nil {
		return "", err
	}
	sd, _, err := openSecured(ctx, e, d, c)
	if err == nil {
		defer sd.Close()
		short, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, err = sd.DescribeTopic(short, topic)
		cancel()
	}
	if err == nil {
		return "", fmt.Errorf("%s: a client with bad credentials described a topic", c.id)
	}
	if !authFailure(err) {
		if d.Client() == "python-kafka-python" && strings.Contains(err.Error(), "Unable to bootstrap") {
			// kafka-python 3.0 records a connection's
			// SaslAuthenticationFailedError (and a refused
			// handshake) but its bootstrap reports only that it
			// timed out, on Apache Kafka as on any broker.
			return "", fmt.Errorf("%w: %s: kafka-python reports a failed authentication as a bootstrap timeout: %v",
				ErrClientFault, c.id, err)
		}
		return "", fmt.Errorf("%s: failed, but not with an authentication error: %w", c.id, err)
	}
	return "refused: " + firstLine(err.Error(), 160), nil
}

// authFailure reports whether err is a client's report of failed
// authentication: Kafka's SASL_AUTHENTICATION_FAILED, librdkafka's
// _AUTHENTICATION or a TLS handshake failure (SSL without a client
// certificate: in TLS 1.3 the server's alert comes after the client's
// handshake, and Java's SSLEngine reports it as "Failed to process
// post-handshake messages").
func authFailure(err error) bool {
	var de *driver.Error
	if errors.As(err, &de) && (de.Code == "SASL_AUTHENTICATION_FAILED" || de.Code == "SSL_AUTHENTICATION_FAILED" || de.Code == "_AUTHENTICATION" || de.Code == "_SSL") {
		return true
	}
	msg := strings.ToLower(err.Error())
	for _, s := range []string{"sasl_authentication_failed", "authentication failed", "authentication failure",
		"sasl authentication error", "ssl handshake failed", "certificate required", "bad certificate", "tls: ",
		"failed to process post-handshake messages"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

package broker_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"

	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/internal/certtest"
)

// tlsProps add an SSL listener requiring client certificates (principal
// mapped to the CN) and a SASL_SSL listener, from PKCS12 and JKS stores
// generated for the test.
func tlsProps(t *testing.T, ca *certtest.CA) map[string]string {
	dir := t.TempDir()
	srv := ca.Issue(t, "CN=localhost,O=Cascade", "localhost", "127.0.0.1")
	return saslProps(map[string]string{
		"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
		// SSL: PKCS12 key store, JKS trust store.
		"listener.name.ssl.ssl.keystore.type":       "PKCS12",
		"listener.name.ssl.ssl.keystore.location":   srv.PKCS12(t, dir, "ssl.p12", "ks-pw"),
		"listener.name.ssl.ssl.keystore.password":   "ks-pw",
		"listener.name.ssl.ssl.truststore.type":     "JKS",
		"listener.name.ssl.ssl.truststore.location": ca.TrustJKS(t, dir, "trust.jks", "ts-pw"),
		"listener.name.ssl.ssl.truststore.password": "ts-pw",
		"listener.name.ssl.ssl.client.auth":         "required",
		"ssl.principal.mapping.rules":               "RULE:^CN=(.*?),.*$/$1/L,DEFAULT",
		// SASL_SSL: a JKS key store with its own key password.
		"listener.name.sasl_ssl.ssl.keystore.location":          srv.JKS(t, dir, "sasl.jks", "ks-pw", "key-pw"),
		"listener.name.sasl_ssl.ssl.keystore.password":          "ks-pw",
		"listener.name.sasl_ssl.ssl.key.password":               "key-pw",
		"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
		"listener.name.sasl_ssl.sasl.enabled.mechanisms":        "SCRAM-SHA-512",
	})
}

func clientTLS(ca *certtest.CA, cert *certtest.Cert) *tls.Config {
	c := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
	if cert != nil {
		c.Certificates = []tls.Certificate{cert.TLS()}
	}
	return c
}

func TestTLSFranzGo(t *testing.T) {
	ca := certtest.NewCA(t, "CN=Test CA")
	b := brokertest.Start(t, tlsProps(t, ca))
	addScramUsers(t, b)
	alice := ca.Issue(t, "CN=alice,O=Example")
	ssl := b.ListenerAddr("SSL")
	if err := roundTrip(t, ssl, "tls-mtls", nil, kgo.DialTLSConfig(clientTLS(ca, alice))); err != nil {
		t.Fatalf("SSL with a client certificate: %v", err)
	}
	if err := roundTrip(t, ssl, "tls-nocert", nil, kgo.DialTLSConfig(clientTLS(ca, nil))); err == nil {
		t.Fatal("SSL with ssl.client.auth=required accepted a client without a certificate")
	}
	other := certtest.NewCA(t, "CN=Other CA").Issue(t, "CN=mallory")
	if err := roundTrip(t, ssl, "tls-othercert", nil, kgo.DialTLSConfig(clientTLS(ca, other))); err == nil {
		t.Fatal("SSL accepted a certificate of an untrusted CA")
	}
	// SASL_SSL: no client certificate needed (ssl.client.auth is the
	// SSL listener's only), SCRAM-SHA-512 over TLS.
	saslSSL := b.ListenerAddr("SASL_SSL")
	carol := scram.Auth{User: "carol", Pass: "carol-pw"}.AsSha512Mechanism()
	if err := roundTrip(t, saslSSL, "tls-scram", carol, kgo.DialTLSConfig(clientTLS(ca, nil))); err != nil {
		t.Fatalf("SASL_SSL: %v", err)
	}
	wrong := scram.Auth{User: "carol", Pass: "nope"}.AsSha512Mechanism()
	if err := roundTrip(t, saslSSL, "tls-scram-bad", wrong, kgo.DialTLSConfig(clientTLS(ca, nil))); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("SASL_SSL wrong password: %v", err)
	}
}

// xdgSCRAM is sarama's SCRAMClient over xdg-go/scram, as sarama's example.
type xdgSCRAM struct {
	hash xscram.HashGeneratorFcn
	conv *xscram.ClientConversation
}

func (x *xdgSCRAM) Begin(user, pass, authz string) error {
	cl, err := x.hash.NewClient(user, pass, authz)
	if err != nil {
		return err
	}
	x.conv = cl.NewConversation()
	return nil
}
func (x *xdgSCRAM) Step(challenge string) (string, error) { return x.conv.Step(challenge) }
func (x *xdgSCRAM) Done() bool                            { return x.conv.Done() }

func saramaRoundTrip(t *testing.T, addr, topic string, cfg *sarama.Config) error {
	t.Helper()
	cfg.Producer.Return.Successes = true
	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Metadata.Retry.Max = 1
	prod, err := sarama.NewSyncProducer([]string{addr}, cfg)
	if err != nil {
		return err
	}
	defer prod.Close()
	if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("v")}); err != nil {
		return err
	}
	cons, err := sarama.NewConsumer([]string{addr}, cfg)
	if err != nil {
		return err
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		return err
	}
	defer pc.Close()
	select {
	case m := <-pc.Messages():
		if string(m.Value) != "v" {
			return fmt.Errorf("consumed %q", m.Value)
		}
		return nil
	case err := <-pc.Errors():
		return err
	case <-time.After(10 * time.Second):
		return errors.New("nothing consumed")
	}
}

func TestSecuritySarama(t *testing.T) {
	ca := certtest.NewCA(t, "CN=Test CA")
	b := brokertest.Start(t, tlsProps(t, ca))
	addScramUsers(t, b)
	for _, c := range []struct {
		name, listener, mech, user, pass string
		tls                              bool
		cert                             bool
	}{
		{"plain", "SASL_PLAINTEXT", sarama.SASLTypePlaintext, "alice", "alice-pw", false, false},
		{"scram256", "SASL_PLAINTEXT", sarama.SASLTypeSCRAMSHA256, "bob", "bob-pw", false, false},
		{"scram512", "SASL_PLAINTEXT", sarama.SASLTypeSCRAMSHA512, "carol", "carol-pw", false, false},
		{"ssl", "SSL", "", "", "", true, true},
		{"saslssl", "SASL_SSL", sarama.SASLTypeSCRAMSHA512, "carol", "carol-pw", true, false},
	} {
		for _, wrong := range []bool{false, true} {
			cfg := sarama.NewConfig()
			cfg.Version = sarama.V2_8_0_0
			if c.mech != "" {
				cfg.Net.SASL.Enable = true
				cfg.Net.SASL.Mechanism = sarama.SASLMechanism(c.mech)
				cfg.Net.SASL.User, cfg.Net.SASL.Password = c.user, c.pass
				if wrong {
					cfg.Net.SASL.Password = "nope"
				}
				switch c.mech {
				case sarama.SASLTypeSCRAMSHA256:
					cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAM{hash: xscram.SHA256} }
				case sarama.SASLTypeSCRAMSHA512:
					cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAM{hash: xscram.SHA512} }
				}
			} else if wrong {
				continue
			}
			if c.tls {
				var cert *certtest.Cert
				if c.cert {
					cert = ca.Issue(t, "CN=sarama")
				}
				cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, clientTLS(ca, cert)
			}
			err := saramaRoundTrip(t, b.ListenerAddr(c.listener), "sarama-"+c.name, cfg)
			switch {
			case !wrong && err != nil:
				t.Errorf("%s: %v", c.name, err)
			case wrong && !errors.Is(err, sarama.ErrSASLAuthenticationFailed):
				t.Errorf("%s with a wrong password: %v, want %v", c.name, err, sarama.ErrSASLAuthenticationFailed)
			}
		}
	}
}

package config

import (
	"errors"
	"strings"
	"testing"
)

func TestSecurityListeners(t *testing.T) {
	b, err := Load("", []string{
		"listeners=PLAINTEXT://127.0.0.1:0,SECURE://127.0.0.1:0,TLS://127.0.0.1:0",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL,TLS:SSL",
		"sasl.enabled.mechanisms=PLAIN",
		"listener.name.secure.sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN",
		"listener.name.secure.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required;",
		"listener.name.secure.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;",
		"listener.name.secure.scram-sha-512.connections.max.reauth.ms=5000",
		"connections.max.reauth.ms=9000",
		"listener.name.tls.ssl.client.auth=required",
		"ssl.keystore.type=PEM",
	})
	if err != nil {
		t.Fatal(err)
	}
	protos := map[string]string{}
	for _, l := range b.Listeners {
		protos[l.Name] = l.SecurityProtocol
	}
	if protos["SECURE"] != ProtocolSASLSSL || protos["TLS"] != ProtocolSSL {
		t.Fatalf("protocols %v", protos)
	}
	if got := b.ListenerList("SECURE", "sasl.enabled.mechanisms"); strings.Join(got, ",") != "SCRAM-SHA-512,PLAIN" {
		t.Fatalf("mechanisms %v", got)
	}
	if got := b.ListenerList("PLAINTEXT", "sasl.enabled.mechanisms"); strings.Join(got, ",") != "PLAIN" {
		t.Fatalf("global mechanisms %v", got)
	}
	for _, c := range []struct{ listener, mech, key, want string }{
		{"SECURE", "SCRAM-SHA-512", "connections.max.reauth.ms", "5000"},
		{"SECURE", "PLAIN", "connections.max.reauth.ms", "9000"},
		{"TLS", "", "ssl.client.auth", "required"},
		{"SECURE", "", "ssl.client.auth", "none"},
		{"SECURE", "", "ssl.keystore.type", "PEM"},
	} {
		var got string
		if c.mech != "" {
			got, _ = b.MechanismValue(c.listener, c.mech, c.key)
		} else {
			got, _ = b.ListenerValue(c.listener, c.key)
		}
		if got != c.want {
			t.Errorf("%s %s %s = %q, want %q", c.listener, c.mech, c.key, got, c.want)
		}
	}
	if _, ok := b.MechanismValue("SECURE", "SCRAM-SHA-256", "sasl.jaas.config"); ok {
		t.Error("a JAAS config without its listener and mechanism prefix")
	}
}

func TestSecurityRefused(t *testing.T) {
	base := []string{"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"}
	cases := []struct {
		overrides []string
		want      string
	}{
		{[]string{"listener.name.sasl_plaintext.ssl.bogus=1"}, `unsupported configuration key "listener.name.sasl_plaintext.ssl.bogus"`},
		{[]string{"listener.name.nosuch.ssl.client.auth=required", "sasl.enabled.mechanisms=PLAIN",
			"listener.name.sasl_plaintext.plain.sasl.jaas.config=x required;"}, "listener NOSUCH is not in listeners"},
		{[]string{"listener.name.sasl_plaintext.ssl.client.auth=sometimes"}, "String must be one of: required, requested, none"},
		{nil, "GSSAPI: SASL mechanism not implemented by Cascade"},
		{[]string{"sasl.enabled.mechanisms=PLAIN"}, "no JAAS configuration for SASL mechanism PLAIN"},
		{[]string{"ssl.keymanager.algorithm=PKIX"}, "Cascade implements only the default value SunX509"},
		{[]string{"ssl.principal.mapping.rules=RULE:abc"}, "Invalid rule"},
		{[]string{"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:KERBEROS"}, "No enum constant for security protocol KERBEROS"},
	}
	for _, c := range cases {
		_, err := Load("", append(append([]string{}, base...), c.overrides...))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v:\n got  %v\n want %s", c.overrides, err, c.want)
		}
	}
	_, err := Load("", append(base, "sasl.enabled.mechanisms=OAUTHBEARER"))
	if !errors.Is(err, ErrUnsupportedMechanism) {
		t.Errorf("OAUTHBEARER: %v", err)
	}
}

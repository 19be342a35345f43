package config

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/cascade-kafka/cascade/broker/security/principal"
)

// Security protocols of listener.security.protocol.map, as Kafka's
// SecurityProtocol.
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// SASL mechanisms Cascade serves, as Kafka's PlainSaslServer and
// ScramMechanism name them.
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
)

// ErrUnsupportedMechanism is wrapped by the error for a SASL mechanism that
// Cascade does not serve (GSSAPI, OAUTHBEARER).
var ErrUnsupportedMechanism = errors.New("SASL mechanism not implemented by Cascade")

// securityDefs are the TLS and SASL configs of Kafka's BrokerSecurityConfigs,
// SslConfigs and SaslConfigs that a broker reads, with Kafka's names, types
// and defaults. Each may also be given per listener as
// listener.name.<listener>.<key> (ListenerValue), and the per-mechanism ones
// as listener.name.<listener>.<mechanism>.<key>.
var securityDefs = []*Def{
	// TLS (SslConfigs, BrokerSecurityConfigs).
	{Name: "ssl.keystore.type", Type: TypeString, Default: "JKS", HasDefault: true, Validate: oneOf("JKS", "PKCS12", "PEM"),
		Doc: "The format of the key store: JKS, PKCS12 or PEM (KIP-651)."},
	{Name: "ssl.keystore.location", Type: TypeString, Doc: "The path of the key store file."},
	{Name: "ssl.keystore.password", Type: TypePassword, Sensitive: true,
		Doc: "The password of the key store file (not used for PEM files, where ssl.key.password decrypts the key)."},
	{Name: "ssl.key.password", Type: TypePassword, Sensitive: true,
		Doc: "The password of the private key in the key store, or of an encrypted PEM key."},
	{Name: "ssl.keystore.certificate.chain", Type: TypePassword, Sensitive: true,
		Doc: "The certificate chain in PEM format, with ssl.keystore.type=PEM (KIP-651)."},
	{Name: "ssl.keystore.key", Type: TypePassword, Sensitive: true,
		Doc: "The private key in PKCS#8 PEM format, with ssl.keystore.type=PEM (KIP-651); encrypted (PBES2) with ssl.key.password."},
	{Name: "ssl.truststore.type", Type: TypeString, Default: "JKS", HasDefault: true, Validate: oneOf("JKS", "PKCS12", "PEM"),
		Doc: "The format of the trust store: JKS, PKCS12 or PEM (KIP-651)."},
	{Name: "ssl.truststore.location", Type: TypeString, Doc: "The path of the trust store file."},
	{Name: "ssl.truststore.password", Type: TypePassword, Sensitive: true, Doc: "The password of the trust store file."},
	{Name: "ssl.truststore.certificates", Type: TypePassword, Sensitive: true,
		Doc: "Trusted certificates in PEM format, with ssl.truststore.type=PEM (KIP-651)."},
	{Name: "ssl.client.auth", Type: TypeString, Default: "none", HasDefault: true, Validate: oneOf("required", "requested", "none"),
		Doc: "Whether the broker asks clients of SSL listeners for a certificate: required, requested or none."},
	{Name: "ssl.enabled.protocols", Type: TypeList, Default: "TLSv1.2,TLSv1.3", HasDefault: true,
		Validate: listOf(false, "TLSv1.2", "TLSv1.3", "TLSv1.1", "TLSv1"), Doc: "The TLS versions a connection may use."},
	{Name: "ssl.protocol", Type: TypeString, Default: "TLSv1.3", HasDefault: true,
		Validate: oneOf("TLSv1.3", "TLSv1.2", "TLS", "TLSv1.1", "TLSv1"),
		Doc:      "The SSLContext protocol; with ssl.enabled.protocols it bounds the versions a connection may use."},
	{Name: "ssl.cipher.suites", Type: TypeList, Default: "", HasDefault: true,
		Doc: "The TLS 1.2 cipher suites allowed, by their IANA (Java) names; empty allows Go's secure defaults. " +
			"TLS 1.3 suites are always Go's."},
	{Name: "ssl.endpoint.identification.algorithm", Type: TypeString, Default: "https", HasDefault: true,
		Doc: "Host name verification of the peer's certificate by the broker's own clients; empty disables it. " +
			"A broker does not check a client's host name."},
	{Name: "ssl.principal.mapping.rules", Type: TypeString, Default: "DEFAULT", HasDefault: true, Validate: principalRules,
		Doc: "Rules mapping a client certificate's distinguished name to a principal name (Kafka's SslPrincipalMapper)."},
	{Name: "ssl.keymanager.algorithm", Type: TypeString, Default: "SunX509", HasDefault: true, DefaultOnly: true,
		Doc: "The JSSE key manager algorithm; Cascade implements only the default."},
	{Name: "ssl.trustmanager.algorithm", Type: TypeString, Default: "PKIX", HasDefault: true, DefaultOnly: true,
		Doc: "The JSSE trust manager algorithm; Cascade implements only the default (PKIX path validation)."},
	{Name: "ssl.engine.factory.class", Type: TypeClass, Default: "", HasDefault: true, DefaultOnly: true,
		Doc: "A custom SslEngineFactory class; Cascade implements only the built-in one."},
	{Name: "ssl.secure.random.implementation", Type: TypeString, Default: "", HasDefault: true, DefaultOnly: true,
		Doc: "The SecureRandom implementation; Cascade always uses the operating system's (crypto/rand)."},
	{Name: "principal.builder.class", Type: TypeClass,
		Default: "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder", HasDefault: true, DefaultOnly: true,
		Doc: "The principal builder; Cascade implements only Kafka's default."},

	// SASL (BrokerSecurityConfigs, SaslConfigs).
	{Name: "sasl.enabled.mechanisms", Type: TypeList, Default: "GSSAPI", HasDefault: true,
		Doc: "The SASL mechanisms SASL listeners accept; Cascade serves PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 " +
			"and refuses a SASL listener with GSSAPI or OAUTHBEARER enabled."},
	{Name: "sasl.mechanism.inter.broker.protocol", Type: TypeString, Default: "GSSAPI", HasDefault: true,
		Doc: "The SASL mechanism brokers use between themselves on a SASL inter-broker listener: PLAIN, SCRAM-SHA-256 or " +
			"SCRAM-SHA-512, logging in with the username and password of the listener's " +
			"listener.name.<listener>.<mechanism>.sasl.jaas.config; a cluster node with another refuses to start."},
	{Name: "sasl.mechanism.controller.protocol", Type: TypeString, Default: "GSSAPI", HasDefault: true,
		Doc: "The SASL mechanism used to reach the controllers (the quorum between controllers, and brokers' " +
			"registration, heartbeats and forwarded requests) on a SASL controller listener, logging in as " +
			"sasl.mechanism.inter.broker.protocol does with the controller listener's JAAS config."},
	{Name: "sasl.jaas.config", Type: TypePassword, Sensitive: true,
		Doc: "The JAAS login module of one listener's mechanism, given as " +
			"listener.name.<listener>.<mechanism>.sasl.jaas.config: PlainLoginModule's user_<name>=\"password\" " +
			"options are the PLAIN users; ScramLoginModule takes its credentials from the metadata log. On the " +
			"inter-broker and controller listeners of a cluster node, its username and password options are " +
			"what the node logs in to its peers with."},
	{Name: "sasl.server.max.receive.size", Type: TypeInt, Default: "524288", HasDefault: true, Validate: atLeast(1),
		Doc: "The largest frame a connection may send before it has authenticated."},
	{Name: "connections.max.reauth.ms", Type: TypeLong, Default: "0", HasDefault: true, Validate: atLeast(0),
		Doc: "The lifetime of a SASL session (KIP-368): told to the client in SaslAuthenticate, after which a " +
			"request other than a re-authentication closes the connection; 0 is unlimited."},
	{Name: "connection.failed.authentication.delay.ms", Type: TypeInt, Default: "100", HasDefault: true, Validate: atLeast(0),
		Doc: "How long the broker waits before answering and closing a connection whose authentication failed."},
}

// listenerKeys are the keys that may be given per listener as
// listener.name.<listener>.<key>; mechanismKeys may also be given per
// listener and mechanism.
var (
	listenerKeys = func() map[string]bool {
		m := map[string]bool{}
		for _, d := range securityDefs {
			if !strings.HasPrefix(d.Name, "sasl.mechanism.") && d.Name != "principal.builder.class" {
				m[d.Name] = true
			}
		}
		return m
	}()
	mechanismKeys = map[string]bool{"sasl.jaas.config": true, "connections.max.reauth.ms": true}
)

// listenerPrefix is the prefix of per-listener keys, as Kafka's
// ListenerName.configPrefix.
const listenerPrefix = "listener.name."

// listenerOverride is a parsed listener.name.<listener>[.<mechanism>].<key>.
type listenerOverride struct {
	listener, mechanism, key string
}

// parseListenerKey splits a per-listener key, or reports that it is not
// one. The listener name is upper-cased and the mechanism name too, as
// Kafka's ListenerName.normalised and saslMechanismPrefix lower-case them
// for lookup.
func parseListenerKey(key string) (listenerOverride, bool) {
	rest, ok := strings.CutPrefix(key, listenerPrefix)
	if !ok {
		return listenerOverride{}, false
	}
	name, rest, ok := strings.Cut(rest, ".")
	if !ok || name == "" {
		return listenerOverride{}, false
	}
	o := listenerOverride{listener: strings.ToUpper(name), key: rest}
	if listenerKeys[rest] {
		return o, true
	}
	mech, k, ok := strings.Cut(rest, ".")
	if ok && mechanismKeys[k] {
		o.mechanism, o.key = strings.ToUpper(mech), k
		return o, true
	}
	return listenerOverride{}, false
}

// setListener validates one per-listener key and records it.
func (b *Broker) setListener(o listenerOverride, key, raw string) error {
	def, _ := brokerDefs.Get(o.key)
	v, err := def.Parse(raw)
	if err != nil {
		var ve *ValueError
		if errors.As(err, &ve) {
			ve.Name = key
		}
		return err
	}
	if def.DefaultOnly {
		dv, _ := def.Parse(def.Default)
		if fmt.Sprint(v) != fmt.Sprint(dv) {
			return &ValueError{Name: key, Value: raw, Reason: "Cascade implements only the default value " + defaultText(def)}
		}
	}
	if b.listenerSet == nil {
		b.listenerSet = map[listenerOverride]string{}
	}
	b.listenerSet[o] = strings.TrimSpace(raw)
	return nil
}

// ListenerValue returns the text of key for one listener:
// listener.name.<listener>.<key> when set, else key itself (set or its
// default), as Kafka's ChannelBuilders reads a listener's configs with
// valuesWithPrefixOverride. ok is false when neither is set and key has
// no default.
func (b *Broker) ListenerValue(listener, key string) (string, bool) {
	if v, ok := b.listenerSet[listenerOverride{listener: strings.ToUpper(listener), key: key}]; ok {
		return v, true
	}
	return b.globalValue(key)
}

// ListenerOverride returns listener.name.<listener>.<key> when it is set.
// Kafka reads ssl.client.auth of a SASL_SSL listener only from there
// (KIP-684), so that a broker-wide required client authentication does not
// apply to SASL clients.
func (b *Broker) ListenerOverride(listener, key string) (string, bool) {
	v, ok := b.listenerSet[listenerOverride{listener: strings.ToUpper(listener), key: key}]
	return v, ok
}

// MechanismValue returns the text of key for one listener and SASL
// mechanism: listener.name.<listener>.<mechanism>.<key>, else the
// listener's value (ListenerValue), as Kafka's JaasContext and
// connectionsMaxReauthMsByMechanism read them.
func (b *Broker) MechanismValue(listener, mechanism, key string) (string, bool) {
	o := listenerOverride{listener: strings.ToUpper(listener), mechanism: strings.ToUpper(mechanism), key: key}
	if v, ok := b.listenerSet[o]; ok {
		return v, true
	}
	if key == "sasl.jaas.config" {
		// Kafka's brokers read a JAAS config only per listener and
		// mechanism (or from a static JAAS file, which Cascade does
		// not read).
		return "", false
	}
	return b.ListenerValue(listener, key)
}

func (b *Broker) globalValue(key string) (string, bool) {
	if v, ok := b.set[key]; ok {
		return v, true
	}
	def, ok := brokerDefs.Get(key)
	if !ok || !def.HasDefault {
		return "", false
	}
	return def.Default, true
}

// ListenerList returns a list-typed key for one listener, parsed.
func (b *Broker) ListenerList(listener, key string) []string {
	v, _ := b.ListenerValue(listener, key)
	return splitList(v)
}

// fillSecurity checks the per-listener keys against the listeners, and the
// SASL mechanisms of every SASL listener: a per-listener key naming no
// listener is refused (Kafka ignores it; a mistyped name would silently
// leave a listener unsecured), as is a mechanism Cascade does not serve.
// A controller listener name counts on a node that does not bind it (a
// broker-only node): its keys configure how the node reaches the
// controllers, as Kafka's broker reads them for its controller channel.
func (b *Broker) fillSecurity() error {
	keys := make([]listenerOverride, 0, len(b.listenerSet))
	for o := range b.listenerSet {
		keys = append(keys, o)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].listener+keys[i].key < keys[j].listener+keys[j].key })
	for _, o := range keys {
		if !hasListener(b.Listeners, o.listener) && !containsFold(b.ControllerListenerNames, o.listener) {
			return fmt.Errorf("%s%s: listener %s is not in listeners", listenerPrefix, strings.ToLower(o.listener), o.listener)
		}
	}
	for _, l := range b.Listeners {
		if l.SecurityProtocol != ProtocolSASLPlaintext && l.SecurityProtocol != ProtocolSASLSSL {
			continue
		}
		mechs := b.ListenerList(l.Name, "sasl.enabled.mechanisms")
		if len(mechs) == 0 {
			return &ValueError{Name: "sasl.enabled.mechanisms", Value: "",
				Reason: "listener " + l.Name + " uses " + l.SecurityProtocol + " but no SASL mechanism is enabled"}
		}
		for _, m := range mechs {
			switch m {
			case MechanismPlain, MechanismScramSHA256, MechanismScramSHA512:
			default:
				return fmt.Errorf("sasl.enabled.mechanisms of listener %s: %s: %w (it serves %s, %s and %s)",
					l.Name, m, ErrUnsupportedMechanism, MechanismPlain, MechanismScramSHA256, MechanismScramSHA512)
			}
			if _, ok := b.MechanismValue(l.Name, m, "sasl.jaas.config"); !ok {
				// As JaasContext.loadServerContext.
				return fmt.Errorf("listener %s: no JAAS configuration for SASL mechanism %s: set %s%s.%s.sasl.jaas.config",
					l.Name, m, listenerPrefix, strings.ToLower(l.Name), strings.ToLower(m))
			}
		}
	}
	return nil
}

// principalRules validates ssl.principal.mapping.rules.
func principalRules(v any) string {
	s, _ := v.(string)
	if _, err := principal.ParseRules(s); err != nil {
		return err.Error()
	}
	return ""
}

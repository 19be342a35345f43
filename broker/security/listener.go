package security

import (
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/security/principal"
	"github.com/cascade-kafka/cascade/broker/security/sasl"
	"github.com/cascade-kafka/cascade/broker/security/tlsconf"
	"github.com/cascade-kafka/cascade/broker/wire"
)

// Options are what a listener's security needs beyond the configuration.
type Options struct {
	// Scram looks a user's SCRAM credential up for a mechanism name (the
	// metadata image's UserScramCredentialRecords).
	Scram func(mechanism, user string) (sasl.ScramCredential, bool)
	// Now is the clock of SASL session lifetimes; nil is time.Now.
	Now func() time.Time
	// Logger logs certificate reloads.
	Logger *slog.Logger
}

// Secured is one listener's security, ready to serve.
type Secured struct {
	Wire wire.Listener
	tls  *tlsconf.Reloader
}

// Close stops watching the listener's certificate files.
func (s *Secured) Close() {
	if s.tls != nil {
		s.tls.Close()
	}
}

// Listener builds the security of listener l.
func Listener(bc *config.Broker, l config.Listener, opts Options) (*Secured, error) {
	out := &Secured{Wire: wire.Listener{Name: l.Name}}
	get := func(key string) string {
		v, _ := bc.ListenerValue(l.Name, key)
		return v
	}
	switch l.SecurityProtocol {
	case config.ProtocolSSL, config.ProtocolSASLSSL:
		tc := tlsconf.FromConfig(get)
		if l.SecurityProtocol == config.ProtocolSASLSSL {
			tc.ClientAuth, _ = bc.ListenerOverride(l.Name, "ssl.client.auth")
		}
		r, err := tlsconf.NewReloader(tc, opts.Logger)
		if err != nil {
			return nil, fmt.Errorf("security: listener %s: %w", l.Name, err)
		}
		out.tls = r
		out.Wire.TLS = r.ServerConfig()
		if l.SecurityProtocol == config.ProtocolSSL {
			rules, err := principal.ParseRules(get("ssl.principal.mapping.rules"))
			if err != nil {
				r.Close()
				return nil, fmt.Errorf("security: listener %s: %w", l.Name, err)
			}
			out.Wire.CertPrincipal = rules.Map
		}
	}
	switch l.SecurityProtocol {
	case config.ProtocolSASLPlaintext, config.ProtocolSASLSSL:
		s, err := saslFor(bc, l, opts)
		if err != nil {
			out.Close()
			return nil, fmt.Errorf("security: listener %s: %w", l.Name, err)
		}
		out.Wire.SASL = s
	}
	return out, nil
}

// saslFor builds a SASL listener's mechanisms, each with its JAAS config:
// PLAIN's users from PlainLoginModule's options, SCRAM's credentials from
// opts.Scram.
func saslFor(bc *config.Broker, l config.Listener, opts Options) (*wire.SASL, error) {
	mechs := bc.ListenerList(l.Name, "sasl.enabled.mechanisms")
	creds := sasl.Credentials{Scram: opts.Scram}
	lifetimes := map[string]time.Duration{}
	for _, m := range mechs {
		jaas, _ := bc.MechanismValue(l.Name, m, "sasl.jaas.config")
		switch m {
		case sasl.Plain:
			users, err := sasl.ParsePlainJAAS(jaas)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", m, err)
			}
			creds.Plain = users
		default:
			if err := sasl.CheckScramJAAS(jaas); err != nil {
				return nil, fmt.Errorf("%s: %w", m, err)
			}
		}
		ms, _ := bc.MechanismValue(l.Name, m, "connections.max.reauth.ms")
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: connections.max.reauth.ms %q: %w", m, ms, err)
		}
		lifetimes[m] = time.Duration(n) * time.Millisecond
	}
	delay, _ := bc.ListenerValue(l.Name, "connection.failed.authentication.delay.ms")
	delayMs, err := strconv.ParseInt(delay, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("connection.failed.authentication.delay.ms %q: %w", delay, err)
	}
	maxRecv, _ := bc.ListenerValue(l.Name, "sasl.server.max.receive.size")
	maxN, err := strconv.ParseInt(maxRecv, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("sasl.server.max.receive.size %q: %w", maxRecv, err)
	}
	return &wire.SASL{
		Mechanisms: mechs,
		NewServer: func(m string) (wire.SASLServer, error) {
			return sasl.NewServer(m, creds)
		},
		SessionLifetime: func(m string) time.Duration { return lifetimes[m] },
		FailedDelay:     time.Duration(delayMs) * time.Millisecond,
		MaxReceiveBytes: int32(maxN),
		Now:             opts.Now,
	}, nil
}

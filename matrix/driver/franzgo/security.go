package franzgo

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// securityOpts are the franz-go options of s: DialTLSConfig for SSL and
// SASL_SSL, SASL with the mechanism's franz-go implementation.
func securityOpts(s driver.Security) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if s.TLS() {
		cfg, err := s.TLSConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if s.SASL() {
		switch s.Mechanism {
		case "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()))
		default:
			return nil, driver.Unsupported("SASL mechanism %q", s.Mechanism)
		}
	}
	if s.Protocol != "" && !s.TLS() && !s.SASL() && s.Protocol != "PLAINTEXT" {
		return nil, fmt.Errorf("franz-go: unknown security protocol %q", s.Protocol)
	}
	return opts, nil
}

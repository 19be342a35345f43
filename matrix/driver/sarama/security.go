package sarama

import (
	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// secure sets s on cfg: Net.TLS for SSL and SASL_SSL, Net.SASL with
// sarama's PLAIN or its SCRAM over xdg-go/scram (as sarama's own example
// does, since sarama ships no SCRAM client).
func secure(cfg *sarama.Config, s driver.Security) error {
	if s.TLS() {
		tc, err := s.TLSConfig()
		if err != nil {
			return err
		}
		cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, tc
	}
	if !s.SASL() {
		return nil
	}
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.User, cfg.Net.SASL.Password = s.Username, s.Password
	cfg.Net.SASL.Mechanism = sarama.SASLMechanism(s.Mechanism)
	switch s.Mechanism {
	case sarama.SASLTypePlaintext:
	case sarama.SASLTypeSCRAMSHA256:
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: scram.SHA256} }
	case sarama.SASLTypeSCRAMSHA512:
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: scram.SHA512} }
	default:
		return driver.Unsupported("SASL mechanism %q", s.Mechanism)
	}
	return nil
}

// scramClient is sarama's SCRAMClient over xdg-go/scram.
type scramClient struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (c *scramClient) Begin(user, password, authzID string) error {
	cl, err := c.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	c.conv = cl.NewConversation()
	return nil
}

func (c *scramClient) Step(challenge string) (string, error) { return c.conv.Step(challenge) }
func (c *scramClient) Done() bool                            { return c.conv.Done() }

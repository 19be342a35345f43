package confluent

import (
	"context"
	"strings"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// secure adds s to cfg in librdkafka's names: security.protocol,
// sasl.mechanisms, sasl.username and sasl.password, ssl.ca.pem (the CA),
// and ssl.certificate.pem with ssl.key.pem for a client certificate.
// librdkafka verifies the broker's host name
// (ssl.endpoint.identification.algorithm=https) by default.
func secure(cfg kafka.ConfigMap, s driver.Security) kafka.ConfigMap {
	if s.Protocol == "" {
		return cfg
	}
	cfg["security.protocol"] = s.Protocol
	if s.SASL() {
		cfg["sasl.mechanisms"] = s.Mechanism
		cfg["sasl.username"] = s.Username
		cfg["sasl.password"] = s.Password
	}
	if s.TLS() {
		cfg["ssl.ca.pem"] = s.CAPEM
		if s.CertPEM != "" {
			cfg["ssl.certificate.pem"] = s.CertPEM
			cfg["ssl.key.pem"] = s.KeyPEM
		}
	}
	return cfg
}

func ptr(m kafka.ConfigMap) *kafka.ConfigMap { return &m }

// checkAuthentication connects a probe producer with cfg and waits until
// it either reads the cluster's metadata or the metadata request times
// out, watching for librdkafka's report that authentication failed:
// librdkafka retries a failed authentication and tells the application only
// through its error events (error_cb), so requests would otherwise just
// wait. The error is then a *driver.Error named _AUTHENTICATION or _SSL.
// The producer is closed only after its metadata request returned, since
// librdkafka must not be closed under a call in progress.
func checkAuthentication(ctx context.Context, cfg kafka.ConfigMap) error {
	p, err := kafka.NewProducer(&cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	done := make(chan error, 1)
	go func() {
		_, err := p.GetMetadata(nil, false, 5000)
		done <- err
	}()
	var authErr error
	for {
		select {
		case err := <-done:
			if authErr != nil {
				return authErr
			}
			return err
		case ev := <-p.Events():
			if authErr == nil {
				authErr = authEvent(ev)
			}
		}
	}
}

// authEvent returns the authentication failure an event reports, or nil.
func authEvent(ev kafka.Event) error {
	ke, ok := ev.(kafka.Error)
	if !ok {
		return nil
	}
	switch ke.Code() {
	case kafka.ErrAuthentication:
		return &driver.Error{Code: "_AUTHENTICATION", Message: ke.Error()}
	case kafka.ErrSsl:
		return &driver.Error{Code: "_SSL", Message: ke.Error()}
	case kafka.ErrTransport:
		// A TLS 1.3 server refuses a missing client certificate with an
		// alert after the handshake, which librdkafka reports as a
		// failed receive: certificate_required (116) from Go's TLS
		// server, bad_certificate (42) from Java's.
		if strings.Contains(ke.Error(), "alert certificate required") || strings.Contains(ke.Error(), "alert bad certificate") {
			return &driver.Error{Code: "_SSL", Message: ke.Error()}
		}
	}
	return nil
}

package matrix

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cascade-kafka/cascade/matrix/apachekafka"
)

// Target names.
const (
	TargetCascade     = "cascade"
	TargetApacheKafka = "apache-kafka"
	TargetExternal    = "external"
)

// Instance is a running broker (or cluster) a matrix run talks to.
type Instance interface {
	// Bootstrap returns the bootstrap address, host:port.
	Bootstrap() string
	// Version describes the broker, e.g. "Apache Kafka 4.4.0".
	Version() string
	// Stop shuts the broker down; for external clusters it does nothing.
	Stop() error
}

// Starter starts a target's instance for one test run with the given
// server.properties overrides (BrokerOverrides, plus VariantOverrides for
// the variant instance).
type Starter func(ctx context.Context, t testing.TB, overrides map[string]string) (Instance, error)

// CascadeStarter starts an embedded Cascade broker with the overrides.
// The matrix's test (cascade_test.go) sets it from broker/brokertest, so
// that this package never imports the broker; when it is unset the cascade
// target reports that it is unavailable.
var CascadeStarter Starter

// ErrTargetUnavailable reports a target that cannot run here.
var ErrTargetUnavailable = errors.New("matrix: target unavailable")

// VariantOverrides are what the variant instance of a started target
// changes from BrokerOverrides, for the cells that need a broker setting
// Kafka cannot change at run time: auto.create.topics.enable is a static
// broker config (KafkaConfig), and scenario 9's unknown-topic cells need it
// off on the main instance.
var VariantOverrides = map[string]string{
	"auto.create.topics.enable": "true",
	// The ACL cells (scenario_acl.go) need an authorizer, also static;
	// resources without ACLs stay open to the variant's other cells.
	"authorizer.class.name":          "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
	"allow.everyone.if.no.acl.found": "true",
}

// StartTarget starts the named target with BrokerOverrides.
func StartTarget(ctx context.Context, t testing.TB, name string) (Instance, error) {
	return StartTargetWith(ctx, t, name, nil)
}

// StartTargetWith starts the named target with BrokerOverrides changed by
// extra. An external cluster cannot be reconfigured, so extra entries make
// it ErrTargetUnavailable.
func StartTargetWith(ctx context.Context, t testing.TB, name string, extra map[string]string) (Instance, error) {
	ov := map[string]string{}
	for k, v := range BrokerOverrides {
		ov[k] = v
	}
	for k, v := range extra {
		ov[k] = v
	}
	switch name {
	case TargetCascade:
		if CascadeStarter == nil {
			return nil, fmt.Errorf("%w: cascade: no embedded broker is linked into this binary (matrix.CascadeStarter is set by the matrix tests from broker/brokertest); select other targets with MATRIX_TARGETS", ErrTargetUnavailable)
		}
		return CascadeStarter(ctx, t, ov)
	case TargetApacheKafka:
		// Kafka's LogManager first runs its retention task after
		// log.initial.task.delay.ms (30 s by default), then every
		// log.retention.check.interval.ms; Cascade has no such delay
		// and refuses the key.
		ov["log.initial.task.delay.ms"] = "0"
		dist, err := apachekafka.Ensure(ctx)
		if err != nil {
			return nil, err
		}
		b, err := dist.StartBroker(ctx, apachekafka.BrokerOptions{Overrides: ov})
		if err != nil {
			return nil, err
		}
		return akInstance{b}, nil
	case TargetExternal:
		if len(extra) > 0 {
			return nil, fmt.Errorf("%w: external: a cluster named by MATRIX_BOOTSTRAP cannot be started with other settings", ErrTargetUnavailable)
		}
		addr := os.Getenv("MATRIX_BOOTSTRAP")
		if addr == "" {
			return nil, fmt.Errorf("%w: external: set MATRIX_BOOTSTRAP=host:port", ErrTargetUnavailable)
		}
		return externalInstance(addr), nil
	default:
		return nil, fmt.Errorf("%w: unknown target %q (known: %s, %s, %s)", ErrTargetUnavailable, name, TargetCascade, TargetApacheKafka, TargetExternal)
	}
}

type akInstance struct{ b *apachekafka.Broker }

func (a akInstance) Bootstrap() string { return a.b.Addr() }
func (a akInstance) Version() string   { return "Apache Kafka " + a.b.Version() }
func (a akInstance) Stop() error       { return a.b.Stop() }

type externalInstance string

func (e externalInstance) Bootstrap() string { return string(e) }
func (e externalInstance) Version() string   { return "external cluster at " + string(e) }
func (e externalInstance) Stop() error       { return nil }

// SelectedTargets returns MATRIX_TARGETS as a list, with apache-kafka (the
// oracle) first so that the other targets' cells can be judged against it.
// The default is "apache-kafka,cascade", plus "external" when
// MATRIX_BOOTSTRAP is set.
func SelectedTargets() []string {
	def := TargetApacheKafka + "," + TargetCascade
	if os.Getenv("MATRIX_BOOTSTRAP") != "" {
		def += "," + TargetExternal
	}
	ts := splitList(os.Getenv("MATRIX_TARGETS"), def)
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		if t == TargetApacheKafka {
			out = append([]string{t}, out...)
		} else {
			out = append(out, t)
		}
	}
	return out
}

// SelectedClients returns MATRIX_CLIENTS as a list, or def when unset.
func SelectedClients(def []string) []string {
	return splitList(os.Getenv("MATRIX_CLIENTS"), strings.Join(def, ","))
}

// DefaultParallel is how many cells of one target run at once unless
// MATRIX_PARALLEL says otherwise. Most cells wait on the broker's timers
// (rebalances, session timeouts, linger), not on the CPU, so on two cores
// four at once take well under half the time of one at a time.
const DefaultParallel = 4

// SelectedParallel returns MATRIX_PARALLEL (a whole number, at least 1),
// or DefaultParallel when it is unset.
func SelectedParallel() (int, error) {
	v := strings.TrimSpace(os.Getenv("MATRIX_PARALLEL"))
	if v == "" {
		return DefaultParallel, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("MATRIX_PARALLEL=%q: want a whole number of at least 1", v)
	}
	return n, nil
}

// SelectScenarios returns the scenarios whose ID starts with one of the
// comma-separated prefixes in MATRIX_SCENARIOS, or all when it is unset.
func SelectScenarios(all []Scenario) []Scenario {
	prefixes := splitList(os.Getenv("MATRIX_SCENARIOS"), "")
	if len(prefixes) == 0 {
		return all
	}
	var out []Scenario
	for _, s := range all {
		for _, p := range prefixes {
			if strings.HasPrefix(s.ID, p) {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

func splitList(s, def string) []string {
	if strings.TrimSpace(s) == "" {
		s = def
	}
	var out []string
	seen := map[string]bool{}
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p != "" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

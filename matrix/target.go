package matrix

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cascade-kafka/cascade/matrix/apachekafka"
	"github.com/cascade-kafka/cascade/matrix/cascadecluster"
	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// Target names.
const (
	TargetCascade     = "cascade"
	TargetApacheKafka = "apache-kafka"
	TargetExternal    = "external"
	// TargetApacheKafkaCluster is three combined KRaft nodes of Apache
	// Kafka (apachekafka.StartCluster), the oracle of TargetCascadeCluster.
	TargetApacheKafkaCluster = "apache-kafka-cluster"
	// TargetCascadeCluster is three cmd/cascade processes
	// (cascadecluster.Start), judged against TargetApacheKafkaCluster.
	TargetCascadeCluster = "cascade-cluster"
)

// OracleOf returns the target whose cells judge target's: apache-kafka for
// the single-node targets and an external cluster, apache-kafka-cluster
// for cascade-cluster, and "" for an oracle itself.
func OracleOf(target string) string {
	switch target {
	case TargetApacheKafka, TargetApacheKafkaCluster:
		return ""
	case TargetCascadeCluster:
		return TargetApacheKafkaCluster
	default:
		return TargetApacheKafka
	}
}

// IsClusterTarget reports a target the matrix starts as a three-node
// cluster.
func IsClusterTarget(target string) bool {
	return target == TargetApacheKafkaCluster || target == TargetCascadeCluster
}

// Instance is a running broker (or cluster) a matrix run talks to.
type Instance interface {
	// Bootstrap returns the bootstrap address, host:port.
	Bootstrap() string
	// Version describes the broker, e.g. "Apache Kafka 4.4.0".
	Version() string
	// Stop shuts the broker down; for external clusters it does nothing.
	Stop() error
}

// ClusterInstance is a started cluster target: the instance, and the
// cluster's nodes for the scenarios that stop, start and ask them one by
// one (the cluster scenarios, ClusterFaultScenarios).
type ClusterInstance interface {
	Instance
	// Cluster returns the running cluster.
	Cluster() cluster.Cluster
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

// VariantOverridesFor returns VariantOverrides for target: on a cluster
// target without the authorizer, since a KRaft quorum whose controllers
// run StandardAuthorizer forms only with its PLAINTEXT principal as a
// super user (Kafka answers the quorum's Fetch with
// AuthorizerNotReadyException until then), and the ACL cells that need
// it run on one broker only (Scenario.SingleNode).
func VariantOverridesFor(target string) map[string]string {
	out := maps.Clone(VariantOverrides)
	if IsClusterTarget(target) {
		delete(out, "authorizer.class.name")
		delete(out, "allow.everyone.if.no.acl.found")
	}
	return out
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
	case TargetApacheKafkaCluster:
		ov["log.initial.task.delay.ms"] = "0" // As for apache-kafka, above.
		for k, v := range ClusterOverrides {
			ov[k] = v
		}
		dist, err := apachekafka.Ensure(ctx)
		if err != nil {
			return nil, err
		}
		c, err := dist.StartCluster(ctx, apachekafka.ClusterOptions{Nodes: ClusterNodes, Overrides: ov, NodeOverrides: clusterRacks()})
		if err != nil {
			return nil, err
		}
		return clusterInstance{c: c, bootstrap: c.Bootstrap(), version: c.Name() + ", 3 combined KRaft nodes"}, nil
	case TargetCascadeCluster:
		for k, v := range ClusterOverrides {
			ov[k] = v
		}
		c, err := cascadecluster.Start(ctx, cascadecluster.Options{Nodes: ClusterNodes, Overrides: ov, NodeOverrides: clusterRacks()})
		if err != nil {
			return nil, err
		}
		return clusterInstance{c: c, bootstrap: c.Bootstrap(), version: "Cascade, 3 cmd/cascade processes"}, nil
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
		return nil, fmt.Errorf("%w: unknown target %q (known: %s)", ErrTargetUnavailable, name, strings.Join(KnownTargets, ", "))
	}
}

type akInstance struct{ b *apachekafka.Broker }

func (a akInstance) Bootstrap() string { return a.b.Addr() }
func (a akInstance) Version() string   { return "Apache Kafka " + a.b.Version() }
func (a akInstance) Stop() error       { return a.b.Stop() }

// ClusterNodes is how many nodes a cluster target has, each a broker and
// a voter of the metadata quorum.
const ClusterNodes = 3

// ClusterOverrides are what a cluster target adds to BrokerOverrides:
// topics of three replicas, two of which must acknowledge an acks=all
// write; the internal topics likewise (the cluster fixtures' defaults,
// stated here so that the matrix says what it runs); and Kafka's
// rack-aware replica selector (KIP-392), so that a consumer that names its
// rack is sent to that rack's replica (clusterRacks puts one node in each);
// and the automatic preferred-leader election every second instead of
// every 5 minutes, so that a node the cluster scenarios stopped and
// started leads its partitions (and coordinates their groups) again
// before the next cell.
var ClusterOverrides = map[string]string{
	"default.replication.factor":               "3",
	"min.insync.replicas":                      "2",
	"offsets.topic.replication.factor":         "3",
	"transaction.state.log.replication.factor": "3",
	"transaction.state.log.min.isr":            "2",
	"replica.selector.class":                   "org.apache.kafka.common.replica.RackAwareReplicaSelector",
	"leader.imbalance.check.interval.seconds":  "1",
}

// ClusterRack returns node id's broker.rack on a cluster target.
func ClusterRack(id int) string { return fmt.Sprintf("rack-%c", 'a'+id-1) }

// clusterRacks puts node i of a cluster target in ClusterRack(i).
func clusterRacks() map[int]map[string]string {
	out := map[int]map[string]string{}
	for id := 1; id <= ClusterNodes; id++ {
		out[id] = map[string]string{"broker.rack": ClusterRack(id)}
	}
	return out
}

// clusterInstance is a started cluster target.
type clusterInstance struct {
	c         cluster.Cluster
	bootstrap string
	version   string
}

func (c clusterInstance) Bootstrap() string        { return c.bootstrap }
func (c clusterInstance) Version() string          { return c.version }
func (c clusterInstance) Stop() error              { return c.c.Close() }
func (c clusterInstance) Cluster() cluster.Cluster { return c.c }

type externalInstance string

func (e externalInstance) Bootstrap() string { return string(e) }
func (e externalInstance) Version() string   { return "external cluster at " + string(e) }
func (e externalInstance) Stop() error       { return nil }

// KnownTargets are the target names StartTarget knows, oracles first.
var KnownTargets = []string{TargetApacheKafka, TargetApacheKafkaCluster, TargetCascade, TargetCascadeCluster, TargetExternal}

// DefaultTargets is MATRIX_TARGETS' default (plus external when
// MATRIX_BOOTSTRAP is set): the single-node targets. The cluster targets
// (ClusterTargets) run when named: their default run takes about eight
// minutes on two cores, which beside the single-node targets (four) and
// the package's other tests would pass go test's default 10-minute
// timeout, so CI runs them as a go test of their own (.ci/run).
var DefaultTargets = []string{TargetApacheKafka, TargetCascade}

// ClusterTargets are the three-node targets, oracle first.
var ClusterTargets = []string{TargetApacheKafkaCluster, TargetCascadeCluster}

// SelectedTargets returns MATRIX_TARGETS as a list, with the oracles
// (apache-kafka, then apache-kafka-cluster) first so that the other
// targets' cells can be judged against them; the others keep their order.
// The default is DefaultTargets, plus "external" when MATRIX_BOOTSTRAP is
// set.
func SelectedTargets() []string {
	def := strings.Join(DefaultTargets, ",")
	if os.Getenv("MATRIX_BOOTSTRAP") != "" {
		def += "," + TargetExternal
	}
	ts := splitList(os.Getenv("MATRIX_TARGETS"), def)
	var oracles, others []string
	for _, want := range []string{TargetApacheKafka, TargetApacheKafkaCluster} {
		if slices.Contains(ts, want) {
			oracles = append(oracles, want)
		}
	}
	for _, t := range ts {
		if OracleOf(t) != "" {
			others = append(others, t)
		}
	}
	return append(oracles, others...)
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

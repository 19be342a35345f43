package matrix

import (
	"fmt"
	"os"
	"strings"
)

// ClusterCatalogueEnv names the variable that chooses what the cluster
// targets run: unset or "default" is ClusterDefaultScenarios, "full" is
// the whole catalogue.
const ClusterCatalogueEnv = "MATRIX_CLUSTER_CATALOGUE"

// ClusterDefaultScenarios are the scenarios the cluster targets run by
// default, beside every cluster scenario: an id, or a prefix ending in
// ".". They are what a replicated partition changes for a client (acks=all
// waiting for the ISR under min.insync.replicas=2, leaders and
// coordinators on other brokers than the bootstrap, idempotent and
// transactional producers whose state lives on the partition leader and
// the transaction coordinator, groups whose coordinator is a replicated
// __consumer_offsets partition). The rest of the catalogue (codecs, admin,
// offsets, compaction, retention, versions, the lost Produce answer, the
// other group cells) asks the partition's leader what one broker answers;
// it runs on request (MATRIX_CLUSTER_CATALOGUE=full), so that the default
// run fits CI's budget.
var ClusterDefaultScenarios = []string{
	"3.cross-client",
	"5.acks=all",
	"5.acks=all-5-in-flight",
	"5.idempotent",
	"5.idempotent-1-in-flight",
	"5.idempotent-5-in-flight",
	"7.resume",
	"7.kip848-resume",
	"7.member-crash",
	"8.",
}

// SelectedClusterCatalogue reports whether MATRIX_CLUSTER_CATALOGUE asks
// for the full catalogue on the cluster targets.
func SelectedClusterCatalogue() (full bool, err error) {
	switch v := strings.TrimSpace(os.Getenv(ClusterCatalogueEnv)); v {
	case "", "default":
		return false, nil
	case "full":
		return true, nil
	default:
		return false, fmt.Errorf("%s=%q: want default or full", ClusterCatalogueEnv, v)
	}
}

// ScenariosFor returns the scenarios of all that run on target: on one
// broker every scenario but the cluster ones; on a cluster target the
// cluster scenarios and, unless full, only ClusterDefaultScenarios of the
// rest.
func ScenariosFor(target string, all []Scenario, full bool) []Scenario {
	onCluster := IsClusterTarget(target)
	var out []Scenario
	for _, s := range all {
		switch {
		case s.Cluster && !onCluster, s.SingleNode && onCluster:
		case onCluster && !s.Cluster && !full && !matchID(s.ID, ClusterDefaultScenarios):
		default:
			out = append(out, s)
		}
	}
	return out
}

// matchID reports whether id is one of ids or starts with one of them
// that ends in ".".
func matchID(id string, ids []string) bool {
	for _, p := range ids {
		if id == p || (strings.HasSuffix(p, ".") && strings.HasPrefix(id, p)) {
			return true
		}
	}
	return false
}

package matrix_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/matrix"
	"github.com/cascade-kafka/cascade/matrix/apachekafka"
	"github.com/cascade-kafka/cascade/matrix/cascadecluster"
	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// clusterOverrides give both clusters the same shape: internal topics and
// the default replication factor at 1, since Cascade's topics are RF=1 for
// now and Kafka must be asked to place them alike.
var clusterOverrides = map[string]string{
	"offsets.topic.replication.factor":                 "1",
	"transaction.state.log.replication.factor":         "1",
	"transaction.state.log.min.isr":                    "1",
	"share.coordinator.state.topic.replication.factor": "1",
	"share.coordinator.state.topic.min.isr":            "1",
	"default.replication.factor":                       "1",
}

// activeFunc names a cluster's active controller.
type activeFunc func(ctx context.Context, c cluster.Cluster) (int, error)

// clusterTarget is one of the two clusters a cluster suite compares.
type clusterTarget struct {
	name  string
	start func(ctx context.Context) (cluster.Cluster, error)
	// active names the active controller, and how says activeBy: both
	// are asked of the quorum (DescribeQuorum through a broker), since
	// Kafka's brokers name a random live broker in DescribeCluster.
	active   activeFunc
	activeBy string
}

var clusterTargets = []clusterTarget{
	{name: "apache-kafka", start: func(ctx context.Context) (cluster.Cluster, error) {
		return apachekafka.StartCluster(ctx, apachekafka.ClusterOptions{Overrides: clusterOverrides})
	}, active: quorumActive, activeBy: "DescribeQuorum"},
	{name: "cascade", start: func(ctx context.Context) (cluster.Cluster, error) {
		opts := cascadecluster.Options{Overrides: clusterOverrides}
		if os.Getenv("CASCADE_CLUSTER_DEBUG") != "" {
			opts.Args = []string{"-v"}
		}
		return cascadecluster.Start(ctx, opts)
	}, active: quorumActive, activeBy: "DescribeQuorum"},
}

// quorumActive names the quorum's leader, as DescribeQuorum answers.
func quorumActive(ctx context.Context, c cluster.Cluster) (int, error) {
	id, _, err := cluster.QuorumLeader(ctx, c)
	return id, err
}

// selectedClusterTargets returns the cluster targets MATRIX_TARGETS names
// (apache-kafka first), by default both.
func selectedClusterTargets() []clusterTarget {
	var out []clusterTarget
	for _, name := range matrix.SelectedTargets() {
		for _, ct := range clusterTargets {
			if ct.name == name {
				out = append(out, ct)
			}
		}
	}
	return out
}

// clusterRun is what the steps of one cluster share: the cluster, and the
// nodes a step chose for the steps after it.
type clusterRun struct {
	target     string // The clusterTarget's name.
	c          cluster.Cluster
	active     activeFunc
	controller int // The active controller when the victim was killed.
	victim     int // The broker the kill steps crash.
}

// conformanceStep is one operation run alike on both clusters. Its answer
// is compared as JSON; an error fails the step on that cluster.
type conformanceStep struct {
	name string
	run  func(ctx context.Context, t *testing.T, r *clusterRun) (any, error)
}

// startCluster starts one target, closing it when the test ends and
// printing its nodes' logs when it failed.
func startCluster(t *testing.T, ctx context.Context, target clusterTarget) cluster.Cluster {
	t.Helper()
	start := time.Now()
	c, err := target.start(ctx)
	if err != nil {
		t.Fatalf("start %s cluster: %v", target.name, err)
	}
	t.Logf("%s cluster of 3 nodes started in %v: %s", c.Name(), time.Since(start).Round(time.Millisecond), strings.Join(c.Seeds(), ","))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s node logs:\n%s", target.name, c.Logs(4000))
		}
		if err := c.Close(); err != nil {
			t.Errorf("close %s cluster: %v", target.name, err)
		}
	})
	if err := cluster.WaitForBrokers(ctx, c, c.BrokerIDs()...); err != nil {
		t.Fatalf("%s: %v", target.name, err)
	}
	return c
}

// TestClusterConformance runs the same operations on a three-node Apache
// Kafka cluster and a three-node Cascade cluster, one after the other (the
// JVMs and the Cascade processes never run at once), and compares the
// answers normalised only for what must differ: ports, cluster ids, and
// which voter is the controller (a live voter on both). Kafka's answers
// come first; a step that fails there is wrong, not Cascade. The clients
// step runs the matrix's cluster scenarios through every selected driver.
func TestClusterConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node Apache Kafka cluster and a three-node Cascade cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	steps := conformanceSteps()
	answers := map[string]map[string]string{}
	for _, target := range selectedClusterTargets() {
		ok := t.Run(target.name, func(t *testing.T) {
			c := startCluster(t, ctx, target)
			r := &clusterRun{target: target.name, c: c, active: target.active}
			answers[target.name] = map[string]string{}
			for _, s := range steps {
				t.Run(s.name, func(t *testing.T) { runStep(ctx, t, r, s, answers) })
			}
		})
		if !ok && target.name == "apache-kafka" && len(answers["apache-kafka"]) == 0 {
			t.Fatal("Apache Kafka gave no answers to compare with")
		}
	}
	if os.Getenv("CASCADE_CLUSTER_ANSWERS") != "" {
		for _, s := range steps {
			t.Logf("%s:\nApache Kafka: %s\nCascade: %s", s.name, answers["apache-kafka"][s.name], answers["cascade"][s.name])
		}
	}
}

// runStep runs step s on r's cluster, keeps its answer as JSON in
// answers[r.target], and judges it against Apache Kafka's answer when there
// is one.
func runStep(ctx context.Context, t *testing.T, r *clusterRun, s conformanceStep, answers map[string]map[string]string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	a, err := s.run(sctx, t, r)
	if err != nil {
		if r.target == "apache-kafka" {
			t.Fatalf("fails on Apache Kafka (the step is wrong): %v", err)
		}
		t.Fatal(err)
	}
	js, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	answers[r.target][s.name] = string(js)
	oracle, have := answers["apache-kafka"][s.name]
	if r.target == "apache-kafka" || !have {
		return
	}
	judge(t, s.name, oracle, string(js))
}

// knownDifference is a difference from Apache Kafka that Cascade has now:
// the changed lines of the step's answer (diffLines, "+" Cascade's, "-"
// Kafka's, trimmed and sorted) and why. A step whose answer differs by
// exactly these lines is logged with its diff, not failed; any other
// difference fails, and so does an answer that matches Kafka again, so
// that the list says what is true.
type knownDifference struct {
	why   string
	lines []string
}

var knownDifferences = map[string]knownDifference{}

// judge compares a step's answer with Apache Kafka's.
func judge(t *testing.T, step, oracle, got string) {
	t.Helper()
	known, isKnown := knownDifferences[step]
	if got == oracle {
		if isKnown {
			t.Errorf("matches Apache Kafka now: drop the known difference (%s)", known.why)
		}
		return
	}
	diff := lineDiff(oracle, got)
	if isKnown && slices.Equal(changedLines(oracle, got), known.lines) {
		t.Logf("known difference from Apache Kafka: %s:\n%s", known.why, diff)
		return
	}
	t.Errorf("differs from Apache Kafka:\n%s\nchanged lines: %q", diff, changedLines(oracle, got))
}

// diffLine is one line of a diff: ' ' in both, '-' Kafka's only, '+' the
// other's only.
type diffLine struct {
	mark byte
	text string
}

// diffLines diffs two JSON renderings line by line (longest common
// subsequence).
func diffLines(want, got string) []diffLine {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	// lcs[i][j] is the length of the longest common subsequence of w[i:]
	// and g[j:].
	lcs := make([][]int, len(w)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(g)+1)
	}
	for i := len(w) - 1; i >= 0; i-- {
		for j := len(g) - 1; j >= 0; j-- {
			if w[i] == g[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var lines []diffLine
	i, j := 0, 0
	for i < len(w) || j < len(g) {
		switch {
		case i < len(w) && j < len(g) && w[i] == g[j]:
			lines = append(lines, diffLine{' ', w[i]})
			i, j = i+1, j+1
		case j < len(g) && (i == len(w) || lcs[i][j+1] >= lcs[i+1][j]):
			lines = append(lines, diffLine{'+', g[j]})
			j++
		default:
			lines = append(lines, diffLine{'-', w[i]})
			i++
		}
	}
	return lines
}

// changedLines returns the changed lines of a diff, marked, trimmed and
// sorted, which do not depend on how the diff aligned them.
func changedLines(want, got string) []string {
	var out []string
	for _, l := range diffLines(want, got) {
		if l.mark != ' ' {
			out = append(out, string(l.mark)+" "+strings.TrimSpace(l.text))
		}
	}
	slices.Sort(out)
	return out
}

// lineDiff renders a diff with two lines of context around each change.
func lineDiff(want, got string) string {
	lines := diffLines(want, got)
	var b strings.Builder
	last := -1
	for k, l := range lines {
		near := false
		for d := max(0, k-2); d <= min(len(lines)-1, k+2); d++ {
			near = near || lines[d].mark != ' '
		}
		if !near {
			continue
		}
		if last >= 0 && k > last+1 {
			b.WriteString("  ...\n")
		}
		fmt.Fprintf(&b, "%c %s\n", l.mark, l.text)
		last = k
	}
	return b.String()
}

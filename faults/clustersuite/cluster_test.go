package clustersuite

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/faults"
	"github.com/cascade-kafka/cascade/faults/netns"
	lin "github.com/cascade-kafka/cascade/linearizability"
	"github.com/cascade-kafka/cascade/matrix/apachekafka"
	"github.com/cascade-kafka/cascade/matrix/cascadecluster"
)

var (
	flagSeed   = flag.Uint64("faults.seed", 0, "seed of the fault schedule and proxy (0: from the clock)")
	flagKafka  = flag.Bool("faults.kafka", true, "also run the suite against Apache Kafka (the oracle) when java and mvn are installed")
	flagJava   = flag.Bool("faults.java", true, "run Java clients (the matrix's Java driver) when java and mvn are installed")
	flagTxn    = flag.Bool("faults.txn", true, "run the transactional producers and read_committed consumers")
	flagKeep   = flag.Bool("faults.keep", false, "keep the artifacts of a passing run too")
	flagFull   = flag.Bool("faults.full", false, "apply every failure mode to every role (CI covers every mode and every role at least once)")
	flagRounds = flag.Int("faults.rounds", 4, "drawn fault sets after the covering ones")
	flagUpdate = flag.Bool("faults.update", false, "rewrite the cluster table in faults/README.md from this run")
	flagRun    = flag.Bool("faults.cluster", false, "run the cluster suites")
	flagSeeds  = flag.String("faults.seeds", "", "comma-separated seeds, each a whole run of both targets; \"fresh\" draws one from the clock (default: -faults.seed's)")
	flagSoak   = flag.Duration("faults.soak", 0, "apply faults for this long, the covering ones first and then drawn sets (e.g. 30m; give go test a -timeout of twice as long)")
	flagOnly   = flag.String("faults.only", "", "run only the named faults, comma-separated (slow:brokers,narrow:brokers); empty: all")
)

// seeds returns the runs' seeds: -faults.seeds, or -faults.seed's one.
func seeds(t *testing.T) []uint64 {
	if *flagSeeds == "" {
		return []uint64{seed()}
	}
	var out []uint64
	for _, f := range strings.Split(*flagSeeds, ",") {
		f = strings.TrimSpace(f)
		if f == "fresh" {
			out = append(out, uint64(time.Now().UnixNano())%1_000_000+1)
			continue
		}
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil || v == 0 {
			t.Fatalf("-faults.seeds: %q is neither a seed above zero nor \"fresh\"", f)
		}
		out = append(out, v)
	}
	return out
}

// runTime bounds one target's run: every fault once with its recoveries
// and the drain, or the soak and the check after it.
func runTime() time.Duration {
	if *flagSoak > 0 {
		return faultTime() + 10*time.Minute
	}
	return clusterTime
}

// faultTime bounds one target's schedule.
func faultTime() time.Duration {
	if *flagSoak > 0 {
		return *flagSoak
	}
	return clusterTime - 5*time.Minute
}

func seed() uint64 {
	if *flagSeed != 0 {
		return *flagSeed
	}
	return uint64(time.Now().UnixNano())%1_000_000 + 1
}

// clusterWatch is what the cluster suites' roles refer to.
var clusterWatch = faults.Watch{Topic: "faults", Partition: 0, Group: "faults-members", TxnID: "faults-txn-0"}

// clusterTime bounds one target's cluster suite: every fault once, with
// its recoveries, and the drain.
const clusterTime = 20 * time.Minute

// TestClusterSuites runs the cluster suite against a three-node Apache
// Kafka cluster and then a three-node Cascade cluster, each in network
// namespaces of its own, with one seed, and writes the faults × targets
// table (cluster.md, cluster.html) into the artifacts directory.
func TestClusterSuites(t *testing.T) {
	if testing.Short() || !*flagRun {
		t.Skip("the cluster suites are off (-short, or without -faults.cluster)")
	}
	requireNetns(t)
	dir, err := os.MkdirTemp("", "cluster-faults-")
	if err != nil {
		t.Fatal(err)
	}
	ss := seeds(t)
	t.Logf("seeds %v (replay one: -faults.seed=N); artifacts in %s", ss, dir)
	var runs []faults.ClusterResult
	for _, s := range ss {
		t.Run(fmt.Sprintf("seed-%d", s), func(t *testing.T) {
			sdir := filepath.Join(dir, fmt.Sprint(s))
			if *flagKafka {
				t.Run("kafka", func(t *testing.T) {
					if r, ok := oracleSuite(t, s, filepath.Join(sdir, "kafka")); ok {
						runs = append(runs, r)
					}
				})
			}
			t.Run("cascade", func(t *testing.T) {
				if r, ok := clusterSuite(faults.Forward(t), s, filepath.Join(sdir, "cascade"), false); ok {
					runs = append(runs, r)
				}
			})
		})
	}
	if len(runs) == 0 {
		return
	}
	results := faults.MergeClusterResults(runs)
	md := faults.ClusterMarkdown(results)
	page := faults.ClusterHTML(results)
	t.Logf("cluster suites (also in %s and %s):\n%s", filepath.Join(dir, "cluster.md"), filepath.Join(dir, "cluster.html"), md)
	errs := []error{os.WriteFile(filepath.Join(dir, "cluster.md"), []byte(md), 0o644),
		os.WriteFile(filepath.Join(dir, "cluster.html"), []byte(page), 0o644)}
	if *flagUpdate {
		errs = append(errs, replaceBetween("../README.md", "<!-- cluster-table -->", "<!-- /cluster-table -->", md),
			os.WriteFile("../cluster.html", []byte(page), 0o644))
	}
	if err := errors.Join(errs...); err != nil {
		t.Error(err)
	}
	if !t.Failed() && !*flagKeep {
		os.RemoveAll(dir)
	} else {
		t.Logf("artifacts kept in %s (cluster.html: the faults × targets report)", dir)
	}
}

// oracleSuite runs the suite on Apache Kafka. The oracle is there to
// show that the checks are fair, and a loaded machine now and then makes
// one of its runs miss a bound: a failed run is repeated once with the
// same seed, and only a second failure fails the test. The first run's
// reasons stay in the test log and the report either way. Cascade's runs
// get no second chance.
func oracleSuite(t *testing.T, s uint64, dir string) (faults.ClusterResult, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), runTime())
	ensureTarget(t, ctx, true)
	cancel()
	var res faults.ClusterResult
	first := faults.Trial(t, func(a *faults.Attempt) { res, _ = clusterSuite(a, s, dir, true) })
	if !first.Failed() {
		return res, true
	}
	why := first.Reasons()
	t.Logf("Apache Kafka failed seed %d on its first run; running it once more. The first run: %s", s, strings.Join(why, "; "))
	res, ok := clusterSuite(faults.Forward(t), s, dir+"-again", true)
	res.Notes = append(faults.RunNotes(s, "first run failed: ", why), res.Notes...)
	return res, ok
}

// clusterSuite starts one target in a network of its own and runs the
// suite; ok is false when the target could not run here (skipped).
func clusterSuite(t *faults.Attempt, s uint64, dir string, kafka bool) (faults.ClusterResult, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), runTime())
	defer cancel()
	ensureTarget(t, ctx, kafka)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	nw, err := netns.New(3, netns.WithForwarders())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := nw.Close(); err != nil {
			t.Errorf("removing the network: %v", err)
		}
	}()
	start := faults.StartCascadeCluster
	if kafka {
		start = faults.StartKafkaCluster
	}
	ct, err := start(ctx, nw, filepath.Join(dir, "cluster"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ct.C.Close()
	fs := faults.ClusterFaults(ct, clusterWatch, s)
	if !*flagFull {
		fs = faults.CoverModesAndRoles(fs, s)
	}
	if *flagOnly != "" {
		fs = onlyFaults(t, fs, strings.Split(*flagOnly, ","))
	}
	var mon *faults.Monitor
	r := &faults.Suite{T: t, Seed: s, Dir: dir, Addrs: ct.C.Seeds(), LogPaths: ct.LogPaths, DataDirs: ct.DataDirs,
		Faults: fs, RF: 3, Java: faults.JavaOpener(t, ctx, *flagJava), Name: ct.Name, KafkaDefects: kafka, StaleReads: true,
		FaultTime: faultTime(), Period: 4 * time.Second, Txn: *flagTxn, Keep: *flagKeep, Progress: true, Copiers: 2,
		Adjust: func(sc *faults.Schedule) {
			sc.Cover, sc.Rounds = true, len(fs)+*flagRounds
			if *flagSoak > 0 {
				sc.Rounds = 0 // until FaultTime
			}
			sc.MaxConcurrent, sc.Settle, sc.Quiet = 1, 3*time.Second, 4*time.Second
		},
		Observe: func(ctx context.Context, clock func() int64) func() {
			mon = &faults.Monitor{T: ct, Topic: clusterWatch.Topic, Partitions: 3, Clock: clock, Interval: 250 * time.Millisecond}
			return mon.Start(ctx)
		}}
	keep := r.Run(ctx)
	res := faults.ClusterResult{Target: ct.Name, Seeds: []uint64{s}, Passed: r.Passed}
	if !r.Passed {
		res.Notes = faults.RunNotes(s, "", t.Reasons())
	}
	if mon != nil {
		res.Figures = faults.ClusterFigures(r.Events, mon.Samples(), r.History, clusterWatch.Topic, clusterWatch.Partition, nw.Nodes())
	}
	if err := ct.C.Close(); err != nil {
		t.Logf("stopping the cluster: %v", err)
	}
	r.Cleanup(keep)
	return res, true
}

// onlyFaults keeps the faults named, failing the test on a name no fault
// has.
func onlyFaults(t testing.TB, fs []faults.Fault, names []string) []faults.Fault {
	var out []faults.Fault
	for _, name := range names {
		n := len(out)
		for _, f := range fs {
			if f.Name == name {
				out = append(out, f)
			}
		}
		if len(out) == n {
			t.Fatalf("-faults.only: no fault named %q", name)
		}
	}
	return out
}

// replaceBetween replaces what lies between the lines begin and end of
// the file at path with body.
func replaceBetween(path, begin, end, body string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s: no %s ... %s section", path, begin, end)
	}
	return os.WriteFile(path, []byte(s[:i+len(begin)]+"\n"+body+s[j:]), 0o644)
}

// controlSeed is the negative control's fixed seed.
const controlSeed = 7

// TestClusterNegativeControl runs the suite on settings that must lose
// acknowledged writes, as the teeth: min.insync.replicas=1,
// unclean.leader.election.enable=true and acks=1 producers, under a
// schedule that isolates and kills partition leaders. A leader cut off
// from its peers keeps acknowledging acks=1 writes alone until it is
// fenced; its successor never had them. The check must report them lost,
// on both targets.
func TestClusterNegativeControl(t *testing.T) {
	if testing.Short() || !*flagRun {
		t.Skip("the cluster suites are off (-short, or without -faults.cluster)")
	}
	requireNetns(t)
	for _, kafka := range []bool{true, false} {
		name := "cascade"
		if kafka {
			name = "kafka"
		}
		t.Run(name, func(t *testing.T) {
			if kafka && !*flagKafka {
				t.Skip("the oracle run is off (-faults.kafka=false)")
			}
			r := controlRun(t, kafka)
			if n := r.Report.Count(lin.KindLostWrite); n == 0 {
				t.Errorf("the unsafe settings lost no acknowledged write; the check found:\n%s", r.Report.Summary())
			} else {
				t.Logf("the check found %d lost writes on the unsafe settings, as it must", n)
			}
			if len(r.Delivery.Missing) == 0 {
				t.Errorf("validate_delivery found no acknowledged record missing on the unsafe settings: %s", r.Delivery)
			}
		})
	}
}

// controlRun starts one target on the unsafe settings and runs the
// negative control's schedule on it.
func controlRun(t *testing.T, kafka bool) *faults.Suite {
	ctx, cancel := context.WithTimeout(context.Background(), clusterTime)
	defer cancel()
	ensureTarget(t, ctx, kafka)
	dir := t.TempDir()
	nw, err := netns.New(3)
	if err != nil {
		t.Fatal(err)
	}
	defer nw.Close()
	start := faults.StartCascadeCluster
	if kafka {
		start = faults.StartKafkaCluster
	}
	ct, err := start(ctx, nw, filepath.Join(dir, "cluster"),
		map[string]string{"min.insync.replicas": "1", "unclean.leader.election.enable": "true"})
	if err != nil {
		t.Fatal(err)
	}
	defer ct.C.Close()
	var fs []faults.Fault
	for _, f := range faults.ClusterFaults(ct, clusterWatch, controlSeed) {
		if f.Name == "isolate:leader" || f.Name == "hard-shutdown:leader" {
			fs = append(fs, f)
		}
	}
	r := &faults.Suite{T: t, Seed: controlSeed, Dir: dir, Addrs: ct.C.Seeds(), LogPaths: ct.LogPaths, DataDirs: ct.DataDirs,
		Faults: fs, RF: 3, Name: ct.Name, StaleReads: true, Control: true,
		FaultTime: clusterTime - 5*time.Minute, Period: 5 * time.Second, Progress: true,
		Adjust: func(sc *faults.Schedule) {
			sc.Cover, sc.Rounds = true, 4
			sc.MaxConcurrent, sc.Settle = 1, 3*time.Second
		},
		Workload: func(w *faults.Workload) {
			w.Producers, w.ConfluentProducers, w.GroupConsumers, w.LeaderAcks = 3, 0, 0, true
		}}
	r.Run(ctx)
	if r.Report == nil {
		t.Fatal("the control run produced no report")
	}
	return r
}

// ensureTarget provisions Apache Kafka's jars (skipping the test where
// Java or Maven is missing) or builds Cascade.
func ensureTarget(t testing.TB, ctx context.Context, kafka bool) {
	t.Helper()
	if !kafka {
		if _, err := cascadecluster.Binary(ctx); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := apachekafka.Ensure(ctx); errors.Is(err, apachekafka.ErrToolMissing) && os.Getenv("CASCADE_REQUIRE_ORACLE") == "" {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
}

// requireNetns skips the test where network namespaces cannot be made
// (not root, no ip or iptables), or fails it when CASCADE_REQUIRE_NETNS is
// set, as CI does, so that a machine that cannot run the suites is not
// taken for one where they passed.
func requireNetns(t *testing.T) {
	t.Helper()
	if err := netns.Available(); err != nil {
		if os.Getenv("CASCADE_REQUIRE_NETNS") != "" {
			t.Fatalf("CASCADE_REQUIRE_NETNS is set: %v", err)
		}
		t.Skip(err)
	}
}

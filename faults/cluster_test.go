package faults

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/faults/netns"
	"github.com/cascade-kafka/cascade/matrix/apachekafka"
	"github.com/cascade-kafka/cascade/matrix/cascadecluster"
)

var (
	flagCluster       = flag.Bool("faults.cluster", false, "run the cluster suites (three nodes in network namespaces; needs root)")
	flagClusterRounds = flag.Int("faults.cluster.rounds", 4, "drawn fault sets after every cluster fault has been applied once")
	flagUpdate        = flag.Bool("faults.update", false, "rewrite the cluster table in README.md from this run")
)

// clusterWatch is what the cluster suites' roles refer to.
var clusterWatch = Watch{Topic: "faults", Partition: 0, Group: "faults-members", TxnID: transactionalIDPrefix + "0"}

// clusterTime bounds one target's cluster suite: every fault once, with
// its recoveries, and the drain.
const clusterTime = 20 * time.Minute

// TestClusterSuites runs the cluster suite against a three-node Apache
// Kafka cluster and then a three-node Cascade cluster, each in network
// namespaces of its own, with one seed, and writes the faults × targets
// table (cluster.md, cluster.html) into the artifacts directory.
func TestClusterSuites(t *testing.T) {
	if testing.Short() || !*flagCluster {
		t.Skip("the cluster suites are off (-short or -faults.cluster=false)")
	}
	if err := netns.Available(); err != nil {
		t.Skip(err)
	}
	s := seed()
	dir, err := os.MkdirTemp("", "cluster-faults-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("seed %d (replay: -faults.seed=%d); artifacts in %s", s, s, dir)
	var results []ClusterResult
	if *flagKafka {
		t.Run("kafka", func(t *testing.T) {
			if r, ok := clusterSuite(t, s, filepath.Join(dir, "kafka"), true); ok {
				results = append(results, r)
			}
		})
	}
	t.Run("cascade", func(t *testing.T) {
		if r, ok := clusterSuite(t, s, filepath.Join(dir, "cascade"), false); ok {
			results = append(results, r)
		}
	})
	if len(results) == 0 {
		return
	}
	md := ClusterMarkdown(results)
	t.Logf("cluster suites (also in %s):\n%s", filepath.Join(dir, "cluster.md"), md)
	errs := []error{os.WriteFile(filepath.Join(dir, "cluster.md"), []byte(md), 0o644),
		os.WriteFile(filepath.Join(dir, "cluster.html"), []byte(ClusterHTML(results)), 0o644)}
	if *flagUpdate {
		errs = append(errs, replaceBetween("README.md", "<!-- cluster-table -->", "<!-- /cluster-table -->", md))
	}
	if err := errors.Join(errs...); err != nil {
		t.Error(err)
	}
	if !t.Failed() && !*flagKeep {
		os.RemoveAll(dir)
	}
}

// clusterSuite starts one target in a network of its own and runs the
// suite; ok is false when the target could not run here (skipped).
func clusterSuite(t *testing.T, s uint64, dir string, kafka bool) (ClusterResult, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), clusterTime)
	defer cancel()
	if kafka {
		if _, err := apachekafka.Ensure(ctx); errors.Is(err, apachekafka.ErrToolMissing) {
			t.Skip(err)
		} else if err != nil {
			t.Fatal(err)
		}
	} else if _, err := cascadecluster.Binary(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	nw, err := netns.New(3)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := nw.Close(); err != nil {
			t.Errorf("removing the network: %v", err)
		}
	}()
	start := StartCascadeCluster
	if kafka {
		start = StartKafkaCluster
	}
	ct, err := start(ctx, nw, filepath.Join(dir, "cluster"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ct.C.Close()
	faults := ClusterFaults(ct, clusterWatch, s)
	var mon *Monitor
	r := &run{t: t, seed: s, dir: dir, addrs: ct.C.Seeds(), logPaths: ct.LogPaths, dataDirs: ct.DataDirs,
		faults: faults, rf: 3, java: javaOpener(t, ctx), name: ct.Name, kafkaDefects: kafka, faultTime: clusterTime - 5*time.Minute, progress: true,
		schedule: func(sc *Schedule) {
			sc.Cover, sc.Rounds = true, len(faults)+*flagClusterRounds
			sc.MaxConcurrent = 1
			sc.Period, sc.Settle = 4*time.Second, 3*time.Second
		},
		observe: func(ctx context.Context, clock func() int64) func() {
			mon = &Monitor{T: ct, Topic: clusterWatch.Topic, Partitions: 3, Clock: clock, Interval: 250 * time.Millisecond}
			return mon.Start(ctx)
		}}
	keep := r.run(ctx)
	res := ClusterResult{Target: ct.Name, Seed: s, Passed: r.passed}
	if mon != nil {
		res.Figures = ClusterFigures(r.events, mon.Samples(), r.h, clusterWatch.Topic, clusterWatch.Partition, nw.Nodes())
	}
	if err := ct.C.Close(); err != nil {
		t.Logf("stopping the cluster: %v", err)
	}
	r.cleanup(keep)
	return res, true
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

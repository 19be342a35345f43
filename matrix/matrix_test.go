package matrix_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/linearizability"
	"github.com/cascade-kafka/cascade/matrix"
	_ "github.com/cascade-kafka/cascade/matrix/driver/all"
)

// reportDir is MATRIX_REPORT_DIR, else the test's artifact directory when
// go test runs with -artifacts, else a new directory under the system temp
// dir (printed at the start and the end), so that concurrent runs never
// write into one another's histories.
func reportDir(t *testing.T) string {
	if d := os.Getenv("MATRIX_REPORT_DIR"); d != "" {
		return d
	}
	if f := flag.Lookup("test.artifacts"); f != nil && f.Value.String() == "true" {
		return t.ArtifactDir()
	}
	d, err := os.MkdirTemp("", "cascade-matrix-")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestMatrix runs every selected client against every selected target. It
// fails when a cell fails on Apache Kafka, or when a cell that passes on
// Apache Kafka (or any cell, when Apache Kafka is not selected) fails on
// another target.
func TestMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("the compatibility matrix starts brokers; skipped with -short")
	}
	// About 3 minutes for both targets and six clients once cached, four
	// cells at a time; the first run also provisions Apache Kafka, Python
	// and Java drivers.
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	targets := matrix.SelectedTargets()
	clients := matrix.SelectedClients(defaultClients())
	dir := reportDir(t)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	selected := matrix.SelectScenarios(matrix.Catalogue())
	parallel, err := matrix.SelectedParallel()
	if err != nil {
		t.Fatal(err)
	}
	fullOnClusters, err := matrix.SelectedClusterCatalogue()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "matrix: targets %v, clients %v, %d cells at once, report in %s\n", targets, clients, parallel, dir)

	var reports []matrix.TargetReport
	// oracles holds each oracle target's cells by key, once it ran.
	oracles := map[string]map[string]matrix.Cell{}
	for _, target := range targets {
		scenarios := matrix.ScenariosFor(target, selected, fullOnClusters)
		rep := matrix.TargetReport{Target: target, Cells: []matrix.Cell{}}
		start := time.Now()
		inst, err := matrix.StartTarget(ctx, t, target)
		if err != nil {
			rep.Error = err.Error()
			rep.BrokerVersion = "(not started)"
			reports = append(reports, rep)
			t.Errorf("target %s: %v", target, err)
			continue
		}
		rep.BrokerVersion = inst.Version()
		fmt.Fprintf(os.Stderr, "matrix: %s (%s) at %s started in %v\n", target, inst.Version(), inst.Bootstrap(), time.Since(start).Round(time.Millisecond))
		rep.History = target + ".history.jsonl"
		h, err := matrix.NewHistory(filepath.Join(dir, rep.History))
		if err != nil {
			t.Fatal(err)
		}
		env := matrix.NewEnv(target, inst.Bootstrap())
		env.Parallel = parallel
		if ci, ok := inst.(matrix.ClusterInstance); ok {
			env.SetCluster(ci)
		}
		if target != matrix.TargetExternal {
			target := target
			env.SetVariant(func(ctx context.Context) (matrix.Instance, error) {
				start := time.Now()
				v, err := matrix.StartTargetWith(ctx, t, target, matrix.VariantOverridesFor(target))
				if err == nil {
					fmt.Fprintf(os.Stderr, "matrix: %s variant at %s started in %v\n", target, v.Bootstrap(), time.Since(start).Round(time.Millisecond))
				}
				return v, err
			})
		}
		cellsStart := time.Now()
		rep.Cells, rep.Clients = matrix.Run(ctx, env, clients, scenarios, h, os.Stderr)
		fmt.Fprintf(os.Stderr, "matrix: %s: %d cells in %v (started in %v before)\n", target, len(rep.Cells), time.Since(cellsStart).Round(time.Second), cellsStart.Sub(start).Round(time.Second))
		if err := env.StopVariant(); err != nil {
			t.Errorf("stop the %s variant: %v", target, err)
		}
		if err := h.Close(); err != nil {
			t.Errorf("history %s: %v", rep.History, err)
		}
		checkHistory(t, target, filepath.Join(dir, rep.History))
		if err := inst.Stop(); err != nil {
			t.Errorf("stop %s: %v", target, err)
		}
		reports = append(reports, rep)

		oracleName := matrix.OracleOf(target)
		if oracleName == "" {
			ref := map[string]matrix.Cell{}
			for _, c := range rep.Cells {
				ref[c.Key()] = c
				if c.Status == matrix.StatusFail {
					t.Errorf("%s: %s %s%s fails on the oracle (the scenario or the driver is wrong): %s", target, c.Scenario, c.Client, peer(c), c.Detail)
				}
			}
			oracles[target] = ref
			continue
		}
		oracle, haveOracle := oracles[oracleName]
		for _, c := range rep.Cells {
			if c.Status != matrix.StatusFail {
				continue
			}
			if o, ok := oracle[c.Key()]; ok && o.Status != matrix.StatusPass {
				t.Logf("%s: %s %s%s fails here and on %s (%s): %s", target, c.Scenario, c.Client, peer(c), oracleName, o.Status, c.Detail)
				continue
			}
			what := "passes on " + oracleName
			if !haveOracle {
				what = "its oracle " + oracleName + " was not selected"
			}
			t.Errorf("%s: %s %s%s fails (%s): %s", target, c.Scenario, c.Client, peer(c), what, c.Detail)
		}
	}
	if err := matrix.WriteReports(dir, reports); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "matrix: report written to %s (index.html, <target>.json, <target>.md)\n", dir)
	summary(reports)
}

// checkHistory runs the linearizability checkers over a target's history:
// no acknowledged record lost, none duplicated, offsets consistent.
func checkHistory(t *testing.T, target, path string) {
	t.Helper()
	ops, err := linearizability.ReadFile(path)
	if err != nil {
		t.Errorf("%s: history %s does not parse: %v", target, path, err)
		return
	}
	rep, err := linearizability.Check(ops, linearizability.Options{Timeout: 30 * time.Second})
	if err != nil {
		t.Errorf("%s: history %s: %v", target, path, err)
		return
	}
	if !rep.Valid() {
		t.Errorf("%s: history %s has anomalies:\n%s", target, path, rep.Summary())
		return
	}
	fmt.Fprintf(os.Stderr, "matrix: %s history: %d operations, no anomalies\n", target, rep.Ops)
}

func peer(c matrix.Cell) string {
	if c.Peer == "" {
		return ""
	}
	return " -> " + c.Peer
}

// summary prints one line per target with its counts.
func summary(reports []matrix.TargetReport) {
	for _, r := range reports {
		n := map[string]int{}
		for _, c := range r.Cells {
			n[c.Status]++
		}
		fmt.Fprintf(os.Stderr, "matrix: %-20s %4d pass %4d fail %4d unsupported %4d client-fault  %s\n", r.Target, n[matrix.StatusPass], n[matrix.StatusFail], n[matrix.StatusUnsupported], n[matrix.StatusClientFault], r.BrokerVersion)
	}
	fmt.Fprintf(os.Stderr, "matrix: %d differences from the oracles (each target beside its own: apache-kafka, apache-kafka-cluster)\n", len(matrix.Differences(reports)))
}

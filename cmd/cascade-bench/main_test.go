package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/cmd/cascade-bench/internal/bench"
)

// TestMain lets the test binary serve as its own kfake helper, as the
// installed command does with "cascade-bench kfake-serve".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "kfake-serve" {
		if err := run(context.Background(), os.Args[1:2]); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestFlagErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "exactly one of --bootstrap and --compare"},
		{[]string{"--bootstrap", "x:1", "--compare", "kfake"}, "exactly one of"},
		{[]string{"--compare", "nosuch"}, "unknown target"},
		{[]string{"--bootstrap", "x:1", "--acks", "2"}, "--acks"},
		{[]string{"--bootstrap", "x:1", "--payload-bytes", "8"}, "--payload-bytes"},
		{[]string{"--bootstrap", "x:1", "--compression", "brotli"}, "--compression"},
		{[]string{"--bootstrap", "x:1", "--client", "sarama"}, "--client"},
		{[]string{"--bootstrap", "x:1", "--records", "0"}, "--records"},
		{[]string{"--bootstrap", "x:1", "extra"}, "unexpected arguments"},
		{[]string{"--bootstrap", "x:1", "--nodes", "0"}, "--nodes"},
		{[]string{"--bootstrap", "x:1", "--replication-factor", "-1"}, "--replication-factor"},
		{[]string{"--compare", "kfake", "--nodes", "3"}, "kfake runs one node"},
	} {
		err := run(ctx, tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// TestCompareKfakeCommand runs the command end to end against a kfake
// helper process and reads back its JSON report.
func TestCompareKfakeCommand(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "report.json")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := run(ctx, []string{"--compare", "kfake", "--rounds", "2", "--records", "1000", "--payload-bytes", "100",
		"--partitions", "2", "--compression", "zstd", "--work-dir", dir, "--disk-probe-bytes", "1048576",
		"--progress", "0", "--json", out, "--html", filepath.Join(dir, "report.html")})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 2 || !rep.Runs[0].Verified || !rep.Runs[1].Verified || rep.Runs[1].Round != 2 {
		t.Errorf("runs = %+v", rep.Runs)
	}
	if len(rep.Medians) != 1 || rep.Medians[0].Runs != 2 || rep.Limits == nil || rep.Limits.Samples != 2 {
		t.Errorf("medians %+v, limits %+v", rep.Medians, rep.Limits)
	}
	if rep.Workload.Compression != "zstd" || rep.Workload.Records != 1000 {
		t.Errorf("workload = %+v", rep.Workload)
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<!DOCTYPE html>", "produce records/s", "<td>kfake</td><td>2</td>"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("HTML report lacks %q", want)
		}
	}
}

// Command cascade-bench is Cascade's load tool: it produces and consumes a
// verifiable workload against any Kafka broker, and compares Cascade with
// Apache Kafka 4.x and franz-go's kfake on the same machine in one run.
//
// Against a running cluster (any Kafka bootstrap address):
//
//	cascade-bench --bootstrap 127.0.0.1:9092 --records 1000000 --payload-bytes 1024
//
// Side by side, each target started by the tool (Cascade built from
// ./cmd/cascade with a fresh data dir, Apache Kafka from the Maven jars the
// matrix uses, kfake in a helper process), in interleaved rounds:
//
//	cascade-bench --compare cascade,apache-kafka,kfake --rounds 3 \
//	    --records 300000 --payload-bytes 1024 --partitions 8 --producers 4 \
//	    --consumers 4 --compression lz4 --acks all --flush-ms 1000 \
//	    --linger-ms 5 --batch-bytes 131072
//
// With --client raw the tool's own client replays prebuilt batches and
// checks fetched ones by header and CRC, so the clients cost next to
// nothing and the broker sets the pace (docs/benchmarks.md, "The raw
// client").
//
// Flags follow kafka-producer-perf-test and the producer configs. Payloads
// are deterministic, incompressible and distinct: each carries its record
// id and a CRC-32C, and the consumers check that every record was read
// exactly once. Progress lines go to standard error while it runs; the end
// is a table of medians and Cascade's ratios, and a JSON report (--json).
// The exit status is 1 when any run failed or was not verified.
//
// "cascade-bench kfake-serve" is the kfake helper: it serves an in-memory
// kfake broker on a free loopback port until SIGINT or SIGTERM.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/cascade-kafka/cascade/cmd/cascade-bench/internal/bench"
	"github.com/cascade-kafka/cascade/matrix/apachekafka"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cascade-bench:", err)
		os.Exit(1)
	}
}

// props collects repeated key=value flags.
type props map[string]string

func (p props) String() string { return fmt.Sprint(map[string]string(p)) }
func (p props) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not key=value", v)
	}
	p[k] = val
	return nil
}

const usage = `usage: cascade-bench [flags]             (--bootstrap ADDR or --compare TARGETS)
       cascade-bench html REPORT.json      (the HTML report of a JSON report, on standard output)
       cascade-bench kfake-serve           (the kfake helper process)
`

func run(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "kfake-serve" {
		return bench.ServeKfake(ctx, os.Stdout)
	}
	if len(args) > 0 && args[0] == "html" {
		return htmlFromJSON(args[1:])
	}
	w := bench.DefaultWorkload()
	fs := flag.NewFlagSet("cascade-bench", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage); fs.PrintDefaults() }
	bootstrap := fs.String("bootstrap", "", "bootstrap address of a running broker to benchmark (host:port)")
	compare := fs.String("compare", "", "comma-separated targets the tool starts itself: cascade, apache-kafka, kfake")
	fs.Int64Var(&w.Records, "records", w.Records, "records to produce and consume per run")
	fs.IntVar(&w.PayloadBytes, "payload-bytes", w.PayloadBytes, "size of each record value")
	fs.IntVar(&w.Partitions, "partitions", w.Partitions, "partitions of the benchmark topic")
	fs.IntVar(&w.Producers, "producers", w.Producers, "producer clients")
	fs.IntVar(&w.Consumers, "consumers", w.Consumers, "consumer clients")
	fs.StringVar(&w.Compression, "compression", w.Compression, "compression.type: none, gzip, snappy, lz4, zstd")
	fs.StringVar(&w.Acks, "acks", w.Acks, "acks: all, 1, 0")
	fs.IntVar(&w.LingerMs, "linger-ms", w.LingerMs, "linger.ms")
	fs.IntVar(&w.BatchBytes, "batch-bytes", w.BatchBytes, "batch.size: most bytes per partition batch")
	fs.IntVar(&w.FetchSize, "fetch-size", w.FetchSize, "consumers' max.partition.fetch.bytes (kafka-consumer-perf-test's --fetch-size)")
	fs.Float64Var(&w.Rate, "rate", 0, "offered records/s over all producers, for latency runs; 0 = as fast as possible")
	fs.StringVar(&w.Client, "client", w.Client, "client: franz-go, confluent-kafka-go, or raw (prebuilt batches replayed, fetched batches checked by header and CRC: next to no client CPU)")
	fs.IntVar(&w.FlushMs, "flush-ms", 0, "periodic fsync interval for brokers the tool starts (log.flush.interval.ms); 0 = Kafka's default")
	fs.Int64Var(&w.WarmupRecords, "warmup-records", 0, "records produced and consumed on a separate topic before each measured run (warms a JIT)")
	fs.Uint64Var(&w.Seed, "seed", w.Seed, "payload seed")
	fs.IntVar(&w.Nodes, "nodes", w.Nodes, "nodes of each target the tool starts (cascade, apache-kafka): above 1, a cluster of combined broker-controller nodes on loopback")
	fs.IntVar(&w.ReplicationFactor, "replication-factor", 0, "replication factor of the benchmark topic; 0 = the cluster's default")
	fs.IntVar(&w.MinInsyncReplicas, "min-insync-replicas", 0, "min.insync.replicas of the benchmark topic; 0 = the cluster's default")
	fs.DurationVar(&w.Timeout, "timeout", w.Timeout, "bound on each phase (produce, consume) of a run")
	keep := fs.Bool("keep-data", false, "keep the benchmark topic and the started brokers' data dirs")
	rounds := fs.Int("rounds", 0, "rounds per target (default 3 with --compare, else 1)")
	jsonPath := fs.String("json", "cascade-bench.json", "where to write the JSON report; - for standard output")
	htmlPath := fs.String("html", "cascade-bench.html", "where to write the HTML report (bars per target, every run); empty for none")
	workDir := fs.String("work-dir", "", "directory for started brokers' data and the disk probe (default a new temporary directory)")
	cascadeBin := fs.String("cascade-bin", "", "Cascade binary to run (default: go build ./cmd/cascade of the enclosing module)")
	cascadeOv, kafkaOv := props{}, props{}
	fs.Var(cascadeOv, "cascade-override", "extra Cascade property `key=value`; repeatable")
	fs.Var(kafkaOv, "kafka-override", "extra Apache Kafka property `key=value`; repeatable")
	diskProbe := fs.Int64("disk-probe-bytes", 256<<20, "bytes the disk write probe writes each round")
	diskSyncEvery := fs.Int64("disk-probe-sync-every", bench.DefaultSyncEveryBytes, "bytes between the fsyncs of the disk probe's flushed pass")
	noLimits := fs.Bool("no-limits", false, "skip measuring disk and loopback throughput")
	every := fs.Duration("progress", 2*time.Second, "interval of progress lines on standard error; 0 disables")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the load tool itself (the clients) to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if err := w.Validate(); err != nil {
		return err
	}
	if (*bootstrap == "") == (*compare == "") {
		return errors.New("give exactly one of --bootstrap and --compare")
	}
	if *rounds == 0 {
		*rounds = 1
		if *compare != "" {
			*rounds = 3
		}
	}
	logf := func(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	wd := *workDir
	if wd == "" {
		d, err := os.MkdirTemp("", "cascade-bench-")
		if err != nil {
			return err
		}
		wd = d
		if !*keep {
			defer os.RemoveAll(wd)
		}
	} else if err := os.MkdirAll(wd, 0o755); err != nil {
		return err
	}

	var targets []bench.Target
	if *bootstrap != "" {
		targets = []bench.Target{bench.External{Addr: *bootstrap}}
	} else {
		for _, name := range strings.Split(*compare, ",") {
			t, err := makeTarget(ctx, strings.TrimSpace(name), wd, w, *cascadeBin, cascadeOv, kafkaOv, *keep, logf)
			if err != nil {
				return err
			}
			targets = append(targets, t)
		}
	}
	opts := bench.CompareOptions{
		Options: bench.Options{Progress: os.Stderr, ProgressEvery: *every, KeepTopic: *keep, PlantLoss: -1},
		Rounds:  *rounds, DiskProbeBytes: *diskProbe, DiskSyncEveryBytes: *diskSyncEvery, Log: logf,
	}
	if *compare != "" && !*noLimits {
		opts.LimitsDir = wd
	}
	logf("workload: %s; %d round(s); work dir %s", w, *rounds, wd)
	rep, runErr := bench.Compare(ctx, targets, w, opts)
	if rep == nil {
		return runErr
	}
	fmt.Println()
	if err := bench.WriteTable(os.Stdout, rep); err != nil {
		return err
	}
	if err := writeJSON(*jsonPath, rep); err != nil {
		return errors.Join(runErr, err)
	}
	if err := writeHTML(*htmlPath, rep); err != nil {
		return errors.Join(runErr, err)
	}
	if runErr != nil {
		return runErr
	}
	for _, r := range rep.Runs {
		if !r.Verified {
			return fmt.Errorf("%s round %d: not every record was consumed exactly once", r.Target, r.Round)
		}
	}
	return nil
}

func makeTarget(ctx context.Context, name, wd string, w bench.Workload, bin string, cascadeOv, kafkaOv props, keep bool, logf func(string, ...any)) (bench.Target, error) {
	switch name {
	case "cascade":
		if bin == "" {
			var err error
			if bin, err = buildCascade(ctx, wd); err != nil {
				return nil, err
			}
		}
		return bench.Cascade{Bin: bin, WorkDir: wd, FlushMs: w.FlushMs, Overrides: cascadeOv, KeepData: keep, Nodes: w.Nodes}, nil
	case "apache-kafka":
		logf("resolving Apache Kafka jars (first use downloads them from Maven Central)...")
		d, err := apachekafka.Ensure(ctx)
		if err != nil {
			return nil, err
		}
		return bench.ApacheKafka{Dist: d, WorkDir: wd, FlushMs: w.FlushMs, Overrides: kafkaOv, KeepData: keep, Nodes: w.Nodes}, nil
	case "kfake":
		if w.Nodes > 1 {
			return nil, fmt.Errorf("kfake runs one node; --nodes %d applies to cascade and apache-kafka", w.Nodes)
		}
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		return bench.Kfake{Exe: exe, Args: []string{"kfake-serve"}, WorkDir: wd}, nil
	}
	return nil, fmt.Errorf("unknown target %q (want cascade, apache-kafka or kfake)", name)
}

// buildCascade builds ./cmd/cascade of the module enclosing the working
// directory into dir.
func buildCascade(ctx context.Context, dir string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "cascade")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/cascade")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building cascade: %w\n%s", err, out)
	}
	return bin, nil
}

// moduleRoot finds the Cascade module above the working directory.
func moduleRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		f, err := os.Open(filepath.Join(d, "go.mod"))
		if err == nil {
			sc := bufio.NewScanner(f)
			first := ""
			if sc.Scan() {
				first = strings.TrimSpace(sc.Text())
			}
			f.Close()
			if first == "module github.com/cascade-kafka/cascade" {
				return d, nil
			}
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", errors.New("not inside the Cascade module: run from the checkout or pass --cascade-bin")
		}
		d = parent
	}
}

// htmlFromJSON writes the HTML report of an earlier run's JSON report.
func htmlFromJSON(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: cascade-bench html REPORT.json")
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	var rep bench.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	return bench.WriteHTML(os.Stdout, &rep)
}

func writeHTML(path string, rep *bench.Report) error {
	if path == "" {
		return nil
	}
	var b bytes.Buffer
	if err := bench.WriteHTML(&b, rep); err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "HTML report: %s\n", path)
	return nil
}

func writeJSON(path string, rep *bench.Report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = os.Stdout.Write(b)
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "JSON report: %s\n", path)
	return nil
}

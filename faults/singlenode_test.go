package faults

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/faults/proxy"
	lin "github.com/cascade-kafka/cascade/linearizability"
	"github.com/cascade-kafka/cascade/matrix/apachekafka"
)

var (
	flagSeed     = flag.Uint64("faults.seed", 0, "seed of the fault schedule and proxy (0: from the clock)")
	flagDuration = flag.Duration("faults.duration", 12*time.Second, "how long faults rotate (a soak: 10m)")
	flagPeriod   = flag.Duration("faults.period", 1500*time.Millisecond, "how long each fault lasts")
	flagKeep     = flag.Bool("faults.keep", false, "keep the artifacts of a passing run too")
	flagKafka    = flag.Bool("faults.kafka", false, "also run the suite against Apache Kafka (the oracle)")
)

// run is one suite run against target, with artifacts in dir.
type run struct {
	t       *testing.T
	seed    uint64
	dir     string
	target  Target
	logPath string
	faults  []Fault
}

func seed() uint64 {
	if *flagSeed != 0 {
		return *flagSeed
	}
	return uint64(time.Now().UnixNano())%1_000_000 + 1
}

func TestSingleNodeCascade(t *testing.T) {
	if testing.Short() {
		t.Skip("fault suite: builds and crashes a broker")
	}
	s := seed()
	dir, err := os.MkdirTemp("", "cascade-faults-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *flagDuration+2*time.Minute)
	defer cancel()
	bin, err := BuildCascade(ctx, "..", dir)
	if err != nil {
		t.Fatal(err)
	}
	proc := &Process{Bin: bin, DataDir: filepath.Join(dir, "data"), LogPath: filepath.Join(dir, "broker.log"),
		Overrides: map[string]string{"log.flush.interval.messages": "1"}}
	if err := proc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer proc.Kill() // after a t.Fatal; a no-op after Stop
	r := &run{t: t, seed: s, dir: dir, target: proc, logPath: proc.LogPath, faults: []Fault{CrashFault(proc)}}
	keep := r.run(ctx)
	if err := proc.Stop(); err != nil {
		t.Errorf("stopping cascade: %v (log %s)", err, proc.LogPath)
		keep = true
	}
	r.cleanup(keep)
}

func TestSingleNodeKafka(t *testing.T) {
	if testing.Short() || !*flagKafka {
		t.Skip("the oracle run needs -faults.kafka")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *flagDuration+5*time.Minute)
	defer cancel()
	dist, err := apachekafka.Ensure(ctx)
	if errors.Is(err, apachekafka.ErrToolMissing) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "kafka-faults-")
	if err != nil {
		t.Fatal(err)
	}
	b, err := dist.StartBroker(ctx, apachekafka.BrokerOptions{Dir: filepath.Join(dir, "kafka"),
		Overrides: map[string]string{"log.flush.interval.messages": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop() // after a t.Fatal; Stop returns its first result again
	r := &run{t: t, seed: seed(), dir: dir, target: kafkaTarget{b}, logPath: b.LogPath()}
	keep := r.run(ctx)
	if err := b.Stop(); err != nil {
		t.Logf("stopping kafka: %v", err)
	}
	r.cleanup(keep)
}

// cleanup removes the artifacts unless they are to be kept.
func (r *run) cleanup(keep bool) {
	if keep || *flagKeep || r.t.Failed() {
		r.t.Logf("artifacts kept in %s", r.dir)
		return
	}
	if err := os.RemoveAll(r.dir); err != nil {
		r.t.Logf("removing artifacts: %v", err)
	}
}

// kafkaTarget is Apache Kafka, which the suite does not crash: the matrix's
// launcher formats a fresh log dir on every start.
type kafkaTarget struct{ b *apachekafka.Broker }

func (k kafkaTarget) Addr() string                { return k.b.Addr() }
func (k kafkaTarget) Crash(context.Context) error { return ErrUnsupported }

// run runs the workload under rotating faults, drains, checks, and
// reports whether the artifacts must be kept.
func (r *run) run(ctx context.Context) (keep bool) {
	t := r.t
	t.Logf("seed %d (replay: -faults.seed=%d); artifacts in %s", r.seed, r.seed, r.dir)
	const topic, partitions = "faults", 3
	adm, err := kgo.NewClient(kgo.SeedBrokers(r.target.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := kadm.NewClient(adm).CreateTopic(ctx, partitions, 1, nil, topic)
	adm.Close()
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic: %v", err)
	}

	g := proxy.NewGroup(proxy.Options{Seed: r.seed})
	defer g.Close()
	p, err := g.Add("broker", "127.0.0.1:0", r.target.Addr())
	if err != nil {
		t.Fatal(err)
	}
	histPath := filepath.Join(r.dir, "history.jsonl")
	hf, err := os.Create(histPath)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriter(hf)
	rec := lin.NewRecorder(bw)
	w := &Workload{Bootstrap: p.Addr(), Topic: topic, Partitions: partitions, Producers: 3, Consumers: 2,
		Group: "faults-group", Rec: rec, Seed: r.seed}

	var flog strings.Builder
	sched := &Schedule{Faults: append(ProxyFaults(p), r.faults...), Seed: r.seed, Period: *flagPeriod, Log: &flog}
	runCtx, stop := context.WithTimeout(ctx, *flagDuration)
	defer stop()
	var wg sync.WaitGroup
	var werr, serr error
	var applied []string
	wg.Add(2)
	go func() { defer wg.Done(); werr = w.Run(runCtx) }()
	go func() { defer wg.Done(); applied, serr = sched.Run(runCtx) }()
	wg.Wait()
	if err := errors.Join(werr, serr, g.Reset()); err != nil {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithTimeout(ctx, time.Minute)
	derr := w.Drain(dctx)
	dcancel()
	if err := errors.Join(bw.Flush(), hf.Close()); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	t.Logf("faults: %s", strings.Join(applied, " "))
	t.Logf("%d produces, %d acknowledged, %d operations recorded", st.Produced, st.Acked, rec.Len())
	if derr != nil {
		t.Errorf("drain: %v", derr)
	}

	h, err := lin.ReadFile(histPath)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := lin.Check(h, lin.Options{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("check: %s", strings.TrimSpace(rep.Summary()))
	if st.Acked == 0 {
		t.Errorf("no produce was acknowledged")
	}
	if !rep.Valid() || derr != nil || t.Failed() {
		if rep.Failing != "" {
			html := filepath.Join(r.dir, "porcupine.html")
			f, err := os.Create(html)
			if err == nil {
				err = errors.Join(lin.Visualize(h, rep.Failing, 30*time.Second, f), f.Close())
			}
			if err != nil {
				t.Logf("visualization: %v", err)
			}
		}
		t.Errorf("seed %d failed; artifacts in %s (history.jsonl, %s, porcupine.html)", r.seed, r.dir, filepath.Base(r.logPath))
		return true
	}
	return false
}

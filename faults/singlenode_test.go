package faults

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/faults/proxy"
	lin "github.com/cascade-kafka/cascade/linearizability"
	"github.com/cascade-kafka/cascade/matrix/apachekafka"
	"github.com/cascade-kafka/cascade/matrix/clients/java"
	"github.com/cascade-kafka/cascade/matrix/clients/provision"
	"github.com/cascade-kafka/cascade/matrix/driver"
)

var (
	flagSeed     = flag.Uint64("faults.seed", 0, "seed of the fault schedule and proxy (0: from the clock)")
	flagDuration = flag.Duration("faults.duration", 25*time.Second, "how long faults rotate in the bounded run")
	flagSoak     = flag.Duration("faults.soak", 0, "a soak: rotate faults this long instead of -faults.duration (e.g. 10m)")
	flagPeriod   = flag.Duration("faults.period", 1500*time.Millisecond, "how long each fault lasts")
	flagKeep     = flag.Bool("faults.keep", false, "keep the artifacts of a passing run too")
	flagKafka    = flag.Bool("faults.kafka", true, "also run the suite against Apache Kafka (the oracle) when java and mvn are installed")
	flagBin      = flag.String("faults.cascade", "", "run this cascade binary instead of building ./cmd/cascade")
	flagTxn      = flag.Bool("faults.txn", true, "run the transactional producers and read_committed consumers (-faults.txn=false leaves them out)")
	flagJava     = flag.Bool("faults.java", true, "run Java clients (the matrix's Java driver) when java and mvn are installed")
)

// faultTime is how long faults rotate: the soak when one is asked for.
func faultTime() time.Duration {
	if *flagSoak > 0 {
		return *flagSoak
	}
	return *flagDuration
}

// run is one suite run against target, with artifacts in dir.
type run struct {
	t    *testing.T
	seed uint64
	dir  string
	// addrs are the brokers' addresses; the clients reach each through
	// a proxy of one group.
	addrs []string
	// logPaths and dataDirs are every node's log file and log dir.
	logPaths []string
	dataDirs []string
	// faults are the target's own; proxyFaults adds the proxy's faults
	// on the first broker's proxy.
	faults      []Fault
	proxyFaults bool
	// rf is the watched topic's replication factor (zero: 1).
	rf int16
	// schedule, when set, adjusts the schedule before it runs.
	schedule func(*Schedule)
	// progress copies the schedule's log to the test log as it goes, for
	// runs long enough that someone watches them.
	progress bool
	// faultTime, when set, bounds the schedule instead of faultTime():
	// a schedule of Rounds ends when they are done.
	faultTime time.Duration
	// observe, when set, starts watching the target with the history's
	// clock while the workload runs; the function it returns stops it.
	observe func(ctx context.Context, clock func() int64) (stop func())
	// After run: the history, the schedule's events and the check's
	// verdict.
	h      []lin.Op
	events []FaultEvent
	passed bool
	java   driver.Opener
	// name is the target's name in the liveness report.
	name string
	// kafkaDefects is set for Apache Kafka only: its anomalies that its
	// skipped transaction markers explain (kafkadefect.go) are reported as
	// a defect reproduced instead of failing the run.
	kafkaDefects bool
}

func seed() uint64 {
	if *flagSeed != 0 {
		return *flagSeed
	}
	return uint64(time.Now().UnixNano())%1_000_000 + 1
}

// javaOpener builds the matrix's Java driver, or returns nil (with the
// reason logged) when it is switched off or its tools are not installed.
func javaOpener(t *testing.T, ctx context.Context) driver.Opener {
	if !*flagJava {
		t.Log("Java clients off (-faults.java=false)")
		return nil
	}
	b, err := java.Ensure(ctx)
	if errors.Is(err, provision.ErrToolMissing) {
		t.Logf("running without Java clients: %v", err)
		return nil
	}
	if err != nil {
		t.Fatalf("building the Java driver: %v", err)
	}
	return driver.ProcessOpener(b.Spec())
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
	ctx, cancel := context.WithTimeout(context.Background(), faultTime()+4*time.Minute)
	defer cancel()
	bin := *flagBin
	if bin == "" {
		if bin, err = BuildCascade(ctx, "..", dir); err != nil {
			os.RemoveAll(dir) // nothing ran: no artifacts to keep
			t.Fatal(err)
		}
	}
	jv := javaOpener(t, ctx)
	proc := &Process{Bin: bin, DataDir: filepath.Join(dir, "data"), LogPath: filepath.Join(dir, "broker.log"),
		Overrides: map[string]string{"log.flush.interval.messages": "1", txnAbortIntervalKey: txnAbortInterval,
			// As matrix/apachekafka starts the oracle: members join
			// without Kafka's 3 s wait for more members.
			"group.initial.rebalance.delay.ms": "0"}}
	if err := proc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer proc.Kill() // after a t.Fatal; a no-op after Stop
	r := &run{t: t, seed: s, dir: dir, addrs: []string{proc.Addr()}, logPaths: []string{proc.LogPath},
		dataDirs: []string{proc.DataDir}, name: "Cascade", proxyFaults: true,
		faults: []Fault{CrashFault(proc), PauseFault(proc, s)}, java: jv}
	keep := r.run(ctx)
	if err := proc.Stop(); err != nil {
		t.Errorf("stopping cascade: %v (log %s)", err, proc.LogPath)
		keep = true
	}
	r.cleanup(keep)
}

func TestSingleNodeKafka(t *testing.T) {
	if testing.Short() || !*flagKafka {
		t.Skip("the oracle run is off (-short or -faults.kafka=false)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), faultTime()+6*time.Minute)
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
	jv := javaOpener(t, ctx)
	// Per-message fsync, as Cascade runs: nothing acknowledged may be lost
	// to a SIGKILL. A short broker session lets the restarted broker
	// register again soon: the controller refuses a new incarnation with
	// DUPLICATE_BROKER_REGISTRATION until the killed one's session
	// (broker.session.timeout.ms, 9 s by default) has expired.
	b, err := dist.StartBroker(ctx, apachekafka.BrokerOptions{Dir: filepath.Join(dir, "kafka"),
		Overrides: map[string]string{
			"log.flush.interval.messages":  "1",
			"broker.session.timeout.ms":    "2000",
			"broker.heartbeat.interval.ms": "500",
			txnAbortIntervalKey:            txnAbortInterval,
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop() // after a t.Fatal; Stop returns its first result again
	k := Kafka{Broker: b}
	s := seed()
	r := &run{t: t, seed: s, dir: dir, addrs: []string{k.Addr()}, logPaths: []string{b.LogPath()},
		dataDirs: []string{b.DataDir()}, proxyFaults: true,
		faults: []Fault{CrashFault(k), PauseFault(k, s)}, java: jv, name: "Apache Kafka " + dist.Version(),
		kafkaDefects: true}
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

// lockedWriter serialises writes of several goroutines to one file.
type lockedWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Flush()
}

// createLog creates an artifact file written through a lockedWriter; close
// flushes and closes it.
func createLog(path string) (*lockedWriter, func() error, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	lw := &lockedWriter{w: bufio.NewWriter(f)}
	return lw, func() error { return errors.Join(lw.Flush(), f.Close()) }, nil
}

// run runs the workload under rotating faults, drains, checks, and
// reports whether the artifacts must be kept.
func (r *run) run(ctx context.Context) (keep bool) {
	t := r.t
	ft := faultTime()
	if r.faultTime > 0 {
		ft = r.faultTime
	}
	t.Logf("seed %d (replay: -faults.seed=%d); faults for up to %v; artifacts in %s", r.seed, r.seed, ft, r.dir)
	const topic, partitions = "faults", 3
	adm, err := kgo.NewClient(kgo.SeedBrokers(r.addrs...))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := kadm.NewClient(adm).CreateTopic(ctx, partitions, max(r.rf, 1), nil, topic)
	adm.Close()
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic: %v", err)
	}

	g := proxy.NewGroup(proxy.Options{Seed: r.seed})
	defer g.Close()
	var bootstrap []string
	var p *proxy.Proxy
	for i, addr := range r.addrs {
		name := "broker"
		if len(r.addrs) > 1 {
			name = fmt.Sprintf("broker-%d", i+1)
		}
		bp, err := g.Add(name, "127.0.0.1:0", addr)
		if err != nil {
			t.Fatal(err)
		}
		if p == nil {
			p = bp
		}
		bootstrap = append(bootstrap, bp.Addr())
	}
	histPath := filepath.Join(r.dir, "history.jsonl")
	hist, closeHist, err := createLog(histPath)
	if err != nil {
		t.Fatal(err)
	}
	clients, closeClients, err := createLog(filepath.Join(r.dir, "clients.log"))
	if err != nil {
		t.Fatal(err)
	}
	faultLog, closeFaults, err := createLog(filepath.Join(r.dir, "faults.log"))
	if err != nil {
		t.Fatal(err)
	}
	rec := lin.NewRecorder(hist)
	clock := ClockAnchor{Wall: time.Now(), Ns: rec.Now()}
	w := &Workload{Bootstrap: strings.Join(bootstrap, ","), Topic: topic, Partitions: partitions,
		Producers: 2, Consumers: 2, ConfluentProducers: 2,
		Group: "faults-group", Rec: rec, Seed: r.seed, ClientLog: clients,
		GroupConsumers: 2, MemberGroup: "faults-members"}
	if r.java != nil {
		w.Java, w.JavaProducers, w.JavaConsumers = r.java, 1, 1
	}
	if *flagTxn {
		w.TxnProducers = 2
	}

	faults := r.faults
	if r.proxyFaults {
		faults = append(ProxyFaults(p), faults...)
	}
	sched := &Schedule{Faults: faults, Seed: r.seed, Period: *flagPeriod, MaxConcurrent: 2,
		Log: faultLog, Clock: rec.Now}
	if r.schedule != nil {
		r.schedule(sched)
	}
	if r.progress {
		sched.Log = io.MultiWriter(faultLog, &testLog{t: t})
	}
	schedCtx, stopSched := context.WithTimeout(ctx, ft)
	defer stopSched()
	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	var wg sync.WaitGroup
	var werr error
	wg.Add(1)
	go func() { defer wg.Done(); werr = w.Run(workCtx) }()
	stopObserving := func() {}
	if r.observe != nil {
		stopObserving = r.observe(workCtx, rec.Now)
	}
	applied, serr := sched.Run(schedCtx)
	// The schedule has healed everything: the workload runs on until
	// every client has succeeded again (or the bound has passed, which
	// Liveness then reports as a stuck client).
	finalHeal := rec.Now()
	waitRecovered(workCtx, rec, finalHeal, livenessBound)
	stopObserving()
	stopWork()
	wg.Wait()
	if err := errors.Join(werr, serr, g.Reset()); err != nil {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithTimeout(ctx, time.Minute)
	derr := w.Drain(dctx)
	dcancel()
	if err := errors.Join(closeHist(), closeClients(), closeFaults()); err != nil {
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
	// The porcupine search grows with the history; a soak gets longer.
	rep, err := lin.Check(h, lin.Options{Timeout: max(30*time.Second, ft/2)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("operations by client kind:\n%s", summarize(h))
	t.Logf("check: %s", strings.TrimSpace(rep.Summary()))
	r.h, r.events = h, sched.Events()
	lv := Liveness(h, r.events, finalHeal, livenessBound)
	md := lv.Markdown(r.name)
	if err := os.WriteFile(filepath.Join(r.dir, "liveness.md"), []byte(md), 0o644); err != nil {
		t.Errorf("writing liveness.md: %v", err)
	}
	t.Logf("liveness (also in %s):\n%s", filepath.Join(r.dir, "liveness.md"), md)
	for _, s := range lv.Stuck {
		t.Errorf("stuck client: %s; the bound after the final heal at %.1f s is %v", s, float64(finalHeal)/1e9, livenessBound)
	}
	if n := lv.Lag["drain"]; n > 0 {
		t.Errorf("%d acknowledged writes not read by the end of the drain", n)
	}
	if n := assignments(h); w.GroupConsumers > 0 && n == 0 {
		t.Errorf("no group assignment recorded: the double_owner check ran on nothing")
	} else {
		t.Logf("%d group assignments recorded", n)
	}
	for _, c := range []string{"producer-", "confluent-", "txn-producer-", "java-producer-"} {
		if (w.JavaProducers == 0 && c == "java-producer-") || (w.TxnProducers == 0 && c == "txn-producer-") {
			continue
		}
		if n := acked(h, c); n == 0 {
			t.Errorf("no %s* produce was acknowledged", c)
		}
	}
	valid, known := r.judge(h, rep, clock)
	if len(known) > 0 {
		// A reproduced defect is evidence, not a pass: its artifacts stay.
		keep = true
	}
	if !valid {
		r.explainSkippedMarkers()
	}
	r.passed = valid && derr == nil && !t.Failed()
	if !r.passed {
		r.keepArtifacts(h, rep)
		t.Errorf("seed %d failed; artifacts in %s (history.jsonl, faults.log, clients.log, %s, datadir.txt, porcupine.html)",
			r.seed, r.dir, logNames(r.logPaths))
		return true
	}
	return keep
}

// judge decides whether the check's report fails the run. For Apache
// Kafka the anomalies its skipped transaction markers explain are written
// to findings.md and the test log as a reproduced Kafka defect; every
// other anomaly, and any dropped past the report's cap (which cannot be
// matched), fails the run. Cascade gets no allowance.
func (r *run) judge(h []lin.Op, rep *lin.Report, clock ClockAnchor) (valid bool, known []KnownDefect) {
	t := r.t
	rest := rep.Anomalies
	if r.kafkaDefects && len(rest) > 0 {
		var lines []SkippedMarkers
		for _, path := range r.logPaths {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("reading the broker log to match anomalies: %v", err)
				return false, nil
			}
			ls, err := ParseSkippedMarkers(b, time.Local)
			if err != nil {
				t.Errorf("matching anomalies with the broker log %s: %v", path, err)
				return false, nil
			}
			lines = append(lines, ls...)
		}
		known, rest = ExplainSkippedMarkers(h, rep, lines, clock)
	}
	if r.kafkaDefects {
		md := FindingsMarkdown(r.name, known)
		if err := os.WriteFile(filepath.Join(r.dir, "findings.md"), []byte(md), 0o644); err != nil {
			t.Errorf("writing findings.md: %v", err)
		}
		for _, d := range known {
			t.Logf("APACHE KAFKA DEFECT REPRODUCED (skipped transaction markers, see findings.md): %s", d)
		}
	}
	dropped := 0
	for k, n := range rep.Dropped {
		if k != lin.KindUnseen {
			dropped += n
		}
	}
	if len(known) > 0 {
		t.Logf("%d of %d anomalies are Apache Kafka's skipped-marker defect; %d unexplained, %d dropped unmatched",
			len(known), len(rep.Anomalies), len(rest), dropped)
	}
	return len(rest) == 0 && dropped == 0, known
}

// livenessBound is how long a client may go without a successful
// operation after the final heal before the run fails it as stuck. What
// Apache Kafka needs sets it: a request sent into a stall (the proxy's
// blackhole drops it) is only given up at the client's request timeout,
// for franz-go's producers the produce timeout (10 s) plus the request
// overhead (2 s), so clients took up to 8.3 s after the final heal in
// the oracle runs; 20 s leaves room without hiding a client that never
// comes back.
const livenessBound = 20 * time.Second

// waitRecovered waits until every client that had succeeded by finalHeal
// has succeeded again since, or bound has passed, or ctx is done.
func waitRecovered(ctx context.Context, rec *lin.Recorder, finalHeal int64, bound time.Duration) {
	before := rec.Progress()
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		now := rec.Progress()
		all := true
		for c := range before {
			all = all && now[c] > finalHeal
		}
		if all {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// assignments counts the acknowledged group assignments in h.
func assignments(h []lin.Op) int {
	n := 0
	for _, o := range h {
		if o.Op == lin.OpAssignment && o.Outcome == lin.OutcomeOK {
			n++
		}
	}
	return n
}

// summarize counts operations per client kind (the client name without
// its number), op and outcome, one line per kind.
func summarize(h []lin.Op) string {
	type key struct{ kind, op string }
	counts := map[key]map[string]int{}
	var keys []key
	for _, o := range h {
		kind := o.Client
		if i := strings.LastIndexByte(kind, '-'); i > 0 {
			kind = kind[:i]
		}
		k := key{kind, o.Op}
		if counts[k] == nil {
			counts[k] = map[string]int{}
			keys = append(keys, k)
		}
		counts[k][o.Outcome]++
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].kind != keys[j].kind {
			return keys[i].kind < keys[j].kind
		}
		return keys[i].op < keys[j].op
	})
	var b strings.Builder
	for _, k := range keys {
		c := counts[k]
		fmt.Fprintf(&b, "  %-16s %-16s ok %6d  unknown %5d  fail %5d\n", k.kind, k.op,
			c[lin.OutcomeOK], c[lin.OutcomeUnknown], c[lin.OutcomeFail])
	}
	return b.String()
}

// acked counts the acknowledged produces of clients named with prefix.
func acked(h []lin.Op, prefix string) int {
	n := 0
	for _, o := range h {
		if o.Op == lin.OpProduce && o.Outcome == lin.OutcomeOK && strings.HasPrefix(o.Client, prefix) {
			n++
		}
	}
	return n
}

// explainSkippedMarkers logs the broker's skipped-marker lines, if any,
// next to a failing check, so an aborted_read or mixed_outcome of the
// oracle is traced to the coordinator rather than to the checker.
func (r *run) explainSkippedMarkers() {
	var lines []string
	for _, path := range r.logPaths {
		b, err := os.ReadFile(path)
		if err != nil {
			r.t.Logf("reading the broker log: %v", err)
			return
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, skippedMarkers) {
				lines = append(lines, l)
			}
		}
	}
	if len(lines) > 0 {
		r.t.Logf("the broker skipped transaction markers %d times (records of those transactions stay open until the producer's next marker, which may commit them):\n%s",
			len(lines), strings.Join(lines, "\n"))
	}
}

// keepArtifacts writes what a failing run leaves besides the history and
// logs: porcupine's visualization of the failing partition and a listing
// of the broker's data dir.
func (r *run) keepArtifacts(h []lin.Op, rep *lin.Report) {
	t := r.t
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
	f, err := os.Create(filepath.Join(r.dir, "datadir.txt"))
	if err == nil {
		for _, dir := range r.dataDirs {
			fmt.Fprintf(f, "%s\n", dir)
			err = errors.Join(err, WriteListing(f, dir))
		}
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		t.Logf("data dir listing: %v", err)
	}
}

// logNames names the nodes' log files for a failure message: the base
// name of one, the paths of several.
func logNames(paths []string) string {
	if len(paths) == 1 {
		return filepath.Base(paths[0])
	}
	return strings.Join(paths, ", ")
}

// testLog writes each complete line it is given to a test's log.
type testLog struct {
	t       *testing.T
	mu      sync.Mutex
	partial []byte
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.t.Log(string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
}

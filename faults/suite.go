package faults

import (
	"bufio"
	"bytes"
	"context"
	"errors"
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
	"github.com/cascade-kafka/cascade/matrix/clients/java"
	"github.com/cascade-kafka/cascade/matrix/clients/provision"
	"github.com/cascade-kafka/cascade/matrix/driver"
)

// Suite is one run of a fault suite against one target: a workload of
// several client libraries through one proxy per broker, a schedule of
// faults, then the drain, the history checks and the liveness report,
// with artifacts in Dir. The single-node and cluster suites' tests fill
// it in and call Run.
type Suite struct {
	T    testing.TB
	Seed uint64
	Dir  string
	// Addrs are the brokers' addresses; the clients reach each through
	// a proxy of one group.
	Addrs []string
	// LogPaths and DataDirs are every node's log file and log dir.
	LogPaths []string
	DataDirs []string
	// Faults are the target's own; WithProxyFaults adds the proxy's faults
	// on the first broker's proxy.
	Faults          []Fault
	WithProxyFaults bool
	// RF is the watched topic's replication factor (zero: 1).
	RF int16
	// Adjust, when set, adjusts the schedule before it runs.
	Adjust func(*Schedule)
	// Progress copies the schedule's log to the test log as it goes, for
	// runs long enough that someone watches them.
	Progress bool
	// FaultTime bounds the schedule (a schedule of Rounds may end
	// sooner); Period is each fault set's length.
	FaultTime, Period time.Duration
	// Txn adds the transactional producers and read_committed consumers;
	// Keep keeps the artifacts of a passing run too.
	Txn, Keep bool
	// Observe, when set, starts watching the target with the history's
	// clock while the workload runs; the function it returns stops it.
	Observe func(ctx context.Context, clock func() int64) (stop func())
	// After run: the history, the schedule's events and the check's
	// verdict.
	History []lin.Op
	Events  []FaultEvent
	Passed  bool
	Java    driver.Opener
	// Name is the target's name in the liveness report.
	Name string
	// Workload, when set, adjusts the workload before it runs.
	Workload func(*Workload)
	// Control marks a negative control: a run on settings that must lose
	// acknowledged writes. Its anomalies and unread acknowledged writes
	// are kept in Report and logged rather than failing the test, which
	// asserts what they must be.
	Control bool
	// Report is the history check's report, and Delivery Kafka's
	// delivery rule applied to the history, after Run.
	Report   *lin.Report
	Delivery Delivery
	// StaleReads lets high watermarks trail the log in the check, as a
	// cluster's do (linearizability.Options.StaleReads).
	StaleReads bool
	// Copiers adds consume-transform-produce loops copying the topic
	// exactly once (Workload.Copiers), checked after the drain.
	Copiers int
	// KafkaDefects is set for Apache Kafka only: its anomalies that its
	// skipped transaction markers explain (kafkadefect.go) are reported as
	// a defect reproduced instead of failing the run.
	KafkaDefects bool
}

// Cleanup removes the artifacts unless they are to be kept.
func (r *Suite) Cleanup(keep bool) {
	if keep || r.Keep || r.T.Failed() {
		r.T.Logf("artifacts kept in %s", r.Dir)
		return
	}
	if err := os.RemoveAll(r.Dir); err != nil {
		r.T.Logf("removing artifacts: %v", err)
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

// Run runs the workload under rotating faults, drains, checks, and
// reports whether the artifacts must be kept.
func (r *Suite) Run(ctx context.Context) (keep bool) {
	t := r.T
	ft := r.FaultTime
	t.Logf("seed %d (replay: -faults.seed=%d); faults for up to %v; artifacts in %s", r.Seed, r.Seed, ft, r.Dir)
	const topic, partitions = "faults", 3
	topics := []string{topic}
	if r.Copiers > 0 {
		topics = append(topics, copyTopic)
	}
	adm, err := kgo.NewClient(kgo.SeedBrokers(r.Addrs...))
	if err != nil {
		t.Fatal(err)
	}
	resps, err := kadm.NewClient(adm).CreateTopics(ctx, partitions, max(r.RF, 1), nil, topics...)
	adm.Close()
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Fatalf("creating topics: %v", err)
	}

	g := proxy.NewGroup(proxy.Options{Seed: r.Seed})
	defer g.Close()
	var bootstrap []string
	var p *proxy.Proxy
	for i, addr := range r.Addrs {
		name := "broker"
		if len(r.Addrs) > 1 {
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
	histPath := filepath.Join(r.Dir, "history.jsonl")
	hist, closeHist, err := createLog(histPath)
	if err != nil {
		t.Fatal(err)
	}
	clients, closeClients, err := createLog(filepath.Join(r.Dir, "clients.log"))
	if err != nil {
		t.Fatal(err)
	}
	faultLog, closeFaults, err := createLog(filepath.Join(r.Dir, "faults.log"))
	if err != nil {
		t.Fatal(err)
	}
	rec := lin.NewRecorder(hist)
	clock := ClockAnchor{Wall: time.Now(), Ns: rec.Now()}
	w := &Workload{Bootstrap: strings.Join(bootstrap, ","), Topic: topic, Partitions: partitions,
		Producers: 2, Consumers: 2, ConfluentProducers: 2,
		Group: "faults-group", Rec: rec, Seed: r.Seed, ClientLog: clients,
		GroupConsumers: 2, MemberGroup: "faults-members"}
	if r.Java != nil {
		w.Java, w.JavaProducers, w.JavaConsumers = r.Java, 1, 1
	}
	if r.Txn {
		w.TxnProducers = 2
	}
	w.Copiers, w.CopyTopic = r.Copiers, copyTopic
	if r.Workload != nil {
		r.Workload(w)
	}

	faults := r.Faults
	if r.WithProxyFaults {
		faults = append(ProxyFaults(p), faults...)
	}
	sched := &Schedule{Faults: faults, Seed: r.Seed, Period: r.Period, MaxConcurrent: 2,
		Log: faultLog, Clock: rec.Now}
	if r.Adjust != nil {
		r.Adjust(sched)
	}
	if r.Progress {
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
	if r.Observe != nil {
		stopObserving = r.Observe(workCtx, rec.Now)
	}
	applied, serr := sched.Run(schedCtx)
	// The schedule has healed everything: the workload runs on until
	// every client has succeeded again (or the bound has passed, which
	// Liveness then reports as a stuck client).
	finalHeal := rec.Now()
	waitRecovered(workCtx, rec, finalHeal, livenessBound)
	copyStuck := w.Copiers > 0 && !waitCopied(workCtx, w, finalHeal, livenessBound)
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
	if w.Copiers > 0 {
		r.checkCopies(ctx, w, copyStuck)
	}

	h, err := lin.ReadFile(histPath)
	if err != nil {
		t.Fatal(err)
	}
	// The porcupine search grows with the history; a soak gets longer.
	rep, err := lin.Check(h, lin.Options{Timeout: max(30*time.Second, ft/2), StaleReads: r.StaleReads})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("operations by client kind:\n%s", summarize(h))
	t.Logf("check: %s", strings.TrimSpace(rep.Summary()))
	r.Delivery = ValidateDelivery(h)
	if d := r.Delivery; d.Valid() {
		t.Logf("validate_delivery: %s", d)
	} else if r.Control {
		t.Logf("validate_delivery (negative control): %s", d)
	} else {
		t.Errorf("validate_delivery fails: %s", d)
	}
	r.History, r.Events, r.Report = h, sched.Events(), rep
	lv := Liveness(h, r.Events, finalHeal, livenessBound)
	md := lv.Markdown(r.Name)
	if err := os.WriteFile(filepath.Join(r.Dir, "liveness.md"), []byte(md), 0o644); err != nil {
		t.Errorf("writing liveness.md: %v", err)
	}
	t.Logf("liveness (also in %s):\n%s", filepath.Join(r.Dir, "liveness.md"), md)
	for _, s := range lv.Stuck {
		t.Errorf("stuck client: %s; the bound after the final heal at %.1f s is %v", s, float64(finalHeal)/1e9, livenessBound)
	}
	if n := lv.Lag["drain"]; n > 0 && !r.Control {
		t.Errorf("%d acknowledged writes not read by the end of the drain", n)
	}
	if n := assignments(h); w.GroupConsumers > 0 && n == 0 {
		t.Errorf("no group assignment recorded: the double_owner check ran on nothing")
	} else {
		t.Logf("%d group assignments recorded", n)
	}
	for _, c := range []string{"producer-", "confluent-", "txn-producer-", "java-producer-"} {
		if (w.JavaProducers == 0 && c == "java-producer-") || (w.TxnProducers == 0 && c == "txn-producer-") ||
			(w.ConfluentProducers == 0 && c == "confluent-") || (w.Producers == 0 && c == "producer-") {
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
	r.Passed = valid && derr == nil && !t.Failed()
	if r.Control {
		t.Logf("negative control: the check found %d anomalies", len(rep.Anomalies))
		return true
	}
	if !r.Passed {
		r.keepArtifacts(h, rep)
		t.Errorf("seed %d failed; artifacts in %s (history.jsonl, faults.log, clients.log, %s, datadir.txt, porcupine.html)",
			r.Seed, r.Dir, logNames(r.LogPaths))
		return true
	}
	return keep
}

// judge decides whether the check's report fails the run. For Apache
// Kafka the anomalies its skipped transaction markers explain are written
// to findings.md and the test log as a reproduced Kafka defect; every
// other anomaly, and any dropped past the report's cap (which cannot be
// matched), fails the run. Cascade gets no allowance.
func (r *Suite) judge(h []lin.Op, rep *lin.Report, clock ClockAnchor) (valid bool, known []KnownDefect) {
	t := r.T
	rest := rep.Anomalies
	if r.KafkaDefects && len(rest) > 0 {
		var lines []SkippedMarkers
		for _, path := range r.LogPaths {
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
	if r.KafkaDefects {
		md := FindingsMarkdown(r.Name, known)
		if stale := StaleCommitFindings(h, rep); stale != "" {
			md += "\n" + stale
			t.Logf("APACHE KAFKA ANOMALY (information, see findings.md): %d stale committed-offset reads", rep.Count(lin.KindStaleCommitRead))
		}
		if err := os.WriteFile(filepath.Join(r.Dir, "findings.md"), []byte(md), 0o644); err != nil {
			t.Errorf("writing findings.md: %v", err)
		}
		for _, d := range known {
			t.Logf("APACHE KAFKA DEFECT REPRODUCED (skipped transaction markers, see findings.md): %s", d)
		}
	}
	if n := rep.Count(lin.KindStaleCommitRead); n > 0 && !r.KafkaDefects && !r.Control {
		// Cascade's group coordinator answers OffsetFetch only from
		// state its followers hold: it never reads back an older offset.
		t.Errorf("%d stale committed-offset reads:\n%s", n, StaleCommitFindings(h, rep))
		return false, nil
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
func (r *Suite) explainSkippedMarkers() {
	var lines []string
	for _, path := range r.LogPaths {
		b, err := os.ReadFile(path)
		if err != nil {
			r.T.Logf("reading the broker log: %v", err)
			return
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, skippedMarkers) {
				lines = append(lines, l)
			}
		}
	}
	if len(lines) > 0 {
		r.T.Logf("the broker skipped transaction markers %d times (records of those transactions stay open until the producer's next marker, which may commit them):\n%s",
			len(lines), strings.Join(lines, "\n"))
	}
}

// keepArtifacts writes what a failing run leaves besides the history and
// logs: porcupine's visualization of the failing partition and a listing
// of the broker's data dir.
func (r *Suite) keepArtifacts(h []lin.Op, rep *lin.Report) {
	t := r.T
	if rep.Failing != "" {
		html := filepath.Join(r.Dir, "porcupine.html")
		f, err := os.Create(html)
		if err == nil {
			err = errors.Join(lin.Visualize(h, rep.Failing, lin.Options{Timeout: 30 * time.Second, StaleReads: r.StaleReads}, f), f.Close())
		}
		if err != nil {
			t.Logf("visualization: %v", err)
		}
	}
	f, err := os.Create(filepath.Join(r.Dir, "datadir.txt"))
	if err == nil {
		for _, dir := range r.DataDirs {
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
	t       testing.TB
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

// JavaOpener builds the matrix's Java driver, or returns nil (with the
// reason logged) when on is false or its tools are not installed.
func JavaOpener(t testing.TB, ctx context.Context, on bool) driver.Opener {
	if !on {
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

package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/matrix/apachekafka"
)

// Target is a broker under test. Start gives a fresh broker for one round
// (or, for an external cluster, the same one every time).
type Target interface {
	Name() string
	Start(ctx context.Context, round int) (*Instance, error)
}

// Instance is a broker, or a cluster, the tool reaches over TCP. Pids and
// DataDirs are set only for brokers the tool started, whose CPU, memory
// and disk it can see: one per node.
type Instance struct {
	// Addr is the bootstrap address, a comma list for a cluster.
	Addr     string
	Pids     []int
	DataDirs []string
	// InMemory marks a broker that keeps no data on disk (kfake).
	InMemory bool
	stop     func() error
}

// Seeds returns the bootstrap addresses.
func (i *Instance) Seeds() []string { return strings.Split(i.Addr, ",") }

// procStats returns the CPU time and peak RSS of every node, summed: a
// cluster's cost is all of its processes'.
func (i *Instance) procStats() (ProcStats, error) {
	var sum ProcStats
	for _, pid := range i.Pids {
		ps, err := readProc(pid)
		if err != nil {
			return sum, err
		}
		sum.CPU += ps.CPU
		sum.PeakRSS += ps.PeakRSS
	}
	return sum, nil
}

// Stop stops a broker the tool started; for an external one it does
// nothing.
func (i *Instance) Stop() error {
	if i.stop == nil {
		return nil
	}
	err := i.stop()
	i.stop = nil
	return err
}

// External is a cluster reached at a bootstrap address and not managed by
// the tool.
type External struct {
	Label string
	Addr  string
}

// Name implements Target.
func (e External) Name() string {
	if e.Label != "" {
		return e.Label
	}
	return "external"
}

// Start implements Target.
func (e External) Start(context.Context, int) (*Instance, error) {
	return &Instance{Addr: e.Addr}, nil
}

// flushOverrides are the broker properties that give Workload.FlushMs
// periodic fsync. Apache Kafka's LogManager only checks dirty logs every
// log.flush.scheduler.interval.ms (default Long.MAX_VALUE), so both keys
// are needed there; Cascade honours the same pair.
func flushOverrides(flushMs int) map[string]string {
	if flushMs <= 0 {
		return nil
	}
	v := strconv.Itoa(flushMs)
	return map[string]string{"log.flush.interval.ms": v, "log.flush.scheduler.interval.ms": v}
}

// Cascade runs ./cmd/cascade as a child process with a fresh data dir
// under WorkDir for every round; with Nodes above 1, a cluster of that
// many processes.
type Cascade struct {
	Bin       string
	WorkDir   string
	FlushMs   int
	Overrides map[string]string
	KeepData  bool
	Nodes     int
}

// Name implements Target.
func (Cascade) Name() string { return "cascade" }

// Start implements Target.
func (c Cascade) Start(ctx context.Context, round int) (*Instance, error) {
	if c.Nodes > 1 {
		return c.startCluster(ctx, round)
	}
	dir := filepath.Join(c.WorkDir, fmt.Sprintf("cascade-r%d", round))
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	props := map[string]string{"listeners": "PLAINTEXT://" + addr, "log.dirs": data}
	for k, v := range flushOverrides(c.FlushMs) {
		props[k] = v
	}
	for k, v := range c.Overrides {
		props[k] = v
	}
	var args []string
	for k, v := range props {
		args = append(args, "--override", k+"="+v)
	}
	logPath := filepath.Join(dir, "cascade.log")
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(c.Bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	setParentDeath(cmd)
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("starting cascade: %w", err)
	}
	inst := &Instance{Addr: addr, Pids: []int{cmd.Process.Pid}, DataDirs: []string{data}}
	inst.stop = processStopper(cmd, lf, dir, c.KeepData)
	if err := waitReady(ctx, addr, 30*time.Second); err != nil {
		inst.Stop()
		return nil, fmt.Errorf("cascade did not start: %w (log %s)", err, logPath)
	}
	return inst, nil
}

// ApacheKafka runs Apache Kafka 4.x from the matrix's Maven jars, with the
// JVM settings kafka-server-start.sh and kafka-run-class.sh use, a fresh
// log dir for every round; with Nodes above 1, a KRaft cluster of that
// many combined nodes.
type ApacheKafka struct {
	Dist      *apachekafka.Dist
	WorkDir   string
	FlushMs   int
	Overrides map[string]string
	KeepData  bool
	Nodes     int
}

// KafkaJVMOptions are KAFKA_HEAP_OPTS (-Xms; -Xmx comes from the heap
// setting) and KAFKA_JVM_PERFORMANCE_OPTS as Kafka's start scripts set them.
var KafkaJVMOptions = []string{
	"-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
	"-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
	"-Djava.awt.headless=true",
}

// Name implements Target.
func (ApacheKafka) Name() string { return "apache-kafka" }

// Start implements Target.
func (a ApacheKafka) Start(ctx context.Context, round int) (*Instance, error) {
	if a.Nodes > 1 {
		return a.startCluster(ctx, round)
	}
	dir := filepath.Join(a.WorkDir, fmt.Sprintf("apache-kafka-r%d", round))
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	ov := map[string]string{}
	for k, v := range flushOverrides(a.FlushMs) {
		ov[k] = v
	}
	for k, v := range a.Overrides {
		ov[k] = v
	}
	b, err := a.Dist.StartBroker(ctx, apachekafka.BrokerOptions{
		Dir: dir, Overrides: ov, Heap: "1G", JVMOptions: KafkaJVMOptions,
	})
	if err != nil {
		return nil, err
	}
	return &Instance{Addr: b.Addr(), Pids: []int{b.Pid()}, DataDirs: []string{b.DataDir()}, stop: func() error {
		err := b.Stop()
		if !a.KeepData {
			err = errors.Join(err, os.RemoveAll(dir))
		}
		return err
	}}, nil
}

// Kfake runs franz-go's in-memory kfake in a helper process: Exe with
// Args (normally this program with "kfake-serve"), which prints
// "kfake listening on <addr>" once it serves.
type Kfake struct {
	Exe     string
	Args    []string
	Env     []string
	WorkDir string
}

// Name implements Target.
func (Kfake) Name() string { return "kfake" }

// KfakeReadyPrefix starts the line a kfake helper prints when it serves.
const KfakeReadyPrefix = "kfake listening on "

// Start implements Target.
func (k Kfake) Start(ctx context.Context, round int) (*Instance, error) {
	logPath := filepath.Join(k.WorkDir, fmt.Sprintf("kfake-r%d.log", round))
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(k.Exe, k.Args...)
	cmd.Env = append(os.Environ(), k.Env...)
	cmd.Stderr = lf
	out, err := cmd.StdoutPipe()
	if err != nil {
		lf.Close()
		return nil, err
	}
	setParentDeath(cmd)
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("starting kfake helper: %w", err)
	}
	inst := &Instance{Pids: []int{cmd.Process.Pid}, InMemory: true}
	inst.stop = processStopper(cmd, lf, "", true)
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), KfakeReadyPrefix); ok {
				lines <- a
				break
			}
		}
		io.Copy(lf, out) // Keep the pipe drained until the helper exits.
	}()
	select {
	case inst.Addr = <-lines:
	case <-time.After(30 * time.Second):
		inst.Stop()
		return nil, fmt.Errorf("kfake helper did not report its address within 30s (log %s)", logPath)
	case <-ctx.Done():
		inst.Stop()
		return nil, ctx.Err()
	}
	if err := waitReady(ctx, inst.Addr, 30*time.Second); err != nil {
		inst.Stop()
		return nil, fmt.Errorf("kfake did not start: %w (log %s)", err, logPath)
	}
	return inst, nil
}

// processStopper returns a function that stops cmd with SIGTERM (SIGKILL
// after 30 s), closes its log and removes dir unless keep is set.
func processStopper(cmd *exec.Cmd, log *os.File, dir string, keep bool) func() error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return func() error {
		var err error
		if serr := cmd.Process.Signal(syscall.SIGTERM); serr != nil && !errors.Is(serr, os.ErrProcessDone) {
			err = serr
		}
		select {
		case werr := <-done:
			var ee *exec.ExitError
			if werr != nil && !(errors.As(werr, &ee) && !ee.Exited()) {
				err = errors.Join(err, werr)
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
			err = errors.Join(err, errors.New("broker ignored SIGTERM for 30s and was killed"))
		}
		err = errors.Join(err, log.Close())
		if dir != "" && !keep {
			err = errors.Join(err, os.RemoveAll(dir))
		}
		return err
	}
}

// freeAddr returns a free loopback address.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitReady polls addr with ApiVersions and Metadata until the broker lists
// itself, or the timeout passes.
func waitReady(ctx context.Context, addr string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if last = probe(ctx, addr); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func probe(ctx context.Context, addr string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0),
		kgo.DialTimeout(time.Second), kgo.RetryTimeout(time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(pctx, cl)
	if err != nil {
		return err
	}
	if len(md.Brokers) == 0 {
		return errors.New("metadata lists no brokers yet")
	}
	return nil
}

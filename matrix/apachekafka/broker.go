package apachekafka

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// Placeholders of BrokerOptions.Overrides values.
const (
	PlaintextAddr  = "{plaintext}"
	ControllerAddr = "{controller}"
)

// BrokerOptions configures StartBroker. The zero value starts a broker with
// Kafka's defaults plus what a single node needs.
type BrokerOptions struct {
	// Dir holds the log dir, server.properties and the log file. Empty
	// means a new temporary directory that Stop removes.
	Dir string
	// Overrides are server.properties entries applied last, as
	// kafka-server-start.sh --override does. In their values
	// PlaintextAddr and ControllerAddr stand for the addresses the
	// broker's PLAINTEXT and CONTROLLER listeners are given, so that
	// further listeners can be added beside them.
	Overrides map[string]string
	// Heap is the JVM -Xmx value; empty means "512m".
	Heap string
	// StartTimeout bounds start-up; zero means 90 seconds.
	StartTimeout time.Duration
	// Stdout, when set, also receives the broker's log lines.
	Stdout *os.File
	// JVMOptions, when non-nil, replace the fast start-up flags
	// (-XX:TieredStopAtLevel=1 and the rest) that precede -cp; Heap still
	// applies. Benchmarks pass kafka-run-class.sh's performance flags here.
	JVMOptions []string
}

// Broker is a running single-node Apache Kafka (combined broker and
// controller in KRaft mode).
type Broker struct {
	dist      *Dist
	addr      string
	ctrlAddr  string
	dir       string
	removeDir bool
	logPath   string
	clusterID string

	propsPath string
	jvm       []string      // JVM flags before -cp.
	stdout    *os.File      // Optional second copy of the log.
	timeout   time.Duration // Start-up bound.
	// ready, when set, replaces the Metadata probe of waitReady: a cluster
	// node waits until it is registered, a controller-only node until its
	// controller listener answers.
	ready func(context.Context) error

	// place, when set, starts the process on node placeID of a placement.
	place   cluster.Placement
	placeID int

	cmd      *exec.Cmd
	logFile  *os.File
	exited   chan struct{}
	waitErr  error
	stopOnce sync.Once
	stopErr  error
}

// Addr returns the PLAINTEXT bootstrap address, host:port on 127.0.0.1.
func (b *Broker) Addr() string { return b.addr }

// LogPath returns the file holding the broker's log.
func (b *Broker) LogPath() string { return b.logPath }

// DataDir returns the broker's log.dirs directory, where partition
// directories such as "topic-0" live.
func (b *Broker) DataDir() string { return filepath.Join(b.dir, "data") }

// ClusterID returns the cluster id the log dir was formatted with.
func (b *Broker) ClusterID() string { return b.clusterID }

// Pid returns the broker's process id, for reading its CPU time and memory
// from /proc.
func (b *Broker) Pid() int {
	if b.cmd == nil || b.cmd.Process == nil {
		return 0
	}
	return b.cmd.Process.Pid
}

// Version returns the Apache Kafka version of the broker.
func (b *Broker) Version() string { return b.dist.version }

// StartBroker formats a fresh single-node KRaft log dir, starts kafka.Kafka
// as a child process on free loopback ports and returns once the broker
// answers Metadata with itself in it. On failure the error names the log
// file. Ports are chosen by binding port 0; the rare collision with another
// process is retried with new ports.
func (d *Dist) StartBroker(ctx context.Context, opts BrokerOptions) (*Broker, error) {
	return cluster.RetryPorts(ctx, func() (*Broker, error) { return d.startBroker(ctx, opts) })
}

func (d *Dist) startBroker(ctx context.Context, opts BrokerOptions) (_ *Broker, err error) {
	b := &Broker{dist: d, exited: make(chan struct{})}
	if b.dir, b.removeDir, err = cluster.WorkDir(opts.Dir, "apache-kafka-"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil && b.removeDir && os.Getenv("CASCADE_KEEP_KAFKA") == "" {
			os.RemoveAll(b.dir)
		}
	}()

	ports, err := cluster.FreePorts(2)
	if err != nil {
		return nil, err
	}
	b.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	b.ctrlAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
	b.logPath = filepath.Join(b.dir, "kafka.log")
	b.clusterID, err = newClusterID()
	if err != nil {
		return nil, err
	}

	props := ServerProperties(b.addr, b.ctrlAddr, b.DataDir())
	places := strings.NewReplacer(PlaintextAddr, b.addr, ControllerAddr, b.ctrlAddr)
	for k, v := range opts.Overrides {
		props[k] = places.Replace(v)
	}
	propsPath := filepath.Join(b.dir, "server.properties")
	if err := os.WriteFile(propsPath, []byte(cluster.FormatProperties(props)), 0o644); err != nil {
		return nil, fmt.Errorf("apachekafka: write server.properties: %w", err)
	}
	if err := os.RemoveAll(b.DataDir()); err != nil {
		return nil, fmt.Errorf("apachekafka: clear data dir: %w", err)
	}
	// As kafka-storage.sh format: writes meta.properties and the bootstrap
	// metadata checkpoint for a static quorum (controller.quorum.voters).
	if _, err := d.Run(ctx, "kafka.tools.StorageTool", "format", "-t", b.clusterID, "-c", propsPath); err != nil {
		return nil, fmt.Errorf("apachekafka: format log dir: %w", err)
	}

	heap := opts.Heap
	if heap == "" {
		heap = "512m"
	}
	b.jvm = []string{"-Xmx" + heap, "-Xms128m", "-XX:+UseG1GC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
		"-Djava.awt.headless=true"}
	if opts.JVMOptions != nil {
		b.jvm = append([]string{"-Xmx" + heap}, opts.JVMOptions...)
	}
	b.propsPath, b.stdout, b.timeout = propsPath, opts.Stdout, opts.StartTimeout
	if b.timeout == 0 {
		b.timeout = 90 * time.Second
	}
	if err := b.launch(ctx); err != nil {
		b.Stop()
		logTail := cluster.ReadTail(b.logPath, 3000)
		if strings.Contains(logTail, "Address already in use") {
			return nil, fmt.Errorf("apachekafka: %w (log %s)", cluster.ErrPortInUse, b.logPath)
		}
		return nil, fmt.Errorf("apachekafka: broker did not start: %w; log %s ends:\n%s", err, b.logPath, logTail)
	}
	return b, nil
}

// launch starts kafka.Kafka on the formatted directory and waits until it
// answers. The log file is appended to, so a restart keeps the history.
func (b *Broker) launch(ctx context.Context) error {
	var err error
	b.logFile, err = os.OpenFile(b.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("apachekafka: open log: %w", err)
	}
	// The broker must outlive ctx (which bounds only start-up), so it is
	// not started with exec.CommandContext.
	cmd := cluster.Command(b.place, b.placeID, b.dist.java, append(append([]string{}, b.jvm...),
		"-Dlog4j2.configurationFile="+filepath.Join(b.dist.dir, "log4j2.properties"),
		"-cp", b.dist.Classpath(), "kafka.Kafka", b.propsPath)...)
	cmd.Dir = b.dir
	if b.stdout != nil {
		w := &teeFile{a: b.logFile, b: b.stdout}
		cmd.Stdout, cmd.Stderr = w, w
	} else {
		cmd.Stdout, cmd.Stderr = b.logFile, b.logFile
	}
	cluster.SetParentDeath(cmd)
	if err := cmd.Start(); err != nil {
		b.logFile.Close()
		return fmt.Errorf("apachekafka: start java: %w", err)
	}
	exited := make(chan struct{})
	b.cmd, b.exited = cmd, exited
	go func() {
		b.waitErr = cmd.Wait()
		close(exited)
	}()
	wctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return b.waitReady(wctx)
}

// Restart starts the broker again on the same directory, ports and
// configuration after Kill, or after Stop when BrokerOptions.Dir was given
// (Stop removes a temporary directory). The data written before survives
// as far as Kafka's own recovery keeps it; the fault suite uses this to
// crash the oracle as it crashes Cascade.
func (b *Broker) Restart(ctx context.Context) error {
	if b.cmd != nil {
		select {
		case <-b.exited:
		default:
			return errors.New("apachekafka: Restart of a running broker")
		}
	}
	if _, err := os.Stat(b.propsPath); err != nil {
		return fmt.Errorf("apachekafka: cannot restart, the broker directory is gone: %w", err)
	}
	if b.logFile != nil {
		b.logFile.Close()
	}
	b.stopOnce, b.stopErr = sync.Once{}, nil
	if err := b.launch(ctx); err != nil {
		b.Kill()
		return fmt.Errorf("apachekafka: broker did not restart: %w; log %s ends:\n%s", err, b.logPath, cluster.ReadTail(b.logPath, 3000))
	}
	return nil
}

// waitReady polls the broker with ApiVersions and Metadata until it lists
// itself as a live broker, the process exits, or ctx ends.
func (b *Broker) waitReady(ctx context.Context) error {
	delay := 50 * time.Millisecond
	var last error
	for {
		select {
		case <-b.exited:
			return fmt.Errorf("broker process exited: %v", b.waitErr)
		default:
		}
		if b.ready != nil {
			last = b.ready(ctx)
		} else {
			last = probe(ctx, b.addr)
		}
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last probe: %v)", ctx.Err(), last)
		case <-b.exited:
			return fmt.Errorf("broker process exited: %v", b.waitErr)
		case <-time.After(delay):
		}
		if delay < 500*time.Millisecond {
			delay *= 2
		}
	}
}

// probe sends ApiVersions and Metadata directly to addr.
func probe(ctx context.Context, addr string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0),
		kgo.DialTimeout(time.Second), kgo.RetryTimeout(time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(pctx, cl)
	if err != nil {
		return err
	}
	if av.ErrorCode != 0 {
		return fmt.Errorf("ApiVersions error code %d", av.ErrorCode)
	}
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(pctx, cl)
	if err != nil {
		return err
	}
	if len(md.Brokers) == 0 {
		return errors.New("metadata lists no brokers yet")
	}
	return nil
}

// Stop sends SIGTERM (Kafka's controlled shutdown), waits up to 30 seconds,
// then kills the process. It removes a temporary directory unless
// CASCADE_KEEP_KAFKA is set. Calling it again returns the first result.
func (b *Broker) Stop() error {
	b.stopOnce.Do(func() {
		if b.cmd != nil && b.cmd.Process != nil {
			select {
			case <-b.exited:
			default:
				if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
					b.stopErr = fmt.Errorf("apachekafka: SIGTERM: %w", err)
				}
				select {
				case <-b.exited:
				case <-time.After(30 * time.Second):
					_ = b.cmd.Process.Kill() // The wait below reports the outcome.
					<-b.exited
					b.stopErr = fmt.Errorf("apachekafka: broker ignored SIGTERM for 30s and was killed; log %s", b.logPath)
				}
			}
		}
		if b.logFile != nil {
			b.logFile.Close()
		}
		if b.removeDir && os.Getenv("CASCADE_KEEP_KAFKA") == "" {
			if err := os.RemoveAll(b.dir); err != nil && b.stopErr == nil {
				b.stopErr = fmt.Errorf("apachekafka: remove %s: %w", b.dir, err)
			}
		}
	})
	return b.stopErr
}

// Kill stops the broker with SIGKILL, as a crash would, leaving its
// directory in place for inspection or restart.
func (b *Broker) Kill() error {
	if b.cmd == nil || b.cmd.Process == nil {
		return nil
	}
	if err := b.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("apachekafka: kill: %w", err)
	}
	<-b.exited
	return nil
}

// ServerProperties returns the single-node combined-mode configuration the
// oracle runs with: Kafka's defaults, plus replication factor 1 for internal
// topics and no initial rebalance delay so group tests do not wait 3 s.
func ServerProperties(addr, ctrlAddr, dataDir string) map[string]string {
	return map[string]string{
		"process.roles":                                    "broker,controller",
		"node.id":                                          "1",
		"listeners":                                        "PLAINTEXT://" + addr + ",CONTROLLER://" + ctrlAddr,
		"advertised.listeners":                             "PLAINTEXT://" + addr,
		"controller.listener.names":                        "CONTROLLER",
		"inter.broker.listener.name":                       "PLAINTEXT",
		"listener.security.protocol.map":                   "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"controller.quorum.voters":                         "1@" + ctrlAddr,
		"log.dirs":                                         dataDir,
		"num.partitions":                                   "1",
		"offsets.topic.replication.factor":                 "1",
		"offsets.topic.num.partitions":                     "1",
		"transaction.state.log.replication.factor":         "1",
		"transaction.state.log.min.isr":                    "1",
		"transaction.state.log.num.partitions":             "1",
		"share.coordinator.state.topic.replication.factor": "1",
		"share.coordinator.state.topic.min.isr":            "1",
		"group.initial.rebalance.delay.ms":                 "0",
	}
}

// newClusterID returns a random cluster id as Kafka's Uuid.randomUuid
// prints it: 16 random bytes in unpadded URL-safe base64, never starting
// with '-' (Kafka rejects those as command-line ambiguous).
func newClusterID() (string, error) {
	for {
		var u [16]byte
		if _, err := rand.Read(u[:]); err != nil {
			return "", fmt.Errorf("apachekafka: cluster id: %w", err)
		}
		s := base64.RawURLEncoding.EncodeToString(u[:])
		if s[0] != '-' && s != "AAAAAAAAAAAAAAAAAAAAAA" && s != "AAAAAAAAAAAAAAAAAAAAAQ" {
			return s, nil
		}
	}
}

// teeFile writes to two files; the broker's log goes to its log file and,
// when asked, to a terminal too.
type teeFile struct{ a, b *os.File }

func (t *teeFile) Write(p []byte) (int, error) {
	n, err := t.a.Write(p)
	if err != nil {
		return n, err
	}
	if _, err := t.b.Write(p); err != nil {
		return n, err
	}
	return n, nil
}

package faults

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/matrix/apachekafka"
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

func seed() uint64 {
	if *flagSeed != 0 {
		return *flagSeed
	}
	return uint64(time.Now().UnixNano())%1_000_000 + 1
}

// javaOpener is JavaOpener as -faults.java says.
func javaOpener(t *testing.T, ctx context.Context) driver.Opener {
	return JavaOpener(t, ctx, *flagJava)
}

// singleNode is a single-node suite as the flags say, the proxy's faults
// included.
func singleNode(t *testing.T, s uint64, dir string, jv driver.Opener) *Suite {
	return &Suite{T: t, Seed: s, Dir: dir, Java: jv, WithProxyFaults: true, FaultTime: faultTime(),
		Period: *flagPeriod, Txn: *flagTxn, Keep: *flagKeep}
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
	r := singleNode(t, s, dir, jv)
	r.Addrs, r.LogPaths, r.DataDirs, r.Name = []string{proc.Addr()}, []string{proc.LogPath}, []string{proc.DataDir}, "Cascade"
	r.Faults = []Fault{CrashFault(proc), PauseFault(proc, s)}
	keep := r.Run(ctx)
	if err := proc.Stop(); err != nil {
		t.Errorf("stopping cascade: %v (log %s)", err, proc.LogPath)
		keep = true
	}
	r.Cleanup(keep)
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
	r := singleNode(t, s, dir, jv)
	r.Addrs, r.LogPaths, r.DataDirs, r.Name = []string{k.Addr()}, []string{b.LogPath()}, []string{b.DataDir()}, "Apache Kafka "+dist.Version()
	r.Faults, r.KafkaDefects = []Fault{CrashFault(k), PauseFault(k, s)}, true
	keep := r.Run(ctx)
	if err := b.Stop(); err != nil {
		t.Logf("stopping kafka: %v", err)
	}
	r.Cleanup(keep)
}

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// TestMain removes the binary cascadeBinary built.
func TestMain(m *testing.M) {
	code := m.Run()
	if builtBin != "" {
		os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}

// cascadeBinary builds cmd/cascade once for every test of the package
// that starts processes.
func cascadeBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cascade-e2e-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "cascade")
		if out, err := exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// testCluster is three combined broker,controller cascade processes.
type testCluster struct {
	t        *testing.T
	bin      string
	procs    []*clusterProc
	logs     []*syncBuffer
	ctlPorts []int
	seeds    []string
	cl       *kgo.Client
	adm      *kadm.Client
}

// startTestCluster starts three nodes with extra server.properties lines
// and waits until Metadata lists all three. Cleanup resumes a stopped
// process and kills every one, printing the logs of a failed test.
func startTestCluster(t *testing.T, extra ...string) *testCluster {
	t.Helper()
	return startTestClusterEach(t, nil, extra...)
}

// startTestClusterEach is startTestCluster with lines of node id's own
// (each may be nil) after the extra lines all nodes share.
func startTestClusterEach(t *testing.T, each func(id int) []string, extra ...string) *testCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("builds cmd/cascade and starts three processes")
	}
	c := &testCluster{t: t, bin: cascadeBinary(t), ctlPorts: make([]int, 3)}
	tmp := t.TempDir()
	var voters []string
	for i := range c.ctlPorts {
		c.ctlPorts[i] = freePort(t)
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, c.ctlPorts[i]))
	}
	for i := range 3 {
		p := &clusterProc{id: i + 1, dir: filepath.Join(tmp, "node"+strconv.Itoa(i+1))}
		p.client = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		c.seeds = append(c.seeds, p.client)
		p.conf = filepath.Join(tmp, fmt.Sprintf("server-%d.properties", i+1))
		props := append([]string{
			"process.roles=broker,controller",
			"node.id=" + strconv.Itoa(i+1),
			"controller.quorum.voters=" + strings.Join(voters, ","),
			fmt.Sprintf("listeners=PLAINTEXT://%s,CONTROLLER://127.0.0.1:%d", p.client, c.ctlPorts[i]),
			"controller.listener.names=CONTROLLER",
			"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
			"log.dirs=" + p.dir,
		}, extra...)
		if each != nil {
			props = append(props, each(i+1)...)
		}
		if err := os.WriteFile(p.conf, []byte(strings.Join(props, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		c.procs = append(c.procs, p)
		c.logs = append(c.logs, &syncBuffer{})
	}
	for i, p := range c.procs {
		p.start(t, c.bin, c.logs[i])
	}
	t.Cleanup(func() {
		for _, p := range c.procs {
			if p.cmd != nil && p.cmd.Process != nil {
				p.cmd.Process.Signal(syscall.SIGCONT)
			}
			p.kill()
		}
		if t.Failed() {
			for i := range c.procs {
				t.Logf("node %d log:\n%s", i+1, c.logs[i].String())
			}
		}
	})
	var err error
	c.cl, err = kgo.NewClient(kgo.SeedBrokers(c.seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequestTimeoutOverhead(5*time.Second), kgo.RetryTimeout(20*time.Second),
		kgo.MetadataMinAge(50*time.Millisecond), kgo.MetadataMaxAge(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.cl.Close)
	c.adm = kadm.NewClient(c.cl)
	waitFor(t, 60*time.Second, "three brokers in Metadata", func() bool { return len(c.liveOn(1)) == 3 })
	return c
}

// liveOn returns the brokers node id's Metadata lists, nil on failure.
func (c *testCluster) liveOn(id int) map[int32]bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	m, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, c.cl.Broker(id))
	if err != nil {
		return nil
	}
	out := map[int32]bool{}
	for _, b := range m.Brokers {
		out[b.NodeID] = true
	}
	return out
}

// controller returns the active controller as node asked's DescribeCluster
// names it, -1 when unknown.
func (c *testCluster) controller(asked int) int32 {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, c.cl.Broker(asked))
	if err != nil || r.ErrorCode != 0 {
		return -1
	}
	return r.ControllerID
}

// leadersOn returns topic's partition leaders as node id's Metadata says.
func (c *testCluster) leadersOn(id int, topic string) map[int32]int32 {
	t := c.metadataTopic(id, topic)
	if t == nil {
		return nil
	}
	out := map[int32]int32{}
	for _, p := range t.Partitions {
		out[p.Partition] = p.Leader
	}
	return out
}

// createTopic creates an RF=1 topic and waits until every partition has a
// leader in node 1's Metadata.
func (c *testCluster) createTopic(name string, partitions int32) map[int32]int32 {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.adm.CreateTopic(ctx, partitions, 1, nil, name); err != nil {
		c.t.Fatalf("CreateTopic %s: %v", name, err)
	}
	var placed map[int32]int32
	waitFor(c.t, 20*time.Second, name+" partitions led", func() bool {
		placed = c.leadersOn(1, name)
		if len(placed) != int(partitions) {
			return false
		}
		for _, l := range placed {
			if l < 0 {
				return false
			}
		}
		return true
	})
	return placed
}

// ctlClient returns node id's controller listener, as a seed broker: a
// client would look for the controller with Metadata, which a controller
// listener does not serve.
func (c *testCluster) ctlClient(id int32) *kgo.Broker {
	c.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(fmt.Sprintf("127.0.0.1:%d", c.ctlPorts[id-1])))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl.SeedBrokers()[0]
}

// stop sends SIGTERM to node id and waits (bounded) for a clean exit; it
// returns how long that took and what the node logged meanwhile.
func (c *testCluster) stop(id int, within time.Duration) (time.Duration, string) {
	c.t.Helper()
	p := c.procs[id-1]
	logged := len(c.logs[id-1].String())
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		c.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		p.cmd = nil
		if err != nil {
			c.t.Fatalf("node %d stopped with %v", id, err)
		}
	case <-time.After(within):
		c.t.Fatalf("node %d did not stop within %v of SIGTERM", id, within)
	}
	return time.Since(start), c.logs[id-1].String()[logged:]
}

// brokerEpoch reads node id's latest broker epoch from its log.
func (c *testCluster) brokerEpoch(id int) int64 {
	c.t.Helper()
	m := regexp.MustCompile(`broker registered.*broker\.epoch=(\d+)`).FindAllStringSubmatch(c.logs[id-1].String(), -1)
	if len(m) == 0 {
		c.t.Fatalf("node %d logged no registration", id)
	}
	e, _ := strconv.ParseInt(m[len(m)-1][1], 10, 64)
	return e
}

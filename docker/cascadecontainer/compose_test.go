package cascadecontainer_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/docker/cascadecontainer"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterFiles checks the server.properties of the local three-node
// cluster (docs/cluster, which docker/compose.yaml and
// docs/cluster/start.sh start): each loads as a node Cascade runs, node N
// listens on 9090+2N and its controller on the port after, and all three
// name the same voters.
func TestClusterFiles(t *testing.T) {
	const voters = "1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097"
	for n := 1; n <= 3; n++ {
		path := filepath.Join("..", "..", "docs", "cluster", "node-"+strconv.Itoa(n)+".properties")
		cfg, err := config.Load(path, []string{"log.dirs=" + t.TempDir()})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if int(cfg.NodeID) != n || !cfg.Cluster.Roles.Broker || !cfg.Cluster.Roles.Controller {
			t.Errorf("%s: node.id %d, roles %+v; want %d, broker and controller", path, cfg.NodeID, cfg.Cluster.Roles, n)
		}
		var vs []string
		for _, v := range cfg.Cluster.Voters {
			vs = append(vs, strconv.Itoa(int(v.ID))+"@"+v.Addr())
		}
		if got := strings.Join(vs, ","); got != voters {
			t.Errorf("%s: voters %s, want %s", path, got, voters)
		}
		if ls := cfg.BrokerListeners(); len(ls) != 1 || ls[0].Port != 9090+2*n {
			t.Errorf("%s: client listeners %+v, want one on port %d", path, ls, 9090+2*n)
		}
	}
}

// compose returns the command line of the engine's compose tool (the
// docker compose plugin, or docker-compose) on docker/compose.yaml with
// args, skipping the test when neither is installed.
func compose(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	var cmd *exec.Cmd
	switch {
	case exec.Command("docker", "compose", "version").Run() == nil:
		cmd = exec.Command("docker", append([]string{"compose", "-f", "../compose.yaml"}, args...)...)
	default:
		if _, err := exec.LookPath("docker-compose"); err != nil {
			t.Skip("neither the docker compose plugin nor docker-compose is installed")
		}
		cmd = exec.Command("docker-compose", append([]string{"-f", "../compose.yaml"}, args...)...)
	}
	img := os.Getenv("CASCADE_IMAGE")
	if img == "" {
		img = cascadecontainer.DefaultImage
	}
	cmd.Env = append(os.Environ(), "CASCADE_IMAGE="+img)
	return cmd
}

func run(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
}

// TestComposeConfig validates docker/compose.yaml with the engine's
// compose tool, when one is installed; it needs no engine and no network.
func TestComposeConfig(t *testing.T) {
	run(t, compose(t, "config", "--quiet"))
}

// composePorts are the fixed host ports of docker/compose.yaml's nodes:
// each node's client listener, then its controller's.
var composePorts = []int{9092, 9093, 9094, 9095, 9096, 9097}

// TestComposeUp starts docker/compose.yaml's three nodes under a project
// of its own, checks that clients bootstrap from 127.0.0.1:9092, :9094
// and :9096 and that each node advertises its own, writes with acks=all to
// a topic with the files' defaults (replication factor 3,
// min.insync.replicas=2) and reads it back, kills cascade-2 with compose
// and still writes, then starts it and waits until it is back in the ISR.
// It is skipped, saying so, when another process holds one of the ports.
func TestComposeUp(t *testing.T) {
	image(t)
	for _, p := range composePorts {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Skipf("port %d is taken (%v): docker/compose.yaml's nodes need 9092 to 9097", p, err)
		}
		ln.Close()
	}
	project := "cascade-compose-test-" + strconv.Itoa(os.Getpid())
	t.Cleanup(func() { run(t, compose(t, "-p", project, "down", "-v")) })
	run(t, compose(t, "-p", project, "up", "-d"))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	seeds := []string{"127.0.0.1:9092", "127.0.0.1:9094", "127.0.0.1:9096"}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	poll(t, ctx, func() error {
		md, err := adm.BrokerMetadata(ctx)
		if err != nil {
			return err
		}
		var got []string
		for _, b := range md.Brokers {
			got = append(got, fmt.Sprintf("%d@%s:%d", b.NodeID, b.Host, b.Port))
		}
		slices.Sort(got)
		if want := []string{"1@127.0.0.1:9092", "2@127.0.0.1:9094", "3@127.0.0.1:9096"}; !slices.Equal(got, want) {
			return fmt.Errorf("brokers %v, want %v", got, want)
		}
		return nil
	})
	poll(t, ctx, func() error {
		resp, err := adm.CreateTopic(ctx, 1, -1, nil, "compose") // the brokers' default RF
		if err == nil {
			err = resp.Err
		}
		return err
	})
	isr := func(n int) {
		t.Helper()
		poll(t, ctx, func() error {
			md, err := adm.Metadata(ctx, "compose")
			if err != nil {
				return err
			}
			p := md.Topics["compose"].Partitions[0]
			if p.Err != nil || p.Leader < 0 || len(p.Replicas) != 3 || len(p.ISR) != n {
				return fmt.Errorf("compose-0: leader %d, replicas %v, ISR %v, err %v", p.Leader, p.Replicas, p.ISR, p.Err)
			}
			return nil
		})
	}
	isr(3)
	produce := func(v string) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "compose", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	produce("one")
	run(t, compose(t, "-p", project, "kill", "cascade-2"))
	isr(2)
	produce("two")
	run(t, compose(t, "-p", project, "start", "cascade-2"))
	isr(3)

	rd, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("compose"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var got []string
	for len(got) < 2 && ctx.Err() == nil {
		rd.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if !slices.Equal(got, []string{"one", "two"}) {
		t.Fatalf("read %q, want one, two", got)
	}
}

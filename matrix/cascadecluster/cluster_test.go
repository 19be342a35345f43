package cascadecluster

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/matrix/cluster"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := Cleanup(); err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
	}
	os.Exit(code)
}

func TestNodeProperties(t *testing.T) {
	n := &Node{ID: 2, Addr: "127.0.0.1:9000", ControllerAddr: "127.0.0.1:9001", Dir: "/d/node-2"}
	p := NodeProperties(n, "1@a:1,2@b:2", 2)
	for k, want := range map[string]string{
		"offsets.topic.replication.factor":         "2",
		"transaction.state.log.replication.factor": "2",
		"transaction.state.log.min.isr":            "2",
		"process.roles":                            "broker,controller",
		"node.id":                                  "2",
		"listeners":                                "PLAINTEXT://127.0.0.1:9000,CONTROLLER://127.0.0.1:9001",
		"controller.listener.names":                "CONTROLLER",
		"controller.quorum.voters":                 "1@a:1,2@b:2",
		"log.dirs":                                 "/d/node-2/data",
	} {
		if p[k] != want {
			t.Errorf("%s = %q, want %q", k, p[k], want)
		}
	}
	if _, ok := p["broker.session.timeout.ms"]; ok {
		t.Errorf("cluster nodes must keep the default session timeout: %v", p)
	}
}

func TestLineWriterPrefixesWholeLines(t *testing.T) {
	var out bytes.Buffer
	l := &lineWriter{w: &out}
	a, b := l.node(1), l.node(2)
	a.Write([]byte("one "))
	b.Write([]byte("two\n"))
	a.Write([]byte("done\nthree"))
	if got, want := out.String(), "node 2 | two\nnode 1 | one done\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestClusterNodeControl starts three processes and drives one node
// through every control: kill -9 (fenced, then back on Restart), SIGSTOP
// and SIGCONT, SIGTERM and Restart.
func TestClusterNodeControl(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/cascade and starts three processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	logs, err := os.Create(t.TempDir() + "/all.log")
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	c, err := Start(ctx, Options{Log: logs})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("logs:\n%s", c.Logs(6000))
		}
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(c.Dir()); !os.IsNotExist(err) {
			t.Errorf("Close left %s: %v", c.Dir(), err)
		}
	}()
	if err := cluster.WaitForBrokers(ctx, c, 1, 2, 3); err != nil {
		t.Fatal(err)
	}
	ctl, err := cluster.Controller(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	victim := 1 + ctl%3
	others := slices.DeleteFunc(c.BrokerIDs(), func(id int) bool { return id == victim })
	wctx, wcancel := context.WithTimeout(ctx, 45*time.Second)
	defer wcancel()

	if err := c.Kill(victim); err != nil {
		t.Fatal(err)
	}
	if c.Live(victim) || c.Node(victim).Running() {
		t.Fatalf("node %d still live after Kill", victim)
	}
	if err := cluster.WaitForBrokers(wctx, c, others...); err != nil {
		t.Fatalf("killed node %d never fenced: %v", victim, err)
	}
	if err := c.Restart(ctx, victim); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitForBrokers(wctx, c, 1, 2, 3); err != nil {
		t.Fatal(err)
	}

	if err := c.Pause(victim); err != nil {
		t.Fatal(err)
	}
	if c.Live(victim) || !c.Node(victim).Running() {
		t.Fatalf("paused node %d: live %v running %v", victim, c.Live(victim), c.Node(victim).Running())
	}
	if err := c.Resume(victim); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(victim); err != nil {
		t.Fatal(err)
	}
	if c.Node(victim).Running() {
		t.Fatalf("node %d runs after Stop", victim)
	}
	if err := c.Restart(ctx, victim); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitForBrokers(wctx, c, 1, 2, 3); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx, victim); err == nil {
		t.Fatal("Restart of a running node succeeded")
	}
	if all, err := os.ReadFile(logs.Name()); err != nil || !strings.Contains(string(all), "node 3 | ") {
		t.Errorf("the Log writer got no line of node 3 (%v):\n%s", err, cluster.Tail(string(all), 2000))
	}
}

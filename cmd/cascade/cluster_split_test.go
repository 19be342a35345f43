package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// splitCluster is a cluster of cmd/cascade processes with split roles:
// controller-only voters 1..nCtl, then broker-only nodes.
type splitCluster struct {
	bin      string
	ctlPorts map[int]int // each voter's controller listener port
	procs    map[int]*clusterProc
	logs     map[int]*syncBuffer
	seeds    []string // the brokers' client listeners
}

// startSplitCluster builds cmd/cascade and starts nCtl controller-only
// voters and nBrokers broker-only nodes. Every node gets its node.id,
// log.dirs and controller.quorum.voters, then common; a controller then
// ctl(its port), a broker brk(its listener address). The nodes are killed
// when the test ends, and their logs shown if it failed.
func startSplitCluster(t *testing.T, nCtl, nBrokers int, common []string,
	ctl func(port int) []string, brk func(addr string) []string) *splitCluster {
	t.Helper()
	tmp := t.TempDir()
	c := &splitCluster{bin: filepath.Join(tmp, "cascade"), ctlPorts: map[int]int{},
		procs: map[int]*clusterProc{}, logs: map[int]*syncBuffer{}}
	if out, err := exec.Command("go", "build", "-o", c.bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var voters []string
	for id := 1; id <= nCtl; id++ {
		c.ctlPorts[id] = freePort(t)
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", id, c.ctlPorts[id]))
	}
	for id := 1; id <= nCtl+nBrokers; id++ {
		p := &clusterProc{id: id, dir: filepath.Join(tmp, "node"+strconv.Itoa(id)),
			conf: filepath.Join(tmp, fmt.Sprintf("server-%d.properties", id))}
		props := append([]string{"node.id=" + strconv.Itoa(id), "log.dirs=" + p.dir,
			"controller.quorum.voters=" + strings.Join(voters, ",")}, common...)
		if id <= nCtl {
			props = append(props, ctl(c.ctlPorts[id])...)
		} else {
			p.client = fmt.Sprintf("127.0.0.1:%d", freePort(t))
			c.seeds = append(c.seeds, p.client)
			props = append(props, brk(p.client)...)
		}
		if err := os.WriteFile(p.conf, []byte(strings.Join(props, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		c.procs[id], c.logs[id] = p, &syncBuffer{}
	}
	for id, p := range c.procs {
		p.start(t, c.bin, c.logs[id])
	}
	t.Cleanup(func() {
		for _, p := range c.procs {
			p.kill()
		}
		if t.Failed() {
			for id := 1; id <= nCtl+nBrokers; id++ {
				t.Logf("node %d log:\n%s", id, c.logs[id].String())
			}
		}
	})
	return c
}

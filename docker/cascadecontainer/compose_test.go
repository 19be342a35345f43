package cascadecontainer_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cascade-kafka/cascade/broker/config"
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

// TestComposeConfig validates docker/compose.yaml with the engine's
// compose tool (the docker compose plugin, or docker-compose), when one is
// installed; it needs no engine and no network.
func TestComposeConfig(t *testing.T) {
	var cmd *exec.Cmd
	switch {
	case exec.Command("docker", "compose", "version").Run() == nil:
		cmd = exec.Command("docker", "compose", "-f", "../compose.yaml", "config", "--quiet")
	default:
		if _, err := exec.LookPath("docker-compose"); err != nil {
			t.Skip("neither the docker compose plugin nor docker-compose is installed")
		}
		cmd = exec.Command("docker-compose", "-f", "../compose.yaml", "config", "--quiet")
	}
	cmd.Env = append(os.Environ(), "CASCADE_IMAGE=cascade/cascade:dev")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
}

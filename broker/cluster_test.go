package broker

import (
	"strconv"
	"testing"

	"github.com/cascade-kafka/cascade/broker/config"
)

// TestClusterIDFor checks that voters of one quorum agree on the cluster id
// without cluster.id, that another voter set gives another id, and that
// cluster.id wins.
func TestClusterIDFor(t *testing.T) {
	load := func(id int, voters string, extra ...string) *config.Broker {
		t.Helper()
		ov := append([]string{"node.id=" + strconv.Itoa(id), "process.roles=broker,controller",
			"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093", "controller.listener.names=CONTROLLER",
			"controller.quorum.voters=" + voters}, extra...)
		b, err := config.LoadCluster("", ov)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	three := "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095"
	a, b := clusterIDFor(load(1, three)), clusterIDFor(load(3, three))
	if a != b || len(a) != 22 {
		t.Fatalf("voters of one quorum derived %q and %q", a, b)
	}
	if c := clusterIDFor(load(1, "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9096")); c == a {
		t.Fatalf("another quorum derived the same id %q", c)
	}
	if c := clusterIDFor(load(1, three, "cluster.id=MkU3OEVBNTcwNTJENDM2Qk")); c != "MkU3OEVBNTcwNTJENDM2Qk" {
		t.Fatalf("cluster.id set, derived %q", c)
	}
}

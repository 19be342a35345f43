package broker

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/wire"
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

// TestForwardingDecisions checks which config requests a cluster broker
// forwards (those naming a topic) and that a NOT_CONTROLLER answer of any
// forwarded API is seen, so the broker retries against the new leader.
func TestForwardingDecisions(t *testing.T) {
	alter := func(types ...kmsg.ConfigResourceType) *wire.Request {
		r := kmsg.NewPtrIncrementalAlterConfigsRequest()
		for _, typ := range types {
			res := kmsg.NewIncrementalAlterConfigsRequestResource()
			res.ResourceType, res.ResourceName = typ, "x"
			r.Resources = append(r.Resources, res)
		}
		return &wire.Request{Header: wire.RequestHeader{Key: r.Key(), Version: r.GetVersion()}, Body: r.AppendTo(nil)}
	}
	if namesTopics(alter(kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeBroker)) {
		t.Error("broker and logger resources forwarded")
	}
	if !namesTopics(alter(kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeTopic)) {
		t.Error("a topic resource not forwarded")
	}
	if !namesTopics(&wire.Request{Header: wire.RequestHeader{Key: 19}}) {
		t.Error("CreateTopics not forwarded")
	}
	ct := kmsg.NewPtrCreateTopicsResponse()
	ct.Topics = append(ct.Topics, kmsg.CreateTopicsResponseTopic{ErrorCode: 0}, kmsg.CreateTopicsResponseTopic{ErrorCode: kerr.NotController.Code})
	ia := kmsg.NewPtrIncrementalAlterConfigsResponse()
	ia.Resources = append(ia.Resources, kmsg.IncrementalAlterConfigsResponseResource{ErrorCode: kerr.InvalidConfig.Code})
	if !hasNotController(ct) || hasNotController(ia) {
		t.Errorf("NOT_CONTROLLER seen in %v and %v", hasNotController(ct), hasNotController(ia))
	}
}

// TestCheckNodeIdentity checks that a cluster node refuses log dirs whose
// meta.properties another cluster or another node wrote, and takes new or
// its own ones.
func TestCheckNodeIdentity(t *testing.T) {
	dir := t.TempDir()
	bc, err := config.LoadCluster("", []string{"node.id=2", "process.roles=broker,controller",
		"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093", "controller.listener.names=CONTROLLER",
		"controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095", "log.dirs=" + dir})
	if err != nil {
		t.Fatal(err)
	}
	id := clusterIDFor(bc)
	if err := checkNodeIdentity(bc, id); err != nil {
		t.Fatalf("a new log dir refused: %v", err)
	}
	write := func(cluster, node string) {
		t.Helper()
		data := "cluster.id=" + cluster + "\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAA\nnode.id=" + node + "\nversion=1\n"
		if err := os.WriteFile(filepath.Join(dir, "meta.properties"), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(id, "2")
	if err := checkNodeIdentity(bc, id); err != nil {
		t.Fatalf("its own log dir refused: %v", err)
	}
	write("MkU3OEVBNTcwNTJENDM2Qk", "2")
	if err := checkNodeIdentity(bc, id); err == nil || !strings.Contains(err.Error(), `belongs to cluster "MkU3OEVBNTcwNTJENDM2Qk"`) ||
		!strings.Contains(err.Error(), "derived from controller.quorum.voters") {
		t.Fatalf("another cluster's log dir: %v", err)
	}
	write(id, "3")
	if err := checkNodeIdentity(bc, id); err == nil || !strings.Contains(err.Error(), "belongs to node 3, but this node's node.id is 2") {
		t.Fatalf("another node's log dir: %v", err)
	}
}

// TestWarnLimiter checks that a refused-frame warning repeats at most once
// per frameWarnEvery for one message, and that other messages pass.
func TestWarnLimiter(t *testing.T) {
	var l warnLimiter
	t0 := time.Unix(1000, 0)
	if !l.allow("a", t0) || l.allow("a", t0.Add(frameWarnEvery-time.Millisecond)) {
		t.Fatal("a repeated warning passed within frameWarnEvery")
	}
	if !l.allow("b", t0) || !l.allow("a", t0.Add(frameWarnEvery)) {
		t.Fatal("a new or due warning was held back")
	}
	for i := range 200 {
		l.allow(strconv.Itoa(i), t0)
	}
	if len(l.last) > 64 {
		t.Fatalf("limiter holds %d keys", len(l.last))
	}
}

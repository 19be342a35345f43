package apachekafka

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestClusterLayoutAndProperties(t *testing.T) {
	for _, tc := range []struct {
		roles   ClusterRoles
		brokers int
		want    []string // id:roles
	}{
		{CombinedRoles, 3, []string{"1:broker,controller", "2:broker,controller", "3:broker,controller"}},
		{DedicatedControllers, 2, []string{"1:controller", "2:controller", "3:controller", "4:broker", "5:broker"}},
	} {
		var got []string
		for _, s := range clusterLayout(tc.roles, tc.brokers) {
			got = append(got, strconv.Itoa(s.id)+":"+s.roles)
			if s.broker != strings.Contains(s.roles, "broker") || s.controller != strings.Contains(s.roles, "controller") {
				t.Errorf("node %d: roles %q but broker=%v controller=%v", s.id, s.roles, s.broker, s.controller)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("layout(%v, %d) = %v, want %v", tc.roles, tc.brokers, got, tc.want)
		}
	}

	voters := "1@127.0.0.1:9001,2@127.0.0.1:9002,3@127.0.0.1:9003"
	ctrl := NodeProperties(&Node{ID: 2, Roles: "controller", ControllerAddr: "127.0.0.1:9002", Dir: "/d"}, voters, 2)
	if ctrl["listeners"] != "CONTROLLER://127.0.0.1:9002" || ctrl["controller.quorum.voters"] != voters {
		t.Errorf("controller properties %v", ctrl)
	}
	if _, ok := ctrl["inter.broker.listener.name"]; ok {
		t.Errorf("a controller-only node names an inter-broker listener: %v", ctrl)
	}
	br := NodeProperties(&Node{ID: 4, Roles: "broker", Addr: "127.0.0.1:9004", Dir: "/d"}, voters, 2)
	if br["listeners"] != "PLAINTEXT://127.0.0.1:9004" || br["offsets.topic.replication.factor"] != "2" ||
		br["listener.security.protocol.map"] != "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT" {
		t.Errorf("broker properties %v", br)
	}
	comb := NodeProperties(&Node{ID: 1, Roles: "broker,controller", Addr: "127.0.0.1:9000", ControllerAddr: "127.0.0.1:9001", Dir: "/d"}, voters, 3)
	if comb["listeners"] != "PLAINTEXT://127.0.0.1:9000,CONTROLLER://127.0.0.1:9001" || comb["offsets.topic.replication.factor"] != "3" ||
		comb["transaction.state.log.min.isr"] != "2" {
		t.Errorf("combined properties %v", comb)
	}
	for _, p := range []map[string]string{ctrl, br, comb} {
		if _, ok := p["broker.session.timeout.ms"]; ok {
			t.Errorf("cluster nodes must keep Kafka's session timeout: %v", p)
		}
	}
}

// startClusterOrSkip starts a three-node combined cluster, printing every
// node's log when the test fails.
func startClusterOrSkip(t *testing.T, ctx context.Context, opts ClusterOptions) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a three-node Apache Kafka cluster")
	}
	d := ensureOrSkip(t, ctx)
	start := time.Now()
	c, err := d.StartCluster(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Apache Kafka %s cluster %s started in %v: %s", c.Version(), c.ClusterID(), time.Since(start).Round(time.Millisecond), c.Bootstrap())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node logs:\n%s", c.Logs(6000))
		}
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

func TestClusterNodeControl(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := startClusterOrSkip(t, ctx, ClusterOptions{})
	if got := len(strings.Split(c.Bootstrap(), ",")); got != 3 {
		t.Fatalf("bootstrap %q lists %d brokers", c.Bootstrap(), got)
	}
	q, err := c.ActiveController(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Node(q.LeaderID) == nil || len(q.Voters) != 3 {
		t.Fatalf("quorum %+v", q)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.Bootstrap(), ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	res, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, "nc")
	if err != nil || res.Err != nil {
		t.Fatalf("create topic: %v %v", err, res.Err)
	}
	ps, err := c.WaitForISR(ctx, "nc", 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "nc", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// A follower that is neither the leader nor the active controller.
	follower := 0
	for _, id := range ps.Replicas {
		if id != ps.Leader && id != q.LeaderID {
			follower = id
		}
	}
	if err := c.Pause(follower); err != nil {
		t.Fatal(err)
	}
	if c.Live(follower) || !c.Node(follower).Running() {
		t.Fatalf("paused node %d: live %v running %v", follower, c.Live(follower), c.Node(follower).Running())
	}
	if err := c.Resume(follower); err != nil {
		t.Fatal(err)
	}
	if !c.Live(follower) {
		t.Fatalf("resumed node %d is not live", follower)
	}

	// Stop is a controlled shutdown: the broker leaves Metadata at once,
	// without waiting for its session to expire.
	if err := c.Stop(ps.Leader); err != nil {
		t.Fatal(err)
	}
	if c.Node(ps.Leader).Running() {
		t.Fatal("stopped node still runs")
	}
	moved, err := c.WaitForLeaderChange(ctx, "nc", 0, ps.Leader)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ps.Replicas, moved.Leader) {
		t.Fatalf("new leader %d is not a replica of %v", moved.Leader, ps.Replicas)
	}
	if err := c.Restart(ctx, ps.Leader); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitForNodeInISRs(ctx, ps.Leader); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx, ps.Leader); err == nil {
		t.Fatal("Restart of a running node succeeded")
	}
	if err := c.Kill(99); err == nil {
		t.Fatal("Kill of an unknown node succeeded")
	}
}

// TestClusterDedicatedControllers starts three controller-only nodes and one
// broker, and checks that the broker keeps serving through the loss of the
// active controller.
func TestClusterDedicatedControllers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := startClusterOrSkip(t, ctx, ClusterOptions{Nodes: 1, Roles: DedicatedControllers})
	if got := c.BrokerIDs(); !slices.Equal(got, []int{4}) || c.Bootstrap() != c.Node(4).Addr {
		t.Fatalf("brokers %v, bootstrap %q", got, c.Bootstrap())
	}
	if _, err := c.Request(ctx, 1, kmsg.NewPtrMetadataRequest()); err == nil {
		t.Fatal("a broker request to a controller-only node was sent")
	}
	q, err := c.ActiveController(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if q.LeaderID < 1 || q.LeaderID > 3 || len(q.Voters) != 3 {
		t.Fatalf("quorum %+v", q)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()), kgo.DefaultProduceTopic("dc"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if res, err := adm.CreateTopic(ctx, 1, 1, nil, "dc"); err != nil || res.Err != nil {
		t.Fatalf("create topic: %v %v", err, res.Err)
	}
	if err := c.Kill(q.LeaderID); err != nil {
		t.Fatal(err)
	}
	nq, err := c.WaitForControllerChange(ctx, q.LeaderID)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := adm.CreateTopic(ctx, 1, 1, nil, "dc2"); err != nil || res.Err != nil {
		t.Fatalf("create topic under controller %d: %v %v", nq.LeaderID, err, res.Err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx, q.LeaderID); err != nil {
		t.Fatal(err)
	}
}

package matrix_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/cascade-kafka/cascade/internal/certtest"
	"github.com/cascade-kafka/cascade/matrix"
	"github.com/cascade-kafka/cascade/matrix/apachekafka"
	"github.com/cascade-kafka/cascade/matrix/cascadecluster"
	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// The users of the secured cluster: the brokers log in to each other's
// INTERNAL listener as interBrokerUser (PLAIN) and present the node
// certificate (principal "localhost" by the mapping rule) on the SSL
// controller listener; both are super users, as is adminUser. noACLUser
// has no ACL until the test grants one.
const (
	interBrokerUser, interBrokerPassword = "broker", "broker-secret"
	adminUser, adminPassword             = "admin", "admin-secret"
	noACLUser, noACLPassword             = "mallory", "mallory-secret"
)

// secureCluster is a three-node cluster whose nodes reach each other only
// over secured listeners: INTERNAL (SASL_SSL, PLAIN) between brokers,
// CONTROLLER (SSL with client certificates) to and between controllers,
// and CLIENT (SASL_SSL, PLAIN) for the test's clients, with
// StandardAuthorizer. Each node keeps the PLAINTEXT listener the cluster
// starters wait on; with the authorizer, its anonymous clients may do
// nothing but list the brokers.
type secureCluster struct {
	c cluster.Cluster
	// client and internal are each node's CLIENT and INTERNAL listeners.
	client, internal map[int]string
	ca               *certtest.CA
	// intruder is a certificate of the cluster's CA whose principal
	// ("intruder") holds no ACL.
	intruder tls.Certificate
}

// secureClusterConfig returns the overrides every node gets and each
// node's extra listeners, with the stores written under dir.
func secureClusterConfig(t *testing.T, dir string) (map[string]string, map[int]string, *secureCluster) {
	ports, err := cluster.FreePorts(6)
	if err != nil {
		t.Fatal(err)
	}
	sc := &secureCluster{client: map[int]string{}, internal: map[int]string{}, ca: certtest.NewCA(t, "CN=Cluster CA")}
	extra := map[int]string{}
	for id := 1; id <= 3; id++ {
		sc.internal[id] = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*(id-1)]))
		sc.client[id] = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*(id-1)+1]))
		extra[id] = "INTERNAL://" + sc.internal[id] + ",CLIENT://" + sc.client[id]
	}
	node := sc.ca.Issue(t, "CN=localhost,O=Cluster", "localhost", "127.0.0.1")
	sc.intruder = sc.ca.Issue(t, "CN=intruder,O=Cluster").TLS()
	ov := map[string]string{
		"listener.security.protocol.map":                       "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL,INTERNAL:SASL_SSL,CLIENT:SASL_SSL",
		"inter.broker.listener.name":                           "INTERNAL",
		"sasl.mechanism.inter.broker.protocol":                 "PLAIN",
		"sasl.enabled.mechanisms":                              "PLAIN",
		"listener.name.internal.plain.sasl.jaas.config":        interBrokerJAAS(interBrokerPassword),
		"listener.name.client.plain.sasl.jaas.config":          plainJAAS("", adminUser, adminPassword, noACLUser, noACLPassword),
		"ssl.keystore.type":                                    "PKCS12",
		"ssl.keystore.location":                                node.PKCS12(t, dir, "node-keystore.p12", "node-ks-pw"),
		"ssl.keystore.password":                                "node-ks-pw",
		"ssl.truststore.type":                                  "PEM",
		"ssl.truststore.location":                              sc.ca.TrustPEM(t, dir, "truststore.pem"),
		"listener.name.controller.ssl.client.auth":             "required",
		"listener.name.controller.ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/,DEFAULT",
		"authorizer.class.name":                                "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":                                          "User:" + interBrokerUser + ";User:localhost;User:" + adminUser,
		"connection.failed.authentication.delay.ms":            "100",
		"min.insync.replicas":                                  "2",
	}
	return ov, extra, sc
}

// plainJAAS is a PlainLoginModule config: login ("" or ` username=...
// password=...`, what the node logs in to peers with) and the users it
// accepts, as name, password pairs.
func plainJAAS(login string, users ...string) string {
	s := "org.apache.kafka.common.security.plain.PlainLoginModule required" + login
	for i := 0; i+1 < len(users); i += 2 {
		s += ` user_` + users[i] + `="` + users[i+1] + `"`
	}
	return s + ";"
}

// interBrokerJAAS is the INTERNAL listener's JAAS config of a node that
// logs in with password and accepts interBrokerUser's right one.
func interBrokerJAAS(password string) string {
	return plainJAAS(` username="`+interBrokerUser+`" password="`+password+`"`, interBrokerUser, interBrokerPassword)
}

// startSecureCluster starts target's three-node secured cluster;
// nodeOverrides are applied after the shared overrides.
func startSecureCluster(t *testing.T, ctx context.Context, target string, nodeOverrides map[int]map[string]string) *secureCluster {
	t.Helper()
	ov, extra, sc := secureClusterConfig(t, t.TempDir())
	for k, v := range clusterOverrides {
		if _, set := ov[k]; !set {
			ov[k] = v
		}
	}
	ct := clusterTarget{name: target}
	switch target {
	case matrix.TargetApacheKafka:
		ct.start = func(ctx context.Context) (cluster.Cluster, error) {
			return apachekafka.StartCluster(ctx, apachekafka.ClusterOptions{Overrides: ov, NodeOverrides: nodeOverrides, ExtraListeners: extra})
		}
	case matrix.TargetCascade:
		ct.start = func(ctx context.Context) (cluster.Cluster, error) {
			opts := cascadecluster.Options{Overrides: ov, NodeOverrides: nodeOverrides, ExtraListeners: extra}
			if os.Getenv("CASCADE_CLUSTER_DEBUG") != "" {
				opts.Args = []string{"-v"}
			}
			return cascadecluster.Start(ctx, opts)
		}
	default:
		t.Fatalf("unknown target %s", target)
	}
	sc.c = startCluster(t, ctx, ct)
	return sc
}

// clientOf returns a client of user on the CLIENT listeners of nodes.
func (sc *secureCluster) clientOf(t *testing.T, user, password string, nodes []int, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	var seeds []string
	for _, id := range nodes {
		seeds = append(seeds, sc.client[id])
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...),
		kgo.DialTLSConfig(&tls.Config{RootCAs: sc.ca.Pool(), MinVersion: tls.VersionTLS12}),
		kgo.SASL(plain.Auth{User: user, Pass: password}.AsMechanism()),
		kgo.RequestRetries(20), kgo.RetryTimeout(30 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestClusterSecurity runs the secured three-node cluster of
// secureClusterConfig on each target (MATRIX_TARGETS selects): clients on
// the SASL_SSL listener are given every broker's SASL_SSL endpoint; a
// client without TLS reaches none of the secured listeners; a principal
// without CREATE on the cluster is refused a CreateTopics sent to a broker
// that is not the controller (so forwarded) and succeeds once an ACL
// grants it; an RF=3 topic written with acks=all reads back in full after
// its leader is killed.
func TestClusterSecurity(t *testing.T) {
	eachSecureTarget(t, 6*time.Minute, func(t *testing.T, ctx context.Context, target string) {
		sc := startSecureCluster(t, ctx, target, nil)
		admin := sc.clientOf(t, adminUser, adminPassword, sc.c.BrokerIDs())
		t.Run("endpoints of the listener", func(t *testing.T) { checkListenerEndpoints(t, ctx, sc, admin) })
		t.Run("plaintext refused", func(t *testing.T) { checkPlaintextRefused(t, sc) })
		t.Run("forwarded authorization", func(t *testing.T) { checkForwardedAuthorization(t, ctx, sc, admin) })
		t.Run("cluster action refused", func(t *testing.T) { checkClusterActionRefused(t, ctx, sc, target) })
		t.Run("acks=all survives leader kill", func(t *testing.T) { checkLeaderKill(t, ctx, sc, admin) })
	})
}

// TestClusterSecuritySASLController runs the secured cluster with a
// SASL_SSL controller listener (PLAIN, sasl.mechanism.controller.protocol)
// in place of the SSL one: the quorum, registration, heartbeats,
// AlterPartition and forwarding authenticate as interBrokerUser. Clients
// see the same cluster: the CLIENT endpoints, forwarded authorization and
// acks=all records kept across a leader kill.
func TestClusterSecuritySASLController(t *testing.T) {
	eachSecureTarget(t, 6*time.Minute, func(t *testing.T, ctx context.Context, target string) {
		saslController := map[string]string{
			"listener.security.protocol.map":                  "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL,INTERNAL:SASL_SSL,CLIENT:SASL_SSL",
			"sasl.mechanism.controller.protocol":              "PLAIN",
			"listener.name.controller.plain.sasl.jaas.config": interBrokerJAAS(interBrokerPassword),
			"listener.name.controller.ssl.client.auth":        "none",
		}
		sc := startSecureCluster(t, ctx, target, map[int]map[string]string{1: saslController, 2: saslController, 3: saslController})
		admin := sc.clientOf(t, adminUser, adminPassword, sc.c.BrokerIDs())
		t.Run("endpoints of the listener", func(t *testing.T) { checkListenerEndpoints(t, ctx, sc, admin) })
		t.Run("plaintext refused", func(t *testing.T) { checkPlaintextRefused(t, sc) })
		t.Run("forwarded authorization", func(t *testing.T) { checkForwardedAuthorization(t, ctx, sc, admin) })
		t.Run("acks=all survives leader kill", func(t *testing.T) { checkLeaderKill(t, ctx, sc, admin) })
	})
}

// eachSecureTarget runs f on each selected cluster target, Apache Kafka
// first, within timeout.
func eachSecureTarget(t *testing.T, timeout time.Duration, f func(t *testing.T, ctx context.Context, target string)) {
	for _, target := range matrix.SelectedTargets() {
		if target != matrix.TargetApacheKafka && target != matrix.TargetCascade {
			continue
		}
		t.Run(target, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			f(t, ctx, target)
		})
	}
}

// checkListenerEndpoints: Metadata, DescribeCluster and FindCoordinator on
// the CLIENT listener name every broker by its CLIENT endpoint.
func checkListenerEndpoints(t *testing.T, ctx context.Context, sc *secureCluster, admin *kgo.Client) {
	want := map[int32]string{}
	for id, a := range sc.client {
		want[int32(id)] = a
	}
	err := cluster.Poll(ctx, 200*time.Millisecond, func() error {
		for _, id := range sc.c.BrokerIDs() {
			got := map[int32]string{}
			md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, admin.Broker(id))
			if err != nil {
				return err
			}
			for _, b := range md.Brokers {
				got[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("node %d: Metadata brokers %v, want the CLIENT listeners %v", id, got, want)
			}
			dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, admin.Broker(id))
			if err != nil {
				return err
			}
			clear(got)
			for _, b := range dc.Brokers {
				got[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("node %d: DescribeCluster brokers %v, want %v", id, got, want)
			}
		}
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKeys = []string{"secure-group"}
		resp, err := fc.RequestWith(ctx, admin)
		if err != nil {
			return err
		}
		for _, c := range resp.Coordinators {
			if c.ErrorCode != 0 {
				return kerr.ErrorForCode(c.ErrorCode)
			}
			if a := net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))); want[c.NodeID] != a {
				return fmt.Errorf("FindCoordinator names %d at %s, want %s", c.NodeID, a, want[c.NodeID])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkPlaintextRefused: a PLAINTEXT ApiVersions to a TLS listener gets no
// answer; the connection is closed.
func checkPlaintextRefused(t *testing.T, sc *secureCluster) {
	for _, id := range sc.c.BrokerIDs() {
		for name, addr := range map[string]string{"CLIENT": sc.client[id], "INTERNAL": sc.internal[id], "CONTROLLER": sc.c.ControllerAddr(id)} {
			if err := plaintextAnswered(addr); err == nil {
				t.Errorf("node %d %s %s answered a PLAINTEXT ApiVersions", id, name, addr)
			} else {
				t.Logf("node %d %s: plaintext client refused: %v", id, name, err)
			}
		}
	}
}

// plaintextAnswered sends ApiVersions v3 unencrypted to addr and returns
// nil only when a well-formed answer comes back.
func plaintextAnswered(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "plain", "1"
	body := req.AppendTo(nil)
	hdr := []byte{0, 18, 0, 3, 0, 0, 0, 1, 0, 5, 'p', 'l', 'a', 'i', 'n', 0}
	frame := append([]byte{0, 0, 0, 0}, append(hdr, body...)...)
	n := len(frame) - 4
	frame[0], frame[1], frame[2], frame[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	if _, err := conn.Write(frame); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return err
	}
	l := int(size[0])<<24 | int(size[1])<<16 | int(size[2])<<8 | int(size[3])
	if l < 4 || l > 1<<20 {
		return fmt.Errorf("an answer of %d bytes is no Kafka response", l)
	}
	buf := make([]byte, l)
	if _, err := io.ReadFull(conn, buf); err != nil {
		return err
	}
	if buf[0] != 0 || buf[1] != 0 || buf[2] != 0 || buf[3] != 1 {
		return errors.New("the answer does not carry the request's correlation id")
	}
	return nil
}

// checkForwardedAuthorization: CreateTopics of noACLUser sent to a broker
// that is not the controller Metadata names is TOPIC_AUTHORIZATION_FAILED;
// after admin grants CREATE on the cluster it succeeds.
func checkForwardedAuthorization(t *testing.T, ctx context.Context, sc *secureCluster, admin *kgo.Client) {
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	via := 0
	for _, id := range sc.c.BrokerIDs() {
		if int32(id) != md.ControllerID {
			via = id
			break
		}
	}
	cl := sc.clientOf(t, noACLUser, noACLPassword, []int{via})
	create := func(topic string) (int16, error) {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 3
		req.Topics = append(req.Topics, rt)
		req.TimeoutMillis = 15000
		resp, err := req.RequestWith(ctx, cl.Broker(via))
		if err != nil {
			return 0, err
		}
		if len(resp.Topics) != 1 {
			return 0, fmt.Errorf("%d topics in the answer", len(resp.Topics))
		}
		return resp.Topics[0].ErrorCode, nil
	}
	code, err := create("secure-denied")
	if err != nil {
		t.Fatal(err)
	}
	if code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("CreateTopics of %s without an ACL via node %d (controller %d): %v, want TOPIC_AUTHORIZATION_FAILED",
			noACLUser, via, md.ControllerID, kerr.ErrorForCode(code))
	}
	adm := kadm.NewClient(admin)
	b := kadm.NewACLs().Allow("User:" + noACLUser).Clusters().Operations(kadm.OpCreate).ResourcePatternType(kadm.ACLPatternLiteral)
	res, err := adm.CreateACLs(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("CreateAcls: %v", r.Err)
		}
	}
	err = cluster.Poll(ctx, 250*time.Millisecond, func() error {
		code, err := create("secure-granted")
		if err != nil {
			return err
		}
		if code != 0 && code != kerr.TopicAlreadyExists.Code {
			return kerr.ErrorForCode(code)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("CreateTopics of %s with CREATE on the cluster via node %d: %v", noACLUser, via, err)
	}
}

// checkLeaderKill: an RF=3 topic written with acks=all over SASL_SSL
// reads back every acknowledged record after its leader is killed.
func checkLeaderKill(t *testing.T, ctx context.Context, sc *secureCluster, admin *kgo.Client) {
	const topic, records = "secure-acks", 300
	adm := kadm.NewClient(admin)
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	var leader int32
	err := cluster.Poll(ctx, 200*time.Millisecond, func() error {
		td, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return err
		}
		p, ok := td[topic].Partitions[0]
		if !ok || p.Leader < 0 || len(p.ISR) != 3 {
			return fmt.Errorf("partition not ready: %+v", td[topic].Partitions)
		}
		leader = p.Leader
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	acked := map[string]bool{}
	for i := range records {
		v := "v" + strconv.Itoa(i)
		if err := admin.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		acked[v] = true
	}
	if err := sc.c.Kill(int(leader)); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed the leader, node %d, after %d acknowledged records", leader, len(acked))
	var rest []int
	for _, id := range sc.c.BrokerIDs() {
		if id != int(leader) {
			rest = append(rest, id)
		}
	}
	cons := sc.clientOf(t, adminUser, adminPassword, rest, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	rctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	for len(seen) < len(acked) && rctx.Err() == nil {
		fs := cons.PollFetches(rctx)
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	var lost []string
	for v := range acked {
		if !seen[v] {
			lost = append(lost, v)
		}
	}
	slices.Sort(lost)
	if len(lost) > 0 {
		t.Fatalf("%d of %d acknowledged records not read back after the leader was killed: %s", len(lost), len(acked), strings.Join(lost[:min(10, len(lost))], ","))
	}
}

// TestClusterSecurityWrongPeerPassword starts the secured cluster with
// node 3 logging in to its peers' INTERNAL listener with a wrong password:
// the peers refuse its replica fetches, so its replicas of partitions the
// other nodes lead leave the ISR and never rejoin, while every node keeps
// running and acks=all writes to those partitions succeed; Cascade's node 3
// logs why.
func TestClusterSecurityWrongPeerPassword(t *testing.T) {
	eachSecureTarget(t, 5*time.Minute, func(t *testing.T, ctx context.Context, target string) {
		wrong := interBrokerJAAS("not-the-password")
		sc := startSecureCluster(t, ctx, target, map[int]map[string]string{
			1: {"replica.lag.time.max.ms": "3000"}, 2: {"replica.lag.time.max.ms": "3000"},
			3: {"replica.lag.time.max.ms": "3000", "listener.name.internal.plain.sasl.jaas.config": wrong}})
		admin := sc.clientOf(t, adminUser, adminPassword, []int{1, 2})
		adm := kadm.NewClient(admin)
		const topic = "secure-wrong-peer"
		if _, err := adm.CreateTopic(ctx, 6, 3, nil, topic); err != nil {
			t.Fatal(err)
		}
		// Every partition led by node 1 or 2 drops node 3 from its ISR.
		others := func() (map[int32]kadm.PartitionDetail, error) {
			td, err := adm.ListTopics(ctx, topic)
			if err != nil {
				return nil, err
			}
			out := map[int32]kadm.PartitionDetail{}
			for p, d := range td[topic].Partitions {
				if d.Leader == 1 || d.Leader == 2 {
					out[p] = d
				}
			}
			if len(out) == 0 {
				return nil, errors.New("no partition led by node 1 or 2")
			}
			return out, nil
		}
		err := cluster.Poll(ctx, 250*time.Millisecond, func() error {
			ps, err := others()
			if err != nil {
				return err
			}
			for p, d := range ps {
				if slices.Contains(d.ISR, 3) {
					return fmt.Errorf("partition %d (leader %d) still has node 3 in its ISR %v", p, d.Leader, d.ISR)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// It stays out: the refusal is not a passing lag.
		for range 10 {
			time.Sleep(time.Second)
			ps, err := others()
			if err != nil {
				t.Fatal(err)
			}
			for p, d := range ps {
				if slices.Contains(d.ISR, 3) {
					t.Fatalf("partition %d: node 3 rejoined the ISR %v with a wrong inter-broker password", p, d.ISR)
				}
			}
		}
		ps, err := others()
		if err != nil {
			t.Fatal(err)
		}
		for p := range ps {
			r := &kgo.Record{Topic: topic, Partition: p, Value: []byte("after")}
			if err := admin.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("acks=all to partition %d without node 3: %v", p, err)
			}
		}
		for _, id := range sc.c.BrokerIDs() {
			if !sc.c.Live(id) {
				t.Fatalf("node %d is not running", id)
			}
		}
		if cc, ok := sc.c.(*cascadecluster.Cluster); ok {
			log, err := os.ReadFile(cc.Node(3).LogPath())
			if err != nil {
				t.Fatal(err)
			}
			const why = "a peer refused this node's credentials or certificate on the inter-broker listener INTERNAL"
			line := ""
			for _, l := range strings.Split(string(log), "\n") {
				if strings.Contains(l, why) {
					line = l
					break
				}
			}
			if line == "" {
				t.Fatalf("no line of node 3's log says why its fetches are refused:\n%s", cluster.ReadTail(cc.Node(3).LogPath(), 4000))
			}
			t.Logf("node 3 logs: %s", line)
		}
	})
}

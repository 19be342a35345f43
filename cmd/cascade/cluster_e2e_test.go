package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/group"
)

// clusterProc is one cascade process of a three-node test cluster.
type clusterProc struct {
	id     int
	dir    string
	conf   string
	client string
	cmd    *exec.Cmd
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (p *clusterProc) start(t *testing.T, bin string, logs *syncBuffer) {
	t.Helper()
	p.cmd = exec.Command(bin, "-config", p.conf)
	p.cmd.Stdout, p.cmd.Stderr = logs, logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
}

func (p *clusterProc) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
		p.cmd = nil
	}
}

// waitFor polls cond every 100 ms until it holds or bound passes, and
// returns how long it took.
func waitFor(t *testing.T, bound time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < bound {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not within %v", what, bound)
	return 0
}

// TestClusterThreeProcesses starts three combined broker,controller
// processes of cmd/cascade from Kafka KRaft server.properties and checks
// through franz-go that they form one cluster: every broker is listed, an
// RF=1 topic is spread over all three and serves produce and fetch on each
// partition, a replication factor above the broker count is refused, and after SIGKILL of
// the active controller a new one is elected, admin requests work again,
// the dead broker is fenced, and the killed node, restarted from its
// directory, rejoins and serves its partitions again.
func TestClusterThreeProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/cascade and starts three processes")
	}
	tc := startTestCluster(t)
	bin, procs, logs, seeds, ctlPorts := tc.bin, tc.procs, tc.logs, tc.seeds, tc.ctlPorts

	// tc's client polls Metadata for changes with a 50 ms MetadataMinAge.
	cl, adm := tc.cl, tc.adm
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	liveBrokers := func() map[int32]bool {
		c, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		m, err := adm.BrokerMetadata(c)
		if err != nil {
			return nil
		}
		out := map[int32]bool{}
		for _, b := range m.Brokers {
			out[b.NodeID] = true
		}
		return out
	}
	// liveBrokersOn asks one broker for Metadata, so a stopped broker
	// does not hold up the poll.
	liveBrokersOn := func(id int) map[int32]bool {
		c, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		m, err := kmsg.NewPtrMetadataRequest().RequestWith(c, cl.Broker(id))
		if err != nil {
			return nil
		}
		out := map[int32]bool{}
		for _, b := range m.Brokers {
			out[b.NodeID] = true
		}
		return out
	}
	formed := waitFor(t, 60*time.Second, "three brokers in Metadata", func() bool { return len(liveBrokers()) == 3 })
	t.Logf("cluster formed: Metadata lists 3 brokers %v after start", formed)

	const topic = "spread"
	if _, err := adm.CreateTopic(ctx, 6, 1, nil, topic); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	leaders := func(name string) map[int32]int32 { return partitionLeaders(ctx, adm, name) }
	var placed map[int32]int32
	waitFor(t, 20*time.Second, "6 partitions with leaders", func() bool {
		placed = leaders(topic)
		if len(placed) != 6 {
			return false
		}
		for _, l := range placed {
			if l < 0 {
				return false
			}
		}
		return true
	})
	byBroker := map[int32][]int32{}
	for p, l := range placed {
		byBroker[l] = append(byBroker[l], p)
	}
	if len(byBroker) != 3 {
		t.Fatalf("partitions not spread over the three brokers: %v", placed)
	}

	// A broker that does not lead a partition refuses Produce and
	// ListOffsets for it, naming the leader (KIP-951) where it can.
	p0, l0 := int32(0), placed[0]
	notLeader := int32(1 + l0%3)
	tm, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	// franz-go sends its highest version the broker supports: v13 names
	// the topic by id.
	pr := kmsg.NewPtrProduceRequest()
	pr.Acks, pr.TimeoutMillis = -1, 5000
	prt := kmsg.NewProduceRequestTopic()
	prt.Topic, prt.TopicID = topic, tm.Topics[topic].ID
	prp := kmsg.NewProduceRequestTopicPartition()
	prp.Partition = p0
	prt.Partitions = append(prt.Partitions, prp)
	pr.Topics = append(pr.Topics, prt)
	prResp, err := pr.RequestWith(ctx, cl.Broker(int(notLeader)))
	if err != nil {
		t.Fatal(err)
	}
	if sp := prResp.Topics[0].Partitions[0]; sp.ErrorCode != kerr.NotLeaderForPartition.Code || sp.CurrentLeader.LeaderID != l0 ||
		len(prResp.Brokers) != 1 || prResp.Brokers[0].NodeID != l0 {
		t.Fatalf("Produce to broker %d for a partition led by %d: %+v, brokers %+v", notLeader, l0, sp, prResp.Brokers)
	}
	lo := kmsg.NewPtrListOffsetsRequest()
	lot := kmsg.NewListOffsetsRequestTopic()
	lot.Topic = topic
	lop := kmsg.NewListOffsetsRequestTopicPartition()
	lop.Partition, lop.Timestamp = p0, -1
	lot.Partitions = append(lot.Partitions, lop)
	lo.Topics = append(lo.Topics, lot)
	loResp, err := lo.RequestWith(ctx, cl.Broker(int(notLeader)))
	if err != nil || loResp.Topics[0].Partitions[0].ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("ListOffsets to broker %d for a partition led by %d: %v %+v", notLeader, l0, err, loResp)
	}

	produceAll := func(value string, parts []int32) {
		t.Helper()
		produceEach(t, ctx, cl, topic, value, parts)
	}
	consume := func(parts []int32, want int) map[string]int {
		t.Helper()
		return consumeFromStart(t, ctx, seeds, topic, parts, want, 30*time.Second)
	}
	all := []int32{0, 1, 2, 3, 4, 5}
	produceAll("first", all)
	got := consume(all, 6)
	for _, p := range all {
		if got[fmt.Sprintf("%d:first", p)] != 1 {
			t.Fatalf("partition %d not read back: %v", p, got)
		}
	}

	// A consumer group: every node's FindCoordinator names the leader of
	// the group's __consumer_offsets partition, its coordinator.
	gc, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup("cluster-group"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	grouped := 0
	groupDeadline := time.Now().Add(45 * time.Second)
	for grouped < 6 && time.Now().Before(groupDeadline) {
		c, cancel := context.WithTimeout(ctx, 3*time.Second)
		fs := gc.PollFetches(c)
		cancel()
		grouped += fs.NumRecords()
	}
	if grouped < 6 {
		t.Fatalf("consumer group read %d of 6 records", grouped)
	}
	if err := gc.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("committing group offsets: %v", err)
	}
	gc.Close()
	groupLeader := leaders("__consumer_offsets")[group.PartitionFor("cluster-group", int32(len(leaders("__consumer_offsets"))))]
	for _, p := range procs {
		if id, code := findCoordinator(ctx, cl, p.id, 0, "cluster-group"); code != 0 || id != groupLeader || id < 1 {
			t.Fatalf("FindCoordinator on node %d: node %d code %d, want the partition leader %d", p.id, id, code, groupLeader)
		}
	}

	// Admin requests sent to a broker that is not the active controller
	// are forwarded to it.
	dc := kmsg.NewPtrDescribeClusterRequest()
	dcResp, err := dc.RequestWith(ctx, cl.Broker(1))
	if err != nil || dcResp.ErrorCode != 0 || len(dcResp.Brokers) != 3 {
		t.Fatalf("DescribeCluster: %v %+v", err, dcResp)
	}
	other := int32(1)
	if dcResp.ControllerID == 1 {
		other = 2
	}
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.TimeoutMillis = 10000
	ctt := kmsg.NewCreateTopicsRequestTopic()
	ctt.Topic, ctt.NumPartitions, ctt.ReplicationFactor = "forwarded", 3, 1
	ct.Topics = append(ct.Topics, ctt)
	ctResp, err := ct.RequestWith(ctx, cl.Broker(int(other)))
	if err != nil || ctResp.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics through broker %d (controller %d): %v %+v", other, dcResp.ControllerID, err, ctResp)
	}
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.TimeoutMillis = 10000
	dtt := kmsg.NewDeleteTopicsRequestTopic()
	dtt.Topic = kmsg.StringPtr("forwarded")
	dt.Topics = append(dt.Topics, dtt)
	dt.TopicNames = []string{"forwarded"}
	dtResp, err := dt.RequestWith(ctx, cl.Broker(int(other)))
	if err != nil || dtResp.Topics[0].ErrorCode != 0 {
		t.Fatalf("DeleteTopics through broker %d: %v %+v", other, err, dtResp)
	}

	// The controller listener of a controller that is not active answers
	// NOT_CONTROLLER; the active one's creates the topic.
	ctlRequest := func(id int32, name string) int16 {
		t.Helper()
		cc, err := kgo.NewClient(kgo.SeedBrokers(fmt.Sprintf("127.0.0.1:%d", ctlPorts[id-1])))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 10000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cc.SeedBrokers()[0])
		if err != nil {
			t.Fatalf("CreateTopics on controller listener %d: %v", id, err)
		}
		return resp.Topics[0].ErrorCode
	}
	if code := ctlRequest(other, "direct"); code != kerr.NotController.Code {
		t.Fatalf("CreateTopics on inactive controller %d: code %d, want NOT_CONTROLLER", other, code)
	}
	if code := ctlRequest(dcResp.ControllerID, "direct"); code != 0 {
		t.Fatalf("CreateTopics on active controller %d: code %d", dcResp.ControllerID, code)
	}

	// sarama: Metadata and a produce to a partition of every broker.
	scfg := sarama.NewConfig()
	scfg.Version = sarama.V3_0_0_0
	scfg.Producer.Return.Successes = true
	scfg.Producer.Partitioner = sarama.NewManualPartitioner
	sc, err := sarama.NewClient(seeds, scfg)
	if err != nil {
		t.Fatalf("sarama client: %v", err)
	}
	if n := len(sc.Brokers()); n != 3 {
		t.Fatalf("sarama sees %d brokers", n)
	}
	sp, err := sarama.NewSyncProducerFromClient(sc)
	if err != nil {
		t.Fatal(err)
	}
	for _, parts := range byBroker {
		if _, _, err := sp.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: parts[0], Value: sarama.StringEncoder("sarama")}); err != nil {
			t.Fatalf("sarama produce to partition %d: %v", parts[0], err)
		}
	}
	sp.Close()
	sc.Close()

	// Topics are replicated to every broker there is, and no further.
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "replicated"); err != nil {
		t.Fatalf("RF=3 CreateTopic: %v", err)
	}
	res, err := adm.CreateTopic(ctx, 1, 4, nil, "overreplicated")
	if !errors.Is(err, kerr.InvalidReplicationFactor) && !errors.Is(res.Err, kerr.InvalidReplicationFactor) {
		t.Fatalf("RF=4 CreateTopic on three brokers: %v / %v, want INVALID_REPLICATION_FACTOR", err, res.Err)
	}

	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ctlID := md.Controller
	if ctlID < 1 || ctlID > 3 {
		t.Fatalf("DescribeCluster controller %d", ctlID)
	}
	victim := procs[ctlID-1]
	killed := time.Now()
	victim.kill()
	electedIn := waitFor(t, 30*time.Second, "a new active controller", func() bool {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		d, err := adm.BrokerMetadata(c)
		return err == nil && d.Controller > 0 && d.Controller != ctlID
	})
	adminIn := waitFor(t, 30*time.Second, "CreateTopics after failover", func() bool {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		r, err := adm.CreateTopic(c, 2, 1, nil, "after-failover")
		return err == nil && r.Err == nil || errors.Is(r.Err, kerr.TopicAlreadyExists)
	})
	adminIn = time.Since(killed)
	alter := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("3600000")}}
	if rs, err := adm.AlterTopicConfigs(ctx, alter, "after-failover"); err != nil || rs[0].Err != nil {
		t.Fatalf("IncrementalAlterConfigs after failover: %v %v", err, rs)
	}
	if rs, err := adm.DeleteTopics(ctx, "after-failover"); err != nil || rs["after-failover"].Err != nil {
		t.Fatalf("DeleteTopics after failover: %v %v", err, rs)
	}
	fencedIn := waitFor(t, 30*time.Second, "the killed broker fenced", func() bool {
		b := liveBrokers()
		return len(b) == 2 && !b[ctlID]
	})
	fencedIn = time.Since(killed)
	t.Logf("kill -9 of active controller %d: new active controller seen after %v; CreateTopics answered %v after the kill; dead broker out of Metadata %v after the kill",
		ctlID, electedIn, adminIn, fencedIn)
	for p, l := range leaders(topic) {
		if l == ctlID {
			t.Fatalf("partition %d still led by the killed broker", p)
		}
		if placed[p] == ctlID && l != -1 {
			t.Fatalf("partition %d of the killed broker has leader %d, want -1", p, l)
		}
	}

	// The restarted node serves only once it caught up with the metadata
	// log: no answer of its own shows it leading at the epochs it had
	// before its fencing.
	fencedEpochs := map[int32]int32{}
	if m, err := adm.Metadata(ctx, topic); err == nil {
		for _, p := range m.Topics[topic].Partitions {
			fencedEpochs[p.Partition] = p.LeaderEpoch
		}
	}
	victim.start(t, bin, logs[ctlID-1])
	restarted := time.Now()
	stale := ""
	waitFor(t, 60*time.Second, "the restarted node answering Metadata", func() bool {
		conn, err := net.DialTimeout("tcp", victim.client, time.Second)
		if err != nil {
			return false
		}
		defer conn.Close()
		rc, err := kgo.NewClient(kgo.SeedBrokers(victim.client))
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(c, rc.SeedBrokers()[0])
		if err != nil {
			return false
		}
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				if p.Leader == ctlID && p.LeaderEpoch < fencedEpochs[p.Partition] {
					stale = fmt.Sprintf("partition %d led by %d at epoch %d, fenced at epoch %d", p.Partition, p.Leader, p.LeaderEpoch, fencedEpochs[p.Partition])
				}
			}
		}
		return true
	})
	if stale != "" {
		t.Fatalf("the restarted node answered from its pre-crash image: %s", stale)
	}
	waitFor(t, 60*time.Second, "the restarted broker leading its partitions again", func() bool {
		now := leaders(topic)
		for _, p := range byBroker[ctlID] {
			if now[p] != ctlID {
				return false
			}
		}
		return len(liveBrokers()) == 3
	})
	t.Logf("restarted node %d unfenced and leading its partitions %v after %v", ctlID, byBroker[ctlID], time.Since(restarted))
	produceAll("second", byBroker[ctlID])
	got = consume(byBroker[ctlID], 2*len(byBroker[ctlID])+1) // and sarama's on the first
	if got[fmt.Sprintf("%d:sarama", byBroker[ctlID][0])] != 1 {
		t.Fatalf("sarama's record after restart: %v", got)
	}
	for _, p := range byBroker[ctlID] {
		if got[fmt.Sprintf("%d:first", p)] != 1 || got[fmt.Sprintf("%d:second", p)] != 1 {
			t.Fatalf("partition %d after restart: %v", p, got)
		}
	}

	// A broker that stops heartbeating while its sockets stay open
	// (SIGSTOP) is fenced after broker.session.timeout.ms (9 s), and
	// unfenced when it heartbeats again.
	var paused *clusterProc
	for _, p := range procs {
		if p.cmd != nil && int32(p.id) != ctlID {
			if m, err := adm.BrokerMetadata(ctx); err == nil && m.Controller != int32(p.id) {
				paused = p
				break
			}
		}
	}
	if paused == nil {
		t.Fatal("no broker to pause")
	}
	stopped := time.Now()
	if err := paused.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	asked := 1
	if paused.id == 1 {
		asked = 2
	}
	waitFor(t, 30*time.Second, "the paused broker fenced", func() bool {
		b := liveBrokersOn(asked)
		return len(b) == 2 && !b[int32(paused.id)]
	})
	sessionFenced := time.Since(stopped)
	// Its last heartbeat was at most broker.heartbeat.interval.ms (2 s)
	// before the stop.
	if sessionFenced < 6*time.Second {
		t.Fatalf("paused broker fenced %v after the stop, before the 9 s session timeout could lapse", sessionFenced)
	}
	if err := paused.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	waitFor(t, 30*time.Second, "the resumed broker unfenced", func() bool { return len(liveBrokersOn(asked)) == 3 })
	t.Logf("SIGSTOP of broker %d: fenced %v after the stop; unfenced %v after SIGCONT",
		paused.id, sessionFenced, time.Since(resumed))

	// SIGKILL of a broker that is not the controller: its heartbeat
	// connection resets and its controller listener refuses a dial, so the
	// controller fences it at once (controller.BrokerGone). Its last
	// heartbeat was at most broker.heartbeat.interval.ms (2 s) before the
	// kill, so the 9 s session timeout cannot fence it within 6 s.
	killed = time.Now()
	paused.kill()
	waitFor(t, 30*time.Second, "the killed broker fenced", func() bool {
		b := liveBrokersOn(asked)
		return len(b) == 2 && !b[int32(paused.id)]
	})
	goneIn := time.Since(killed)
	if goneIn > 6*time.Second {
		t.Fatalf("a killed broker was fenced only after %v: by its session timeout, not at once", goneIn)
	}
	paused.start(t, bin, logs[paused.id-1])
	waitFor(t, 60*time.Second, "the killed broker back", func() bool { return len(liveBrokersOn(asked)) == 3 })
	t.Logf("SIGKILL of broker %d (not the controller): fenced %v after the kill", paused.id, goneIn)

	// SIGTERM stops every node cleanly (exit status 0) within a bound,
	// the quorum losing its majority on the way.
	for _, p := range procs {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range procs {
		done := make(chan error, 1)
		go func() { done <- p.cmd.Wait() }()
		select {
		case err := <-done:
			p.cmd = nil
			if err != nil {
				t.Errorf("node %d stopped with %v", p.id, err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("node %d did not stop within 20 s of SIGTERM", p.id)
		}
	}
}

// produceEach produces value to each of parts of topic, one synchronous
// record per partition, and fails the test on the first error.
func produceEach(t *testing.T, ctx context.Context, cl *kgo.Client, topic, value string, parts []int32) {
	t.Helper()
	for _, p := range parts {
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := cl.ProduceSync(c, &kgo.Record{Topic: topic, Partition: p, Value: []byte(value)}).FirstErr()
		cancel()
		if err != nil {
			t.Fatalf("produce to %s-%d: %v", topic, p, err)
		}
	}
}

// consumeFromStart reads parts of topic from their start with a new client
// until want records came back or bound passed, and returns how often
// each "partition:value" was read.
func consumeFromStart(t *testing.T, ctx context.Context, seeds []string, topic string, parts []int32, want int, bound time.Duration) map[string]int {
	t.Helper()
	offs := map[int32]kgo.Offset{}
	for _, p := range parts {
		offs[p] = kgo.NewOffset().AtStart()
	}
	cc, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	got := map[string]int{}
	n := 0
	deadline := time.Now().Add(bound)
	for n < want && time.Now().Before(deadline) {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cc.PollFetches(c)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			got[fmt.Sprintf("%d:%s", r.Partition, r.Value)]++
			n++
		})
	}
	if n < want {
		t.Fatalf("read %d of %d records back: %v", n, want, got)
	}
	return got
}

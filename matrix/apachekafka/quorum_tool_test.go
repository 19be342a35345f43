package apachekafka

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterControllerAPIsReference records, on a three-node Kafka
// cluster, what Cascade's cluster tests (cmd/cascade) hold Cascade to:
// kafka-metadata-quorum describe --status and --replication through a
// broker, DescribeQuorum forwarded by a broker, ElectLeaders codes for a
// replication-factor-1 topic, and the answer to CreateTopics through a
// broker that reaches no controller (two of three nodes paused). It takes
// about two minutes of three JVMs (Kafka answers that CreateTopics after
// 60 s), so it runs only with CASCADE_KAFKA_REFERENCE=1: what it records
// is Kafka's behaviour, which changes only with Kafka's version.
func TestClusterControllerAPIsReference(t *testing.T) {
	if os.Getenv("CASCADE_KAFKA_REFERENCE") == "" {
		t.Skip("a reference recording of Apache Kafka; run with CASCADE_KAFKA_REFERENCE=1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startClusterOrSkip(t, ctx, ClusterOptions{})
	q, err := c.ActiveController(ctx)
	if err != nil {
		t.Fatal(err)
	}
	asked := 1 + q.LeaderID%3
	broker := c.Node(asked).Addr

	status, err := c.dist.Run(ctx, "org.apache.kafka.tools.MetadataQuorumCommand", "--bootstrap-server", broker, "describe", "--status")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kafka-metadata-quorum describe --status:\n%s", status)
	for _, want := range []string{"LeaderId:               " + strconv.Itoa(q.LeaderID), "CurrentVoters:", "HighWatermark:"} {
		if !strings.Contains(string(status), want) {
			t.Errorf("--status lacks %q", want)
		}
	}
	repl, err := c.dist.Run(ctx, "org.apache.kafka.tools.MetadataQuorumCommand", "--bootstrap-server", broker, "describe", "--replication")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kafka-metadata-quorum describe --replication:\n%s", repl)

	dq := kmsg.NewPtrDescribeQuorumRequest()
	dt := kmsg.NewDescribeQuorumRequestTopic()
	dt.Topic = metadataTopic
	dt.Partitions = append(dt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	dq.Topics = append(dq.Topics, dt)
	resp, err := c.Request(ctx, asked, dq)
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.(*kmsg.DescribeQuorumResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || int(p.LeaderID) != q.LeaderID {
		t.Fatalf("DescribeQuorum through broker %d: %+v", asked, resp)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BrokerAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.TimeoutMillis = 10000
	ctt := kmsg.NewCreateTopicsRequestTopic()
	ctt.Topic, ctt.NumPartitions, ctt.ReplicationFactor = "elect", 3, 1
	ct.Topics = append(ct.Topics, ctt)
	if r, err := ct.RequestWith(ctx, cl); err != nil || r.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics: %v %+v", err, r)
	}
	el := kmsg.NewPtrElectLeadersRequest()
	el.TimeoutMillis = 10000
	et := kmsg.NewElectLeadersRequestTopic()
	et.Topic, et.Partitions = "elect", []int32{0, 9}
	el.Topics = append(el.Topics, et)
	var codes []int16
	if err := poll(ctx, func() error {
		r, err := c.Request(ctx, asked, el)
		if err != nil {
			return err
		}
		codes = codes[:0]
		for _, p := range r.(*kmsg.ElectLeadersResponse).Topics[0].Partitions {
			codes = append(codes, p.ErrorCode)
		}
		if len(codes) != 2 || codes[0] == kerr.UnknownTopicOrPartition.Code {
			return kerr.UnknownTopicOrPartition // the topic is not yet known
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if codes[0] != kerr.ElectionNotNeeded.Code || codes[1] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("ElectLeaders codes %v", codes)
	}

	// Two of three nodes paused, the active controller among them.
	for _, n := range c.Nodes() {
		if n.ID != asked {
			if err := c.Pause(n.ID); err != nil {
				t.Fatal(err)
			}
			defer c.Resume(n.ID)
		}
	}
	nc, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.RequestRetries(0), kgo.RequestTimeoutOverhead(90*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ct.Topics[0].Topic = "never"
	ct.TimeoutMillis = 5000
	start := time.Now()
	r, err := ct.RequestWith(ctx, nc.SeedBrokers()[0])
	if err != nil {
		t.Fatalf("CreateTopics without a controller, after %v: %v", time.Since(start), err)
	}
	t.Logf("CreateTopics through broker %d with no controller reachable: code %d (%v) after %v",
		asked, r.Topics[0].ErrorCode, kerr.ErrorForCode(r.Topics[0].ErrorCode), time.Since(start))
	if r.Topics[0].ErrorCode != kerr.RequestTimedOut.Code {
		t.Errorf("CreateTopics without a controller: code %d, want REQUEST_TIMED_OUT", r.Topics[0].ErrorCode)
	}
}

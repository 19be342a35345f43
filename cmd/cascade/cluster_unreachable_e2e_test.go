package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterControllerUnreachable stops (SIGSTOP) two of three nodes, the
// active controller among them, so the third has no quorum and no
// controller. It keeps serving produce (acks=all) and fetch for the
// partitions it leads from its last metadata image; CreateTopics through
// it is answered REQUEST_TIMED_OUT once the request's timeout passes, and
// nothing is created: the request it forwarded waited in the stopped
// controller's socket, and the resumed controller drops it, since the
// broker had given up on it. After SIGCONT the cluster serves admin
// requests again and every acknowledged record is read back.
func TestClusterControllerUnreachable(t *testing.T) {
	c := startTestCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const topic = "isolated"
	placed := c.createTopic(topic, 6)
	ctl := c.controller(1)
	survivor := 1 + int(ctl)%3
	var mine []int32
	for p, l := range placed {
		if l == int32(survivor) {
			mine = append(mine, p)
		}
	}
	slices.Sort(mine)
	if len(mine) == 0 {
		t.Fatalf("broker %d leads nothing: %v", survivor, placed)
	}
	acked := map[string]bool{}
	produce := func(cl *kgo.Client, value string, parts []int32) {
		t.Helper()
		for _, p := range parts {
			pc, pcancel := context.WithTimeout(ctx, 20*time.Second)
			err := cl.ProduceSync(pc, &kgo.Record{Topic: topic, Partition: p, Value: []byte(value)}).FirstErr()
			pcancel()
			if err != nil {
				t.Fatalf("produce %s to %d: %v", value, p, err)
			}
			acked[fmt.Sprintf("%d:%s", p, value)] = true
		}
	}
	all := []int32{0, 1, 2, 3, 4, 5}
	produce(c.cl, "before", all)

	var stopped []*clusterProc
	for _, p := range c.procs {
		if p.id != survivor {
			if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			stopped = append(stopped, p)
		}
	}
	resume := func() {
		for _, p := range stopped {
			p.cmd.Process.Signal(syscall.SIGCONT)
		}
		stopped = nil
	}
	defer resume()
	// A client that reaches only the survivor (a stopped process accepts
	// connections but never answers them) and produces without
	// idempotence: a producer id comes from a block the controller hands
	// out, as in Kafka, and this broker may hold none yet.
	var dead []string
	for _, p := range c.procs {
		if p.id != survivor {
			dead = append(dead, p.client)
		}
	}
	d := &net.Dialer{Timeout: time.Second}
	only, err := kgo.NewClient(kgo.SeedBrokers(c.seeds[survivor-1]), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RequestTimeoutOverhead(5*time.Second), kgo.RetryTimeout(20*time.Second),
		kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			if slices.Contains(dead, host) {
				return nil, errors.New("stopped in this test")
			}
			return d.DialContext(ctx, network, host)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer only.Close()
	// At once, while the survivor still takes the stopped node for the
	// active controller: the request reaches that node's socket and waits
	// there, and must not run when the node resumes.
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.TimeoutMillis = 5000
	ctt := kmsg.NewCreateTopicsRequestTopic()
	ctt.Topic, ctt.NumPartitions, ctt.ReplicationFactor = "never", 1, 1
	ct.Topics = append(ct.Topics, ctt)
	asked := time.Now()
	ctResp, err := ct.RequestWith(ctx, only.Broker(survivor))
	answered := time.Since(asked)
	if err != nil || len(ctResp.Topics) != 1 || ctResp.Topics[0].ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("CreateTopics without a controller: %v %+v", err, ctResp)
	}
	if answered > 15*time.Second {
		t.Fatalf("CreateTopics without a controller answered after %v, past its 5 s timeout", answered)
	}
	t.Logf("CreateTopics through broker %d with no controller reachable: REQUEST_TIMED_OUT after %v", survivor, answered)

	produce(only, "during", mine)
	got := c.leadersOn(survivor, topic)
	for _, p := range mine {
		if got[p] != int32(survivor) {
			t.Fatalf("the survivor's Metadata for partition %d: leader %d", p, got[p])
		}
	}

	resume()
	resumed := time.Now()
	waitFor(t, 60*time.Second, "CreateTopics after SIGCONT", func() bool {
		cc, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		r, err := c.adm.CreateTopic(cc, 1, 1, nil, "after-resume")
		return err == nil && (r.Err == nil || errors.Is(r.Err, kerr.TopicAlreadyExists))
	})
	t.Logf("admin requests served again %v after SIGCONT", time.Since(resumed))
	for _, p := range c.procs {
		if strings.Contains(c.logs[p.id-1].String(), "dropped a forwarded request whose sender gave up on it") {
			t.Logf("node %d dropped the forwarded CreateTopics that waited in its socket", p.id)
		}
	}
	// Every node has applied a batch committed after the timed-out
	// request; none has the topic it asked for.
	waitFor(t, 30*time.Second, "three brokers after SIGCONT", func() bool { return len(c.liveOn(survivor)) == 3 })
	for _, p := range c.procs {
		waitFor(t, 30*time.Second, fmt.Sprintf("node %d seeing after-resume", p.id), func() bool {
			return len(c.leadersOn(p.id, "after-resume")) == 1
		})
		mr := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("never")
		mr.Topics = append(mr.Topics, rt)
		resp, err := mr.RequestWith(ctx, c.cl.Broker(p.id))
		if err != nil || resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("the timed-out topic on node %d: %v %+v", p.id, err, resp)
		}
	}
	waitFor(t, 60*time.Second, "every partition led again", func() bool {
		l := c.leadersOn(survivor, topic)
		for _, p := range all {
			if l == nil || l[p] < 0 {
				return false
			}
		}
		return true
	})
	produce(c.cl, "after", all)

	offs := map[int32]kgo.Offset{}
	for _, p := range all {
		offs[p] = kgo.NewOffset().AtStart()
	}
	cc, err := kgo.NewClient(kgo.SeedBrokers(c.seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	read := map[string]bool{}
	for deadline := time.Now().Add(30 * time.Second); len(read) < len(acked) && time.Now().Before(deadline); {
		pc, pcancel := context.WithTimeout(ctx, 2*time.Second)
		cc.PollFetches(pc).EachRecord(func(r *kgo.Record) { read[fmt.Sprintf("%d:%s", r.Partition, r.Value)] = true })
		pcancel()
	}
	for k := range acked {
		if !read[k] {
			t.Errorf("acknowledged record %s not read back", k)
		}
	}
	if len(read) != len(acked) {
		t.Fatalf("read %d records, %d acknowledged: %v", len(read), len(acked), read)
	}
}

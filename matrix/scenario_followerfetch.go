package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/faults/proxy"
	"github.com/cascade-kafka/cascade/matrix/cluster"
	"github.com/cascade-kafka/cascade/matrix/driver"
)

// faultTopic returns the cell's cluster (faultCluster) and a new
// one-partition topic holding 20 records written by d with acks=all.
func faultTopic(ctx context.Context, e *Env, d driver.Driver, name string) (cluster.Cluster, string, []driver.Record, error) {
	c, err := faultCluster(ctx, e)
	if err != nil {
		return nil, "", nil, err
	}
	topic := e.Topic(name + "-" + d.Client())
	if err := createTopic(ctx, e, d, topic, 1, nil); err != nil {
		return nil, "", nil, err
	}
	recs := make([]driver.Record, 20)
	for i := range recs {
		recs[i] = driver.Record{Partition: 0, Value: []byte(fmt.Sprintf("%s-%d", topic, i))}
	}
	if _, err := produceOK(ctx, d, driver.Produce{Topic: topic, Records: recs, Acks: -1}); err != nil {
		return nil, "", nil, err
	}
	return c, topic, recs, nil
}

// expectOffsets requires recs to be n records at offsets from, from+1...
func expectOffsets(recs []driver.Record, from int64, n int) error {
	if len(recs) < n {
		return fmt.Errorf("read %d records, want %d", len(recs), n)
	}
	for i, r := range recs[:n] {
		if r.Offset != from+int64(i) {
			return fmt.Errorf("record %d at offset %d, want %d", i, r.Offset, from+int64(i))
		}
	}
	return nil
}

// fetchCounterToxicType is the proxy toxic that counts Fetch requests.
const fetchCounterToxicType = "matrix_fetch_counter"

func init() {
	proxy.Register(fetchCounterToxicType, func() any { return &countingToxic{Match: proxy.Match{APIKey: 1}} })
}

// followerFetchScenario is KIP-392 on a cluster target, whose brokers are
// in racks rack-a, rack-b, rack-c with Kafka's RackAwareReplicaSelector: a
// consumer naming the rack of a follower of its partition is sent there by
// the leader (PreferredReadReplica) and reads everything from it. Its
// connections go through faults/proxy, one proxy per broker counting the
// Fetch requests it carries, so the cell sees from the broker side which
// broker served the consumer: it fails when every fetch went to the
// leader.
var followerFetchScenario = Scenario{
	ID:    "11.follower-fetch",
	Title: "a consumer with client.rack reads from its rack's follower (KIP-392, RackAwareReplicaSelector), counted at the brokers",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		c, topic, recs, err := faultTopic(ctx, e, d, "follower-fetch")
		if err != nil {
			return "", err
		}
		leader, err := cluster.Leader(ctx, c, topic, 0)
		if err != nil {
			return "", err
		}
		follower := leader%len(c.BrokerIDs()) + 1
		// Every record is on the follower and below its high watermark
		// (the leader's, passed on in its next fetch answer).
		if err := cluster.Poll(ctx, cluster.PollInterval, func() error { return replicaCaughtUp(ctx, c, follower, topic, int64(len(recs))) }); err != nil {
			return "", fmt.Errorf("follower node %d: %w", follower, err)
		}
		g, front, counters, err := countingProxies(ctx, c, topic)
		if err != nil {
			return "", err
		}
		defer g.Close()
		defer func() {
			toxicCountsMu.Lock()
			for _, k := range counters {
				delete(toxicCounts, k)
			}
			toxicCountsMu.Unlock()
		}()
		v, err := e.OpenOn(ctx, d.Client(), front)
		if err != nil {
			return "", err
		}
		defer v.Close()
		got, err := v.Consume(ctx, driver.Consume{Topic: topic, Partition: 0, From: 0, Count: len(recs), TimeoutMs: 15000, Rack: ClusterRack(follower)})
		if err == nil && got.Error != nil {
			err = got.Error
		}
		if err != nil {
			return "", fmt.Errorf("consume in %s: %w", ClusterRack(follower), err)
		}
		if err := expectOffsets(got.Records, 0, len(recs)); err != nil {
			return "", err
		}
		toxicCountsMu.Lock()
		byNode := map[int]int{}
		for id, k := range counters {
			byNode[id] = toxicCounts[k]
		}
		toxicCountsMu.Unlock()
		if byNode[follower] == 0 {
			return "", fmt.Errorf("consumer in %s read all %d records but sent no Fetch to the follower there, node %d (Fetch requests by node: %v; leader %d)", ClusterRack(follower), len(recs), follower, byNode, leader)
		}
		return fmt.Sprintf("leader node %d sent the %s consumer to follower node %d, which served %d of its Fetch requests (by node: %v); all %d records read", leader, ClusterRack(follower), follower, byNode[follower], byNode, len(recs)), nil
	},
	Timeout: 60 * time.Second,
	Cluster: true,
}

// replicaCaughtUp succeeds once node id's replica of topic/0 serves a
// consumer (a Fetch with replica id -1, as KIP-392 lets a follower answer)
// the record at offset n-1 below its high watermark.
func replicaCaughtUp(ctx context.Context, c cluster.Cluster, id int, topic string, n int64) error {
	md, err := c.Request(ctx, id, cluster.MetadataRequest([]string{topic}))
	if err != nil {
		return err
	}
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MaxBytes = 0, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	// Fetch names the topic up to v12 and identifies it from v13 on.
	ft.Topic = topic
	for _, t := range md.(*kmsg.MetadataResponse).Topics {
		if t.Topic != nil && *t.Topic == topic {
			ft.TopicID = t.TopicID
		}
	}
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = 0, n-1, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	resp, err := c.Request(ctx, id, req)
	if err != nil {
		return err
	}
	if code := resp.(*kmsg.FetchResponse).ErrorCode; code != 0 {
		return fmt.Errorf("fetch %s/0 at %d: %s", topic, n-1, driver.CodeName(code))
	}
	for _, t := range resp.(*kmsg.FetchResponse).Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return fmt.Errorf("fetch %s/0 at %d: %s", topic, n-1, driver.CodeName(p.ErrorCode))
			}
			if p.HighWatermark < n {
				return fmt.Errorf("high watermark %d, want %d", p.HighWatermark, n)
			}
			return nil
		}
	}
	return errors.New("no partition in the Fetch answer")
}

// countingProxies puts faults/proxy in front of every broker of c, each
// proxy counting its Fetch requests under its own counter, and returns
// the group (the caller closes it), the address a client bootstraps from,
// and each broker's counter.
func countingProxies(ctx context.Context, c cluster.Cluster, tag string) (*proxy.Group, string, map[int]string, error) {
	g := proxy.NewGroup(proxy.Options{})
	counters := map[int]string{}
	seeds := c.Seeds()
	front := ""
	for i, id := range c.BrokerIDs() {
		counter := fmt.Sprintf("%s-node-%d", tag, id)
		attrs, err := json.Marshal(map[string]any{"api_key": 1, "counter": counter})
		if err != nil {
			g.Close()
			return nil, "", nil, err
		}
		toxicCountsMu.Lock()
		toxicCounts[counter] = 0
		toxicCountsMu.Unlock()
		counters[id] = counter
		p, err := g.Add(counter, "127.0.0.1:0", seeds[i])
		if err == nil {
			err = p.AddToxic(proxy.ToxicSpec{Name: "count-fetch", Type: fetchCounterToxicType, Stream: "upstream", Toxicity: 1, Attributes: attrs})
		}
		if err != nil {
			g.Close()
			return nil, "", nil, fmt.Errorf("proxy to node %d at %s: %w", id, seeds[i], err)
		}
		if front == "" {
			front = p.Addr()
		}
	}
	return g, front, counters, nil
}

package replication

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/log"
)

// clients holds one franz-go client per leader endpoint, which negotiates
// versions with ApiVersions and keeps the connection, as Kafka's
// BrokerBlockingSender does for one fetcher.
type clients struct {
	cfg Config

	mu     sync.Mutex
	byAddr map[string]*kgo.Client
}

func newClients(cfg Config) *clients {
	return &clients{cfg: cfg, byAddr: map[string]*kgo.Client{}}
}

func (c *clients) get(addr string) (*kgo.Broker, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.byAddr[addr]
	if cl == nil {
		var err error
		dialTimeout := min(c.cfg.SocketTimeout, 5*time.Second)
		opts := []kgo.Opt{kgo.SeedBrokers(addr),
			kgo.ClientID("cascade-replica-fetcher-" + strconv.Itoa(int(c.cfg.NodeID))),
			kgo.DialTimeout(dialTimeout),
			kgo.RequestTimeoutOverhead(c.cfg.SocketTimeout),
			kgo.ConnIdleTimeout(time.Minute)}
		if dial := c.cfg.Dial; dial != nil {
			// franz-go's DialTimeout binds only its own dialer.
			opts = append(opts, kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
				ctx, cancel := context.WithTimeout(ctx, dialTimeout)
				defer cancel()
				return dial(ctx, network, host)
			}))
		}
		cl, err = kgo.NewClient(opts...)
		if err != nil {
			return nil, err
		}
		c.byAddr[addr] = cl
	}
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return nil, fmt.Errorf("replication: no connection to %s", addr)
	}
	return seeds[0], nil
}

func (c *clients) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for a, cl := range c.byAddr {
		cl.Close()
		delete(c.byAddr, a)
	}
}

// fetch sends one replica Fetch to addr.
func (c *clients) fetch(ctx context.Context, addr string, r *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	b, err := c.get(addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.SocketTimeout+time.Duration(r.MaxWaitMillis)*time.Millisecond)
	defer cancel()
	resp, err := r.RequestWith(ctx, b)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// listOffset asks the leader at addr for tp's offset at timestamp (-2 the
// log start, -1 the log end) as a replica does, with its replica id.
func (c *clients) listOffset(ctx context.Context, addr string, replicaID int32, tp log.TopicPartition, leaderEpoch int32, timestamp int64) (int64, error) {
	b, err := c.get(addr)
	if err != nil {
		return 0, err
	}
	r := kmsg.NewPtrListOffsetsRequest()
	r.ReplicaID = replicaID
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = tp.Topic
	p := kmsg.NewListOffsetsRequestTopicPartition()
	p.Partition, p.CurrentLeaderEpoch, p.Timestamp = tp.Partition, leaderEpoch, timestamp
	t.Partitions = append(t.Partitions, p)
	r.Topics = append(r.Topics, t)
	resp, err := r.RequestWith(ctx, b)
	if err != nil {
		return 0, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("replication: ListOffsets answer without %s-%d", tp.Topic, tp.Partition)
	}
	rp := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		return 0, err
	}
	return rp.Offset, nil
}

package broker

import (
	"context"
	"errors"
	"log/slog"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/partition"
	"github.com/cascade-kafka/cascade/broker/replication"
)

// newReplication is the ISR replication of a cluster node's partitions
// with more than one replica, as ReplicationConfigs configure it.
func newReplication(bc *config.Broker, parts *partition.Manager, n *clusterNode, cfg Config, logger *slog.Logger) *replication.Manager {
	r := bc.Cluster.Replication
	timeout := bc.Cluster.Quorum.RequestTimeout
	if timeout <= 0 {
		timeout = 2 * r.SocketTimeout
	}
	return replication.New(replication.Config{
		NodeID:                bc.NodeID,
		Listener:              bc.Cluster.InterBrokerListener,
		MinInsyncReplicas:     bc.MinInsyncReplicas,
		LagTimeMax:            r.LagTimeMax,
		FetchMaxBytes:         r.FetchMaxBytes,
		FetchResponseMaxBytes: r.FetchResponseMaxBytes,
		FetchMinBytes:         r.FetchMinBytes,
		FetchWaitMax:          r.FetchWaitMax,
		FetchBackoff:          r.FetchBackoff,
		SocketTimeout:         r.SocketTimeout,
		NumFetchers:           int(r.NumFetchers),
		Logger:                logger,
		Now:                   cfg.Now,
		Dial:                  n.peerDial,
	}, parts, &alterSender{n: n, client: newCtlClient("cascade-alter-partition-"+strconv.Itoa(int(n.self)), timeout, n.ctlDial)})
}

// alterSender sends a leader's AlterPartition to the active controller's
// listener, as Kafka's AlterPartitionManager over its controller channel.
type alterSender struct {
	n      *clusterNode
	client *ctlClient
}

func (s *alterSender) AlterPartition(ctx context.Context, r *kmsg.AlterPartitionRequest) (*kmsg.AlterPartitionResponse, error) {
	_, addr, ok := s.n.leader()
	if !ok {
		return nil, errors.New("broker: no active controller known")
	}
	resp, err := s.client.do(ctx, addr, r)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.AlterPartitionResponse), nil
}

func (s *alterSender) BrokerEpoch() int64 { return s.n.epoch.Load() }

// A cluster node's replication honours these.
func init() {
	for _, k := range []string{"replica.lag.time.max.ms", "replica.socket.timeout.ms", "replica.fetch.max.bytes",
		"replica.fetch.wait.max.ms", "replica.fetch.min.bytes", "replica.fetch.backoff.ms",
		"replica.fetch.response.max.bytes", "num.replica.fetchers"} {
		clusterKeys[k] = true
	}
}

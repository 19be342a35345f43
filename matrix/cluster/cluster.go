package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Cluster is a running multi-node Kafka-compatible cluster whose nodes are
// separate processes on loopback ports, each a broker and a voter of the
// metadata quorum, that a test can crash, stop, pause and restart one by
// one.
type Cluster interface {
	// Name describes the cluster's software, e.g. "Apache Kafka 4.4.0".
	Name() string
	// BrokerIDs returns the node ids that run a broker, in order.
	BrokerIDs() []int
	// Seeds returns every broker's address, for a client's bootstrap list.
	Seeds() []string
	// ControllerAddr returns node id's controller listener, or "" when it
	// is not a voter.
	ControllerAddr(id int) string
	// Live reports whether node id runs and is not paused.
	Live(id int) bool
	// Request sends req to node id's broker listener and returns the
	// answer, without retries or routing.
	Request(ctx context.Context, id int, req kmsg.Request) (kmsg.Response, error)
	// ControllerRequest sends req to node id's controller listener.
	ControllerRequest(ctx context.Context, id int, req kmsg.Request) (kmsg.Response, error)
	// Kill sends SIGKILL, as a crash would, and waits for the exit.
	Kill(id int) error
	// Stop sends SIGTERM and waits, bounded, for the exit.
	Stop(id int) error
	// Pause sends SIGSTOP: the node's sockets stay open, it says nothing.
	Pause(id int) error
	// Resume sends SIGCONT to a paused node.
	Resume(id int) error
	// Restart starts a killed or stopped node on the same directory, ports
	// and configuration, and returns when it is registered again.
	Restart(ctx context.Context, id int) error
	// Logs returns the last n bytes of every node's log.
	Logs(n int) string
	// Close kills every node and releases what the cluster holds.
	Close() error
}

// PollInterval is how often the Wait helpers ask again.
const PollInterval = 100 * time.Millisecond

// Poll calls f every interval until it returns nil or ctx ends, and then
// returns ctx's error with f's last.
func Poll(ctx context.Context, interval time.Duration, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}

// LiveBrokers returns the ids of the brokers that run and are not paused.
func LiveBrokers(c Cluster) []int {
	return slices.DeleteFunc(c.BrokerIDs(), func(id int) bool { return !c.Live(id) })
}

// MetadataRequest returns a Metadata request for topics; nil asks for every
// topic, an empty list for none.
func MetadataRequest(topics []string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	if topics != nil {
		req.Topics = []kmsg.MetadataRequestTopic{}
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	}
	return req
}

// Metadata asks the live brokers in id order, except avoid while another
// is live, for Metadata of topics (nil: every topic) and returns the first
// answer.
func Metadata(ctx context.Context, c Cluster, topics []string, avoid int) (*kmsg.MetadataResponse, error) {
	var order []int
	for _, id := range LiveBrokers(c) {
		if id != avoid {
			order = append(order, id)
		}
	}
	if avoid > 0 && c.Live(avoid) {
		order = append(order, avoid)
	}
	var errs []error
	req := MetadataRequest(topics)
	for _, id := range order {
		resp, err := c.Request(ctx, id, req)
		if err == nil {
			return resp.(*kmsg.MetadataResponse), nil
		}
		errs = append(errs, fmt.Errorf("node %d: %w", id, err))
	}
	if len(errs) == 0 {
		return nil, errors.New("cluster: no live broker")
	}
	return nil, fmt.Errorf("cluster: metadata: %w", errors.Join(errs...))
}

// DescribeQuorumRequest asks for the metadata log's partition,
// __cluster_metadata-0.
func DescribeQuorumRequest() *kmsg.DescribeQuorumRequest {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	return req
}

// QuorumLeader asks every live voter's controller listener for the
// metadata quorum (DescribeQuorum, KIP-595, answered by the quorum's leader
// only) and returns the voter that reports itself leader at the highest
// epoch, and that epoch: the active controller. Kafka's brokers name a
// random live broker as the controller in Metadata and DescribeCluster
// (clients cannot reach the controllers), so only this names Kafka's
// active controller.
func QuorumLeader(ctx context.Context, c Cluster) (id int, epoch int32, err error) {
	id, epoch = -1, -1
	var errs []error
	req := DescribeQuorumRequest()
	for _, v := range LiveBrokers(c) {
		if c.ControllerAddr(v) == "" {
			continue
		}
		resp, err := c.ControllerRequest(ctx, v, req)
		if err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", v, err))
			continue
		}
		r := resp.(*kmsg.DescribeQuorumResponse)
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", v, err))
			continue
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					errs = append(errs, fmt.Errorf("node %d: %w", v, err))
				} else if int(p.LeaderID) == v && p.LeaderEpoch > epoch {
					id, epoch = v, p.LeaderEpoch
				}
			}
		}
	}
	if id < 0 {
		return -1, -1, fmt.Errorf("%w: no voter leads the quorum: %w", ErrNoController, errors.Join(errs...))
	}
	return id, epoch, nil
}

// ErrNoController reports that no live broker names a live voter as the
// active controller.
var ErrNoController = errors.New("cluster: no live controller known")

// Controller asks the live brokers (DescribeCluster, KIP-700) which node
// is the controller and returns the first answer naming a live voter: a
// broker may still name a controller that has just died. Cascade's brokers
// name the active controller; Kafka's name a random live broker (see
// QuorumLeader).
func Controller(ctx context.Context, c Cluster) (int, error) {
	var errs []error
	for _, id := range LiveBrokers(c) {
		resp, err := c.Request(ctx, id, kmsg.NewPtrDescribeClusterRequest())
		if err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", id, err))
			continue
		}
		r := resp.(*kmsg.DescribeClusterResponse)
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", id, err))
			continue
		}
		ctl := int(r.ControllerID)
		if ctl < 0 || c.ControllerAddr(ctl) == "" || !c.Live(ctl) {
			errs = append(errs, fmt.Errorf("node %d names controller %d, not a live voter", id, ctl))
			continue
		}
		return ctl, nil
	}
	return -1, fmt.Errorf("%w: %w", ErrNoController, errors.Join(errs...))
}

// WaitForBrokers waits until every live broker's Metadata lists exactly
// the given broker ids (registered and unfenced), so that a crashed
// broker's fencing and a restarted one's return are seen by all, the
// restarted broker's own view included.
func WaitForBrokers(ctx context.Context, c Cluster, ids ...int) error {
	want := slices.Clone(ids)
	slices.Sort(want)
	req := MetadataRequest([]string{})
	return Poll(ctx, PollInterval, func() error {
		live := LiveBrokers(c)
		if len(live) == 0 {
			return errors.New("cluster: no live broker")
		}
		for _, id := range live {
			resp, err := c.Request(ctx, id, req)
			if err != nil {
				return fmt.Errorf("node %d: %w", id, err)
			}
			if got := BrokerList(resp.(*kmsg.MetadataResponse)); !slices.Equal(got, want) {
				return fmt.Errorf("node %d's Metadata lists brokers %v, want %v", id, got, want)
			}
		}
		return nil
	})
}

// BrokerList returns the ids of the brokers a Metadata answer lists, sorted.
func BrokerList(md *kmsg.MetadataResponse) []int {
	var got []int
	for _, b := range md.Brokers {
		got = append(got, int(b.NodeID))
	}
	slices.Sort(got)
	return got
}

// Registered succeeds once node id's broker lists itself in its own
// Metadata: registered with the controller and unfenced.
func Registered(ctx context.Context, c Cluster, id int) error {
	resp, err := c.Request(ctx, id, MetadataRequest([]string{}))
	if err != nil {
		return err
	}
	for _, b := range resp.(*kmsg.MetadataResponse).Brokers {
		if int(b.NodeID) == id {
			return nil
		}
	}
	return fmt.Errorf("node %d is not yet in its own Metadata", id)
}

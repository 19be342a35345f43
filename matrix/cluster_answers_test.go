package matrix_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// This file turns a cluster's answers into values that two clusters of the
// same shape can be compared by: everything kept, except what must differ
// between them (ports, cluster ids, which node ids play which part).

// labels names node ids in an answer. The identity labels keep the ids;
// after a kill, roleLabels names the nodes by their part (controller,
// victim, other), which two clusters whose controllers differ share.
type labels func(id int32) string

func idLabels(id int32) string { return strconv.Itoa(int(id)) }

// roleLabels names the controller "C", the victim "V" and the third node
// "O", and any other id by itself (-1, no leader, stays "-1").
func roleLabels(controller, victim int) labels {
	return func(id int32) string {
		switch {
		case id < 0:
			return strconv.Itoa(int(id))
		case int(id) == controller:
			return "C"
		case int(id) == victim:
			return "V"
		default:
			return "O"
		}
	}
}

func (l labels) all(ids []int32) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = l(id)
	}
	return out
}

// codeName returns Kafka's name for an error code ("" for none).
func codeName(code int16) string {
	if code == 0 {
		return ""
	}
	if err := kerr.ErrorForCode(code); err != nil {
		if ke, ok := err.(*kerr.Error); ok {
			return ke.Message
		}
		return err.Error()
	}
	return fmt.Sprintf("code %d", code)
}

// brokerAnswer is one broker as Metadata or DescribeCluster lists it: the
// port is judged against the node's own listener, not kept.
type brokerAnswer struct {
	ID             string
	Host           string
	PortIsListener bool
	Rack           *string
	Fenced         bool `json:",omitempty"`
}

func brokerOf(c cluster.Cluster, l labels, id int32, host string, port int32, rack *string) brokerAnswer {
	own := false
	for i, seed := range c.Seeds() {
		if c.BrokerIDs()[i] == int(id) {
			own = seed == net.JoinHostPort(host, strconv.Itoa(int(port)))
		}
	}
	return brokerAnswer{ID: l(id), Host: host, PortIsListener: own, Rack: rack}
}

// controllerLabel is "live voter" for a controller id that names a live
// voter of c, which is all that two clusters' answers must agree on.
func controllerLabel(c cluster.Cluster, id int32) string {
	if id >= 0 && c.ControllerAddr(int(id)) != "" && c.Live(int(id)) {
		return "live voter"
	}
	return fmt.Sprintf("%d (not a live voter)", id)
}

type partitionAnswer struct {
	Partition   int32
	Error       string
	Leader      string
	LeaderEpoch int32
	Replicas    []string
	ISR         []string
	Offline     []string
}

type topicAnswer struct {
	Topic      string
	Error      string
	Internal   bool
	HasID      bool
	Partitions []partitionAnswer
}

type metadataAnswer struct {
	Brokers      []brokerAnswer
	HasClusterID bool
	Controller   string
	Topics       []topicAnswer
}

func partitionOf(l labels, p kmsg.MetadataResponseTopicPartition) partitionAnswer {
	return partitionAnswer{Partition: p.Partition, Error: codeName(p.ErrorCode), Leader: l(p.Leader), LeaderEpoch: p.LeaderEpoch,
		Replicas: l.all(p.Replicas), ISR: l.all(p.ISR), Offline: l.all(p.OfflineReplicas)}
}

func metadataOf(c cluster.Cluster, l labels, md *kmsg.MetadataResponse) metadataAnswer {
	a := metadataAnswer{HasClusterID: md.ClusterID != nil && *md.ClusterID != "", Controller: controllerLabel(c, md.ControllerID)}
	for _, b := range md.Brokers {
		a.Brokers = append(a.Brokers, brokerOf(c, l, b.NodeID, b.Host, b.Port, b.Rack))
	}
	slices.SortFunc(a.Brokers, func(x, y brokerAnswer) int { return cmpString(x.ID, y.ID) })
	for _, t := range md.Topics {
		ta := topicAnswer{Error: codeName(t.ErrorCode), Internal: t.IsInternal, HasID: t.TopicID != [16]byte{}}
		if t.Topic != nil {
			ta.Topic = *t.Topic
		}
		for _, p := range t.Partitions {
			ta.Partitions = append(ta.Partitions, partitionOf(l, p))
		}
		slices.SortFunc(ta.Partitions, func(x, y partitionAnswer) int { return int(x.Partition - y.Partition) })
		a.Topics = append(a.Topics, ta)
	}
	slices.SortFunc(a.Topics, func(x, y topicAnswer) int { return cmpString(x.Topic, y.Topic) })
	return a
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

type describeClusterAnswer struct {
	Error         string
	EndpointType  int8
	SameClusterID bool
	Controller    string
	Brokers       []brokerAnswer
	AuthorizedOps int32
}

// describeCluster asks node id for DescribeCluster, fenced brokers
// included (v2), and compares its cluster id with Metadata's.
func describeCluster(ctx context.Context, c cluster.Cluster, l labels, id int) (describeClusterAnswer, error) {
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeFencedBrokers = true
	resp, err := c.Request(ctx, id, req)
	if err != nil {
		return describeClusterAnswer{}, err
	}
	r := resp.(*kmsg.DescribeClusterResponse)
	mresp, err := c.Request(ctx, id, cluster.MetadataRequest([]string{}))
	if err != nil {
		return describeClusterAnswer{}, err
	}
	md := mresp.(*kmsg.MetadataResponse)
	a := describeClusterAnswer{Error: codeName(r.ErrorCode), EndpointType: r.EndpointType,
		SameClusterID: md.ClusterID != nil && r.ClusterID == *md.ClusterID && r.ClusterID != "",
		Controller:    controllerLabel(c, r.ControllerID), AuthorizedOps: r.ClusterAuthorizedOperations}
	for _, b := range r.Brokers {
		ba := brokerOf(c, l, b.NodeID, b.Host, b.Port, b.Rack)
		ba.Fenced = b.IsFenced
		a.Brokers = append(a.Brokers, ba)
	}
	slices.SortFunc(a.Brokers, func(x, y brokerAnswer) int { return cmpString(x.ID, y.ID) })
	return a, nil
}

func TestOffsetsPartitionIsKafkas(t *testing.T) {
	for _, tc := range []struct {
		s    string
		hash int32
	}{
		{"", 0},
		{"hello", 99162322},
		{"Aa", 2112},
		{"BB", 2112},
		{"polygenelubricants", -1 << 31}, // Integer.MIN_VALUE: Utils.abs maps it to 0.
		{"\U0001F600", 1772899},          // One code point, two UTF-16 units: 0xD83D*31 + 0xDE00.
	} {
		if got := cluster.JavaStringHash(tc.s); got != tc.hash {
			t.Errorf("cluster.JavaStringHash(%q) = %d, want %d", tc.s, got, tc.hash)
		}
	}
	if p := cluster.CoordinatorPartition("polygenelubricants", 50); p != 0 {
		t.Errorf("partition of a MIN_VALUE hash = %d, want 0", p)
	}
	if p := cluster.CoordinatorPartition("hello", 50); p != 99162322%50 {
		t.Errorf("partition of hello = %d", p)
	}
}

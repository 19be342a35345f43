package matrix_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// The steps of TestClusterConformance before the kill: each sends the same
// requests to either cluster and returns the normalised answer.

// Topics of the conformance steps.
const (
	assignedTopic = "conformance-assigned"
	spreadTopic   = "conformance-spread"
)

// assignment is the explicit RF=1 placement of assignedTopic: one
// partition on each broker, not in id order.
var assignment = [][]int32{{2}, {3}, {1}}

func conformanceSteps() []conformanceStep {
	return []conformanceStep{
		{"metadata-brokers", stepMetadataBrokers},
		{"describe-cluster", stepDescribeCluster},
		{"describe-quorum", stepDescribeQuorum},
		{"create-topics", stepCreateTopics},
		{"metadata-assigned", func(ctx context.Context, t *testing.T, r *clusterRun) (any, error) {
			return settledMetadata(ctx, r.c, idLabels, assignedTopic, len(assignment))
		}},
		{"metadata-spread", stepMetadataSpread},
		{"create-partitions", stepCreatePartitions},
		{"describe-configs", stepDescribeConfigs},
		{"delete-topics", stepDeleteTopics},
		{"find-coordinator", stepFindCoordinator},
		{"consumer-offsets-placement", stepOffsetsPlacement},
		{"clients", stepClients},
		{"kill-non-controller", stepKill},
		{"restart", stepRestart},
	}
}

// eachBroker asks every live broker and requires that they all give the
// same answer, which it returns.
func eachBroker(ctx context.Context, c cluster.Cluster, ask func(id int) (any, error)) (any, error) {
	var first any
	var firstJS string
	for i, id := range cluster.LiveBrokers(c) {
		a, err := ask(id)
		if err != nil {
			return nil, fmt.Errorf("node %d: %w", id, err)
		}
		js, _ := json.Marshal(a)
		if i == 0 {
			first, firstJS = a, string(js)
			continue
		}
		if string(js) != firstJS {
			return nil, fmt.Errorf("brokers disagree: node %d answers %s, node %d %s", cluster.LiveBrokers(c)[0], firstJS, id, js)
		}
	}
	return first, nil
}

func metadataOn(ctx context.Context, c cluster.Cluster, id int, topics []string) (*kmsg.MetadataResponse, error) {
	resp, err := c.Request(ctx, id, cluster.MetadataRequest(topics))
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

func stepMetadataBrokers(ctx context.Context, t *testing.T, r *clusterRun) (any, error) {
	return eachBroker(ctx, r.c, func(id int) (any, error) {
		md, err := metadataOn(ctx, r.c, id, []string{})
		if err != nil {
			return nil, err
		}
		return metadataOf(r.c, idLabels, md), nil
	})
}

func stepDescribeCluster(ctx context.Context, t *testing.T, r *clusterRun) (any, error) {
	return eachBroker(ctx, r.c, func(id int) (any, error) { return describeCluster(ctx, r.c, idLabels, id) })
}

// createTopicsAnswer is one topic of a CreateTopics answer. The message is
// logged, not compared.
type createTopicsAnswer struct {
	Topic             string
	Error             string
	NumPartitions     int32
	ReplicationFactor int16
	HasID             bool
	Configs           int
}

func createTopics(ctx context.Context, t *testing.T, c cluster.Cluster, id int, req *kmsg.CreateTopicsRequest) ([]createTopicsAnswer, error) {
	resp, err := c.Request(ctx, id, req)
	if err != nil {
		return nil, err
	}
	var out []createTopicsAnswer
	for _, rt := range resp.(*kmsg.CreateTopicsResponse).Topics {
		if rt.ErrorMessage != nil {
			t.Logf("CreateTopics %s: %s: %s", rt.Topic, codeName(rt.ErrorCode), *rt.ErrorMessage)
		}
		out = append(out, createTopicsAnswer{Topic: rt.Topic, Error: codeName(rt.ErrorCode), NumPartitions: rt.NumPartitions,
			ReplicationFactor: rt.ReplicationFactor, HasID: rt.TopicID != [16]byte{}, Configs: len(rt.Configs)})
	}
	slices.SortFunc(out, func(a, b createTopicsAnswer) int { return cmpString(a.Topic, b.Topic) })
	return out, nil
}

func newTopic(name string, partitions int32, rf int16, assign ...[]int32) kmsg.CreateTopicsRequestTopic {
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
	for p, replicas := range assign {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = int32(p), replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	return rt
}

// stepCreateTopics sends one CreateTopics with the valid topics and every
// kind of bad request, to a broker that is not the controller (forwarded,
// KIP-590).
func stepCreateTopics(ctx context.Context, t *testing.T, r *clusterRun) (any, error) {
	ctl, err := r.active(ctx, r.c)
	if err != nil {
		return nil, err
	}
	via := 1 + ctl%3
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	gap := newTopic("bad-assignment-gap", -1, -1, []int32{1})
	gap.ReplicaAssignment[0].Partition = 1
	req.Topics = append(req.Topics,
		newTopic(assignedTopic, -1, -1, assignment...),
		newTopic(spreadTopic, 6, -1),
		newTopic("bad-rf-above-brokers", 1, 4),
		newTopic("bad-rf-zero", 1, 0),
		newTopic("bad-partitions-zero", 0, 1),
		newTopic("bad-assignment-unknown-broker", -1, -1, []int32{7}),
		newTopic("bad-assignment-duplicate-replica", -1, -1, []int32{1, 1}),
		newTopic("bad-assignment-empty", -1, -1, []int32{}),
		newTopic("bad-assignment-uneven", -1, -1, []int32{1}, []int32{2, 3}),
		newTopic("bad-assignment-and-count", 1, -1, []int32{1}),
		newTopic("bad-assignment-and-rf", -1, 1, []int32{1}),
		gap,
		newTopic("bad/name", 1, 1),
	)
	return createTopics(ctx, t, r.c, via, req)
}

// settledMetadata waits until every live broker reports n partitions of
// topic, each with a leader, and returns the topic as they agree on it.
func settledMetadata(ctx context.Context, c cluster.Cluster, l labels, topic string, n int) (any, error) {
	return settled(ctx, c, l, topic, func(ta topicAnswer) error {
		if len(ta.Partitions) != n {
			return fmt.Errorf("%s has %d partitions, want %d", topic, len(ta.Partitions), n)
		}
		for _, p := range ta.Partitions {
			if p.Leader == "-1" {
				return fmt.Errorf("%s/%d has no leader", topic, p.Partition)
			}
		}
		return nil
	})
}

// settled polls every live broker's Metadata of topic until ok holds on
// each and they agree, and returns that answer.
func settled(ctx context.Context, c cluster.Cluster, l labels, topic string, ok func(topicAnswer) error) (any, error) {
	var out any
	err := cluster.Poll(ctx, cluster.PollInterval, func() error {
		a, err := eachBroker(ctx, c, func(id int) (any, error) {
			md, err := metadataOn(ctx, c, id, []string{topic})
			if err != nil {
				return nil, err
			}
			ma := metadataOf(c, l, md)
			if len(ma.Topics) != 1 {
				return nil, fmt.Errorf("Metadata of %s lists %d topics", topic, len(ma.Topics))
			}
			if err := ok(ma.Topics[0]); err != nil {
				return nil, err
			}
			return ma.Topics[0], nil
		})
		out = a
		return err
	})
	return out, err
}

// spreadAnswer is a topic under default placement: the partitions with
// their leaders replaced by whether the leader is the one replica, and how
// many partitions each broker leads, sorted.
type spreadAnswer struct {
	Partitions []partitionAnswer
	PerBroker  []int
}

func spreadOf(ta topicAnswer) spreadAnswer {
	var a spreadAnswer
	per := map[string]int{}
	for _, p := range ta.Partitions {
		per[p.Leader]++
		rel := p
		mark := func(ids []string) []string {
			out := make([]string, len(ids))
			for i, id := range ids {
				out[i] = "other"
				if id == p.Leader {
					out[i] = "leader"
				}
			}
			return out
		}
		rel.Leader, rel.Replicas, rel.ISR, rel.Offline = "leader", mark(p.Replicas), mark(p.ISR), mark(p.Offline)
		a.Partitions = append(a.Partitions, rel)
	}
	for _, n := range per {
		a.PerBroker = append(a.PerBroker, n)
	}
	slices.Sort(a.PerBroker)
	return a
}

func stepMetadataSpread(ctx context.Context, t *testing.T, r *clusterRun) (any, error) {
	a, err := settledMetadata(ctx, r.c, idLabels, spreadTopic, 6)
	if err != nil {
		return nil, err
	}
	return spreadOf(a.(topicAnswer)), nil
}

type createPartitionsAnswer struct {
	Topic string
	Error string
}

// stepCreatePartitions grows assignedTopic to 6 partitions with explicit
// replicas, after the bad requests, and reports the topic then.
func stepCreatePartitions(ctx context.Context, t *testing.T, r *clusterRun) (any, error) {
	ask := func(topic string, count int32, assign ...[]int32) kmsg.CreatePartitionsRequestTopic {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = topic, count
		for _, replicas := range assign {
			a := kmsg.NewCreatePartitionsRequestTopicAssignment()
			a.Replicas = replicas
			rt.Assignment = append(rt.Assignment, a)
		}
		return rt
	}
	var out []createPartitionsAnswer
	send := func(topics ...kmsg.CreatePartitionsRequestTopic) error {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.TimeoutMillis = 10000
		req.Topics = topics
		resp, err := r.c.Request(ctx, cluster.LiveBrokers(r.c)[0], req)
		if err != nil {
			return err
		}
		for _, rt := range resp.(*kmsg.CreatePartitionsResponse).Topics {
			if rt.ErrorMessage != nil {
				t.Logf("CreatePartitions %s: %s: %s", rt.Topic, codeName(rt.ErrorCode), *rt.ErrorMessage)
			}
			out = append(out, createPartitionsAnswer{Topic: rt.Topic, Error: codeName(rt.ErrorCode)})
		}
		return nil
	}
	// Each bad request alone: Kafka refuses a topic named twice in one.
	for _, bad := range []kmsg.CreatePartitionsRequestTopic{
		ask(assignedTopic, 2),
		ask(assignedTopic, 3),
		ask(assignedTopic, 5, []int32{3}),
		ask(assignedTopic, 5, []int32{3}, []int32{7}),
		ask(assignedTopic, 5, []int32{3}, []int32{2, 2}),
		ask(assignedTopic, 5, []int32{3}, []int32{1, 2}),
		ask("no-such-topic", 2),
	} {
		if err := send(bad); err != nil {
			return nil, err
		}
	}
	// Two partitions on each broker, so that whichever broker the kill
	// steps crash leads as many as on the other cluster.
	if err := send(ask(assignedTopic, 6, []int32{3}, []int32{1}, []int32{2})); err != nil {
		return nil, err
	}
	md, err := settledMetadata(ctx, r.c, idLabels, assignedTopic, 6)
	if err != nil {
		return nil, err
	}
	return struct {
		Answers []createPartitionsAnswer
		Topic   any
	}{out, md}, nil
}

type configAnswer struct {
	Name      string
	Value     *string
	ReadOnly  bool
	Source    int8
	Sensitive bool
}

func stepDescribeConfigs(ctx context.Context, t *testing.T, r *clusterRun) (any, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, assignedTopic
	req.Resources = append(req.Resources, rr)
	resp, err := r.c.Request(ctx, cluster.LiveBrokers(r.c)[0], req)
	if err != nil {
		return nil, err
	}
	var out struct {
		Error   string
		Configs []configAnswer
	}
	for _, res := range resp.(*kmsg.DescribeConfigsResponse).Resources {
		out.Error = codeName(res.ErrorCode)
		for _, c := range res.Configs {
			out.Configs = append(out.Configs, configAnswer{Name: c.Name, Value: c.Value, ReadOnly: c.ReadOnly, Source: int8(c.Source), Sensitive: c.IsSensitive})
		}
	}
	slices.SortFunc(out.Configs, func(a, b configAnswer) int { return cmpString(a.Name, b.Name) })
	return out, nil
}

// stepDeleteTopics deletes spreadTopic and an unknown topic, then waits
// until no live broker lists spreadTopic.
func stepDeleteTopics(ctx context.Context, t *testing.T, r *clusterRun) (any, error) {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 10000
	for _, name := range []string{spreadTopic, "no-such-topic"} {
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, dt)
		req.TopicNames = append(req.TopicNames, name)
	}
	resp, err := r.c.Request(ctx, cluster.LiveBrokers(r.c)[0], req)
	if err != nil {
		return nil, err
	}
	type answer struct {
		Topic string
		Error string
	}
	var out []answer
	for _, rt := range resp.(*kmsg.DeleteTopicsResponse).Topics {
		name := ""
		if rt.Topic != nil {
			name = *rt.Topic
		}
		out = append(out, answer{name, codeName(rt.ErrorCode)})
	}
	slices.SortFunc(out, func(a, b answer) int { return cmpString(a.Topic, b.Topic) })
	after, err := settled(ctx, r.c, idLabels, spreadTopic, func(ta topicAnswer) error {
		if ta.Error != kerr.UnknownTopicOrPartition.Message {
			return fmt.Errorf("%s still answers %q with %d partitions", spreadTopic, ta.Error, len(ta.Partitions))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return struct {
		Answers []answer
		After   any
	}{out, after}, nil
}

// Groups whose coordinators FindCoordinator is asked for.
var coordinatorGroups = []string{"group-a", "group-b", "orders", "payments-consumer", "g", "cascade"}

// stepFindCoordinator asks every live broker for the coordinators of
// coordinatorGroups and judges each answer against the cluster's own
// Metadata: the coordinator is the leader of the group's
// __consumer_offsets partition (offsetsPartition), at that leader's
// address. offsets.topic.num.partitions is Kafka's default, 50, on both.
func stepFindCoordinator(ctx context.Context, t *testing.T, r *clusterRun) (any, error) {
	type answer struct {
		Group              string
		Error              string
		Partition          int32
		IsPartitionLeader  bool
		AddressOfTheLeader bool
	}
	// The first FindCoordinator creates __consumer_offsets; wait until it
	// answers for every group on every broker.
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKeys = coordinatorGroups
	var last *kmsg.FindCoordinatorResponse
	err := cluster.Poll(ctx, cluster.PollInterval, func() error {
		for _, id := range cluster.LiveBrokers(r.c) {
			resp, err := r.c.Request(ctx, id, req)
			if err != nil {
				return err
			}
			last = resp.(*kmsg.FindCoordinatorResponse)
			for _, co := range last.Coordinators {
				if err := kerr.ErrorForCode(co.ErrorCode); err != nil {
					return fmt.Errorf("node %d, group %s: %w", id, co.Key, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	offsets, err := settled(ctx, r.c, idLabels, "__consumer_offsets", func(ta topicAnswer) error {
		if len(ta.Partitions) == 0 {
			return errors.New("__consumer_offsets has no partitions yet")
		}
		for _, p := range ta.Partitions {
			if p.Leader == "-1" {
				return fmt.Errorf("__consumer_offsets/%d has no leader", p.Partition)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	ot := offsets.(topicAnswer)
	leaders := map[int32]string{}
	for _, p := range ot.Partitions {
		leaders[p.Partition] = p.Leader
	}
	coords, err := eachBroker(ctx, r.c, func(id int) (any, error) {
		resp, err := r.c.Request(ctx, id, req)
		if err != nil {
			return nil, err
		}
		var out []answer
		for _, co := range resp.(*kmsg.FindCoordinatorResponse).Coordinators {
			p := cluster.CoordinatorPartition(co.Key, int32(len(ot.Partitions)))
			a := answer{Group: co.Key, Error: codeName(co.ErrorCode), Partition: p, IsPartitionLeader: fmt.Sprint(co.NodeID) == leaders[p]}
			a.AddressOfTheLeader = brokerOf(r.c, idLabels, co.NodeID, co.Host, co.Port, nil).PortIsListener
			if !a.IsPartitionLeader {
				t.Logf("node %d: group %s: coordinator %d, but __consumer_offsets/%d is led by %s", id, co.Key, co.NodeID, p, leaders[p])
			}
			out = append(out, a)
		}
		slices.SortFunc(out, func(a, b answer) int { return cmpString(a.Group, b.Group) })
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	return coords, nil
}

// stepOffsetsPlacement reports __consumer_offsets (created by
// stepFindCoordinator) as default placement made it: internal, RF=1, and
// how its partitions are spread over the brokers.
func stepOffsetsPlacement(ctx context.Context, t *testing.T, r *clusterRun) (any, error) {
	md, err := settledMetadata(ctx, r.c, idLabels, "__consumer_offsets", 50)
	if err != nil {
		return nil, err
	}
	ot := md.(topicAnswer)
	return struct {
		Internal bool
		Spread   spreadAnswer
	}{ot.Internal, spreadOf(ot)}, nil
}

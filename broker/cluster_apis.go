package broker

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/controller"
	"github.com/cascade-kafka/cascade/broker/handler"
	"github.com/cascade-kafka/cascade/broker/metadata"
	"github.com/cascade-kafka/cascade/broker/quorum"
	"github.com/cascade-kafka/cascade/broker/wire"
)

// The controller APIs a cluster node serves beyond registration and
// heartbeats:
//
//   - DescribeQuorum: v0-2, on both listeners, as Kafka 4.4. The active
//     controller answers from its raft leader's view (quorum.Describe);
//     any other voter answers NOT_LEADER_OR_FOLLOWER at partition level, as
//     KafkaRaftClient. A broker forwards it to the active controller, as
//     Kafka's KafkaApis.forwardToControllerOrFail.
//     v1: LastFetchTimestamp, LastCaughtUpTimestamp (KIP-836).
//     v2: ErrorMessage, ReplicaDirectoryId (zero: a static quorum has
//     none), Nodes with the voters' controller listeners (KIP-853).
//     Offsets are raft indexes: a voter's LogEndOffset is the index of the
//     last entry the leader knows it holds, HighWatermark the commit index.
//   - ElectLeaders: v0-2, forwarded by brokers to the active controller, as
//     Kafka's; served by controller.ElectLeaders (v1: ElectionType and a
//     top-level ErrorCode; v2: flexible).
//   - AlterPartition: v2-3 on the controller listener only, as Kafka 4.4
//     (v0-1 were removed by KIP-896); served by controller.AlterPartition.
//   - DescribeCluster: v0-2 on the controller listener, as Kafka's
//     ControllerApis (KIP-919): the controllers, for clients bootstrapped
//     from controllers (kafka-metadata-quorum --bootstrap-controller).

// servedByController are the forwarded keys (forwardedKeys) that the
// controller's own code answers rather than the handlers'.
var servedByController = map[int16]bool{
	43: true, // ElectLeaders
	45: true, // AlterPartitionReassignments (cluster_reassign.go)
	46: true, // ListPartitionReassignments
	55: true, // DescribeQuorum
}

// brokerListenerControllerAPIs are the controller APIs a cluster broker
// advertises in its own ApiVersions, since it forwards them: the versions
// of controllerAPIs.
func brokerListenerControllerAPIs() []kmsg.ApiVersionsResponseApiKey {
	var out []kmsg.ApiVersionsResponseApiKey
	for _, a := range controllerAPIs {
		if servedByController[a.Key] {
			k := kmsg.NewApiVersionsResponseApiKey()
			k.ApiKey, k.MinVersion, k.MaxVersion = a.Key, a.Min, a.Max
			out = append(out, k)
		}
	}
	return out
}

// withControllerAPIs adds the forwarded controller APIs to a broker
// listener's ApiVersions answer.
func withControllerAPIs(resp wire.Response) wire.Response {
	av, ok := resp.Msg.(*kmsg.ApiVersionsResponse)
	if !ok || av.ErrorCode != 0 {
		return resp
	}
	for _, k := range brokerListenerControllerAPIs() {
		if !slices.ContainsFunc(av.ApiKeys, func(a kmsg.ApiVersionsResponseApiKey) bool { return a.ApiKey == k.ApiKey }) {
			av.ApiKeys = append(av.ApiKeys, k)
		}
	}
	slices.SortFunc(av.ApiKeys, func(a, b kmsg.ApiVersionsResponseApiKey) int { return int(a.ApiKey) - int(b.ApiKey) })
	return resp
}

// serveLocally answers a forwarded controller API on this node, the active
// controller, without a round trip through its own controller listener.
func (n *clusterNode) serveLocally(wr *wire.Request) (wire.Response, error) {
	broker, epoch := int32(-1), int64(-1)
	resp, err := n.handleControllerRequest(wr, &broker, &epoch)
	if err != nil {
		return wire.Response{}, err
	}
	return wire.Response{Msg: resp}, nil
}

// notControllerAnswer reports whether a forwarded controller API's answer
// came from a node that is not the active controller, so the broker tries
// again against the one it learns of next.
func notControllerAnswer(resp kmsg.Response) bool {
	switch r := resp.(type) {
	case *kmsg.ElectLeadersResponse:
		return r.ErrorCode == kerr.NotController.Code
	case *kmsg.AlterPartitionAssignmentsResponse:
		return r.ErrorCode == kerr.NotController.Code
	case *kmsg.ListPartitionReassignmentsResponse:
		return r.ErrorCode == kerr.NotController.Code
	case *kmsg.DescribeQuorumResponse:
		if r.ErrorCode == kerr.NotController.Code {
			return true
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == kerr.NotLeaderForPartition.Code {
					return true
				}
			}
		}
	}
	return false
}

// metadataTopic is the metadata log's topic-partition as DescribeQuorum
// names it.
const metadataTopic = "__cluster_metadata"

// kafkaMessage is Kafka's default message of an error code (Errors.message),
// which its ApiError carries when it has none of its own.
func kafkaMessage(code int16) *string {
	var ke *kerr.Error
	if code == 0 || !errors.As(kerr.ErrorForCode(code), &ke) || ke.Description == "" {
		return nil
	}
	s := ke.Description
	return &s
}

// quorumObservers are the metadata log's observers for DescribeQuorum: the
// broker-only nodes that fetched it from this voter (the leader, which
// observers prefer) in the last observer session, in id order. An
// observer's log end offset is the last index it holds.
func (n *clusterNode) quorumObservers() []quorum.ReplicaState {
	obs := n.raft.Observers()
	slices.SortFunc(obs, func(a, b quorum.ObserverState) int { return int(a.ID - b.ID) })
	out := make([]quorum.ReplicaState, 0, len(obs))
	for _, o := range obs {
		out = append(out, quorum.ReplicaState{ID: uint64(o.ID), LogEndOffset: o.LogEndOffset, LastFetch: o.LastFetch, LastCaughtUp: o.LastCaughtUp})
	}
	return out
}

// describeQuorum answers DescribeQuorum as KafkaRaftClient's
// handleDescribeQuorumRequest: a request that names anything but
// __cluster_metadata-0 alone is UNKNOWN_TOPIC_OR_PARTITION for each
// partition it names; a voter that is not the leader answers
// NOT_LEADER_OR_FOLLOWER.
func (n *clusterNode) describeQuorum(ctx context.Context, r *kmsg.DescribeQuorumRequest) *kmsg.DescribeQuorumResponse {
	resp := r.ResponseKind().(*kmsg.DescribeQuorumResponse)
	if len(r.Topics) != 1 || r.Topics[0].Topic != metadataTopic || len(r.Topics[0].Partitions) != 1 || r.Topics[0].Partitions[0].Partition != 0 {
		code := kerr.UnknownTopicOrPartition.Code
		for _, t := range r.Topics {
			rt := kmsg.NewDescribeQuorumResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewDescribeQuorumResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.ErrorMessage = p.Partition, code, kafkaMessage(code)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	rt := kmsg.NewDescribeQuorumResponseTopic()
	rt.Topic = metadataTopic
	rp := kmsg.NewDescribeQuorumResponseTopicPartition()
	d, err := n.raft.Describe(ctx)
	if err != nil {
		code := kerr.NotLeaderForPartition.Code
		if !errors.Is(err, quorum.ErrNotLeader) {
			code = kerr.UnknownServerError.Code
		}
		rp.ErrorCode, rp.ErrorMessage = code, kafkaMessage(code)
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp
	}
	rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = int32(d.Leader), int32(d.Term), d.HighWatermark
	for _, v := range d.Voters {
		rp.CurrentVoters = append(rp.CurrentVoters, replicaState(v))
	}
	rp.Observers = []kmsg.DescribeQuorumResponseTopicPartitionReplicaState{}
	for _, o := range n.quorumObservers() {
		rp.Observers = append(rp.Observers, replicaState(o))
	}
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	name := n.bc.Cluster.ControllerListenerNames[0]
	for _, v := range n.bc.Cluster.Voters {
		node := kmsg.NewDescribeQuorumResponseNode()
		node.NodeID = v.ID
		l := kmsg.NewDescribeQuorumResponseNodeListener()
		l.Name, l.Host, l.Port = name, v.Host, uint16(v.Port)
		node.Listeners = append(node.Listeners, l)
		resp.Nodes = append(resp.Nodes, node)
	}
	return resp
}

// replicaState converts one voter or observer; unknown times are -1.
func replicaState(s quorum.ReplicaState) kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
	rs := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
	rs.ReplicaID, rs.LogEndOffset = int32(s.ID), s.LogEndOffset
	if !s.LastFetch.IsZero() {
		rs.LastFetchTimestamp = s.LastFetch.UnixMilli()
	}
	if !s.LastCaughtUp.IsZero() {
		rs.LastCaughtUpTimestamp = s.LastCaughtUp.UnixMilli()
	}
	return rs
}

// apiCode returns the Kafka code and message of a controller result: the
// error's own message, else Kafka's default for the code, as ApiError.
func apiCode(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	code := codeOf(err)
	var me *metadata.Error
	if errors.As(err, &me) && me.Message != "" {
		msg := me.Message
		return code, &msg
	}
	return code, kafkaMessage(code)
}

// electLeadersFailed answers every partition of r with code: in the
// top-level error from v1 on, per partition in v0, which has none.
func electLeadersFailed(r *kmsg.ElectLeadersRequest, resp *kmsg.ElectLeadersResponse, code int16, msg *string) {
	if r.Version >= 1 {
		resp.ErrorCode = code
		return
	}
	for _, t := range r.Topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, code, msg
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
}

// requestContext bounds a controller operation by the request's timeout,
// as ControllerApis' deadline from timeoutMs; 0 or less means 30 s.
func requestContext(ctx context.Context, timeoutMs int32) (context.Context, context.CancelFunc) {
	if timeoutMs <= 0 {
		timeoutMs = 30000
	}
	return context.WithTimeout(ctx, time.Duration(timeoutMs)*time.Millisecond)
}

// electLeaders answers ElectLeaders as ControllerApis and
// ReplicationControlManager.electLeaders: null topics elect for every
// partition and list every topic, leaving out partitions that needed no
// election; named partitions are each answered. A node that is not the
// active controller answers NOT_CONTROLLER (top level from v1, per
// partition in v0, as ElectLeadersRequest.getErrorResponse).
func (n *clusterNode) electLeaders(ctx context.Context, r *kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse {
	resp := r.ResponseKind().(*kmsg.ElectLeadersResponse)
	var topics []controller.ElectTopic
	if r.Topics != nil {
		topics = []controller.ElectTopic{}
		for _, t := range r.Topics {
			topics = append(topics, controller.ElectTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
	}
	ctx, cancel := requestContext(ctx, r.TimeoutMillis)
	defer cancel()
	var results []controller.ElectResult
	var names []string
	err := n.active.do(ctx, func(c *controller.Controller, img *metadata.Image, _ time.Time, _ int64) ([]metadata.Record, error) {
		recs, res, err := c.ElectLeaders(img, r.ElectionType, topics)
		results, names = res, nil
		if topics == nil {
			for _, t := range img.Topics() {
				names = append(names, t.Name)
			}
		}
		return recs, err
	})
	if err != nil {
		code, msg := requestCode(err)
		electLeadersFailed(r, resp, code, msg)
		return resp
	}
	if topics == nil {
		for _, name := range names {
			topics = append(topics, controller.ElectTopic{Topic: name})
		}
	}
	// Results come in the order of the topics, one per partition named.
	for _, t := range topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = []kmsg.ElectLeadersResponseTopicPartition{}
		for len(results) > 0 && results[0].Topic == t.Topic && (r.Topics == nil || len(rt.Partitions) < len(t.Partitions)) {
			res := results[0]
			results = results[1:]
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition = res.Partition
			rp.ErrorCode, rp.ErrorMessage = apiCode(res.Err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// alterPartition answers AlterPartition as ControllerApis and
// ReplicationControlManager.alterPartition: a broker epoch that is not the
// sender's registration, or a node that is not the active controller, is
// a top-level error; partitions are answered per topic in request order,
// with the state after the change on success.
func (n *clusterNode) alterPartition(ctx context.Context, r *kmsg.AlterPartitionRequest) *kmsg.AlterPartitionResponse {
	resp := r.ResponseKind().(*kmsg.AlterPartitionResponse)
	req := controller.AlterPartitionRequest{BrokerID: r.BrokerID, BrokerEpoch: r.BrokerEpoch}
	for _, t := range r.Topics {
		at := controller.AlterPartitionTopic{TopicID: metadata.UUID(t.TopicID)}
		for _, p := range t.Partitions {
			ad := controller.AlterPartitionData{Partition: p.Partition, LeaderEpoch: p.LeaderEpoch,
				LeaderRecoveryState: p.LeaderRecoveryState, PartitionEpoch: p.PartitionEpoch}
			if r.Version >= 3 {
				for _, m := range p.NewEpochISR {
					ad.NewISR = append(ad.NewISR, controller.BrokerState{BrokerID: m.BrokerID, BrokerEpoch: m.BrokerEpoch})
				}
			} else {
				for _, id := range p.NewISR {
					ad.NewISR = append(ad.NewISR, controller.BrokerState{BrokerID: id, BrokerEpoch: -1})
				}
			}
			at.Partitions = append(at.Partitions, ad)
		}
		req.Topics = append(req.Topics, at)
	}
	var results []controller.AlterPartitionResult
	err := n.active.do(ctx, func(c *controller.Controller, img *metadata.Image, _ time.Time, _ int64) ([]metadata.Record, error) {
		recs, res, err := c.AlterPartition(img, req)
		results = res
		return recs, err
	})
	if err != nil {
		resp.ErrorCode, _ = apiCode(err)
		return resp
	}
	for _, t := range r.Topics {
		rt := kmsg.NewAlterPartitionResponseTopic()
		rt.TopidID = t.TopicID
		for range t.Partitions {
			res := results[0]
			results = results[1:]
			rp := kmsg.NewAlterPartitionResponseTopicPartition()
			rp.Partition = res.Partition
			rp.ErrorCode, _ = apiCode(res.Err)
			if res.Err == nil {
				rp.LeaderID, rp.LeaderEpoch, rp.ISR = res.Leader, res.LeaderEpoch, res.ISR
				rp.LeaderRecoveryState, rp.PartitionEpoch = res.LeaderRecoveryState, res.PartitionEpoch
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// The active controller runs preferred-leader balancing
// (controller.Tick) as these say.
func init() {
	clusterKeys["auto.leader.rebalance.enable"] = true
	clusterKeys["leader.imbalance.check.interval.seconds"] = true
	clusterKeys["controlled.shutdown.enable"] = true // cluster_shutdown.go
}

// describeControllers answers DescribeCluster on the controller listener as
// ControllerApis.handleDescribeCluster and AuthHelper's
// computeDescribeClusterResponse: the voters with their controller
// listeners and the active controller (-1 when unknown); a request for
// brokers (v0 asks for nothing else) is MISMATCHED_ENDPOINT_TYPE, from v1,
// or INVALID_REQUEST in v0; an unknown type is UNSUPPORTED_ENDPOINT_TYPE.
func (n *clusterNode) describeControllers(r *kmsg.DescribeClusterRequest) *kmsg.DescribeClusterResponse {
	resp := r.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = 2
	resp.ClusterAuthorizedOperations = math.MinInt32
	typ := r.EndpointType
	if r.Version == 0 {
		typ = 1
	}
	fail := func(code int16, msg string) *kmsg.DescribeClusterResponse {
		if r.Version == 0 {
			code = kerr.InvalidRequest.Code
		}
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return resp
	}
	switch typ {
	case 2:
	case 1:
		return fail(kerr.MismatchedEndpointType.Code, "The request was sent to an endpoint of type CONTROLLER, but we wanted an endpoint of type BROKER")
	default:
		return fail(kerr.UnsupportedEndpointType.Code, "Unsupported endpoint type "+strconv.Itoa(int(typ)))
	}
	resp.ClusterID = n.clusterID
	resp.ControllerID = n.ControllerID()
	for _, v := range n.bc.Cluster.Voters {
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port = v.ID, v.Host, int32(v.Port)
		resp.Brokers = append(resp.Brokers, b)
	}
	if r.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = handler.ClusterAuthorizedOps
	}
	return resp
}

package handler

import (
	"cmp"
	"context"
	"math"
	"slices"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster: v0-2
//
//   - v0: KIP-700; flexible from the start
//   - v1: EndpointType (KIP-919): a broker answers only for brokers, else
//     MISMATCHED_ENDPOINT_TYPE
//   - v2: IncludeFencedBrokers and each broker's IsFenced (KIP-1073): the
//     fenced registrations too, with their endpoint of the listener this
//     node serves clients on; a single node is never fenced
//
// ControllerID is a live broker, since clients cannot reach the
// controllers: Kafka's brokers name a random live broker; Cascade names the
// active controller when it is a live broker (a combined node), else this
// broker or another live one, and -1 while no active controller is known;
// a single node names itself. Cascade has no authorizer, so
// ClusterAuthorizedOperations, when asked for, is every operation Kafka's
// AclEntry supports on the CLUSTER resource.
func init() { register(60, 0, 2, handleDescribeCluster) }

// ClusterAuthorizedOps are the AclOperation codes (Kafka's AclOperation)
// supported on CLUSTER: what DescribeCluster reports as authorized, on the
// broker and the controller listener alike.
const ClusterAuthorizedOps = 1<<5 | // CREATE
	1<<7 | // ALTER
	1<<8 | // DESCRIBE
	1<<9 | // CLUSTER_ACTION
	1<<10 | // DESCRIBE_CONFIGS
	1<<11 | // ALTER_CONFIGS
	1<<12 // IDEMPOTENT_WRITE

func handleDescribeCluster(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.DescribeClusterRequest)
	resp := r.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.SetVersion(req.Version)
	resp.EndpointType = 1 // brokers
	resp.ClusterAuthorizedOperations = math.MinInt32
	if req.Version >= 1 && r.EndpointType != 1 {
		// As KafkaApis.handleDescribeCluster, for any type but BROKER.
		want := "UNKNOWN"
		if r.EndpointType == 2 {
			want = "CONTROLLER"
		}
		resp.ErrorCode = kerr.MismatchedEndpointType.Code
		msg := "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type " + want
		resp.ErrorMessage = &msg
		env.Metrics.Error(req.Key, resp.ErrorCode)
		return resp, nil
	}
	resp.ClusterID = env.Meta.Image().ClusterID
	resp.ControllerID = env.controllerID()
	for _, a := range env.brokers() {
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port = a.ID, a.Host, a.Port
		if a.Rack != "" {
			rack := a.Rack
			b.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, b)
	}
	if req.Version >= 2 && r.IncludeFencedBrokers {
		resp.Brokers = append(resp.Brokers, fencedBrokers(env)...)
		slices.SortFunc(resp.Brokers, func(a, b kmsg.DescribeClusterResponseBroker) int { return cmp.Compare(a.NodeID, b.NodeID) })
	}
	if r.IncludeClusterAuthorizedOperations {
		// As KafkaApis.handleDescribeCluster: 0 to a client that may
		// not DESCRIBE the cluster.
		resp.ClusterAuthorizedOperations = 0
		if env.authorizeCluster(req, acl.Describe) {
			resp.ClusterAuthorizedOperations = env.authorizedOperations(req, acl.Cluster, acl.ClusterName)
		}
	}
	return resp, nil
}

// fencedBrokers returns the fenced registrations of the image, each with
// the endpoint of the listener this node advertises to clients (the one
// its own registration lists at Env's host and port), as Kafka's
// KRaftMetadataCache.describeClusterBrokers with fenced brokers included.
func fencedBrokers(env *Env) []kmsg.DescribeClusterResponseBroker {
	if env.Cluster == nil {
		return nil
	}
	img := env.Meta.Image()
	self, ok := img.Broker(env.NodeID)
	if !ok {
		return nil
	}
	listener := ""
	for _, e := range self.Endpoints {
		if e.Host == env.Host && int32(e.Port) == env.Port {
			listener = e.Name
		}
	}
	var out []kmsg.DescribeClusterResponseBroker
	for _, reg := range img.Brokers() {
		if !reg.Fenced {
			continue
		}
		for _, e := range reg.Endpoints {
			if e.Name != listener {
				continue
			}
			b := kmsg.NewDescribeClusterResponseBroker()
			b.NodeID, b.Host, b.Port, b.IsFenced = reg.ID, e.Host, int32(e.Port), true
			if reg.Rack != "" {
				rack := reg.Rack
				b.Rack = &rack
			}
			out = append(out, b)
			break
		}
	}
	return out
}

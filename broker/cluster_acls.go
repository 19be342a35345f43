package broker

import (
	"fmt"
	"reflect"
	"time"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/controller"
	"github.com/cascade-kafka/cascade/broker/metadata"
	"github.com/cascade-kafka/cascade/broker/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateAcls and DeleteAcls reach the active controller as Kafka's
// ControllerApis serves them: a broker forwards the request whole in an
// Envelope (forwardedKeys), authorized as the client's principal, and the controller plans the records on its image and
// proposes them to the metadata quorum; every node's image then indexes
// the ACLs when it applies the committed batch.

// CreateACLs is never planned by a broker: the request is forwarded.
func (w *brokerWriter) CreateACLs([]acl.Binding) ([]error, error) { return nil, errForwardedWhole }

// DeleteACLs is never planned by a broker: the request is forwarded.
func (w *brokerWriter) DeleteACLs([]acl.Filter) ([]metadata.DeleteACLsResult, error) {
	return nil, errForwardedWhole
}

// CreateACLs plans the creations on the controller's image
// (AclControlManager.createAcls) and commits them through the quorum.
func (w *ctlWriter) CreateACLs(bindings []acl.Binding) ([]error, error) {
	ctx, cancel := w.ctx()
	defer cancel()
	var errs []error
	err := w.a.do(ctx, func(_ *controller.Controller, img *metadata.Image, _ time.Time, _ int64) ([]metadata.Record, error) {
		recs, e, err := metadata.PlanCreateACLs(img, bindings, nil)
		errs = e
		return recs, err
	})
	return errs, err
}

// DeleteACLs plans the deletions on the controller's image
// (AclControlManager.deleteAcls) and commits them through the quorum.
func (w *ctlWriter) DeleteACLs(filters []acl.Filter) ([]metadata.DeleteACLsResult, error) {
	ctx, cancel := w.ctx()
	defer cancel()
	var out []metadata.DeleteACLsResult
	err := w.a.do(ctx, func(_ *controller.Controller, img *metadata.Image, _ time.Time, _ int64) ([]metadata.Record, error) {
		recs, res := metadata.PlanDeleteACLs(img, filters)
		out = res
		return recs, nil
	})
	return out, err
}

// controllerOperation is the cluster operation each API the controller
// serves itself needs, as ControllerApis authorizes them: CLUSTER_ACTION
// for the brokers' own traffic, ALTER for elections and reassignments,
// DESCRIBE for the quorum and the reassignments in progress.
var controllerOperation = map[int16]acl.Operation{
	43: acl.Alter,         // ElectLeaders
	45: acl.Alter,         // AlterPartitionReassignments
	46: acl.Describe,      // ListPartitionReassignments
	55: acl.Describe,      // DescribeQuorum
	56: acl.ClusterAction, // AlterPartition
	62: acl.ClusterAction, // BrokerRegistration
	63: acl.ClusterAction, // BrokerHeartbeat
	67: acl.ClusterAction, // AllocateProducerIds
}

// controllerDenied answers CLUSTER_AUTHORIZATION_FAILED to a request the
// connection's principal may not make (AuthHelper.authorizeClusterOperation),
// and reports whether it did. The controller's own authorizer decides, fed
// by its image from the start, so brokers registering before this node's
// handlers exist are checked too. In a cluster with an authorizer the brokers'
// principal must therefore be a super user or hold CLUSTER_ACTION, as in
// Kafka.
func (n *clusterNode) controllerDenied(wr *wire.Request, req kmsg.Request) (kmsg.Response, bool) {
	op, ok := controllerOperation[req.Key()]
	if !ok || n.authz == nil ||
		n.authz.Authorize(acl.Session{Principal: wr.Principal, Host: wr.ClientHost}, op, acl.Cluster, acl.ClusterName) {
		return nil, false
	}
	resp := req.ResponseKind()
	setErrorCode(resp, kerr.ClusterAuthorizationFailed.Code)
	switch r := resp.(type) {
	case *kmsg.BrokerRegistrationResponse:
		r.BrokerEpoch = -1
	case *kmsg.BrokerHeartbeatResponse:
		r.IsFenced = true
	}
	return resp, true
}

// kraftKeys are KRaft's quorum APIs: Fetch, Vote, BeginQuorumEpoch,
// EndQuorumEpoch and FetchSnapshot. Cascade's quorum runs over its own
// frames on the controller listener, not these, so it serves none of them;
// but as Kafka's ControllerApis authorizes each before handling it, a
// principal without CLUSTER_ACTION on the Cluster is answered
// CLUSTER_AUTHORIZATION_FAILED, the answer it would get from Kafka.
var kraftKeys = map[int16]bool{1: true, 52: true, 53: true, 54: true, 59: true}

// kraftDenied answers a KRaft quorum request: CLUSTER_AUTHORIZATION_FAILED
// (top level, and on every partition of a Fetch) to a principal without
// CLUSTER_ACTION, else an error that closes the connection, since Cascade
// does not serve the API.
func (n *clusterNode) kraftDenied(wr *wire.Request) (kmsg.Response, error) {
	h := wr.Header
	req := kmsg.RequestForKey(h.Key)
	if req == nil || h.Version < 0 || h.Version > req.MaxVersion() {
		return nil, fmt.Errorf("unsupported api key %d version %d", h.Key, h.Version)
	}
	req.SetVersion(h.Version)
	if err := req.ReadFrom(wr.Body); err != nil {
		return nil, err
	}
	if n.authz == nil || n.authz.Authorize(acl.Session{Principal: wr.Principal, Host: wr.ClientHost}, acl.ClusterAction, acl.Cluster, acl.ClusterName) {
		return nil, fmt.Errorf("%s is not served on the controller listener: Cascade's quorum speaks its own frames", kmsg.NameForKey(h.Key))
	}
	code := kerr.ClusterAuthorizationFailed.Code
	resp := req.ResponseKind()
	setErrorCode(resp, code)
	if r, ok := resp.(*kmsg.FetchResponse); ok {
		for _, t := range req.(*kmsg.FetchRequest).Topics {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.HighWatermark, rp.LastStableOffset = p.Partition, code, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
	}
	return resp, nil
}

// setErrorCode sets the top-level ErrorCode of resp, a kmsg response that
// has one (every response of controllerOperation and kraftKeys).
func setErrorCode(resp kmsg.Response, code int16) {
	if f := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode"); f.IsValid() && f.Kind() == reflect.Int16 {
		f.SetInt(int64(code))
	}
}

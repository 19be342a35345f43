package broker

import (
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
	code := kerr.ClusterAuthorizationFailed.Code
	resp := req.ResponseKind()
	switch r := resp.(type) {
	case *kmsg.ElectLeadersResponse:
		r.ErrorCode = code
	case *kmsg.AlterPartitionAssignmentsResponse:
		r.ErrorCode = code
	case *kmsg.ListPartitionReassignmentsResponse:
		r.ErrorCode = code
	case *kmsg.DescribeQuorumResponse:
		r.ErrorCode = code
	case *kmsg.AlterPartitionResponse:
		r.ErrorCode = code
	case *kmsg.BrokerRegistrationResponse:
		r.ErrorCode, r.BrokerEpoch = code, -1
	case *kmsg.BrokerHeartbeatResponse:
		r.ErrorCode, r.IsFenced = code, true
	case *kmsg.AllocateProducerIDsResponse:
		r.ErrorCode = code
	}
	return resp, true
}

package broker

import (
	"time"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/controller"
	"github.com/cascade-kafka/cascade/broker/metadata"
)

// CreateAcls and DeleteAcls reach the active controller as Kafka's
// ControllerApis serves them: a broker forwards the request whole
// (forwardedKeys), and the controller plans the records on its image and
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

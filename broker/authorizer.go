package broker

import (
	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/metadata"
)

// newAuthorizer returns the authorizer authorizer.class.name asks for, kept
// up to date with the ACLs of st's image (as StandardAuthorizer is fed by
// the metadata publisher), or nil when none is configured. The
// subscription lives as long as the store.
func newAuthorizer(bc *config.Broker, st *metadata.Store) *acl.Authorizer {
	if !bc.AuthorizerEnabled {
		return nil
	}
	az := acl.NewAuthorizer(bc.SuperUsers, bc.AllowEveryoneIfNoACLFound)
	st.Subscribe(func(prev, next *metadata.Image) {
		if prev.ACLs() != next.ACLs() {
			az.SetIndex(next.ACLs())
		}
	})
	return az
}

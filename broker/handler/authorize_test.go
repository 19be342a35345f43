package handler

import (
	"testing"

	"github.com/cascade-kafka/cascade/broker/acl"
)

// BenchmarkAuthorizeTopic measures the hot path's check (Produce's WRITE,
// Fetch's READ) without an authorizer and with one holding ACLs; neither
// allocates.
func BenchmarkAuthorizeTopic(b *testing.B) {
	req := &Request{Principal: acl.Anonymous, Host: "127.0.0.1"}
	az := acl.NewAuthorizer(nil, false)
	bindings := map[acl.ID]acl.Binding{}
	for i := range 100 {
		bindings[acl.ID{byte(i), 1}] = acl.Binding{ResourceType: acl.Topic, Name: "t" + string(rune('a'+i%26)) + string(rune('a'+i/26)),
			Pattern: acl.Literal, Principal: acl.Anonymous, Host: "*", Operation: acl.Write, Permission: acl.Allow}
	}
	bindings[acl.ID{0, 2}] = acl.Binding{ResourceType: acl.Topic, Name: "t", Pattern: acl.Prefixed, Principal: "User:*",
		Host: "10.0.0.1", Operation: acl.All, Permission: acl.Deny}
	az.SetIndex(acl.NewIndex(bindings))
	for _, bc := range []struct {
		name string
		env  *Env
	}{{"off", &Env{}}, {"on", &Env{Authorizer: az}}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !bc.env.authorizeTopic(req, acl.Write, "tab") {
					b.Fatal("denied")
				}
			}
		})
	}
}

package config

import (
	"slices"
	"strings"
	"testing"
)

func TestAuthorizerConfig(t *testing.T) {
	b, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.AuthorizerEnabled || len(b.SuperUsers) != 0 || b.AllowEveryoneIfNoACLFound {
		t.Fatalf("defaults: %v %v %v", b.AuthorizerEnabled, b.SuperUsers, b.AllowEveryoneIfNoACLFound)
	}
	b, err = New(map[string]string{
		"authorizer.class.name":          StandardAuthorizerClass,
		"super.users":                    " User:admin ;User:ANONYMOUS;",
		"allow.everyone.if.no.acl.found": "true",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !b.AuthorizerEnabled || !slices.Equal(b.SuperUsers, []string{"User:admin", "User:ANONYMOUS"}) || !b.AllowEveryoneIfNoACLFound {
		t.Fatalf("set: %v %v %v", b.AuthorizerEnabled, b.SuperUsers, b.AllowEveryoneIfNoACLFound)
	}
	for _, tc := range []struct{ key, value, want string }{
		{"authorizer.class.name", "kafka.security.authorizer.AclAuthorizer", "Cascade implements only " + StandardAuthorizerClass},
		{"super.users", "admin", "expected principal of the form User:name, got admin"},
		{"allow.everyone.if.no.acl.found", "yes", "Expected value to be either true or false"},
	} {
		if _, err := New(map[string]string{tc.key: tc.value}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%s: %v, want %q", tc.key, tc.value, err, tc.want)
		}
	}
}

package principal

import (
	"errors"
	"testing"
)

// The cases of Kafka's SslPrincipalMapperTest.
func TestRules(t *testing.T) {
	cases := []struct{ rules, dn, want string }{
		{"DEFAULT", "CN=Duke,OU=ServiceUsers,O=Org,C=US", "CN=Duke,OU=ServiceUsers,O=Org,C=US"},
		{"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=Duke,OU=ServiceUsers,O=Org,C=US", "Duke"},
		{"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT", "CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"},
		{"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/U, DEFAULT", "CN=Duke,OU=ServiceUsers,O=Org,C=US", "DUKE"},
		{"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=Duke,OU=Other,O=Org", "CN=Duke,OU=Other,O=Org"},
		{"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L", "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Santa Clara,ST=CA,C=US", "duke@javasoft"},
		{"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,\nDEFAULT", "OU=JavaSoft,CN=Duke.Test,C=US", "duke.test"},
		{`RULE:^CN=(.*?),OU=(.*?)$/$1\/$2/`, "CN=a,OU=b", "a/b"},
	}
	for _, c := range cases {
		r, err := ParseRules(c.rules)
		if err != nil {
			t.Fatalf("%q: %v", c.rules, err)
		}
		got, err := r.Map(c.dn)
		if err != nil || got != c.want {
			t.Errorf("%q on %q = %q, %v; want %q", c.rules, c.dn, got, err, c.want)
		}
	}
	r, _ := ParseRules("RULE:^CN=(.*)$/$1/")
	if _, err := r.Map("O=x"); !errors.Is(err, ErrNoMatchingRule) {
		t.Fatalf("no match: %v", err)
	}
	for _, bad := range []string{"", "DEFAULTS,", "RULE:abc", "RULE:a/b", "RULE:(/x/", "KERBEROS"} {
		if _, err := ParseRules(bad); !errors.Is(err, ErrInvalidRule) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func FuzzRules(f *testing.F) {
	f.Add("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT", "CN=Duke,OU=ServiceUsers")
	f.Add(`RULE:\/(.*)/$1\$/U`, "/x")
	f.Fuzz(func(t *testing.T, rules, dn string) {
		r, err := ParseRules(rules)
		if err != nil {
			if !errors.Is(err, ErrInvalidRule) {
				t.Fatal(err)
			}
			return
		}
		if _, err := r.Map(dn); err != nil && !errors.Is(err, ErrNoMatchingRule) {
			t.Fatal(err)
		}
	})
}

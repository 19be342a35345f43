package config

import (
	"os"
	"strings"
	"testing"
)

// docSection returns the text of docs/configuration.md's "## title"
// section, up to the next "## " heading.
func docSection(t *testing.T, title string) string {
	t.Helper()
	raw, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## "+title+"\n")
	if !ok {
		t.Fatalf("no %s section", title)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	return section
}

// TestSecurityKeysDocumented checks docs/configuration.md has a row for
// every TLS and SASL key, with its default, in the Security section, and
// for every authorizer key in the Authorization section.
func TestSecurityKeysDocumented(t *testing.T) {
	security := docSection(t, "Security")
	for _, d := range securityDefs {
		row := "| `" + d.Name + "` | |"
		if d.HasDefault && d.Default != "" {
			row = "| `" + d.Name + "` | `" + d.Default + "` |"
		}
		if !strings.Contains(security, row) {
			t.Errorf("%s: no row %q in the Security section", d.Name, row)
		}
	}
	authz := docSection(t, "Authorization")
	for _, d := range authorizerDefs {
		if row := "| `" + d.Name + "` |"; !strings.Contains(authz, row) {
			t.Errorf("%s: no row %q in the Authorization section", d.Name, row)
		}
	}
}

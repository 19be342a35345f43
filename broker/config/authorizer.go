package config

import "strings"

// StandardAuthorizerClass is the one authorizer.class.name Cascade honours:
// Kafka's KRaft authorizer, whose ACLs live in the metadata log.
const StandardAuthorizerClass = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

// authorizerDefs are the authorizer configs (ServerConfigs'
// authorizer.class.name and StandardAuthorizer's super.users and
// allow.everyone.if.no.acl.found).
var authorizerDefs = []*Def{
	{Name: "authorizer.class.name", Type: TypeString, Default: "", HasDefault: true, Validate: authorizerClass,
		Doc: "The authorizer: empty (no authorization) or " + StandardAuthorizerClass + " (ACLs kept in the metadata log)."},
	{Name: "super.users", Type: TypeString, Default: "", HasDefault: true, Validate: superUsers,
		Doc: "Principals (User:name) separated by semicolons that every ACL check allows."},
	{Name: "allow.everyone.if.no.acl.found", Type: TypeBoolean, Default: "false", HasDefault: true,
		Doc: "Whether a resource no ACL names is open to every principal."},
}

// authorizerClass refuses an authorizer other than StandardAuthorizer: a
// custom class cannot be loaded, and running without the checks it asked
// for would be silently open.
func authorizerClass(v any) string {
	s, _ := v.(string)
	if s == "" || s == StandardAuthorizerClass {
		return ""
	}
	return "Cascade implements only " + StandardAuthorizerClass
}

// superUsers checks that every entry parses as a principal, as
// SecurityUtils.parseKafkaPrincipal does for StandardAuthorizer.
func superUsers(v any) string {
	for _, u := range SplitSuperUsers(v.(string)) {
		if typ, name, ok := strings.Cut(u, ":"); !ok || typ == "" || name == "" {
			return "expected principal of the form User:name, got " + u
		}
	}
	return ""
}

// SplitSuperUsers splits super.users on semicolons and trims each entry, as
// StandardAuthorizer.getConfiguredSuperUsers does.
func SplitSuperUsers(s string) []string {
	var out []string
	for _, u := range strings.Split(s, ";") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// fillAuthorizer sets the authorizer fields.
func (b *Broker) fillAuthorizer() {
	b.AuthorizerEnabled = b.str("authorizer.class.name") != ""
	b.SuperUsers = SplitSuperUsers(b.str("super.users"))
	b.AllowEveryoneIfNoACLFound = b.value("allow.everyone.if.no.acl.found").(bool)
}

// Package principal names the principal of a connection as Kafka's
// KafkaPrincipal prints it: User:ANONYMOUS before authentication, User:<name>
// after a SASL exchange, and the client certificate's distinguished name
// mapped by ssl.principal.mapping.rules (Kafka's SslPrincipalMapper) on an SSL
// listener with client authentication.
//
//	rules, err := principal.ParseRules(`RULE:^CN=(.*?),O=(.*)$/$1@$2/L,DEFAULT`)
//	name, err := rules.Map("CN=Alice,O=Example") // "alice@example"
//	p := principal.User(name)                     // "User:alice@example"
package principal

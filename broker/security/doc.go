// Package security builds the security of Cascade's listeners from the
// broker configuration, as Kafka's ChannelBuilders does for each listener's
// security protocol: TLS for SSL and SASL_SSL (package tlsconf, from
// ssl.* keys), the SASL mechanisms for SASL_PLAINTEXT and SASL_SSL (package
// sasl, from sasl.enabled.mechanisms, the listener's JAAS configs and the
// SCRAM credentials of the metadata image), and the principal of a client
// certificate (package principal, from ssl.principal.mapping.rules). Each
// key is read per listener: listener.name.<listener>.<key> first, then
// <key> (config.Broker.ListenerValue).
//
//	l, err := security.Listener(bc, bc.Listeners[0], security.Options{Scram: img.ScramCredential})
//	go srv.ServeListener(ln, l.Wire)
//	defer l.Close() // stops watching certificate files
//
// Client is the other side, for the connections a node of a cluster opens
// to its peers' inter-broker and controller listeners: TLS from the
// listener's trust and key stores, then SaslHandshake and SaslAuthenticate
// with the username and password of the listener's JAAS config, as a
// Kafka broker logs in to another.
//
//	c, err := security.NewClient(bc, "INTERNAL", config.ProtocolSASLSSL, "PLAIN")
//	dial := c.Dial(nil) // a DialFunc whose connections are authenticated
package security

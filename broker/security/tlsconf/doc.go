// Package tlsconf builds a listener's TLS server configuration from Kafka's
// ssl.* keys, as Kafka's DefaultSslEngineFactory: key and trust stores of
// type JKS (github.com/pavlo-v-chernykh/keystore-go), PKCS12
// (software.sslmate.com/src/go-pkcs12) or PEM (KIP-651: files, or the
// ssl.keystore.certificate.chain, ssl.keystore.key and
// ssl.truststore.certificates values), ssl.client.auth, ssl.enabled.protocols
// bounded by ssl.protocol, and ssl.cipher.suites by their IANA names (Java's
// names too). A Reloader reloads the stores when their files change, as a
// dynamic keystore update does in Kafka.
//
//	r, err := tlsconf.NewReloader(tlsconf.FromConfig(get), logger)
//	tlsLn := tls.NewListener(ln, r.ServerConfig())
package tlsconf

// Package proxy owns Cascade's Kafka-aware fault-injecting TCP proxy.
//
// A Group holds one Proxy per upstream broker. Each Proxy listens on its own
// address, parses Kafka frames in both directions (requests are matched to
// responses by correlation id, so a response is decoded with kmsg at the
// request's key and version) and rewrites Metadata, FindCoordinator and
// DescribeCluster responses so that clients reach every broker only through
// its proxy; a broker the group has not seen gets a new proxy on first
// mention.
//
// Faults are toxics, after Shopify's toxiproxy: a byte-level toxic is a
// one-method interface (Toxic.Pipe) registered by name, applied per
// direction ("upstream" is client to broker, "downstream" broker to client)
// with a toxicity probability drawn per connection. The byte-level set keeps
// toxiproxy's names and parameters: latency, bandwidth, slow_close, timeout,
// reset_peer, slicer, limit_data. Kafka-aware toxics (KafkaToxic.Act) are
// selected by API key and optionally client id and fire on a Trigger (once,
// nth, times, always, probability): kafka_error answers with an error code
// instead of forwarding, kafka_drop_response forwards the request and cuts
// the connection before the response, kafka_delay_response delays the
// response, kafka_fetch_corrupt corrupts or duplicates a record batch in a
// Fetch response, kafka_refuse_connection refuses new connections.
//
// Unlike toxiproxy, all randomness comes from the Group's seed: every toxic
// gets its own *rand.Rand derived from the seed and the proxy and toxic
// names, so the same seed and the same traffic inject the same faults.
//
// Use from a test:
//
//	g := proxy.NewGroup(proxy.Options{Seed: 1})
//	defer g.Close()
//	p, err := g.Add("kafka", "127.0.0.1:0", brokerAddr)
//	// point the client at p.Addr()
//	err = p.AddToxic(proxy.ToxicSpec{Name: "lost-produce", Type: "kafka_drop_response",
//		Attributes: json.RawMessage(`{"api_key":0,"trigger":"once"}`)})
//
// The same operations are served over HTTP in toxiproxy's JSON (Group.Handler),
// so toxiproxy's clients and CLI drive the byte-level toxics unchanged.
package proxy
